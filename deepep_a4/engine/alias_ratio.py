"""YAML alias expansion bounded as the Pulumi CLI's yaml.v3 bounds it.

The CLI reads a stack file with gopkg.in/yaml.v3, which accepts aliases (`*a`), so refusing them would differ
from it. yaml.v3 refuses a document whose decoding comes mostly from alias expansion: its decoder counts every
node it decodes (decodeCount) and those decoded inside an alias (aliasCount), and fails with "document contains
excessive aliasing" when aliasCount > 100, decodeCount > 1000 and aliasCount / decodeCount exceeds
allowedAliasRatio(decodeCount): 0.99 up to 400,000 decodes, 0.10 from 4,000,000, linear between
(go-yaml/yaml branch v3 decode.go: alias_ratio_range_low/high, allowedAliasRatio, decoder.unmarshal; the
constants are the same in yaml.v2 2.4.0 and in yaml/go-yaml). PyYAML builds aliases as shared Python objects,
so loading a bomb costs nothing until something walks it (json.dumps of a value: a 418-byte file expands to
722 MB); the walk below counts the composed node graph the way decoder.unmarshal does, and stops as soon as
yaml.v3 would.
"""

from __future__ import annotations

import yaml

ALIAS_RATIO_RANGE_LOW = 400_000
ALIAS_RATIO_RANGE_HIGH = 4_000_000


def allowed_alias_ratio(decode_count: int) -> float:
    """yaml.v3 decode.go allowedAliasRatio."""
    if decode_count <= ALIAS_RATIO_RANGE_LOW:
        return 0.99
    if decode_count >= ALIAS_RATIO_RANGE_HIGH:
        return 0.10
    span = ALIAS_RATIO_RANGE_HIGH - ALIAS_RATIO_RANGE_LOW
    return 0.99 - 0.89 * ((decode_count - ALIAS_RATIO_RANGE_LOW) / span)


class ExcessiveAliasingError(ValueError):
    """The document yaml.v3 refuses with "document contains excessive aliasing"."""

    def __init__(self, decodes: int, aliased: int):
        self.decodes, self.aliased = decodes, aliased
        super().__init__(f"excessive aliasing: {aliased} of the first {decodes} values come from aliases")


def check_aliasing(root: yaml.Node | None) -> int:
    """Walks ROOT in document order as yaml.v3's decoder does: a node met the first time is its anchor's own
    text; met again, it is an alias, and everything below it is decoded inside the alias. Raises
    ExcessiveAliasingError where yaml.v3 would fail; returns the number of decodes."""
    if root is None:
        return 0
    seen: set[int] = set()
    decodes = aliased = 0
    # (node, inside an alias)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, in_alias = stack.pop()
        if id(node) in seen:
            in_alias = True  # an alias: decoded again, counted as aliased (decoder.alias: aliasDepth++)
        seen.add(id(node))
        decodes += 1
        aliased += in_alias
        if aliased > 100 and decodes > 1000 and aliased / decodes > allowed_alias_ratio(decodes):
            raise ExcessiveAliasingError(decodes, aliased)
        if isinstance(node, yaml.MappingNode):
            for key, value in reversed(node.value):
                stack += [(value, in_alias), (key, in_alias)]
        elif isinstance(node, yaml.SequenceNode):
            stack += [(item, in_alias) for item in reversed(node.value)]
    return decodes

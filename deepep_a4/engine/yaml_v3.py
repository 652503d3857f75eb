"""A YAML reader that types plain scalars as Go's gopkg.in/yaml.v3 does when it decodes into `any`.

The Pulumi CLI reads stack files and Pulumi.yaml with yaml.v3 (pulumi/pulumi sdk/go/common/encoding/marshal.go
yamlMarshaler.Unmarshal, `yaml.Unmarshal`; sdk/go.mod pins gopkg.in/yaml.v3 v3.0.1 in every release from
pkg/v3.208.0 to v3.259.0, commit 1b5949891b3cefcb9974752b24a5ecef0acc86c8). yaml.v3 is not YAML 1.1 (PyYAML's
`off` is a word to it) and not plain YAML 1.2 either: the rules below are go-yaml/yaml v3.0.1
(f6f7691b1fdeb513f56608cd2c32c51f8194bf51) resolve.go `resolve` and `parseTimestamp`, and decode.go
`(*decoder).scalar`, which sets an `any` to the resolved value.

Quoted scalars stay strings (decode.go: `n.indicatedString()` -> strTag). A key written twice in one mapping
is an error to yaml.v3 ("mapping key ... already defined", decode.go `(*decoder).mapping`); it is refused here.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from typing import Any

import yaml

_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

# resolve.go init: resolveMapList.
_BOOLS = {"true": True, "True": True, "TRUE": True, "false": False, "False": False, "FALSE": False}
_NULLS = ("", "~", "null", "Null", "NULL")
_SPECIAL_FLOATS = {
    **dict.fromkeys((".nan", ".NaN", ".NAN"), math.nan),
    **dict.fromkeys((".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF"), math.inf),
    **dict.fromkeys(("-.inf", "-.Inf", "-.INF"), -math.inf),
}
# resolve.go yamlStyleFloat.
_YAML_STYLE_FLOAT = re.compile(r"[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?")
# Go's strconv.ParseInt(s, 0, 64) syntax: sign, then 0x/0o/0b/leading-0 octal or decimal (underscores are
# removed before, resolve.go `plain`).
_GO_INT = re.compile(r"[+-]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)")
_INT64 = (-(2**63), 2**63 - 1)
_UINT64_MAX = 2**64 - 1
# resolve.go allowedTimestampFormats (Go time layouts): date only, or date and time (T, t or a space).
_TIMESTAMP = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2})(?:([Tt ])(\d{1,2}):(\d{1,2}):(\d{1,2})(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})?)?$"
)


class GoTime(str):
    """A scalar yaml.v3 read as a timestamp: Pulumi keeps it as Go's time.Time.String() (object.go
    unmarshalObject: `case time.Time: newObject(v.String())`); the str is that text."""


def _go_int(text: str) -> int | None:
    if not _GO_INT.fullmatch(text):
        return None
    sign = -1 if text.startswith("-") else 1
    body = text.lstrip("+-")
    if len(body) > 1 and body[0] == "0" and body[1] not in "xXoObB":
        value = int(body, 8)  # Go's base-0 ParseInt reads a leading 0 as octal ("0777" is 511)
    else:
        value = int(body, 0)
    return sign * value


def _timestamp(text: str) -> GoTime | None:
    m = _TIMESTAMP.match(text)
    if not m:
        return None
    year, month, day, sep, hh, mm, ss, frac, zone = m.groups()
    if sep == " " and zone:  # "2006-1-2 15:4:5.999999999" has no zone
        return None
    if sep in ("T", "t") and not zone:  # the RFC 3339 layouts need one
        return None
    try:
        when = dt.datetime(int(year), int(month), int(day), int(hh or 0), int(mm or 0), int(ss or 0))
    except ValueError:
        return None
    if zone in (None, "Z"):
        suffix = "+0000 UTC"
    else:
        suffix = zone.replace(":", "") + " " + zone.replace(":", "")  # Go prints an unnamed zone as +0800 +0800
    nanos = (frac or "").lstrip(".").rstrip("0")
    clock = when.strftime("%Y-%m-%d %H:%M:%S") + (f".{nanos}" if nanos else "")
    return GoTime(f"{clock} {suffix}")


def resolve_plain(text: str) -> Any:
    """A plain (unquoted) scalar as yaml.v3 decodes it into `any` (resolve.go `resolve` with no tag)."""
    hint = text[0] if text else "N"
    if not (hint in "+-0123456789yYnNtTfFoO~." or text == ""):
        return text
    if text in _BOOLS:
        return _BOOLS[text]
    if text in _NULLS:
        return None
    if text in _SPECIAL_FLOATS:
        return _SPECIAL_FLOATS[text]
    if hint == ".":
        try:
            return float(text) if _YAML_STYLE_FLOAT.fullmatch(text) else text
        except ValueError:
            return text
    if hint in "+-0123456789":
        stamp = _timestamp(text)
        if stamp is not None:
            return stamp
        plain = text.replace("_", "")
        value = _go_int(plain)
        if value is not None and _INT64[0] <= value <= _UINT64_MAX:
            return value
        if _YAML_STYLE_FLOAT.fullmatch(plain):
            return float(plain)
    return text


class GoYamlLoader(_Loader):  # type: ignore[misc,valid-type]
    """PyYAML's parser with yaml.v3's scalar typing (PyYAML's resolver is YAML 1.1's)."""


class DuplicateKeyError(ValueError):
    def __init__(self, key: str, first_line: int, line: int):
        self.key, self.first_line, self.line = key, first_line, line
        super().__init__(f"mapping key {key!r} already defined at line {first_line}")


def _scalar(loader: yaml.SafeLoader, node: yaml.ScalarNode) -> Any:
    # Quoted or a block scalar (| >): a string to yaml.v3. A plain scalar's explicit tag (`!!str 13.0`) is not
    # kept by PyYAML's nodes: it is typed as an untagged one (stack files do not use tags).
    return node.value if node.style else resolve_plain(node.value)


def _mapping(loader: yaml.SafeLoader, node: yaml.MappingNode) -> dict[Any, Any]:
    out: dict[Any, Any] = {}
    lines: dict[Any, int] = {}
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if isinstance(key, (list, dict)):
            key = str(key)
        if key in out:
            raise DuplicateKeyError(str(key), lines[key], key_node.start_mark.line + 1)
        lines[key] = key_node.start_mark.line + 1
        out[key] = loader.construct_object(value_node, deep=True)
    return out


def _sequence(loader: yaml.SafeLoader, node: yaml.SequenceNode) -> list[Any]:
    return [loader.construct_object(child, deep=True) for child in node.value]


for _tag in ("str", "bool", "int", "float", "null", "timestamp", "binary", "value", "merge"):
    GoYamlLoader.add_constructor(f"tag:yaml.org,2002:{_tag}", _scalar)
GoYamlLoader.add_constructor("tag:yaml.org,2002:map", _mapping)
GoYamlLoader.add_constructor("tag:yaml.org,2002:omap", _mapping)
GoYamlLoader.add_constructor("tag:yaml.org,2002:seq", _sequence)


def load(text: str) -> Any:
    """The document as yaml.v3 hands it to Pulumi (`any`): str, bool, int, float, GoTime, None, list, dict."""
    return yaml.load(text, Loader=GoYamlLoader)  # noqa: S506 - a SafeLoader subclass

"""The pack as `pulumi up` runs it, on plan resources: every mandatory rule of every resource, the rules that read
a resource's name, and the stack rules. Shared by the corpus and lock tests."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

from deepep_a4.policy import rules
from tests.conftest import plan
from tests.deepep_a4.policy.test_pack import engine_like

Resources = list[rules.Resource]


@functools.cache
def _base(stack: str, overrides: tuple[tuple[str, Any], ...]) -> tuple[rules.Resource, ...]:
    return tuple(engine_like(plan(stack, **{k: list(v) if isinstance(v, tuple) else v for k, v in overrides})))


def resources(stack: str, **overrides: Any) -> Resources:
    """A fresh, editable copy of the plan's resources as the engine shows them."""
    key = tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in overrides.items()))
    base = _base(stack, key)
    return [rules.Resource(r.type, r.name, copy.deepcopy(r.props)) for r in base]


def refusals(found: Resources) -> list[str]:
    """Every mandatory violation the pack reports on the resources."""
    out: list[str] = []
    for r in found:
        for name, (_, rule) in rules.RESOURCE_RULES.items():
            if name not in rules.ADVISORY_RULES:
                out += [f"{name}: {r.name}: {m}" for m in rule(r.type, r.props)]
        for name, (_, named) in rules.NAMED_RESOURCE_RULES.items():
            out += [f"{name}: {m}" for m in named(r.type, r.name, r.props)]
    for name, (_, stack_rule) in rules.STACK_RULES.items():
        out += [f"{name}: {m}" for m in stack_rule(found)]
    return out


def find(found: Resources, name: str, type_suffix: str = "") -> dict[str, Any]:
    """The properties of the one resource named `name` (and of a type ending in `type_suffix`)."""
    hits = [r for r in found if r.name == name and r.type.endswith(type_suffix) and not r.type.startswith("deepep-a4:")]
    assert len(hits) == 1, (name, [h.type for h in hits])
    return hits[0].props  # type: ignore[return-value]


Edit = Callable[[Resources], None]

"""Shared helpers: run the real program under mocks with a stack file plus overrides.

The default stack is the host-install one (the field reports' path) that most component tests describe; the
supported profile's stacks are named where a test is about them (tests/components/test_node_profile.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepep_a4.tools import plan_engine

ROOT = Path(__file__).resolve().parent.parent


def stack_config(stack: str = "gke-b200-ubuntu", **overrides: Any) -> dict[str, Any]:
    """The stack file's config with `overrides` (keys without namespace) applied."""
    cfg = plan_engine.read_stack_config(stack)
    cfg.update({f"deepep-a4:{k}": v for k, v in overrides.items()})
    return cfg


def plan(stack: str = "gke-b200-ubuntu", **overrides: Any) -> plan_engine.PlanResult:
    """Runs __main__.py under mocks and returns every registered resource with its inputs."""
    result, _ = plan_engine.run_program(stack, stack_config(stack, **overrides))
    return result


def of_type(result: plan_engine.PlanResult, type_token: str) -> list[dict[str, Any]]:
    return [r for r in result.resources if r["type"] == type_token]


def one(result: plan_engine.PlanResult, type_token: str, name: str | None = None) -> dict[str, Any]:
    found = [r for r in of_type(result, type_token) if name is None or r["name"] == name]
    assert len(found) == 1, f"expected one {type_token} {name or ''}, found {[r['name'] for r in found]}"
    return found[0]

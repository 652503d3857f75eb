"""The rehearsal's Pulumi stack: `<stack>-rehearsal`, whose config is the stack's plus `rehearsal: true` and its own
name prefix (components/rehearsal.py says what the program changes for it)."""

from __future__ import annotations

from typing import Any

from components import rehearsal
from components.config.keys import PROJECT_NAME


def stack_name(stack: str) -> str:
    return stack + rehearsal.STACK_SUFFIX


def config(stack_cfg: dict[str, Any], real_prefix: str) -> dict[str, Any]:
    """The rehearsal stack's namespaced config: the stack's own, `rehearsal: true`, and a name prefix of its own so
    the rehearsal and the real stack can share a project."""
    return {
        **stack_cfg,
        f"{PROJECT_NAME}:rehearsal": True,
        f"{PROJECT_NAME}:namePrefix": rehearsal.name_prefix(real_prefix),
    }

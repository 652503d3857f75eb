"""The rehearsal's Pulumi stack: `<stack>-rehearsal`, whose config is the stack's plus `rehearsal: true` and its own
name prefix (components/rehearsal.py says what the program changes for it)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from components import rehearsal
from components.config.keys import PROJECT_NAME
from deepep_a4 import stackfile
from deepep_a4.run.platforms import AutomationStack


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


def deadline_account(cfg: Any) -> str:
    """The GKE deadline job's account (components/gke/deadline.py), the principal that must delete the pool."""
    from components.gke.deadline import account_id

    return f"{account_id(cfg.name_prefix)}@{cfg.project}.iam.gserviceaccount.com"


HEADER = (
    "# Written by `deepep-a4 rehearse --stack {stack}` and removed when the rehearsal is torn down: stack {stack}'s\n"
    "# config plus `rehearsal: true` and a name prefix of its own (docs/rehearsal.md). Do not edit; rehearse again.\n"
)


def write_file(stack: str, cfg: dict[str, Any], root: Path) -> Path:
    """stacks/Pulumi.<stack>-rehearsal.yaml, where the Pulumi CLI reads the stack's config (stackConfigDir)."""
    path = stackfile.stack_file(stack_name(stack), root)
    path.write_text(HEADER.format(stack=stack) + yaml.safe_dump({"config": cfg}, sort_keys=False))
    return path


class RehearsalStack(AutomationStack):
    """The Automation API's stack of the rehearsal, which also removes itself after its destroy."""

    def remove(self) -> None:
        self._stack.workspace.remove_stack(self.name)

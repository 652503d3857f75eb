"""`deepep-a4 run` rehearses first: when this stack's settings have not passed a rehearsal (the checklist kept under
their hash, deepep_a4/rehearse/checklist.py), `run` runs `deepep-a4 rehearse` before it creates anything and stops
if the rehearsal fails; `--skip-rehearsal` skips it with a warning. One call from run (`before_run`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from deepep_a4 import stackfile
from deepep_a4.paths import project_root
from deepep_a4.rehearse import checklist as checklists

ROOT = project_root()
SKIP_WARNING = (
    "WARNING: --skip-rehearsal: stack {stack}'s settings have not passed a rehearsal, and the A4s are paid for "
    "from now; a seam that fails (DNS, a grant, the scheduling block) is found at A4 prices "
    "(`deepep-a4 rehearse --stack {stack}` proves them for under a dollar: docs/rehearsal.md)"
)


def before_run(
    stack: str,
    skip: bool,
    say: Callable[[str], None],
    rehearse: Callable[[str], int] | None = None,
    root: Path = ROOT,
) -> int | None:
    """None when `run` may go on; else the exit status to stop with (the rehearsal's)."""
    raw = stackfile.read(stack, root)
    if checklists.passed(stack, raw, root):
        say(f"rehearsal: these settings of {stack} passed one (build/rehearsal/{stack}/checklist.md)")
        return None
    if skip:
        say(SKIP_WARNING.format(stack=stack))
        return None
    say(
        f"rehearsal: stack {stack}'s settings have not passed a rehearsal: `deepep-a4 rehearse --stack {stack}` "
        "first (about 20 min, under a dollar; --skip-rehearsal skips it)"
    )
    if rehearse is None:
        from deepep_a4.rehearse import command

        def rehearse_here(name: str) -> int:
            return command.execute(name, False, command.Deps(say=say))

        rehearse = rehearse_here
    rc = rehearse(stack)
    if rc != 0:
        say(f"rehearsal FAILED (exit {rc}): no A4 was created; build/rehearsal/{stack}/checklist.md says which seam")
        return rc
    return None

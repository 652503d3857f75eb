"""`deepep-a4 rehearse --stack S [--dry-run]`: before any A4 is paid for, the user's own project proves every seam.

Deploys `S-rehearsal` (S's config, `rehearsal: true`: e2-standard-4 spot machines, no GPU, a short TTL, probes
in place of the GPU phases and the benchmarks; components/rehearsal.py) through the Automation API under the
policy pack as `deepep-a4 run` does, reads the seams Google answers (A4 quota, machineTypes.get), collects the
probes' REHEARSAL lines, fires the deadline, destroys everything with refresh (also after a FAIL or Ctrl-C) and
writes build/rehearsal/S/checklist.md and .json. --dry-run prints the cost and time estimate and the measured
offline parts, and makes nothing. Exit status: 0 every seam passed, 1 a seam failed, 2 bad arguments, 3 no
Pulumi CLI, 5 the teardown failed (the command to finish it is printed).
"""

from __future__ import annotations

import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import yaml

from components import config
from deepep_a4 import options, stackfile
from deepep_a4.paths import project_root
from deepep_a4.rehearse import checklist as checklists
from deepep_a4.rehearse import estimate as estimates
from deepep_a4.rehearse import stack as rehearsal_stack
from deepep_a4.rehearse.session import MISSING_PROBES_FIX, Clients, Session, missing_probes
from deepep_a4.run import preflight as run_preflight

ROOT = project_root()
EXIT_PASS, EXIT_FAILED, EXIT_USAGE, EXIT_NO_CLI, EXIT_TEARDOWN = 0, 1, 2, 3, 5


@dataclass
class Deps:
    """What the rehearsal talks to: the real tools, or fakes in tests."""

    which: Callable[[str], str | None] = shutil.which
    make_stack: Callable[[str], Any] = rehearsal_stack.RehearsalStack
    preflight: Callable[[str, config.StackConfig, bool], list[str]] | None = None
    clients: Clients = field(default_factory=Clients)
    missing_probes: Callable[[], list[str]] = missing_probes
    say: Callable[[str], None] = print
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    root: Path = ROOT  # where the stack files are (the Pulumi project's folder)
    out_root: Path = ROOT  # where build/rehearsal/STACK/ goes


def stack_config(name: str, root: Path) -> dict[str, Any]:
    """The stack file's `config:` as written (YAML types kept: the engine type-checks them against Pulumi.yaml)."""
    _, path = stackfile.resolve(name, root)
    return dict((yaml.safe_load(path.read_text()) or {}).get("config") or {})


def execute(name: str, dry_run: bool, deps: Deps) -> int:
    say, t0 = deps.say, time.perf_counter()
    try:
        name, _ = stackfile.resolve(name, deps.root)
        raw = stackfile.read(name, deps.root)
        cfg = config.parse(stackfile.project_keys(raw), name)
    except (stackfile.StackFileError, config.ConfigError) as err:
        say(f"error: {err}")
        return EXIT_USAGE
    if name.endswith(rehearsal_stack.rehearsal.STACK_SUFFIX) or cfg.rehearsal:
        say(f"error: {name} is a rehearsal itself: rehearse the stack it was made from")
        return EXIT_USAGE
    measured = {"config read and checked": time.perf_counter() - t0}
    reh_name = rehearsal_stack.stack_name(name)
    reh_raw = rehearsal_stack.config(stack_config(name, deps.root), cfg.name_prefix)
    t1 = time.perf_counter()
    reh_cfg = config.parse(stackfile.project_keys({k: _text(v) for k, v in reh_raw.items()}), reh_name)
    if dry_run:
        from deepep_a4.plan import engine as plan_engine

        plan_engine.run_program(reh_name, {k: _text(v) for k, v in reh_raw.items()})
        measured[f"the rehearsal's offline plan ({reh_name})"] = time.perf_counter() - t1
    est = estimates.estimate(cfg)
    for line in est.render(measured):
        say(line)
    settings = checklists.settings_hash(raw)
    say(f"Settings hash {settings}: checklist build/rehearsal/{name}/ (zone, TTL, versions and sizes left out)")
    if dry_run:
        say("--dry-run: nothing was made.")
        return EXIT_PASS
    missing = deps.missing_probes()
    if missing:
        say(f"error: {MISSING_PROBES_FIX}: {', '.join(missing)}. Nothing was created.")
        return EXIT_USAGE
    if deps.which("pulumi") is None:
        say("error: the rehearsal drives the Pulumi CLI through the Automation API: install it (see `deepep-a4 run`)")
        return EXIT_NO_CLI
    problems = (deps.preflight or run_preflight.check)(name, cfg, False)
    if problems:
        for problem in problems:
            say(f"error: {problem}")
        say("  Nothing was created.")
        return EXIT_NO_CLI if problems[0].startswith("the Pulumi CLI") else EXIT_USAGE
    path = rehearsal_stack.write_file(name, reh_raw, deps.root)
    sheet = checklists.Checklist(name, settings, cfg.platform)
    sheet.cost_estimate_usd, sheet.cost_basis = est.usd, "estimate, deepep_a4/prices.yaml"
    try:
        stack = deps.make_stack(reh_name)
        Session(stack, reh_cfg, sheet, deps.clients, say, deps.clock, deps.sleep).run()
    except Exception as err:  # the stack could not even be opened: nothing was created
        say(f"error: cannot open stack {reh_name} with the Pulumi CLI: {str(err).strip()[-1000:]}")
        return EXIT_FAILED
    finally:
        path.unlink(missing_ok=True)
    written = checklists.write(sheet, deps.out_root)
    for s in sheet.seams:
        fix = f"  -> docs/troubleshooting.md {s.troubleshooting}" if s.troubleshooting else ""
        say(f"  {s.status}  {s.seam:<22} {s.evidence[:150]}{fix}")
    say(f"Rehearsal {'PASSED' if sheet.passed else 'FAILED'}: {written} ({sheet.wall_seconds:.0f} s); {sheet.teardown}")
    if sheet.teardown.startswith("DESTROY FAILED"):
        return EXIT_TEARDOWN
    return EXIT_PASS if sheet.passed else EXIT_FAILED


def _text(value: Any) -> str:
    """A YAML value as the engine hands it to the program: strings, objects and lists as JSON."""
    import json

    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value) if isinstance(value, (list, dict)) else str(value)


@click.command("rehearse", help=(__doc__ or "").split("\n\n")[0])
@click.option("--stack", required=True, help="stack name (gke-b200) or its file (stacks/Pulumi.gke-b200.yaml)")
@click.option("--dry-run", is_flag=True, help="print the cost and time estimate; make nothing")
@click.pass_context
def command(ctx: click.Context, stack: str, dry_run: bool) -> None:
    deps = ctx.obj if isinstance(ctx.obj, Deps) else Deps()
    ctx.exit(execute(stack, dry_run, deps))


def main(argv: list[str] | None = None, **deps: Any) -> int:
    """The same command as a function, its exit status returned; keyword arguments replace the `Deps`."""
    return options.exit_status(command, argv, "deepep-a4 rehearse", obj=Deps(**deps))


if __name__ == "__main__":
    sys.exit(main())

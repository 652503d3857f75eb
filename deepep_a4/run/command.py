#!/usr/bin/env python3
"""One command for the whole loop, under the policy pack in policy/: up, install, benchmarks, report, destroy.

    .venv/bin/deepep-a4 run --stack gke-b200 [--keep] [--yes] [--out DIR]

Drives the stack through Pulumi's Automation API (the Pulumi CLI must be on PATH):

0. `check`    before anything is created: the Pulumi CLI's version, the passphrase a DIY backend needs, the
              policy pack's environment and the store (deepep_a4/run/preflight.py), then `pulumi preview`
              with the policy pack: a mandatory violation stops the run before `up`;
1. `up`       the stack, as `pulumi up -s STACK` would (its config comes from stacks/Pulumi.STACK.yaml);
2. `install`  waits until the installer reports ready on every node (GKE: the installer DaemonSet's
              ready count; GCE: each VM's status.json in the results bucket), showing "nodes ready N/M";
3. `bench`    waits until every benchmark finished (GKE: the benchmark Jobs; GCE: every VM done);
4. `collect`  writes the report with the report functions (deepep_a4/report) (build/report/STACK by default),
              and each node's bring-up times (deepep_a4/timeline.py: created, Ready, installed, first
              benchmark line) into timeline.json there, printed one line per node, with the totals against
              the bring-up table's (docs/installer.md#bring-up-time); also after a failed wait;
5. `destroy`  the stack, unless --keep.

Ctrl-C or any failure stops the waiting, says what is still running and offers the destroy (--yes
destroys without asking; without a terminal the stack is destroyed unless --keep). Exit status: 0 the
report's gate passed, 1 it failed (or a benchmark failed), 2 bad arguments, 3 no Pulumi CLI, 4 the stack
did not come up, its preview failed or a wait timed out, 5 the destroy failed, 130 interrupted.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from components import config
from components.deadline import parse_time
from deepep_a4 import cost, options, stackfile
from deepep_a4 import timeline as times
from deepep_a4.capacity import run_hooks
from deepep_a4.expected_times import TableError, expected_bringup
from deepep_a4.paths import project_root
from deepep_a4.rehearse import gate as rehearse_gate
from deepep_a4.run import preflight as run_preflight
from deepep_a4.run.help import (  # the exit statuses, declared with the help that lists them
    EXIT_DESTROY_FAILED,
    EXIT_FAILED,
    EXIT_GATE_FAILED,
    EXIT_INTERRUPTED,
    EXIT_NO_CLI,
    EXIT_PASS,
    EXIT_USAGE,
    run_help,
)
from deepep_a4.run.interfaces import Probe, StackOps
from deepep_a4.run.platforms import (
    AutomationStack,
    GceProbe,
    GkeProbe,
    NoStackError,
    Progress,
    RunFailedError,
)
from deepep_a4.store import fill as store_fill
from deepep_a4.store.fill import fill_and_pin

ROOT = project_root()

AUTH_PLUGIN = "gke-gcloud-auth-plugin"
AUTH_PLUGIN_MISSING = (
    f"a gke stack's kubeconfig authenticates with {AUTH_PLUGIN}, which is not on PATH.\n  Install it: "
    "`gcloud components install gke-gcloud-auth-plugin` (or the google-cloud-cli-gke-gcloud-auth-plugin "
    "package), then run this again.\n  Nothing was created."
)
CLI_MISSING = (
    "deepep-a4 run drives `pulumi up` and `pulumi destroy` through Pulumi's Automation API, which needs the "
    "Pulumi CLI on PATH.\n  Install it: https://www.pulumi.com/docs/install/ (e.g. `curl -fsSL https://get.pulumi.com "
    "| sh`), then `pulumi login` (or `pulumi login --local`) and run this again.\n  Nothing was created. The offline "
    "plan needs no CLI: .venv/bin/deepep-a4 plan --stack STACK"
)


NOTHING_CREATED = "Nothing was created."
# With --destroy the stack may hold resources: what the refusal leaves is the stack as it was, still running.
NOTHING_DESTROYED = "Nothing was destroyed: what the stack holds is still there (and billed)."


def refusal_text(text: str, destroy_only: bool) -> str:
    return text.replace(NOTHING_CREATED, NOTHING_DESTROYED) if destroy_only else text


# -- the run -------------------------------------------------------------------------------------------


@dataclass
class Settings:
    keep: bool = False
    assume_yes: bool = False
    interactive: bool = True
    poll_seconds: float = 30.0
    install_timeout_s: float = 90 * 60
    bench_timeout_s: float = 120 * 60
    report_every_s: float = 300.0  # an unchanged wait still says so this often
    out: Path = ROOT / "build" / "report"
    cap_line: str = ""
    platform: str = ""
    profile: str = ""


class BenchmarkRun:
    def __init__(
        self,
        stack: StackOps,
        probe: Probe,
        settings: Settings,
        *,
        ask: Callable[[str], str] = input,
        say: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.stack, self.probe, self.s = stack, probe, settings
        self.ask, self.say, self.clock, self.sleep = ask, say, clock, sleep
        self.phase = "start"
        self.started = clock()

    def log(self, text: str) -> None:
        elapsed = int(self.clock() - self.started)
        self.say(f"[{elapsed // 3600:d}:{elapsed // 60 % 60:02d}:{elapsed % 60:02d}] {self.phase}: {text}")

    def enter(self, phase: str, text: str) -> None:
        self.phase = phase
        self.log(text)

    def run(self) -> int:
        self.started = self.clock()
        touched = False  # once `up` starts, cloud resources may exist
        outputs: dict[str, Any] | None = None
        rc = EXIT_FAILED
        try:
            self.enter("preview", f"pulumi preview --policy-pack policy -s {self.stack.name}")
            try:
                self.stack.preview(on_output=self._pulumi_line)
            except Exception as err:  # a mandatory policy violation, a refusal of the program: nothing exists yet
                self.log(f"FAILED: {type(err).__name__}: {str(err).strip()[-2000:]}")
                self.log("nothing was created: `pulumi up` did not run")
                return EXIT_FAILED
            self.enter("up", f"pulumi up -s {self.stack.name}" + (f" ({self.s.cap_line})" if self.s.cap_line else ""))
            touched = True
            self.stack.up(on_output=self._pulumi_line)
            outputs = self.stack.outputs()
            self.enter("install", "waiting for the installer on every node")
            self.wait(lambda: self.probe.installed(outputs), self.s.install_timeout_s, "nodes ready")
            self.enter("bench", "waiting for the benchmarks")
            self.wait(lambda: self.probe.benchmarks(outputs), self.s.bench_timeout_s, "benchmarks finished")
            self.enter("collect", f"writing the report to {self.s.out}")
            rc = self.probe.collect(outputs, self.s.out)
            self.log("report gate " + ("PASSED" if rc == EXIT_PASS else f"FAILED (report exit {rc})"))
            rc = EXIT_PASS if rc == EXIT_PASS else EXIT_GATE_FAILED
            ok = True
        except KeyboardInterrupt:
            self.say("")
            self.log("interrupted (Ctrl-C)")
            rc, ok = EXIT_INTERRUPTED, False
        except RunFailedError as err:
            self.log(f"FAILED: {err}")
            rc, ok = EXIT_FAILED, False
        except Exception as err:  # the Automation API's CommandError, a probe's error: same way out
            self.log(f"FAILED: {type(err).__name__}: {str(err).strip()[-2000:]}")
            rc, ok = EXIT_FAILED, False
        if outputs is not None and rc != EXIT_INTERRUPTED:
            self.record_timeline(outputs)  # a failed install's times are worth keeping too
        if touched:
            rc = self.finish(ok, rc)
        return rc

    def record_timeline(self, outputs: dict[str, Any]) -> None:
        """Each node's bring-up times into the results folder and onto the console; never fails the run."""
        try:
            # The resources in the stack's state (AutomationStack.resources): GCE's instances with their
            # creationTimestamp; a stack without the call (a fake) has none.
            state: Any = getattr(self.stack, "resources", None)
            resources: list[dict[str, Any]] = state() if state is not None else []
            nodes = self.probe.timeline(outputs, resources)
            try:
                expected = expected_bringup(self.s.platform, self.s.profile)
            except TableError:
                expected = None
            doc = times.document(nodes, self.stack.name, self.s.platform, self.s.profile, expected)
            lines = times.console_lines(doc, nodes)
            path = times.write(self.s.out, doc, lines)
        except Exception as err:  # a cluster gone, a bucket unreadable: say so, go on to the destroy
            self.log(f"bring-up times not recorded: {type(err).__name__}: {str(err).strip()[-500:]}")
            return
        for line in lines:
            self.log(f"bring-up {line}")
        self.log(f"bring-up times in {path}; docs/installer.md#the-first-real-run-fills-it makes them measured rows")

    def _pulumi_line(self, line: str) -> None:
        if line.strip():
            self.say(f"    {line.rstrip()}")

    def wait(self, probe: Callable[[], Progress], timeout_s: float, what: str) -> None:
        """Polls until complete; fails fast on a reported failure and at the timeout."""
        deadline = self.clock() + timeout_s
        last_text, last_said = "", -1e18
        while True:
            p = probe()
            text = f"{what} {p.done}/{p.total}" + (f" ({p.detail})" if p.detail else "")
            if text != last_text or self.clock() - last_said >= self.s.report_every_s:
                self.log(text)
                last_text, last_said = text, self.clock()
            if p.failed:
                raise RunFailedError(f"{self.phase}: " + "; ".join(p.failed))
            if p.complete:
                return
            if self.clock() >= deadline:
                raise RunFailedError(f"{self.phase}: timed out after {timeout_s / 60:.0f} min with {text}")
            self.sleep(self.s.poll_seconds)

    def finish(self, ok: bool, rc: int) -> int:
        """Destroys, or says exactly what keeps running and how to remove it."""
        name = self.stack.name
        if ok and self.s.keep:
            self.enter("keep", f"--keep: stack {name} stays up")
            return self._still_running(rc)
        if not ok and not self._confirm_destroy():
            return self._still_running(rc)
        self.enter("destroy", f"pulumi destroy --refresh -s {name}")
        try:
            self.stack.destroy(on_output=self._pulumi_line)
        except KeyboardInterrupt:
            self.log("destroy interrupted: the stack may be half removed")
            return self._still_running(EXIT_DESTROY_FAILED)
        except Exception as err:
            self.log(f"destroy FAILED: {type(err).__name__}: {str(err).strip()[-1000:]}")
            return self._still_running(EXIT_DESTROY_FAILED)
        self.log(f"stack {name} destroyed: nothing of it is left running")
        return rc

    def _confirm_destroy(self) -> bool:
        if self.s.assume_yes:
            return True
        if not self.s.interactive:
            # Nobody to ask: a stack left behind costs money every hour, unless the user said --keep.
            return not self.s.keep
        try:
            answer = self.ask(f"Destroy stack {self.stack.name} now? [Y/n] ").strip().lower()
        except (KeyboardInterrupt, EOFError):
            self.say("")
            return False
        return answer in ("", "y", "yes")

    def _still_running(self, rc: int) -> int:
        name = self.stack.name
        self.say(f"Stack {name} is still up and billing: its A4 capacity, network and (GKE) cluster.")
        if self.s.cap_line:
            self.say(f"  {self.s.cap_line}")
        self.say(f"  See it:       pulumi stack -s {name}")
        self.say(f"  Remove it:    pulumi destroy --refresh -s {name}")
        self.say(f"            or: .venv/bin/deepep-a4 run --stack {name} --destroy")
        return rc


# -- command line --------------------------------------------------------------------------------------


def stack_cfg(name: str, raw: dict[str, Any] | None = None) -> config.StackConfig:
    """The stack's validated config: the Automation API's view when given, else the stack file."""
    return stackfile.parse_stack(name, ROOT, raw)


def deployed_refusal(name: str, cfg: config.StackConfig, stack: Any, now: dt.datetime | None = None) -> str | None:
    """Why `up` must not run on what the stack already holds, or None.

    A platform switch in one stack would create the new machines before Pulumi deletes the old ones: twice
    the A4 capacity, billed, and often not available. After the stack's deadline the program refuses `up`
    (components/deadline.py); saying so here saves the wait for the preview."""
    outputs = stack.outputs() if hasattr(stack, "outputs") else {}
    deployed = outputs.get("platform")
    destroy_first = f"run `deepep-a4 run --stack {name} --destroy` (or `pulumi destroy --refresh -s {name}`) first"
    if deployed and deployed != cfg.platform:
        return (
            f"stack {name} is deployed on {deployed} and its config now says platform {cfg.platform}: `pulumi up` "
            f"would create the {cfg.platform} machines before deleting the {deployed} ones; {destroy_first}"
        )
    at = outputs.get("deadline")
    if at and (now or dt.datetime.now(dt.UTC)) >= parse_time(str(at)):
        return f"stack {name}'s deadline {at} has passed and `pulumi up` is refused after it; {destroy_first}"
    return None


@dataclass
class Deps:
    """What the run talks to: the real tools, or fakes in tests."""

    which: Callable[[str], str | None] = shutil.which
    make_stack: Callable[[str], Any] = AutomationStack
    # `run --destroy` opens the stack without creating it (None: AutomationStack.existing, or make_stack where a
    # test replaced it); a missing stack raises run_platforms.NoStackError.
    open_stack: Callable[[str], Any] | None = None
    make_probe: Callable[[config.StackConfig], Probe] | None = None
    ask: Callable[[str], str] = input
    say: Callable[[str], None] = print
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    # The checks before anything is created (run_preflight.check when None): one line per problem.
    preflight: Callable[[str, config.StackConfig, bool], list[str]] | None = None
    tty: Callable[[], bool] = sys.stdin.isatty
    # `deepep-a4 rehearse` first, unless these settings passed one (deepep_a4/rehearse/gate.py; a fake in tests).
    rehearse: Callable[[str], int] | None = None


POSITIVE = click.FloatRange(min=0, min_open=True)


@click.command("run", help=run_help((__doc__ or "").split("\n\n")[0].strip()), context_settings={"show_default": True})
@click.option("--stack", required=True, help="stack name: stacks/Pulumi.<stack>.yaml")
@click.option("--keep", is_flag=True, help="leave the stack up after a successful run")
@click.option("--yes", "assume_yes", is_flag=True, help="destroy after a failure or Ctrl-C without asking")
@click.option("--destroy", "destroy_only", is_flag=True, help="only destroy the stack (cleanup after --keep)")
@click.option("--out", help="report folder (default build/report/STACK)")
@click.option("--install-timeout", type=POSITIVE, default=90.0, metavar="MIN", help="install wait in minutes")
@click.option("--poll", type=POSITIVE, default=30.0, metavar="S", help="seconds between checks")
@click.option("--build-store", is_flag=True, help="a store without a pinned manifest: build and pin one without asking")
@click.option("--capacity-timeout", type=POSITIVE, default=120.0, metavar="MIN", help="all `capacity` tries, minutes")
@click.option("--skip-rehearsal", is_flag=True, help="no rehearsal first, though these settings passed none (warns)")
@click.pass_context
def command(ctx: click.Context, **options: Any) -> None:
    deps = ctx.obj if isinstance(ctx.obj, Deps) else Deps()
    ctx.exit(execute(options.pop("stack"), **options, deps=deps))


def execute(
    name: str,
    keep: bool,
    assume_yes: bool,
    destroy_only: bool,
    out: str | None,
    install_timeout: float,
    poll: float,
    deps: Deps,
    build_store: bool = False,
    capacity_timeout: float = 120.0,
    skip_rehearsal: bool = False,
) -> int:
    say, which = deps.say, deps.which
    try:
        name, _ = stackfile.resolve(name, ROOT)
    except stackfile.StackFileError as err:
        say(f"error: {err}")
        return EXIT_USAGE
    if which("pulumi") is None:
        say(refusal_text(CLI_MISSING, destroy_only))
        return EXIT_NO_CLI
    try:
        problems = (deps.preflight or run_preflight.check)(name, stack_cfg(name), destroy_only)
    except config.ConfigError as err:
        say(f"error: {err}")
        return EXIT_USAGE
    if problems:
        for problem in problems:
            say(f"error: {problem}")
        say("  Nothing was created." if not destroy_only else "  Nothing was changed.")
        return EXIT_NO_CLI if problems[0].startswith("the Pulumi CLI") else EXIT_USAGE
    try:
        if destroy_only:
            opener = deps.open_stack or (AutomationStack.existing if deps.make_stack is AutomationStack else None)
            stack = (opener or deps.make_stack)(name)
        else:
            stack = deps.make_stack(name)
        raw = stack.raw_config() if hasattr(stack, "raw_config") else None
        cfg = stack_cfg(name, raw or None)
    except config.ConfigError as err:
        say(f"error: {err}")
        return EXIT_USAGE
    except NoStackError:
        say(f"stack {name} does not exist in this backend: nothing to destroy (nothing was created)")
        return EXIT_PASS
    except Exception as err:
        say(f"error: cannot open stack {name} with the Pulumi CLI: {str(err).strip()[-1000:]}")
        return EXIT_FAILED
    refusal = None if destroy_only else deployed_refusal(name, cfg, stack)
    refusal = refusal or (
        None if destroy_only else fill_and_pin(name, cfg, stack, build_store, deps.ask, say, deps.tty())
    )
    if refusal:
        say(f"error: {refusal}")
        return EXIT_USAGE
    if not destroy_only and store_fill.needs_build(cfg):  # pinned just now: read the stack's config again
        cfg = stack_cfg(name, stack.raw_config() if hasattr(stack, "raw_config") else None)
    if cfg.platform == "gke" and which(AUTH_PLUGIN) is None:
        # The cluster's kubeconfig authenticates through it: without it every Kubernetes object fails mid-up.
        say(refusal_text(AUTH_PLUGIN_MISSING, destroy_only))
        return EXIT_NO_CLI
    if not destroy_only and (stop := rehearse_gate.before_run(name, skip_rehearsal, say, deps.rehearse, ROOT)):
        return stop  # the gate reads run's own ROOT's stack file; it returns None or a non-zero exit status
    probe = (deps.make_probe or (lambda c: GkeProbe(c) if c.platform == "gke" else GceProbe(c)))(cfg)
    tests = max(len(cfg.benchmarks.tests), 1)
    settings = Settings(
        keep=keep,
        assume_yes=assume_yes,
        interactive=sys.stdin.isatty(),
        poll_seconds=poll,
        install_timeout_s=install_timeout * 60,
        # Every test may take its full timeout at every start; the internode barrier and pod starts get half an
        # hour more.
        bench_timeout_s=cfg.benchmarks.test_budget_seconds * tests + 30 * 60,
        out=Path(out) if out else ROOT / "build" / "report" / name,
        cap_line=cost.bill_cap(cfg).line,
        platform=cfg.platform,
        profile=cfg.node_profile,
    )
    if not destroy_only:  # the `capacity` fallback and the internode restarts (deepep_a4/capacity/run_hooks.py)
        stack, probe = run_hooks.wrap(stack, probe, cfg, say, deps.clock, capacity_timeout * 60)
    run = BenchmarkRun(stack, probe, settings, ask=deps.ask, say=say, clock=deps.clock, sleep=deps.sleep)
    if destroy_only:
        return run.finish(ok=True, rc=EXIT_PASS)
    return run.run()


def main(argv: list[str] | None = None, **deps: Any) -> int:
    """The same command as a function, its exit status returned; keyword arguments replace the `Deps`."""
    return options.exit_status(command, argv, "deepep-a4 run", obj=Deps(**deps))


if __name__ == "__main__":
    sys.exit(main())

"""`deepep-a4 report`: the command line of the report (sources, stack, gate ratio, output folder)."""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

import click

from deepep_a4 import options
from deepep_a4.report.analysis import analyze
from deepep_a4.report.checks import FIELD_LABEL
from deepep_a4.report.sources import (
    DEFAULT_GATE_RATIO,
    ROOT,
    SourceArgs,
    SourceError,
    make_source,
    stack_gate_ratio,
    stack_output,
    stack_tests,
    unknown_stack,
)
from deepep_a4.report.writers import reasons_in_order, write_report

# -- command line -----------------------------------------------------------------------------------


def gate_ratio_arg(text: str) -> float:
    """--gate-ratio: a fraction between 0 and 1, the range components/config allows for benchGateRatio."""
    try:
        ratio = float(text)
    except ValueError:
        ratio = float("nan")
    if not 0 <= ratio <= 1:
        raise click.BadParameter(f"must be a fraction between 0 and 1 (as benchGateRatio), e.g. 0.5, not {text}")
    return ratio


def out_problem(out: Path) -> str | None:
    """Why the report cannot be written under `out` (checked before reading any source), or None."""
    for p in (out, *out.parents):
        if p.exists():
            return None if p.is_dir() else f"--out {out} is not a folder" + ("" if p == out else f" ({p} is a file)")
    return None


def _gate_ratio(_ctx: click.Context, _param: click.Parameter, value: str | None) -> float | None:
    return None if value is None else gate_ratio_arg(value)


HELP = """Benchmark report from a stack's Jobs, a bucket or saved logs, with its verdict.

SOURCES: log files or folders, k8s:NAMESPACE, gs://BUCKET/PREFIX (or another registered scheme); none with
--stack reads the stack's benchmark Jobs.

Exit status: 0 the verdict is PASS; 1 it is FAIL or NOT PROVEN (the verdict fails closed: a check without its
evidence is "not run"; the reasons are printed); 2 nothing found or a usage error."""


@click.command("report", help=HELP, context_settings={"show_default": True})
@click.argument("sources", nargs=-1)
@click.option(
    "--stack", help="read the stack's benchmark Jobs, kubeconfig output, benchGateRatio and its tests (each expected)"
)
@click.option(
    "--kubeconfig",
    envvar="KUBECONFIG",
    show_envvar=True,
    help="kubeconfig for k8s: sources",
)
@click.option("--namespace", help="namespace of the benchmark Jobs (k8s: without one)")
@click.option(
    "--gate-ratio",
    callback=_gate_ratio,
    metavar="RATIO",
    help=f"fraction of the baseline that passes, 0 to 1 (default: benchGateRatio or {DEFAULT_GATE_RATIO})",
)
@click.option("--out", help="report folder (default build/report[/STACK])")
@click.option("--no-plots", is_flag=True, help="write no sweep plots (no matplotlib needed)")
@click.pass_context
def command(
    ctx: click.Context,
    sources: tuple[str, ...],
    stack: str | None,
    kubeconfig: str | None,
    namespace: str | None,
    gate_ratio: float | None,
    out: str | None,
    no_plots: bool,
) -> None:
    if not sources and not stack:
        raise click.UsageError("give a SOURCE or --stack")
    ctx.exit(execute(list(sources), stack, SourceArgs(kubeconfig, namespace), gate_ratio, out, no_plots))


def main(argv: list[str] | None = None) -> int:
    """The same command as a function, its exit status returned."""
    return options.exit_status(command, argv, "deepep-a4 report")


def execute(
    specs: list[str], stack: str | None, args: SourceArgs, gate: float | None, out_arg: str | None, no_plots: bool
) -> int:
    if stack and (why := unknown_stack(stack)):
        print(f"error: {why}", file=sys.stderr)
        return 2
    out = Path(out_arg) if out_arg else ROOT / "build" / "report" / (stack or "")
    if why := out_problem(out):
        print(f"error: {why}", file=sys.stderr)
        return 2
    tmp: tempfile.TemporaryDirectory[str] | None = None
    expected: tuple[str, ...] = ()
    if stack:
        try:
            gate = stack_gate_ratio(stack) if gate is None else gate
            expected = stack_tests(stack)
        except SourceError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        if not specs:
            if shutil.which("pulumi") is None:
                print(
                    "error: pulumi not found on PATH: the stack's kubeconfig comes from `pulumi stack output`; "
                    "install the Pulumi CLI, or name a source (saved logs, k8s:NAMESPACE --kubeconfig FILE, gs://...)",
                    file=sys.stderr,
                )
                return 2
            kubeconfig = stack_output(stack, "kubeconfig", secret=True)
            if kubeconfig is None:
                print(
                    f"error: stack {stack} has no kubeconfig output (is it a GKE stack that is up?)",
                    file=sys.stderr,
                )
                return 2
            tmp = tempfile.TemporaryDirectory()
            kc = Path(tmp.name) / "kubeconfig"
            kc.write_text(kubeconfig)
            kc.chmod(0o600)
            args.kubeconfig = str(kc)
            args.kubeconfig_label = f"the kubeconfig output of stack {stack}"
            namespace = args.namespace or stack_output(stack, "benchNamespace")
            specs = [f"k8s:{namespace or ''}"]
    if args.namespace is None and any(s.startswith("k8s:") for s in specs):
        from scripts.names import NAMESPACE

        args.namespace = NAMESPACE
    gate = DEFAULT_GATE_RATIO if gate is None else gate

    try:
        sources = [make_source(s, args) for s in specs]
        items = [item for src in sources for item in src.items()]
    except SourceError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except SystemExit as err:  # a registered source's own message (gs: no gcloud, a failed copy)
        if not isinstance(err.code, str):
            raise
        print(f"error: {err.code}", file=sys.stderr)
        return 2
    finally:
        if tmp is not None:
            tmp.cleanup()
    report = analyze(items, gate, [s.describe() for s in sources], expected)
    if not report.runs:
        print("no benchmark results found in: " + ", ".join(s.describe() for s in sources), file=sys.stderr)
        return 2
    try:
        path = write_report(report, out, plots=not no_plots)
    except OSError as err:
        print(f"error: cannot write the report to {out}: {err.strerror or err}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    for run in report.failed_runs:  # every reason, the known-failure fixes first: none is cut
        print(f"  {run.test} ({run.origin}, start {run.repeat}): {run.status}", file=sys.stderr)
        for reason in reasons_in_order(run):
            print(f"    - {reason}", file=sys.stderr)
    for check in report.open_checks:
        if check.origin == "all" or check.name == "figures":  # a run's own checks are among its reasons
            print(
                f"  {check.test} ({check.origin}): {check.name} check {check.status}: {check.detail}", file=sys.stderr
            )
    for row in report.failed_rows:
        print(
            f"  {row.test} {row.metric} {row.dtype or ''} {FIELD_LABEL.get(row.field, row.field)}: "
            f"{row.value:.2f} GB/s is {row.ratio:.0%} of the baseline {row.baseline.value if row.baseline else ''}",
            file=sys.stderr,
        )
    print(f"gate: {report.verdict}")
    if not report.passed:
        print(
            f"exit 1: the verdict is {report.verdict}, not PASS; the reasons are above "
            "(docs/benchmarks.md tells how to read them)",
            file=sys.stderr,
        )
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())

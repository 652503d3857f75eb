"""`deepep-a4 report`: the command line of the report (sources, stack, gate ratio, output folder)."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
from pathlib import Path

from deepep_a4.tools.report.analysis import analyze
from deepep_a4.tools.report.checks import FIELD_LABEL
from deepep_a4.tools.report.sources import (
    DEFAULT_GATE_RATIO,
    ROOT,
    SourceError,
    make_source,
    stack_gate_ratio,
    stack_output,
    stack_tests,
    unknown_stack,
)
from deepep_a4.tools.report.writers import reasons_in_order, write_report

# -- command line -----------------------------------------------------------------------------------


def gate_ratio_arg(text: str) -> float:
    """--gate-ratio: a fraction between 0 and 1, the range components/config allows for benchGateRatio."""
    try:
        ratio = float(text)
    except ValueError:
        ratio = float("nan")
    if not 0 <= ratio <= 1:
        raise argparse.ArgumentTypeError(
            f"must be a fraction between 0 and 1 (as benchGateRatio), e.g. 0.5, not {text}"
        )
    return ratio


def out_problem(out: Path) -> str | None:
    """Why the report cannot be written under `out` (checked before reading any source), or None."""
    for p in (out, *out.parents):
        if p.exists():
            return None if p.is_dir() else f"--out {out} is not a folder" + ("" if p == out else f" ({p} is a file)")
    return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="deepep-a4 report", description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("sources", nargs="*", help="log files or folders, k8s:NAMESPACE, or a registered scheme")
    ap.add_argument(
        "--stack",
        help="read the stack's benchmark Jobs, kubeconfig output, benchGateRatio and its tests (each expected)",
    )
    ap.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), help="kubeconfig for k8s: sources")
    ap.add_argument("--namespace", default=None, help="namespace of the benchmark Jobs (k8s: without one)")
    ap.add_argument(
        "--gate-ratio",
        type=gate_ratio_arg,
        help=f"fraction of the baseline that passes, 0 to 1 (default: benchGateRatio or {DEFAULT_GATE_RATIO})",
    )
    ap.add_argument("--out", default=None, help="report folder (default build/report[/STACK])")
    ap.add_argument("--no-plots", action="store_true")
    args = ap.parse_args(argv)

    gate = args.gate_ratio
    specs = list(args.sources)
    if not specs and not args.stack:
        ap.error("give a SOURCE or --stack")
    if args.stack and (why := unknown_stack(args.stack)):
        print(f"error: {why}", file=sys.stderr)
        return 2
    out = Path(args.out) if args.out else ROOT / "build" / "report" / (args.stack or "")
    if why := out_problem(out):
        print(f"error: {why}", file=sys.stderr)
        return 2
    tmp: tempfile.TemporaryDirectory[str] | None = None
    expected: tuple[str, ...] = ()
    if args.stack:
        try:
            gate = stack_gate_ratio(args.stack) if gate is None else gate
            expected = stack_tests(args.stack)
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
            kubeconfig = stack_output(args.stack, "kubeconfig", secret=True)
            if kubeconfig is None:
                print(
                    f"error: stack {args.stack} has no kubeconfig output (is it a GKE stack that is up?)",
                    file=sys.stderr,
                )
                return 2
            tmp = tempfile.TemporaryDirectory()
            kc = Path(tmp.name) / "kubeconfig"
            kc.write_text(kubeconfig)
            kc.chmod(0o600)
            args.kubeconfig = str(kc)
            args.kubeconfig_label = f"the kubeconfig output of stack {args.stack}"
            namespace = args.namespace or stack_output(args.stack, "benchNamespace")
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
        path = write_report(report, out, plots=not args.no_plots)
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
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())

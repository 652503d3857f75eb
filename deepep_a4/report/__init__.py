"""Collects the benchmark runner's results and writes the report: Markdown, CSV, JSON and sweep plots.

    .venv/bin/deepep-a4 report --stack gke-b200                 # the stack's benchmark Jobs (kubeconfig output)
    .venv/bin/deepep-a4 report tests/fixtures/bench/h200x2_run.log --out build/report
    .venv/bin/deepep-a4 report k8s:deepep-a4 --kubeconfig ~/.kube/config
    .venv/bin/deepep-a4 report saved-logs/ --gate-ratio 0.5

Each SOURCE is a file or folder of saved logs / runner JSON, `k8s:NAMESPACE` (the benchmark pods'
logs, read with the kubernetes client), or any scheme registered with `register_source` (`gs://` for the
GCE VMs' bucket). With --stack and no SOURCE the stack's own Jobs are read, through the
kubeconfig the stack exports.

The report puts every measured figure next to the B200 baseline of the field reports
(deepep_a4/report/baselines.py), the ratio, and DeepEP's published H800 figures as an outside
reference (never gated); a figure below `--gate-ratio` (the stack's benchGateRatio) times its baseline
fails the gate, and so does a failed, truncated or timed-out test. The verdict fails closed: a check
without its evidence (the transport, NIC counters on every node, a baseline for the shape, a test the stack
runs) is "not run" and the verdict NOT PROVEN. docs/benchmarks.md tells how to read it.
Exit status: 0 PASS, 1 FAIL or NOT PROVEN, 2 nothing found or a usage error (an unreadable source, an
unknown stack, a bad option). A runner JSON that is not usable is skipped with a warning that names the
file.
"""

from __future__ import annotations

from deepep_a4.report.analysis import (
    Report,
    Row,
    Run,
    analyze,
    apply_gate,
    rows_of,
    runs_from,
)
from deepep_a4.report.checks import FIELD_LABEL, Check
from deepep_a4.report.cli import (
    gate_ratio_arg,
    main,
    out_problem,
)
from deepep_a4.report.plots import sweeps_of, write_plots
from deepep_a4.report.records import (
    NUMERIC_PARAMS,
    REQUIRED_FIELDS,
    check_runner_doc,
    skip_text,
)
from deepep_a4.report.sources import (
    DEFAULT_GATE_RATIO,
    ROOT,
    KubernetesSource,
    LogItem,
    PathSource,
    Source,
    SourceArgs,
    SourceError,
    SourceFactory,
    make_source,
    register_source,
    stack_gate_ratio,
    stack_output,
    stack_tests,
    unknown_stack,
    warn,
)
from deepep_a4.report.writers import (
    CSV_FIELDS,
    SWEEP_FIELDS,
    TEST_TITLES,
    markdown,
    reasons_in_order,
    write_csv,
    write_json,
    write_report,
)

__all__ = [
    "CSV_FIELDS",
    "DEFAULT_GATE_RATIO",
    "FIELD_LABEL",
    "NUMERIC_PARAMS",
    "REQUIRED_FIELDS",
    "ROOT",
    "SWEEP_FIELDS",
    "TEST_TITLES",
    "Check",
    "KubernetesSource",
    "LogItem",
    "PathSource",
    "Report",
    "Row",
    "Run",
    "Source",
    "SourceArgs",
    "SourceError",
    "SourceFactory",
    "analyze",
    "apply_gate",
    "check_runner_doc",
    "gate_ratio_arg",
    "main",
    "make_source",
    "markdown",
    "out_problem",
    "reasons_in_order",
    "register_source",
    "rows_of",
    "runs_from",
    "skip_text",
    "stack_gate_ratio",
    "stack_output",
    "stack_tests",
    "sweeps_of",
    "unknown_stack",
    "warn",
    "write_csv",
    "write_json",
    "write_plots",
    "write_report",
]

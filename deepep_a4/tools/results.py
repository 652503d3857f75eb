#!/usr/bin/env python3
"""Collects the benchmark runner's results and writes the report: Markdown, CSV, JSON and sweep plots.

    python scripts/results.py --stack gke-b200                 # the stack's benchmark Jobs (kubeconfig output)
    python scripts/results.py tests/fixtures/bench/h200x2_run.log --out build/report
    python scripts/results.py k8s:deepep-a4 --kubeconfig ~/.kube/config
    python scripts/results.py saved-logs/ --gate-ratio 0.5

Each SOURCE is a file or folder of saved logs / runner JSON, `k8s:NAMESPACE` (the benchmark pods'
logs, read with the kubernetes client), or any scheme registered with `register_source` (issue 6 adds
`gs://` for the GCE VMs). With --stack and no SOURCE the stack's own Jobs are read, through the
kubeconfig the stack exports.

The report puts every measured figure next to the B200 baseline of the seeds (scripts/bench/baselines.py)
and the ratio; a figure below `--gate-ratio` (the stack's benchGateRatio) times its baseline fails the
gate, and so does a failed, truncated or timed-out test. Exit status: 0 gate passed, 1 gate failed,
2 nothing found or a usage error (an unreadable source, an unknown stack, a bad option). A runner JSON
that is not usable is skipped with a warning that names the file.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from deepep_a4.config import stackfile
from deepep_a4.node.bench import baselines as bl
from deepep_a4.node.bench import parse as bp
from deepep_a4.paths import project_root

ROOT = project_root()

DEFAULT_GATE_RATIO = 0.5  # components/config.py's default of benchGateRatio (a test keeps them equal)

# -- sources ---------------------------------------------------------------------------------------------


@dataclass
class LogItem:
    """One log (or runner JSON document) and where it came from."""

    origin: str  # pod name, file name, object name
    text: str = ""
    doc: dict[str, Any] | None = None  # a runner <test>.json instead of a log
    meta: dict[str, str] = field(default_factory=dict)


class Source(Protocol):
    """Anything that yields benchmark logs."""

    def describe(self) -> str: ...

    def items(self) -> Iterator[LogItem]: ...


SourceFactory = Callable[[str, argparse.Namespace], Source]
_SOURCES: dict[str, SourceFactory] = {}


class SourceError(Exception):
    """A source that cannot be read at all (no such path, no kubeconfig, unknown scheme): exit 2."""


def warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr)


# -- runner JSON --------------------------------------------------------------------------------------

# What the report reads of a record besides its kind, by (test, kind): params and values that must be
# numbers. Other numbers it reads are optional (`values` must hold numbers only, `params` below).
REQUIRED_FIELDS: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {
    ("intranode", "sweep"): ((), ("nvl_bw",)),
    ("internode", "sweep"): (("nvl_chunk", "rdma_chunk"), ("rdma_bw",)),
    ("nccl", "nccl"): ((), ("busbw", "algbw")),
}
NUMERIC_PARAMS = ("sms", "nvl_chunk", "rdma_chunk", "size", "ranks")  # when present and not null


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_record(test: str, i: int, rec: Any) -> dict[str, Any]:
    """Record `i` of a runner JSON with its optional fields filled in, or ValueError saying what is wrong."""
    if not isinstance(rec, dict):
        raise ValueError(f"record {i} is a {type(rec).__name__}, not an object")
    kind = rec.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"record {i} has no `kind`" if kind is None else f"record {i}: `kind` {kind!r} is not a name")
    where = f"record {i} ({kind})"
    for key in ("name", "dtype"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            raise ValueError(f"{where}: `{key}` must be a string or null, not {rec[key]!r}")
    rank = rec.get("rank")
    if rank is not None and (not isinstance(rank, int) or isinstance(rank, bool)):
        raise ValueError(f"{where}: `rank` must be an integer or null, not {rank!r}")
    params = rec.get("params", {})
    values = rec.get("values", {})
    for key, obj in (("params", params), ("values", values)):
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: `{key}` must be an object, not {type(obj).__name__}")
    bad = [k for k, v in values.items() if not _is_number(v)]
    if bad:
        raise ValueError(f"{where}: values.{bad[0]} must be a number, not {values[bad[0]]!r}")
    bad = [k for k in NUMERIC_PARAMS if params.get(k) is not None and not _is_number(params[k])]
    if bad:
        raise ValueError(f"{where}: params.{bad[0]} must be a number, not {params[bad[0]]!r}")
    need_params, need_values = REQUIRED_FIELDS.get((test, kind), ((), ()))
    missing = [f"params.{k}" for k in need_params if params.get(k) is None]
    missing += [f"values.{k}" for k in need_values if k not in values]
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)}")
    return {**rec, "name": rec.get("name"), "dtype": rec.get("dtype"), "rank": rank, "params": params, "values": values}


def check_runner_doc(doc: dict[str, Any]) -> dict[str, Any]:
    """A runner <test>.json with its records checked and completed, or ValueError saying what is wrong."""
    test = doc.get("test")
    if test not in bp.TESTS:
        raise ValueError(f"`test` is {test!r}, not one of {', '.join(bp.TESTS)}")
    status = doc.get("status", "failed")
    if not isinstance(status, str):
        raise ValueError(f"`status` must be a string such as 'passed', not {status!r}")
    problems = doc.get("problems", [])
    if not isinstance(problems, list) or not all(isinstance(p, str) for p in problems):
        raise ValueError(f"`problems` must be a list of strings, not {problems!r}"[:200])
    records = doc.get("records")
    if not isinstance(records, list):
        raise ValueError(f"`records` must be a list of records, not {type(records).__name__}")
    checked = [_check_record(test, i, r) for i, r in enumerate(records)]
    return {**doc, "test": test, "status": status, "problems": problems, "records": checked}


def _skip_text(what: str, why: str) -> str:
    return f"skipping {what}: {why} (not a usable runner result: re-run the test, or remove the file)"


def register_source(scheme: str, factory: SourceFactory) -> None:
    """Makes `scheme:...` (or `scheme://...`) a source: factory(spec, args) -> Source."""
    _SOURCES[scheme] = factory


class PathSource:
    """A log file, a runner JSON file, or a folder of them (searched recursively)."""

    def __init__(self, path: str):
        self.path = Path(path)

    def describe(self) -> str:
        return str(self.path)

    def items(self) -> Iterator[LogItem]:
        files = sorted(self.path.rglob("*")) if self.path.is_dir() else [self.path]
        logs = {f.stem for f in files if f.suffix in (".log", ".txt")}
        for f in files:
            if not f.is_file():
                continue
            origin = str(f.relative_to(self.path)) if self.path.is_dir() else f.name
            if f.suffix in (".log", ".txt"):
                try:
                    text = f.read_text(encoding="utf-8", errors="replace")
                except OSError as err:
                    warn(f"skipping {f}: cannot read it: {err.strerror or err}")
                    continue
                yield LogItem(origin, text=text)
            elif f.suffix == ".json" and f.stem not in logs:
                try:
                    doc = json.loads(f.read_text(encoding="utf-8"))
                except OSError as err:
                    warn(f"skipping {f}: cannot read it: {err.strerror or err}")
                    continue
                except (UnicodeDecodeError, json.JSONDecodeError) as err:
                    warn(_skip_text(str(f), f"not valid JSON ({err})"))
                    continue
                if isinstance(doc, dict) and "records" in doc and "test" in doc:
                    try:
                        doc = check_runner_doc(doc)
                    except ValueError as err:
                        warn(_skip_text(str(f), str(err)))
                        continue
                    yield LogItem(origin, doc=doc)


class KubernetesSource:
    """The logs of the benchmark pods in a namespace, through the kubernetes client.

    `core_v1` may be passed in (tests); otherwise one is built from the kubeconfig.
    """

    def __init__(
        self,
        namespace: str,
        kubeconfig: str | None = None,
        selector: str | None = None,
        container: str | None = None,
        core_v1: Any = None,
        kubeconfig_label: str | None = None,
    ):
        from deepep_a4.program.gke_workloads import BENCH_CONTAINER, BENCH_SELECTOR

        self.namespace = namespace
        self.kubeconfig = kubeconfig
        # What to call the kubeconfig in messages (the stack's output is read into a temporary file).
        self.kubeconfig_label = kubeconfig_label or f"kubeconfig {kubeconfig or '~/.kube/config (the default)'}"
        self.selector = selector or BENCH_SELECTOR
        self.container = container or BENCH_CONTAINER
        self._core_v1 = core_v1

    def describe(self) -> str:
        return f"pods {self.selector!r} in namespace {self.namespace}"

    def _api(self) -> Any:
        if self._core_v1 is None:
            try:
                from kubernetes import client
                from kubernetes import config as kube_config
            except ImportError as err:
                raise SourceError(
                    "reading Job logs needs the kubernetes client: .venv/bin/pip install kubernetes"
                ) from err
            import yaml

            try:
                api_client = kube_config.new_client_from_config(config_file=self.kubeconfig)
            except (kube_config.ConfigException, yaml.YAMLError, OSError) as err:
                reason = " ".join(str(err).split())
                if self.kubeconfig and os.pathsep not in self.kubeconfig and not Path(self.kubeconfig).exists():
                    reason = "no such file"
                raise SourceError(
                    f"cannot load {self.kubeconfig_label}: {reason}. Get one with the stack's getCredentials "
                    "command (`pulumi stack output getCredentials -s STACK`: `gcloud container clusters "
                    "get-credentials CLUSTER --location REGION --project PROJECT`), or use --stack STACK"
                ) from err
            self._core_v1 = client.CoreV1Api(api_client)
        return self._core_v1

    def items(self) -> Iterator[LogItem]:
        api = self._api()
        try:
            pods = api.list_namespaced_pod(self.namespace, label_selector=self.selector).items
        except Exception as err:  # ApiException, urllib3's connection errors: the cluster is not reachable
            reason = " ".join(str(err).split())[:300]
            raise SourceError(
                f"cannot list the benchmark pods in namespace {self.namespace} with {self.kubeconfig_label}: "
                f"{reason} (is the cluster up, and the kubeconfig current? see the stack's getCredentials output)"
            ) from err
        for pod in sorted(pods, key=lambda p: p.metadata.name):
            labels = pod.metadata.labels or {}
            annotations = pod.metadata.annotations or {}
            meta = {
                "job": labels.get("job-name", ""),
                "index": annotations.get("batch.kubernetes.io/job-completion-index", ""),
                "node": getattr(pod.spec, "node_name", "") or "",
                "phase": getattr(pod.status, "phase", "") or "",
            }
            try:
                text = api.read_namespaced_pod_log(pod.metadata.name, self.namespace, container=self.container)
            except Exception as err:  # a pod that never started has no log: report it, go on
                text = f"[runner] error cannot read the log of pod {pod.metadata.name}: {err}"
            yield LogItem(pod.metadata.name, text=text, meta=meta)


def _k8s_factory(spec: str, args: argparse.Namespace) -> Source:
    namespace = spec.split(":", 1)[1].lstrip("/") or args.namespace
    label = getattr(args, "kubeconfig_label", None)
    return KubernetesSource(namespace, kubeconfig=args.kubeconfig, kubeconfig_label=label)


register_source("k8s", _k8s_factory)

# gs://BUCKET/PREFIX: the GCE VMs' results in the stack's bucket (issue 6), copied with `gcloud storage cp -r`.
from deepep_a4.tools.gcs_source import make_gs_factory  # noqa: E402  (registers after PathSource exists)

register_source("gs", make_gs_factory(PathSource))


def make_source(spec: str, args: argparse.Namespace) -> Source:
    """The source of `spec`; SourceError for an unknown scheme or a path that does not exist."""
    m = re.match(r"^([a-z][a-z0-9+.-]*):(?!\\)", spec)
    if m and m[1] in _SOURCES:
        return _SOURCES[m[1]](spec, args)
    if m and len(m[1]) > 1 and not Path(spec).exists():
        raise SourceError(
            f"unknown source scheme {m[1]!r} in {spec}; known: {', '.join(sorted(_SOURCES))}, or a file or folder"
        )
    if not Path(spec).exists():
        raise SourceError(f"no such file or folder: {spec}")
    return PathSource(spec)


# -- the stack ------------------------------------------------------------------------------------------


def unknown_stack(stack: str) -> str | None:
    """Why `stack` is not a stack of this project, or None."""
    try:
        stackfile.resolve(stack, ROOT)
    except stackfile.StackFileError as err:
        return str(err)
    return None


def stack_output(stack: str, name: str, secret: bool = False) -> str | None:
    cmd = ["pulumi", "stack", "output", name, "--stack", stack] + (["--show-secrets"] if secret else [])
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return out or None


def stack_gate_ratio(stack: str) -> float | None:
    try:
        out = subprocess.run(
            ["pulumi", "config", "get", "benchGateRatio", "--stack", stack],
            check=True,
            capture_output=True,
            text=True,
            cwd=ROOT,
        ).stdout.strip()
        return float(out)
    except (OSError, subprocess.CalledProcessError, ValueError):
        return None


# -- analysis -------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One test's result from one source (a pod, a file)."""

    origin: str
    test: str
    status: str  # passed | failed | skipped
    problems: list[str]
    records: list[dict[str, Any]]
    processes: int | None
    nodes: int | None
    meta: dict[str, str] = field(default_factory=dict)


@dataclass
class Row:
    origin: str
    test: str
    metric: str
    dtype: str | None
    field: str
    value: float
    unit: str
    config: str
    processes: int | None
    nodes: int | None
    extra: str = ""
    baseline: bl.Baseline | None = None
    references: list[bl.Baseline] = dataclasses.field(default_factory=list)  # `field` is a column here
    ratio: float | None = None
    gate: str = "n/a"  # pass | FAIL | n/a


FIELD_LABEL = {"nvl_bw": "NVL", "rdma_bw": "RDMA", "bw": "per rank", "busbw": "bus bw", "algbw": "alg bw"}


def _fingerprint(test: str, records: list[dict[str, Any]]) -> str:
    keep = [(r["kind"], r["name"], r["dtype"], r["rank"], sorted(r["values"].items())) for r in records]
    return hashlib.sha256(json.dumps([test, keep], default=str).encode()).hexdigest()


def runs_from(items: Iterable[LogItem]) -> list[Run]:
    """Every test result in the items, each once (a folder may hold a log and its JSON)."""
    runs: list[Run] = []
    seen: set[str] = set()
    for item in items:
        found: list[Run] = []
        if item.doc is not None:
            try:  # PathSource checked it already; another source's document is checked here
                d = check_runner_doc(item.doc)
            except ValueError as err:
                warn(_skip_text(item.origin, str(err)))
                continue
            found.append(
                Run(
                    item.origin,
                    d["test"],
                    d.get("status", "failed"),
                    list(d.get("problems", [])),
                    list(d.get("records", [])),
                    None,
                    None,
                    item.meta,
                )
            )
        else:
            for res in bp.parse_log(item.text):
                if res.test is None:
                    continue
                begin = res.begin or {}
                status = "passed" if res.passed else "failed"
                found.append(
                    Run(
                        item.origin,
                        res.test,
                        status,
                        res.problems,
                        res.records,
                        begin.get("processes"),
                        begin.get("nodes"),
                        item.meta,
                    )
                )
            found += _skipped_from_summary(item, {r.test for r in found})
        for run in found:
            fp = _fingerprint(run.test, run.records) if run.records else f"{run.origin}/{run.test}"
            if fp in seen:
                continue
            seen.add(fp)
            runs.append(run)
    return runs


def _skipped_from_summary(item: LogItem, have: set[str]) -> list[Run]:
    """Tests the runner skipped (e.g. after a failed NCCL check) appear only in its summary line."""
    out = []
    for line in item.text.splitlines():
        if line.startswith("[runner] summary "):
            try:
                summary = json.loads(line[len("[runner] summary ") :])
            except json.JSONDecodeError:
                continue
            for t in summary.get("tests", []):
                if t.get("test") not in have and t.get("status") != "passed":
                    out.append(
                        Run(
                            item.origin,
                            t["test"],
                            t.get("status", "failed"),
                            list(t.get("problems", [])),
                            [],
                            None,
                            summary.get("nodes"),
                            item.meta,
                        )
                    )
    return out


def _config_text(params: dict[str, Any]) -> str:
    parts = []
    if "sms" in params:
        parts.append(f"SMs {params['sms']}")
    if params.get("nvl_chunk") is not None:
        parts.append(f"NVL chunk {params['nvl_chunk']}")
    if params.get("rdma_chunk") is not None:
        parts.append(f"RDMA chunk {params['rdma_chunk']}")
    return ", ".join(parts)


def rows_of(run: Run) -> list[Row]:
    rows: list[Row] = []
    recs = run.records
    if run.test in ("intranode", "internode"):
        for r in recs:
            if r["kind"] != "best":
                continue
            fields = ["rdma_bw", "nvl_bw"] if run.test == "internode" else ["nvl_bw"]
            for f in fields:
                if f in r["values"]:
                    t = r["values"].get("time")
                    rows.append(
                        Row(
                            run.origin,
                            run.test,
                            r["name"],
                            r["dtype"],
                            f,
                            r["values"][f],
                            "GB/s",
                            _config_text(r["params"]),
                            run.processes,
                            run.nodes,
                            extra=f"t {t:.2f} us" if t is not None else "",
                        )
                    )
    elif run.test == "low-latency":
        by_metric: dict[str, list[float]] = {}
        for r in recs:
            if r["kind"] == "rank" and "bw" in r["values"]:
                by_metric.setdefault(r["name"], []).append(r["values"]["bw"])
        for metric in ("dispatch+combine", "dispatch", "combine"):
            vals = by_metric.get(metric)
            if vals:
                rows.append(
                    Row(
                        run.origin,
                        run.test,
                        metric,
                        None,
                        "bw",
                        round(sum(vals) / len(vals), 2),
                        "GB/s",
                        f"mean of {len(vals)} ranks",
                        run.processes,
                        run.nodes,
                        extra=f"min {min(vals):.2f}",
                    )
                )
    elif run.test == "nccl":
        nccl = [r for r in recs if r["kind"] == "nccl"]
        if nccl:
            big = max(nccl, key=lambda r: r["params"].get("size", 0))
            size_mib = big["params"].get("size", 0) / 2**20
            for f in ("busbw", "algbw"):
                rows.append(
                    Row(
                        run.origin,
                        run.test,
                        "all-to-all",
                        None,
                        f,
                        big["values"][f],
                        "GB/s",
                        f"{big['params'].get('ranks')} ranks, {size_mib:.0f} MiB per rank",
                        run.processes,
                        run.nodes,
                    )
                )
    return rows


def apply_gate(rows: list[Row], ratio: float) -> None:
    for row in rows:
        refs = bl.find(row.test, row.metric, row.dtype, row.field, row.processes, row.nodes)
        row.baseline = next((b for b in refs if b.primary), None)
        row.references = [b for b in refs if not b.primary]
        if row.baseline is not None:
            row.ratio = row.value / row.baseline.value
            row.gate = "pass" if row.ratio >= ratio else "FAIL"


@dataclass
class Report:
    runs: list[Run]
    rows: list[Row]
    gate_ratio: float
    sources: list[str]
    plots: list[tuple[Run, str, str]] = field(default_factory=list)  # (run, sweep title, file name)

    @property
    def failed_runs(self) -> list[Run]:
        return [r for r in self.runs if r.status != "passed"]

    @property
    def failed_rows(self) -> list[Row]:
        return [r for r in self.rows if r.gate == "FAIL"]

    @property
    def passed(self) -> bool:
        return bool(self.runs) and not self.failed_runs and not self.failed_rows


def analyze(items: Iterable[LogItem], gate_ratio: float, sources: list[str]) -> Report:
    runs = runs_from(items)
    rows = [row for run in runs for row in rows_of(run)]
    apply_gate(rows, gate_ratio)
    return Report(runs, rows, gate_ratio, sources)


# -- sweeps and plots --------------------------------------------------------------------------------


def sweeps_of(run: Run) -> dict[tuple[str, str | None], list[dict[str, Any]]]:
    out: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
    for r in run.records:
        if r["kind"] == "sweep":
            out.setdefault((r["name"] or "unlabelled", r["dtype"]), []).append(r)
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower()


def write_plots(report: Report, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for run in report.runs:
        for (op, dtype), recs in sweeps_of(run).items():
            title = f"{run.test} {op}" + (f" {dtype}" if dtype else "")
            fname = f"sweep-{_slug(run.origin)}-{_slug(title)}.png"
            fig, ax = plt.subplots(figsize=(7, 4))
            if run.test == "internode":
                # 2-D sweep: RDMA bandwidth against RDMA chunk, one line per NVL chunk.
                by_nvl: dict[int, list[tuple[int, float]]] = {}
                for r in recs:
                    by_nvl.setdefault(r["params"]["nvl_chunk"], []).append(
                        (r["params"]["rdma_chunk"], r["values"]["rdma_bw"])
                    )
                for nvl, pts in sorted(by_nvl.items()):
                    pts.sort()
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=f"NVL chunk {nvl}")
                ax.set_xlabel("RDMA chunk size (tokens)")
                ax.set_ylabel("RDMA bandwidth (GB/s)")
                if len(by_nvl) > 1:
                    ax.legend(fontsize="x-small", ncol=2)
            else:
                pts = sorted(
                    (r["params"]["nvl_chunk"], r["values"]["nvl_bw"]) for r in recs if r["params"].get("nvl_chunk")
                )
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label="NVL chunk")
                default = [r["values"]["nvl_bw"] for r in recs if r["params"].get("nvl_chunk") is None]
                if default:
                    ax.axhline(default[0], ls="--", color="grey", label=f"default config ({default[0]:.1f})")
                ax.set_xlabel("NVL chunk size (tokens)")
                ax.set_ylabel("NVLink bandwidth (GB/s)")
                ax.legend(fontsize="small")
            best = [
                r
                for r in run.records
                if r["kind"] == "best" and r["name"] == op and (r["dtype"] == dtype or op == "combine")
            ]
            f = "rdma_bw" if run.test == "internode" else "nvl_bw"
            if best and f in best[0]["values"]:
                ax.set_title(f"{title} ({run.origin}): best {best[0]['values'][f]:.2f} GB/s")
            else:
                ax.set_title(f"{title} ({run.origin})")
            ax.grid(True, alpha=0.3)
            fig.tight_layout()
            fig.savefig(out / fname, dpi=110)
            plt.close(fig)
            report.plots.append((run, title, fname))


# -- writers ----------------------------------------------------------------------------------------


def _fmt(v: float | None, digits: int = 2) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def _baseline_text(row: Row) -> str:
    if row.baseline is None:
        return "n/a"
    return f"{row.baseline.value:g} ({row.baseline.note})" if row.baseline.note else f"{row.baseline.value:g}"


TEST_TITLES = {
    "nccl": "NCCL all-to-all check (fabric)",
    "intranode": "Intranode (test_intranode.py)",
    "low-latency": "Low-latency (test_low_latency.py)",
    "internode": "Internode (test_internode.py)",
}


def markdown(report: Report) -> str:
    lines = ["# DeepEP benchmark report", ""]
    verdict = "PASS" if report.passed else "FAIL"
    lines.append(
        f"**Gate: {verdict}**: every test must pass and every figure with a baseline must reach "
        f"{report.gate_ratio:.0%} of its B200 baseline (benchGateRatio {report.gate_ratio:g})."
    )
    lines.append("")
    lines.append(f"Sources: {', '.join(report.sources)}")
    lines.append("")
    lines.append("| test | source | status | problems |")
    lines.append("|---|---|---|---|")
    for run in report.runs:
        problems = "; ".join(run.problems[:3]).replace("|", "\\|") or "-"
        lines.append(f"| {run.test} | {run.origin} | {run.status} | {problems} |")
    lines.append("")
    for test in bp.TESTS:
        rows = [r for r in report.rows if r.test == test]
        if not rows:
            continue
        lines.append(f"## {TEST_TITLES[test]}")
        lines.append("")
        lines.append("| source | metric | dtype | measured (GB/s) | config | baseline B200 (GB/s) | ratio | gate |")
        lines.append("|---|---|---|---:|---|---:|---:|---|")
        for r in rows:
            measured = f"{r.value:.2f} {FIELD_LABEL.get(r.field, r.field)}"
            config = ", ".join(x for x in (r.config, r.extra) if x)
            lines.append(
                f"| {r.origin} | {r.metric} | {r.dtype or ''} | {measured} | {config} | {_baseline_text(r)} | "
                f"{_fmt(r.ratio)} | {r.gate} |"
            )
        sources = sorted({r.baseline.source for r in rows if r.baseline})
        refs = sorted({(b.source, b.metric, b.dtype or "", b.field, b.value) for r in rows for b in r.references})
        shapes = sorted({(r.processes, r.nodes) for r in rows})
        lines.append("")
        shape_text = ", ".join(f"{p or '?'} GPUs per node x {n or '?'} node(s)" for p, n in shapes)
        lines.append(f"Shape: {shape_text}. Baselines: {'; '.join(sources) or 'none for this shape'}.")
        if refs:
            ref_text = "; ".join(f"{m} {d} {FIELD_LABEL.get(f, f)} {v:g}" for _, m, d, f, v in refs)
            lines.append(f"Other reference ({refs[0][0]}): {ref_text}.")
        if test == "internode":
            lines.append(
                f"An RDMA figure near {bl.SINGLE_NIC_TRAP_RDMA_GBPS} GB/s means every GPU used one NIC "
                "(the GPU-to-NIC mapping of DeepEP PR #466 missing): seed 001, problem 3."
            )
        lines.append("")
    if report.plots:
        lines.append("## Tuning sweeps")
        lines.append("")
        for run, title, fname in report.plots:
            lines.append(f"![{title} ({run.origin})]({fname})")
        lines.append("")
    return "\n".join(lines)


CSV_FIELDS = [
    "origin",
    "test",
    "metric",
    "dtype",
    "field",
    "value",
    "unit",
    "config",
    "extra",
    "processes",
    "nodes",
    "baseline",
    "baseline_source",
    "ratio",
    "gate",
]
SWEEP_FIELDS = [
    "origin",
    "test",
    "op",
    "dtype",
    "sms",
    "nvl_chunk",
    "rdma_chunk",
    "nvl_bw",
    "rdma_bw",
    "time",
    "notify",
]


def write_csv(report: Report, out: Path) -> None:
    with (out / "results.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, CSV_FIELDS)
        w.writeheader()
        for r in report.rows:
            w.writerow(
                {
                    "origin": r.origin,
                    "test": r.test,
                    "metric": r.metric,
                    "dtype": r.dtype or "",
                    "field": r.field,
                    "value": r.value,
                    "unit": r.unit,
                    "config": r.config,
                    "extra": r.extra,
                    "processes": r.processes or "",
                    "nodes": r.nodes or "",
                    "baseline": r.baseline.value if r.baseline else "",
                    "baseline_source": r.baseline.source if r.baseline else "",
                    "ratio": _fmt(r.ratio, 4),
                    "gate": r.gate,
                }
            )
    with (out / "sweeps.csv").open("w", newline="") as f:
        w = csv.DictWriter(f, SWEEP_FIELDS)
        w.writeheader()
        for run in report.runs:
            for (op, dtype), recs in sweeps_of(run).items():
                for r in recs:
                    p, v = r["params"], r["values"]
                    w.writerow(
                        {
                            "origin": run.origin,
                            "test": run.test,
                            "op": op,
                            "dtype": dtype or "",
                            "sms": p.get("sms", ""),
                            "nvl_chunk": "default" if p.get("default_config") else p.get("nvl_chunk", ""),
                            "rdma_chunk": p.get("rdma_chunk", ""),
                            "nvl_bw": v.get("nvl_bw", ""),
                            "rdma_bw": v.get("rdma_bw", ""),
                            "time": v.get("time", ""),
                            "notify": v.get("notify", ""),
                        }
                    )


def write_json(report: Report, out: Path) -> None:
    doc = {
        "gate": "pass" if report.passed else "fail",
        "gate_ratio": report.gate_ratio,
        "sources": report.sources,
        "runs": [
            {"origin": r.origin, "test": r.test, "status": r.status, "problems": r.problems, "meta": r.meta}
            for r in report.runs
        ],
        "rows": [
            {
                "origin": r.origin,
                "test": r.test,
                "metric": r.metric,
                "dtype": r.dtype,
                "field": r.field,
                "value": r.value,
                "unit": r.unit,
                "baseline": r.baseline.value if r.baseline else None,
                "baseline_source": r.baseline.source if r.baseline else None,
                "ratio": r.ratio,
                "gate": r.gate,
            }
            for r in report.rows
        ],
    }
    (out / "results.json").write_text(json.dumps(doc, indent=1) + "\n")


def write_report(report: Report, out: Path, plots: bool = True) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    if plots:
        write_plots(report, out)
    write_csv(report, out)
    write_json(report, out)
    path = out / "report.md"
    path.write_text(markdown(report) + "\n")
    return path


# -- command line -----------------------------------------------------------------------------------


def gate_ratio_arg(text: str) -> float:
    """--gate-ratio: a fraction between 0 and 1, the range components/config.py allows for benchGateRatio."""
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
    ap.add_argument("--stack", help="read the stack's benchmark Jobs, kubeconfig output and benchGateRatio")
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
    if args.stack:
        if gate is None:
            gate = stack_gate_ratio(args.stack)
        if not specs:
            kubeconfig = stack_output(args.stack, "kubeconfig", secret=True)
            if kubeconfig is None:
                print(f"stack {args.stack} has no kubeconfig output (is it a GKE stack that is up?)", file=sys.stderr)
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
        from deepep_a4.program.gke_workloads import NAMESPACE

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
    report = analyze(items, gate, [s.describe() for s in sources])
    if not report.runs:
        print("no benchmark results found in: " + ", ".join(s.describe() for s in sources), file=sys.stderr)
        return 2
    try:
        path = write_report(report, out, plots=not args.no_plots)
    except OSError as err:
        print(f"error: cannot write the report to {out}: {err.strerror or err}", file=sys.stderr)
        return 2
    print(f"report: {path}")
    for run in report.failed_runs:
        print(f"  {run.test} ({run.origin}): {run.status}: {'; '.join(run.problems[:3])}", file=sys.stderr)
    for row in report.failed_rows:
        print(
            f"  {row.test} {row.metric} {row.dtype or ''} {FIELD_LABEL.get(row.field, row.field)}: "
            f"{row.value:.2f} GB/s is {row.ratio:.0%} of the baseline {row.baseline.value if row.baseline else ''}",
            file=sys.stderr,
        )
    print(f"gate: {'PASS' if report.passed else 'FAIL'}")
    return 0 if report.passed else 1


if __name__ == "__main__":
    sys.exit(main())

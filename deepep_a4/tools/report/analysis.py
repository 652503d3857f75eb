"""From logs to rows: runs, figures next to their baselines, the gate."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from deepep_a4.node.bench import parse as bp
from deepep_a4.tools.report import baselines as bl
from deepep_a4.tools.report.records import check_runner_doc, skip_text
from deepep_a4.tools.report.sources import LogItem, warn

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
                warn(skip_text(item.origin, str(err)))
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

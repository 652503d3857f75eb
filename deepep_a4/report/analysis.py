"""From logs to rows: runs, figures next to their baselines, the checks, the verdict.

The verdict fails closed. Every run states its own checks (the parser's: the test completed, and for the
RDMA tests the transport and the NIC counters); the report adds the figures against the A4 baselines and,
for internode, that a log came from every node. A check without evidence is "not run": the verdict is then
NOT PROVEN, never PASS. A test started several times (BENCH_REPEATS) gives one row per figure: the median of
the starts, gated, with min and max beside it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from deepep_a4.report import baselines as bl
from deepep_a4.report.checks import Check, expected_checks, figure_checks, node_checks, run_checks
from deepep_a4.report.records import check_runner_doc, skip_text
from deepep_a4.report.runs import Row, Run
from deepep_a4.report.sources import LogItem, warn
from scripts.bench import parse as bp

# -- analysis -------------------------------------------------------------------------------------------


def _fingerprint(run: Run) -> str:
    keep = [(r["kind"], r["name"], r["dtype"], r["rank"], sorted(r["values"].items())) for r in run.records]
    where = [run.test, run.node_rank, run.repeat, keep]
    return hashlib.sha256(json.dumps(where, default=str).encode()).hexdigest()


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _placed(run: Run, begin: dict[str, Any], meta: dict[str, str]) -> Run:
    """The run with where and what it ran: the runner's begin record, else the source's metadata."""
    run.repeat = _int(begin.get("repeat")) or 1
    run.node_rank = _int(begin.get("node_rank"))
    if run.node_rank is None:
        run.node_rank = _int(meta.get("index"))
    run.host = str(begin.get("host") or "")
    ran = begin.get("ran")
    run.ran = {str(k): str(v) for k, v in ran.items()} if isinstance(ran, dict) else {}
    if meta.get("image") and run.ran.get("image", "unknown") == "unknown":
        run.ran["image"] = meta["image"]  # a pod's image digest, from its status
    return run


def _doc_status(d: dict[str, Any], checks: list[dict[str, str]]) -> str:
    """A runner JSON's status, failing closed: an older runner's "passed" without evidence is unproven."""
    status = d.get("status", "failed")
    if status == bp.PASSED and any(c.get("status") == bp.FAIL for c in checks):
        return "failed"
    if status == bp.PASSED and any(c.get("status") == bp.NOT_RUN for c in checks):
        return bp.UNPROVEN
    return status


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
            begin = d.get("begin") or {}
            checks = d.get("checks")
            if checks is None:  # a runner before the evidence checks: judged from what the JSON holds
                seg = bp.Segment(d["test"], [], begin or None, d.get("end") or None)
                checks = bp.evidence_checks(d["test"], seg)
            run = Run(
                item.origin,
                d["test"],
                _doc_status(d, checks),
                list(d.get("problems", [])),
                list(d.get("records", [])),
                begin.get("processes"),
                begin.get("nodes"),
                item.meta,
                checks,
            )
            found.append(_placed(run, begin, item.meta))
        else:
            for res in bp.parse_log(item.text):
                if res.test is None:
                    continue
                begin = res.begin or {}
                run = Run(
                    item.origin,
                    res.test,
                    res.status,
                    res.problems,
                    res.records,
                    begin.get("processes"),
                    begin.get("nodes"),
                    item.meta,
                    res.checks,
                )
                found.append(_placed(run, begin, item.meta))
            found += _skipped_from_summary(item, {r.test for r in found})
        for run in found:
            fp = _fingerprint(run) if run.records else f"{run.origin}/{run.test}/{run.repeat}"
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
                            node=run.node,
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
                        node=run.node,
                    )
                )
    elif run.test == "elastic":
        rows += _elastic_rows(run)
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
                        node=run.node,
                    )
                )
    return rows


def _elastic_rows(run: Run) -> list[Row]:
    """DeepEP V2: per operation and dispatch dtype, the mean over ranks of the scale-up (NVLink) and, across
    nodes, scale-out (RDMA) bandwidth of the first case of that dtype (scripts/bench/parse_elastic.py)."""
    values = {k: v for r in run.records if r["kind"] == "summary" for k, v in r["values"].items()}
    if not values:  # a runner JSON keeps records, not the summary: recompute it from them
        values = bp.bench_elastic.summary_values(run.records)
    sms = next((r["params"]["sms"] for r in run.records if r["kind"] == "config" and "sms" in r["params"]), None)
    rows = []
    for metric, dtype, label in (
        ("dispatch", "FP8", "dispatch_FP8"),
        ("dispatch", "BF16", "dispatch_BF16"),
        ("combine", "BF16", "combine"),
    ):
        for f in ("su_bw", "so_bw"):
            mean = values.get(f"{label}_{f}_mean")
            if mean is None:
                continue
            config = ", ".join(x for x in (f"SMs {sms}" if sms else "", "mean over ranks") if x)
            rows.append(
                Row(
                    run.origin,
                    run.test,
                    metric,
                    dtype,
                    f,
                    mean,
                    "GB/s",
                    config,
                    run.processes,
                    run.nodes,
                    extra=f"min {values[f'{label}_{f}_min']:.2f}",
                    node=run.node,
                )
            )
    return rows


def merge_starts(rows: list[Row]) -> list[Row]:
    """One row per figure of a node: the median of its starts (BENCH_REPEATS), every start kept in samples."""
    groups: dict[tuple[Any, ...], list[Row]] = {}
    for r in rows:
        groups.setdefault((r.node, r.test, r.metric, r.dtype, r.field, r.processes, r.nodes), []).append(r)
    out = []
    for group in groups.values():
        first = group[0]
        values = [r.value for r in group]
        merged = dataclasses.replace(first, value=statistics.median(values), samples=values)
        if len(group) > 1:
            configs = {r.config for r in group}
            merged.config = first.config if len(configs) == 1 else "best config differs between starts"
            merged.extra = ""
        out.append(merged)
    return out


def apply_gate(rows: list[Row], ratio: float) -> None:
    for row in rows:
        refs = bl.find(row.test, row.metric, row.dtype, row.field, row.processes, row.nodes)
        row.baseline = next((b for b in refs if b.primary), None)
        row.references = [b for b in refs if not b.primary]
        row.outside, row.outside_band = bl.outside(row.test, row.metric, row.dtype, row.field, row.processes, row.nodes)
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
    checks: list[Check] = field(default_factory=list)

    @property
    def failed_runs(self) -> list[Run]:
        return [r for r in self.runs if r.status != "passed"]

    @property
    def failed_rows(self) -> list[Row]:
        return [r for r in self.rows if r.gate == "FAIL"]

    @property
    def open_checks(self) -> list[Check]:
        """Checks that are not a pass: failed, or without evidence."""
        return [c for c in self.checks if c.status in (bp.FAIL, bp.NOT_RUN)]

    @property
    def verdict(self) -> str:
        """PASS, FAIL (something failed), or NOT PROVEN (nothing failed, but evidence is missing)."""
        if not self.runs:
            return "NOT PROVEN"
        if any(r.status not in ("passed", bp.UNPROVEN) for r in self.runs) or self.failed_rows:
            return "FAIL"
        if any(c.status == bp.FAIL for c in self.checks):
            return "FAIL"
        if any(r.status == bp.UNPROVEN for r in self.runs) or self.open_checks:
            return "NOT PROVEN"
        return "PASS"

    @property
    def passed(self) -> bool:
        return self.verdict == "PASS"


def analyze(items: Iterable[LogItem], gate_ratio: float, sources: list[str], expected: Iterable[str] = ()) -> Report:
    runs = runs_from(items)
    rows = merge_starts([row for run in runs for row in rows_of(run)])
    apply_gate(rows, gate_ratio)
    checks = run_checks(runs) + figure_checks(runs, rows, gate_ratio) + node_checks(runs)
    checks += expected_checks(runs, expected)
    return Report(runs, rows, gate_ratio, sources, checks=checks)

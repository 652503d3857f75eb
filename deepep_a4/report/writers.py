"""The report's files: Markdown, CSV and JSON (plots: plots.py)."""

from __future__ import annotations

import csv
import dataclasses
import json
from pathlib import Path

from deepep_a4.report import baselines as bl
from deepep_a4.report.analysis import Report, Row, Run
from deepep_a4.report.checks import FIELD_LABEL
from deepep_a4.report.plots import sweeps_of, write_plots
from deepep_a4.report.side_by_side import side_by_side
from scripts.bench import parse as bp


def _fmt(v: float | None, digits: int = 2) -> str:
    return "" if v is None else f"{v:.{digits}f}"


def _baseline_text(row: Row) -> str:
    if row.baseline is None:
        return "n/a"
    return f"{row.baseline.value:g} ({row.baseline.note})" if row.baseline.note else f"{row.baseline.value:g}"


def _starts_text(row: Row) -> str:
    if row.starts == 1:
        return "1"
    low, high = min(row.samples), max(row.samples)
    return f"{row.starts}: {low:.2f} / {row.value:.2f} / {high:.2f}"


def _outside_text(row: Row) -> str:
    """The published figure at the row's EP size, and the band over the EP sizes published."""
    refs = sorted(row.outside_band, key=lambda r: r.ep)
    if not refs:
        return ""
    low, high = min(r.value for r in refs), max(r.value for r in refs)
    band = f"{low:g}" if low == high else f"{low:g}-{high:g}"
    eps = f"EP{refs[0].ep}" if len(refs) == 1 else f"EP{refs[0].ep}-{refs[-1].ep}"
    if row.outside is None:
        ep = (row.processes or 8) * (row.nodes or (2 if row.test == "internode" else 1))
        return f"none at EP{ep} (published: {band} at {eps}, {refs[0].note})"
    ref = row.outside
    return f"{ref.value:g} at EP{ref.ep} ({ref.note})" + (f"; {band} at {eps}" if len(refs) > 1 else "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


TEST_TITLES = {
    "nccl": "NCCL all-to-all check (fabric)",
    "intranode": "Intranode (test_intranode.py)",
    "low-latency": "Low-latency (test_low_latency.py)",
    "internode": "Internode (test_internode.py)",
    "elastic": "Elastic, DeepEP V2 (tests/elastic/test_ep.py)",
}
VERDICT_TEXT = {
    "PASS": "every test passed, every check has its evidence, and every figure with an A4 baseline reaches",
    "FAIL": "a test or a check failed, or a figure is under",
    "NOT PROVEN": 'nothing failed, but a check has no evidence ("not run" below), so this is not a pass; '
    "figures are judged against",
}
# What ran, in the order a reader checks it (what_ran.RAN_KEYS), with the table's headings.
RAN_COLUMNS = (
    ("stack", "stack"),
    ("deepep_ref", "DeepEP ref"),
    ("deepep_commit", "DeepEP commit"),
    ("deepep_checkout", "checkout HEAD"),
    ("deepep_pr466", "PR #466"),
    ("nvshmem", "NVSHMEM"),
    ("nvshmem_source", "NVSHMEM from"),
    ("torch", "PyTorch"),
    ("nccl", "NCCL"),
    ("cuda", "CUDA"),
    ("driver", "driver"),
    ("doca_ofed", "DOCA-OFED"),
    ("gdrcopy", "GDRCopy"),
    ("installer_hash", "installer"),
    ("image", "image"),
)


def reasons_in_order(run: Run) -> list[str]:
    """Every reason of a run, the known-failure fixes first: what to do comes before what went wrong."""
    hints = [p for p in run.problems if p.startswith(bp.bench_patterns.HINT_PREFIX)]
    return hints + [p for p in run.problems if p not in hints]


def _short_reasons(run: Run) -> str:
    reasons = reasons_in_order(run)
    if not reasons:
        return "-"
    text = "; ".join(reasons)
    if len(reasons) <= 2 and len(text) <= 240:
        return _cell(text)
    return f"{len(reasons)} reasons: see [Reasons](#reasons)"


def _what_ran(report: Report) -> list[str]:
    nodes: dict[str, dict[str, str]] = {}
    for run in report.runs:
        if run.ran or run.node not in nodes:
            nodes[run.node] = run.ran or nodes.get(run.node, {})
    lines = ["## What ran", ""]
    lines.append("| node | " + " | ".join(h for _, h in RAN_COLUMNS) + " |")
    lines.append("|---|" + "---|" * len(RAN_COLUMNS))
    for node, ran in nodes.items():
        cells = [_cell(ran.get(k) or "unknown") for k, _ in RAN_COLUMNS]
        lines.append(f"| {_cell(node)} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "From the runner's record on each node: the installer's config.sh and status.json, the loaded driver, "
        "the DeepEP checkout and the tests' Python packages; a pod's image from its status. \"unknown\": "
        "nothing on the node said (a log from an older runner, a file the pod cannot see).",
        "",
    ]
    return lines


def markdown(report: Report) -> str:
    lines = ["# DeepEP benchmark report", ""]
    verdict = report.verdict
    lines.append(
        f"**Verdict: {verdict}**: {VERDICT_TEXT[verdict]} {report.gate_ratio:.0%} of its B200 A4 baseline "
        f"(benchGateRatio {report.gate_ratio:g})."
    )
    lines.append("")
    lines.append(f"Sources: {', '.join(report.sources)}")
    lines.append("")
    lines.append("## Tests")
    lines.append("")
    lines.append("| test | source | start | status | reasons |")
    lines.append("|---|---|---:|---|---|")
    for run in report.runs:
        lines.append(f"| {run.test} | {_cell(run.origin)} | {run.repeat} | {run.status} | {_short_reasons(run)} |")
    lines.append("")
    if report.checks:
        lines.append("## Checks")
        lines.append("")
        lines.append("| test | source | start | check | result | evidence |")
        lines.append("|---|---|---:|---|---|---|")
        for c in report.checks:
            start = "" if c.repeat is None else str(c.repeat)
            lines.append(
                f"| {c.test} | {_cell(c.origin)} | {start} | {c.name} | {c.status} | {_cell(c.detail) or '-'} |"
            )
        lines.append("")
    failed = [r for r in report.runs if r.problems]
    if failed:
        lines.append('<a id="reasons"></a>')
        lines.append("## Reasons")
        lines.append("")
        for run in failed:
            lines.append(f"**{run.test}** ({run.origin}, start {run.repeat}): {run.status}")
            lines.append("")
            lines += [f"- {reason}" for reason in reasons_in_order(run)]
            lines.append("")
    lines += _what_ran(report)
    for test in bp.TESTS:
        rows = [r for r in report.rows if r.test == test]
        if not rows:
            continue
        lines.append(f"## {TEST_TITLES[test]}")
        lines.append("")
        lines.append(
            "| source | metric | dtype | measured (GB/s) | starts: min / median / max | config | baseline B200 "
            "(GB/s) | ratio | gate | outside reference (GB/s), not a gate |"
        )
        lines.append("|---|---|---|---:|---|---|---:|---:|---|---|")
        for r in rows:
            measured = f"{r.value:.2f} {FIELD_LABEL.get(r.field, r.field)}"
            config = ", ".join(x for x in (r.config, r.extra) if x)
            lines.append(
                f"| {_cell(r.origin)} | {r.metric} | {r.dtype or ''} | {measured} | {_starts_text(r)} | {config} | "
                f"{_baseline_text(r)} | {_fmt(r.ratio)} | {r.gate} | {_outside_text(r)} |"
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
        if any(r.outside_band for r in rows):
            published = "; ".join(sorted({o.source for r in rows for o in r.outside_band}))
            lines.append(
                f"Outside reference: {published}. Other hardware or DeepEP's own setting, for "
                "orientation only: never a pass criterion."
            )
        if any(r.starts > 1 for r in rows):
            lines.append("A test started more than once: the measured figure is the median of its starts, gated.")
        if test == "internode":
            lines.append(
                f"An RDMA figure near {bl.SINGLE_NIC_TRAP_RDMA_GBPS} GB/s means every GPU used one NIC "
                "(the GPU-to-NIC mapping of DeepEP PR #466 missing): troubleshooting T10."
            )
        lines.append("")
    lines += side_by_side(report.rows)
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
    "starts",
    "min",
    "max",
    "outside_reference",
    "outside_source",
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
                    "starts": r.starts,
                    "min": min(r.samples) if r.samples else r.value,
                    "max": max(r.samples) if r.samples else r.value,
                    "outside_reference": r.outside.value if r.outside else "",
                    "outside_source": r.outside.source if r.outside else "",
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
        "verdict": report.verdict,
        "gate_ratio": report.gate_ratio,
        "sources": report.sources,
        "runs": [
            {
                "origin": r.origin,
                "test": r.test,
                "repeat": r.repeat,
                "node_rank": r.node_rank,
                "status": r.status,
                "problems": r.problems,
                "checks": r.checks,
                "ran": r.ran,
                "meta": r.meta,
            }
            for r in report.runs
        ],
        "checks": [dataclasses.asdict(c) for c in report.checks],
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
                "samples": r.samples,
                "outside_reference": r.outside.value if r.outside else None,
                "outside_source": r.outside.source if r.outside else None,
            }
            for r in report.rows
        ],
    }
    (out / "results.json").write_text(json.dumps(doc, indent=1) + "\n")


def restarts_section(out: Path) -> list[str]:
    """The internode restarts `run` made in this report folder (restarts.json, written by its preemption watchdog:
    deepep_a4/capacity/preemption.py), each with its cause; none when the file is absent."""
    path = out / "restarts.json"
    if not path.is_file():
        return []
    doc = json.loads(path.read_text())
    lines = ["", "## Restarts", ""]
    for r in doc.get("restarts", []):
        lines.append(f"- restart {r['n']} at {r['at']}: {'; '.join(r['causes'])} -> {r['action']}")
    if not doc.get("restarts"):
        lines.append("- none")
    if doc.get("notRestarted"):
        lines.append(f"- not restarted again: {doc['notRestarted']}")
    return lines


def write_report(report: Report, out: Path, plots: bool = True) -> Path:
    out.mkdir(parents=True, exist_ok=True)
    if plots:
        write_plots(report, out)
    write_csv(report, out)
    write_json(report, out)
    path = out / "report.md"
    path.write_text("\n".join([markdown(report), *restarts_section(out)]) + "\n")
    return path

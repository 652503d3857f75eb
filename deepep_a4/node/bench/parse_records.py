"""The parser's records, and whether a parsed test is complete and passed (its summary record).

Record fields:

    test     intranode | low-latency | internode | nccl
    kind     config | layout | case | sweep | best | rank | nccl | warning | error | summary
    name     what was measured: "dispatch", "combine", "dispatch+combine", "dispatch send/recv",
             "layout kernel", "all-to-all", a case such as "BF16 with top-k async=False previous=False"
    dtype    FP8 | BF16 | null
    rank     the rank that printed the line (low-latency), else null
    params   the configuration of the measurement (SMs, NVL chunk, RDMA chunk, async, previous...)
    values   numbers, with their units in `units` (GB/s, us, ms, MB, B)
    line     line number in the log (1-based)

Stdlib only: shipped next to run_bench.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

try:  # in the package (tests, the workstation's report)
    from deepep_a4.node.bench import parse_patterns as bench_patterns
except ImportError:  # pragma: no cover - on a node the shipped files lie in one folder, sys.path[0]
    import parse_patterns as bench_patterns  # type: ignore[no-redef]

LL_METRICS = ("dispatch+combine", "dispatch", "combine", "dispatch send/recv", "combine send/recv")


def num(text: str | None) -> float | None:
    return None if text is None else float(text)


def record(
    test: str | None,
    kind: str,
    name: str,
    line: int,
    *,
    dtype: str | None = None,
    rank: int | None = None,
    params: dict[str, Any] | None = None,
    values: dict[str, float | None] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    vals = {k: v for k, v in (values or {}).items() if v is not None}
    rec: dict[str, Any] = {
        "test": test,
        "kind": kind,
        "name": name,
        "dtype": dtype,
        "rank": rank,
        "params": params or {},
        "values": vals,
        "units": {k: bench_patterns.UNITS[k] for k in vals if k in bench_patterns.UNITS},
        "line": line,
    }
    rec.update(extra)
    return rec


@dataclass
class Segment:
    """The output of one test: the lines between a runner's begin/end markers, or a whole raw log."""

    test: str | None
    lines: list[tuple[int, str]] = field(default_factory=list)
    begin: dict[str, Any] | None = None
    end: dict[str, Any] | None = None


@dataclass(frozen=True)
class Expect:
    """What a complete run prints, where known (from the runner's arguments)."""

    processes: int | None = None
    nodes: int | None = None


def check(
    test: str | None, recs: list[dict[str, Any]], seg: Segment | None = None, expect: Expect = Expect()
) -> list[str]:
    """Every reason why `recs` are not a complete, passed run of `test`; empty when it passed. A failed
    run also gets the fix of each known failure its lines show."""
    problems = _incomplete_or_failed(test, recs, seg, expect)
    if problems and seg is not None:
        problems += bench_patterns.known_failure_hints(line for _, line in seg.lines)
    return problems


def _incomplete_or_failed(
    test: str | None, recs: list[dict[str, Any]], seg: Segment | None, expect: Expect
) -> list[str]:
    problems: list[str] = []
    if test is None:
        return ["no DeepEP or NCCL result lines found"]
    errors = [r for r in recs if r["kind"] == "error"]
    for e in errors[:5]:
        problems.append(f"line {e['line']}: {e['name']}: {e.get('text', '')}")
    if seg is not None and seg.begin is not None and seg.end is None:
        problems.append("truncated: the runner never reported the end of this test")
    if seg is not None and seg.end is not None:
        if seg.end.get("timed_out"):
            problems.append(f"timeout: killed after {seg.end.get('timeout_s')} s")
        elif seg.end.get("rc") not in (0, None):
            problems.append(f"exit code {seg.end.get('rc')}")
    kinds = {r["kind"] for r in recs}

    if test == "nccl":
        if not any(r["kind"] == "nccl" for r in recs):
            problems.append("truncated: no all-to-all result line")
        checks = [r for r in recs if r["kind"] == "case"]
        if not checks:
            problems.append("truncated: no all-to-all data check line")
        elif not all(c["passed"] for c in checks):
            problems.append("all-to-all data check failed")
        return problems

    if test in ("intranode", "internode"):
        cases = [r for r in recs if r["kind"] == "case"]
        if "config" not in kinds:
            problems.append("truncated: no [config] line")
        if "layout" not in kinds:
            problems.append("truncated: no [layout] line")
        if not cases:
            problems.append("truncated: no [testing] line")
        for c in cases:
            if not c["passed"]:
                problems.append(f"line {c['line']}: case '{c['name']}' did not pass")
        best = {(r["name"], r["dtype"]) for r in recs if r["kind"] == "best"}
        need = [("dispatch", "BF16"), ("combine", "BF16")]
        if any(c["dtype"] == "FP8" for c in cases):
            need.insert(0, ("dispatch", "FP8"))
        for op, dtype in need:
            if (op, dtype) not in best:
                label = f"Best {op}" + (f" ({dtype})" if op == "dispatch" else "")
                problems.append(f"truncated: no '[tuning] {label}' line")
        orphans = [r for r in recs if r["kind"] == "sweep" and not r["name"]]
        if orphans:
            problems.append(f"truncated: {len(orphans)} tuning line(s) after the last Best line")
        if test == "internode" and any(r["kind"] == "best" and "rdma_bw" not in r["values"] for r in recs):
            problems.append("internode Best lines without RDMA bandwidth")

    if test == "low-latency":
        ranks: dict[int, set[str]] = {}
        for r in recs:
            if r["kind"] == "rank":
                ranks.setdefault(r["rank"], set()).add(r["name"])
        if not ranks:
            problems.append("truncated: no [rank N] result line")
        for rank in sorted(ranks):
            missing = [m for m in LL_METRICS if m not in ranks[rank]]
            if missing:
                problems.append(f"truncated: rank {rank} printed no {', '.join(missing)}")
        if expect.processes and (expect.nodes or 1) == 1 and ranks:
            absent = sorted(set(range(expect.processes)) - set(ranks))
            if absent:
                problems.append(f"truncated: no results from rank(s) {', '.join(map(str, absent))}")
    return problems


def summarize(test: str | None, recs: list[dict[str, Any]], problems: list[str]) -> dict[str, Any]:
    cases = [r for r in recs if r["kind"] == "case"]
    values: dict[str, float | None] = {}
    for r in recs:
        if r["kind"] == "best":
            for k in ("nvl_bw", "rdma_bw"):
                if k in r["values"]:
                    values[f"{r['name']}{'_' + r['dtype'] if r['name'] == 'dispatch' else ''}_{k}"] = r["values"][k]
    ll = [r["values"]["bw"] for r in recs if r["kind"] == "rank" and r["name"] == "dispatch+combine"]
    if ll:
        values["dispatch+combine_bw_min"] = min(ll)
        values["dispatch+combine_bw_mean"] = round(sum(ll) / len(ll), 2)
    busbw = [r["values"]["busbw"] for r in recs if r["kind"] == "nccl"]
    if busbw:
        values["busbw_max"] = max(busbw)
    return record(
        test,
        "summary",
        "summary",
        0,
        values=values,
        status="passed" if not problems else "failed",
        problems=problems,
        cases_passed=sum(1 for c in cases if c["passed"]),
        cases_total=len(cases),
    )

"""The parser's records, and whether a parsed test is complete and passed (its summary record).

Record fields:

    test     intranode | low-latency | internode | nccl | elastic (DeepEP V2, parse_elastic.py)
    kind     config | layout | case | sweep | best | rank | nccl | warning | error | summary
    name     what was measured: "dispatch", "combine", "dispatch+combine", "dispatch send/recv",
             "layout kernel", "all-to-all", a case such as "BF16 with top-k async=False previous=False"
    dtype    FP8 | BF16 | null
    rank     the rank that printed the line (low-latency, elastic), else null
    params   the configuration of the measurement (SMs, NVL chunk, RDMA chunk, async, previous...)
    values   numbers, with their units in `units` (GB/s, us, ms, MB, B)
    line     line number in the log (1-based)

A parsed test is judged twice: its own output (complete, every case passed) and, for the tests that use
RDMA (low-latency, internode), the evidence the runner recorded around it: the transport (its `[runner]
begin` record of the NVSHMEM settings, and no NVSHMEM transport failure in the log) and the NIC counters
(its `[runner] end` record). Missing evidence is "not run", never a pass: the test's status is then
"unproven". Stdlib only: shipped next to run_bench.py.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any

try:  # in the package (tests, the workstation's report)
    from scripts.bench import parse_elastic as bench_elastic
    from scripts.bench import parse_patterns as bench_patterns
except ImportError:  # pragma: no cover - on a node the shipped files lie in one folder, sys.path[0]
    import parse_elastic as bench_elastic  # type: ignore[no-redef]
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
    """What a complete run prints, where known (from the runner's arguments). rdma_nics=False: the machine has no
    RDMA NIC at all (the hardware test checked /sys/class/infiniband): the RDMA evidence checks are "n/a" there."""

    processes: int | None = None
    nodes: int | None = None
    rdma_nics: bool = True


# Status of one check, and of a judged test. NA: a check that cannot apply (no RDMA NIC on the machine).
PASS, FAIL, NOT_RUN, NA = "pass", "FAIL", "not run", "n/a"
PASSED, FAILED, UNPROVEN = "passed", "failed", "unproven"
RDMA_TESTS = ("low-latency", "internode")
# A NIC "carries" the test when it sent at least this share of the bytes all the node's NICs sent.
NIC_BUSY_SHARE = 0.05


def check(
    test: str | None, recs: list[dict[str, Any]], seg: Segment | None = None, expect: Expect = Expect()
) -> list[str]:
    """Every reason why `recs` are not a complete, passed and proven run of `test`; empty when it passed."""
    return judge(test, recs, seg, expect)[1]


def judge(
    test: str | None, recs: list[dict[str, Any]], seg: Segment | None = None, expect: Expect = Expect()
) -> tuple[str, list[str], list[dict[str, str]]]:
    """(status, reasons, evidence checks) of a parsed test. Status: passed; failed (its output or a check
    failed); unproven (nothing failed, but a check had no evidence). A run that is not passed also gets the
    fix of each known failure its lines show, for the test that printed them."""
    problems = _incomplete_or_failed(test, recs, seg, expect)
    checks = evidence_checks(test, seg, expect.rdma_nics)
    status = PASSED
    if problems or any(c["status"] == FAIL for c in checks):
        status = FAILED
    elif any(c["status"] == NOT_RUN for c in checks):
        status = UNPROVEN
    problems += [f"{c['check']} check {c['status']}: {c['detail']}" for c in checks if c["status"] in (FAIL, NOT_RUN)]
    if problems and seg is not None:
        problems += bench_patterns.known_failure_hints((line for _, line in seg.lines), test)
    return status, problems, checks


# -- evidence of the transport and the NICs (low-latency, internode) ------------------------------------


def evidence_checks(test: str | None, seg: Segment | None, rdma_nics: bool = True) -> list[dict[str, str]]:
    """The transport and NIC checks of an RDMA test, from the runner's records around its output."""
    if test not in RDMA_TESTS:
        return []
    begin = seg.begin if seg is not None else None
    end = seg.end if seg is not None else None
    lines = seg.lines if seg is not None else []
    status, detail = transport_verdict(begin, lines, rdma_nics)
    checks = [{"check": "transport", "status": status, "detail": detail}]
    if rdma_nics:
        status, detail = nic_check(test, begin, end)
    else:
        status, detail = NA, "no RDMA NIC on this machine: no NIC can carry traffic (the hardware test)"
    checks.append({"check": "NIC", "status": status, "detail": detail})
    return checks


def degraded_ibgda(begin: dict[str, Any] | None, lines: list[tuple[int, str]]) -> str:
    """Why NVSHMEM's IBGDA ran degraded, as its own lines say, or "": the CPU-assisted NIC handler or NIC buffers
    in host memory where the settings did not ask for them. NVSHMEM_IBGDA_NIC_HANDLER=gpu (every supported-profile
    stack: no gdrdrv there) is not enforced by NVSHMEM, which falls back silently: this check makes it loud."""
    transport = (begin or {}).get("transport") or {}
    asked = str(transport.get("NVSHMEM_IBGDA_NIC_HANDLER") or "").strip().lower()
    cpu_asked = asked in ("cpu", "cpu_host_memory")
    hostmem_asked = str(transport.get("NVSHMEM_IBGDA_FORCE_NIC_BUF_MEMTYPE") or "").strip().lower() == "hostmem"
    for n, line in lines:
        m = bench_patterns.RE_IBGDA_HANDLER.search(line)
        if m and m["handler"].strip().upper().startswith("CPU") and not cpu_asked:
            return (
                f"line {n}: NVSHMEM took the CPU-assisted NIC handler ('NIC handler will be {m['handler'].strip()}') "
                f"where NVSHMEM_IBGDA_NIC_HANDLER={asked or 'unset'} asked for none: the GPU cannot ring the "
                "NIC's doorbell (troubleshooting T09)"
            )
        if not cpu_asked and bench_patterns.RE_CPU_FALLBACK.search(line):
            return (
                f"line {n}: NVSHMEM could not map the NIC's doorbell for the GPU and falls back to the CPU handler "
                f"({line.strip()[:160]!r}; troubleshooting T09)"
            )
        m = bench_patterns.RE_NIC_BUF.search(line)
        if m and m["where"] == "host" and not hostmem_asked:
            return (
                f"line {n}: NVSHMEM put the NIC buffers in host memory ('NIC buffer will be on host memory'): the "
                "NIC could not register GPU memory (no dma-buf UMEM in this NVSHMEM build, no nvidia-peermem; "
                "troubleshooting T09)"
            )
    return ""


def transport_verdict(
    begin: dict[str, Any] | None, lines: list[tuple[int, str]], rdma_nics: bool = True
) -> tuple[str, str]:
    """IBGDA named by the runner's record of the test's NVSHMEM settings, not refused in the log and not degraded
    to the CPU handler or host-memory NIC buffers. rdma_nics=False (a machine without any RDMA NIC): IBGDA's init
    failure is what NVSHMEM must print there, so the check is "n/a" (a degraded path still fails)."""
    degraded = degraded_ibgda(begin, lines)
    if degraded:
        return FAIL, degraded
    for n, line in lines:
        m = bench_patterns.RE_TRANSPORT_FAILED.search(line)
        if m and m["transport"].upper() == "IBGDA":
            if not rdma_nics:
                return NA, (
                    f"no RDMA NIC on this machine: NVSHMEM's IBGDA init failure (line {n}) is expected there; the "
                    "test ran over NVLink (P2P)"
                )
            return FAIL, (
                f"line {n}: NVSHMEM could not start IBGDA ('init failed for transport: IBGDA'), so no byte went "
                "through a NIC (troubleshooting T21: does the process see the node's HCAs?)"
            )
    if not rdma_nics:
        return NA, "no RDMA NIC on this machine: IBGDA cannot run here (the hardware test)"
    transport = (begin or {}).get("transport")
    if not isinstance(transport, dict):
        return NOT_RUN, "the log does not name the transport (no NVSHMEM settings in the runner's begin record)"
    remote = str(transport.get("NVSHMEM_REMOTE_TRANSPORT") or "unset")
    if remote.lower() != "ibgda":
        return NOT_RUN, (
            f"NVSHMEM_REMOTE_TRANSPORT={remote}: the test ran without IBGDA (the installer's env file sets "
            "ibgda on a machine with RDMA NICs)"
        )
    handler = transport.get("NVSHMEM_IBGDA_NIC_HANDLER") or "unset"
    path = ibgda_path(lines)
    if str(transport.get("NVSHMEM_DEBUG") or "").upper() in ("INFO", "TRACE") and "not in the log" in path:
        # The runner sets NVSHMEM_DEBUG=INFO for the RDMA tests: then NVSHMEM's silence about its path is no proof.
        return NOT_RUN, (
            f"NVSHMEM_DEBUG={transport['NVSHMEM_DEBUG']} but the log has no 'NIC handler will be ...' line: the IBGDA "
            "path NVSHMEM took is not shown"
        )
    return PASS, (
        f"IBGDA (NVSHMEM_REMOTE_TRANSPORT=ibgda, NIC handler {handler}); no transport failure in the log; {path}"
    )


def ibgda_path(lines: list[tuple[int, str]]) -> str:
    """Which IBGDA path NVSHMEM took, as its INFO output says (troubleshooting T09)."""
    for n, line in lines:
        m = bench_patterns.RE_IBGDA_HANDLER.search(line)
        if m:
            said = m["handler"].strip()
            kind = "CPU-assisted" if said.upper().startswith("CPU") else "GPU handler"
            return f"IBGDA path: {kind} (line {n}: 'NIC handler will be {said}')"
    return "IBGDA path: not in the log (NVSHMEM_DEBUG=INFO prints 'NIC handler will be ...')"


def nic_check(test: str, begin: dict[str, Any] | None, end: dict[str, Any] | None) -> tuple[str, str]:
    """Whether the test's traffic crossed every NIC of this node. Low-latency on one node with NVLink on
    sends nothing through a NIC (NVSHMEM P2P): there the installer's verify must have done it."""
    begin = begin or {}
    argv = begin.get("argv") or []
    over_nvlink = test == "low-latency" and "--disable-nvlink" not in argv and (begin.get("nodes") or 1) == 1
    if not over_nvlink:
        return nic_verdict((end or {}).get("nics"))
    ran = begin.get("ran") if isinstance(begin.get("ran"), dict) else {}
    proof = str((ran or {}).get("verify_rdma") or "")
    if proof.startswith("RDMA path:"):
        return PASS, f"NVLink carried this test (one node); the installer's verify on this node: {proof}"
    return NOT_RUN, (
        "NVLink carried this test (one node, NVLink on), and no proof that this node's NICs carry RDMA was "
        "recorded (the installer's verify note in status.json); BENCH_LOW_LATENCY_ARGS=--disable-nvlink "
        "sends the test itself through the NICs"
    )


def nic_verdict(nics: Any) -> tuple[str, str]:
    """Judges the runner's NIC record: bytes each RDMA NIC of this node sent during the test."""
    if not isinstance(nics, dict):
        return NOT_RUN, "the log has no record of the NIC counters around the test"
    if nics.get("error"):
        return NOT_RUN, f"NIC counters not read ({nics['error']}): nothing shows that the traffic crossed the NICs"
    sent = {str(k): v for k, v in (nics.get("sent") or {}).items() if isinstance(v, (int, float))}
    expected = nics.get("expected") or 0
    total = sum(sent.values())
    if len(sent) < expected:
        return FAIL, f"counters of {len(sent)} NIC(s) {sorted(sent)}, the machine type has {expected}"
    if total == 0:
        return FAIL, f"none of the {len(sent)} NICs sent a byte during the test: its traffic did not cross them"
    busy = [k for k, v in sent.items() if v >= NIC_BUSY_SHARE * total]
    if len(busy) == 1 and len(sent) > 1:
        return FAIL, (
            f"RDMA traffic on one NIC only ({busy[0]}: {sent[busy[0]] / total:.0%} of {total / 1e9:.2f} GB): "
            f"every GPU used the same NIC, so DEEP_EP_DEVICE_TO_HCA_MAPPING (DeepEP PR #466) is not in effect "
            f"(troubleshooting T10, ~6.5 GB/s): set deepepPr466=true"
        )
    idle = sorted(set(sent) - set(busy))
    if idle:
        return FAIL, (
            f"RDMA traffic on {len(busy)} of {len(sent)} NICs; idle (under {NIC_BUSY_SHARE:.0%} of "
            f"{total / 1e9:.2f} GB): {', '.join(idle)} (troubleshooting T10)"
        )
    least = min(sent, key=lambda k: sent[k])
    return PASS, (
        f"every one of {len(sent)} NICs carried traffic: {total / 1e9:.2f} GB in all, the least "
        f"{sent[least] / 1e9:.2f} GB on {least}"
    )


def _incomplete_or_failed(
    test: str | None, recs: list[dict[str, Any]], seg: Segment | None, expect: Expect
) -> list[str]:
    problems: list[str] = []
    if test is None:
        return ["no DeepEP or NCCL result lines found"]
    # The same error from every rank is one reason with all its lines: grouped, never dropped.
    errors: dict[tuple[str, str], list[int]] = {}
    for r in recs:
        if r["kind"] == "error":
            errors.setdefault((r["name"], r.get("text", "")), []).append(r["line"])
    for (name, text), at in errors.items():
        where = f"line {at[0]}" if len(at) == 1 else f"lines {_line_list(at)}"
        problems.append(f"{where}: {name}: {text}")
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

    if test == "elastic":
        argv = [str(a) for a in ((seg.begin or {}).get("argv") or [])] if seg else []
        problems += bench_elastic.problems(recs, expect.processes, expect.nodes, argv)

    if test == "low-latency":
        ranks: dict[int, set[str]] = {}
        for r in recs:
            if r["kind"] == "rank":
                ranks.setdefault(r["rank"], set()).add(r["name"])
        if not ranks:
            problems.append("truncated: no [rank N] result line")
        lacking: dict[str, list[int]] = {}
        for rank in sorted(ranks):
            missing = [m for m in LL_METRICS if m not in ranks[rank]]
            if missing:
                lacking.setdefault(", ".join(missing), []).append(rank)
        for missing_text, which in lacking.items():
            who = f"rank {which[0]}" if len(which) == 1 else f"ranks {', '.join(map(str, which))}"
            problems.append(f"truncated: {who} printed no {missing_text}")
        if expect.processes and (expect.nodes or 1) == 1 and ranks:
            absent = sorted(set(range(expect.processes)) - set(ranks))
            if absent:
                problems.append(f"truncated: no results from rank(s) {', '.join(map(str, absent))}")
    return problems


def _line_list(lines: list[int], show: int = 8) -> str:
    text = ", ".join(map(str, lines[:show]))
    return text + (f" and {len(lines) - show} more" if len(lines) > show else "")


def summarize(
    test: str | None,
    recs: list[dict[str, Any]],
    problems: list[str],
    status: str | None = None,
    checks: list[dict[str, str]] | None = None,
) -> dict[str, Any]:
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
    if test == "elastic":
        values.update(bench_elastic.summary_values(recs))
    busbw = [r["values"]["busbw"] for r in recs if r["kind"] == "nccl"]
    if busbw:
        values["busbw_max"] = max(busbw)
    return record(
        test,
        "summary",
        "summary",
        0,
        values=values,
        status=status or (PASSED if not problems else FAILED),
        problems=problems,
        checks=checks or [],
        cases_passed=sum(1 for c in cases if c["passed"]),
        cases_total=len(cases),
    )


def spread(summaries: list[tuple[str, dict[str, float]]]) -> dict[str, dict[str, dict[str, float]]]:
    """test -> figure -> min, median, max and n, over the summary values of a test started more than once."""
    by_test: dict[str, dict[str, list[float]]] = {}
    for test, values in summaries:
        for key, value in values.items():
            by_test.setdefault(test, {}).setdefault(key, []).append(value)
    return {
        test: {
            k: {"min": min(v), "median": statistics.median(v), "max": max(v), "n": len(v)}
            for k, v in figures.items()
            if len(v) > 1
        }
        for test, figures in by_test.items()
        if any(len(v) > 1 for v in figures.values())
    }

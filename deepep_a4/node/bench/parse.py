#!/usr/bin/env python3
"""Parser of DeepEP test output (v1.2.1 and the default 1.2.1+29d31c0) and of this runner's NCCL check.

    python scripts/bench/parse.py LOG [--test T] [--processes N] [--nodes N] [--summary]

prints one JSON record per line and exits 0 when every test in the log completed and passed, 1 when a
test failed, or its output is truncated, unknown or missing (the reasons go to stderr), 2 when LOG
cannot be read (no such file, a folder) or the arguments are wrong.

A log is either the raw output of one DeepEP test script (the test is then told from its lines, or
given with --test) or the output of `run_bench.py`, whose `[runner] begin {...}` / `[runner] end {...}`
markers separate the tests it ran. Record fields:

    test     intranode | low-latency | internode | nccl
    kind     config | layout | case | sweep | best | rank | nccl | warning | error | summary
    name     what was measured: "dispatch", "combine", "dispatch+combine", "dispatch send/recv",
             "layout kernel", "all-to-all", a case such as "BF16 with top-k async=False previous=False"
    dtype    FP8 | BF16 | null
    rank     the rank that printed the line (low-latency), else null
    params   the configuration of the measurement (SMs, NVL chunk, RDMA chunk, async, previous...)
    values   numbers, with their units in `units` (GB/s, us, ms, MB, B)
    line     line number in the log (1-based)

Stdlib only: this file runs inside benchmark pods next to run_bench.py.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

TESTS = ("nccl", "intranode", "low-latency", "internode")
DEEPEP_TESTS = ("intranode", "low-latency", "internode")

_N = r"[-+]?(?:\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|inf|nan)"
_TAG_SPLIT = re.compile(r"(?=\[(?:rank \d+|config|layout|testing|tuning|nccl)\] )")
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) ")

RE_CONFIG = re.compile(r"^\[config\] (?P<body>\w+=\d+(?:, \w+=\d+)*)$")
RE_LAYOUT = re.compile(rf"^\[layout\] Kernel performance: (?P<ms>{_N}) ms$")
RE_CASE = re.compile(
    r"^\[testing\] Running with (?P<dtype>BF16|FP8), (?P<topk>with|without) top-k "
    r"\(async=(?P<async>True|False), previous=(?P<previous>True|False)\) \.\.\.(?P<rest>.*)$"
)
# Intranode: "[tuning] SMs 24, NVL chunk 4: 287.42 GB/s (NVL), avg_t: 405.99 us" (chunk may be "default").
# From 1.2.1+29d31c0 (the default ref) the sweep line drops "avg_t: ": "... 287.42 GB/s (NVL), 405.99 us".
RE_INTRA_SWEEP = re.compile(
    rf"^\[tuning\] SMs (?P<sms>\d+), NVL chunk (?P<nvl>\d+|default): (?P<nvl_bw>{_N}) GB/s \(NVL\), "
    rf"(?:avg_t: )?(?P<t>{_N}) us$"
)
RE_INTRA_BEST_DISPATCH = re.compile(
    rf"^\[tuning\] Best dispatch \((?P<dtype>FP8|BF16)\): SMs (?P<sms>\d+), NVL chunk (?P<nvl>\d+), "
    rf"(?P<nvl_bw>{_N}) GB/s \(NVL\), t: (?P<t>{_N}) us$"
)
RE_INTRA_BEST_COMBINE = re.compile(
    rf"^\[tuning\] Best combine: SMs (?P<sms>\d+), NVL chunk (?P<nvl>\d+): (?P<nvl_bw>{_N}) GB/s \(NVL\), "
    rf"t: (?P<t>{_N}) us$"
)
# Internode, v1.2.1: "SMs S, NVL chunk N, RDMA chunk R, transmit: T us, notify: U us, BW: A GB/s (RDMA), B GB/s (NVL)";
# older builds (the GKE seed's sample) and 1.2.1+29d31c0 again: "SMs S, NVL chunk N, RDMA chunk R: U + T us,
# A GB/s (RDMA), B GB/s (NVL)" and, for the best combine, "RDMA chunk R, U + T us, ...".
_INTER_BODY = (
    rf"SMs (?P<sms>\d+), NVL chunk (?P<nvl>\d+), RDMA chunk (?P<rdma>\d+)"
    rf"(?:, transmit: (?P<t>{_N}) us, notify: (?P<notify>{_N}) us, BW: "
    rf"|[:,] (?P<notify_old>{_N}) \+ (?P<t_old>{_N}) us, )"
    rf"(?P<rdma_bw>{_N}) GB/s \(RDMA\), (?P<nvl_bw>{_N}) GB/s \(NVL\)$"
)
RE_INTER_SWEEP = re.compile(r"^\[tuning\] " + _INTER_BODY)
RE_INTER_BEST = re.compile(r"^\[tuning\] Best (?P<op>dispatch|combine)(?: \((?P<dtype>FP8|BF16)\))?: " + _INTER_BODY)
RE_LL_BOTH = re.compile(
    rf"^\[rank (?P<rank>\d+)\] Dispatch \+ combine bandwidth: (?P<bw>{_N}) GB/s, avg_t=(?P<avg>{_N}) us, "
    rf"min_t=(?P<min>{_N}) us, max_t=(?P<max>{_N}) us$"
)
RE_LL_SPLIT = re.compile(
    rf"^\[rank (?P<rank>\d+)\] Dispatch bandwidth: (?P<d_bw>{_N}) GB/s, avg_t=(?P<d_t>{_N}) us \| "
    rf"Combine bandwidth: (?P<c_bw>{_N}) GB/s, avg_t=(?P<c_t>{_N}) us$"
)
RE_LL_SENDRECV = re.compile(
    rf"^\[rank (?P<rank>\d+)\] Dispatch send/recv time: (?P<d_send>{_N}) \+ (?P<d_recv>{_N}) us \| "
    rf"Combine send/recv time: (?P<c_send>{_N}) \+ (?P<c_recv>{_N}) us$"
)
RE_ALLOC = re.compile(rf"^Allocating buffer size: (?P<mb>{_N}) MB \.\.\.$")
RE_SEED = re.compile(r"^Testing with seed (?P<seed>\d+) \.\.\.$")
RE_REF_HASH = re.compile(r"^ref_hash=-?\d+$")
# This runner's NCCL all-to-all check (run_bench.py prints exactly these).
RE_NCCL = re.compile(
    rf"^\[nccl\] all-to-all: ranks (?P<ranks>\d+), size (?P<bytes>\d+) B per rank, avg_t: (?P<t>{_N}) us, "
    rf"algbw: (?P<algbw>{_N}) GB/s, busbw: (?P<busbw>{_N}) GB/s$"
)
RE_NCCL_CHECK = re.compile(r"^\[nccl\] all-to-all check: (?P<result>passed|FAILED.*)$")
RE_NCCL_INFO = re.compile(r"^\[nccl\] (?:backend|init|env)\b.*$")
RE_RUNNER = re.compile(r"^\[runner\] (?P<what>begin|end|result|info|env|error) ?(?P<body>.*)$")
RE_KNOWN_TAG = re.compile(r"^\[(?:rank \d+|config|layout|testing|tuning|nccl)\]")

# Lines that mean the run broke, whatever else it printed.
RE_ERROR = re.compile(
    r"(?:^Traceback \(most recent call last\):"
    r"|^(?:[\w.]+\.)?\w*(?:Error|Exception)(?::|$)"
    r"|DeepEP error:|CUDA error:|NCCL error|terminate called after throwing"
    r"|process \d+ terminated with (?:exit code|signal)"
    r"|Segmentation fault|core dumped|Killed$)"
)
RE_WARNING = re.compile(r"\bWARN(?:ING)?\b|\bWarning\b|init failed for transport")

UNITS = {
    "nvl_bw": "GB/s",
    "rdma_bw": "GB/s",
    "bw": "GB/s",
    "algbw": "GB/s",
    "busbw": "GB/s",
    "time": "us",
    "notify": "us",
    "avg_t": "us",
    "min_t": "us",
    "max_t": "us",
    "send": "us",
    "recv": "us",
    "kernel": "ms",
    "buffer": "MB",
    "size": "B",
}

# Failures the seed reports hit, by what the log shows, with the fix that worked there. A failed run
# whose log matches gets the fix added to its reasons (a passed run is never failed by these).
KNOWN_FAILURES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"timeout \(dispatch CPU\)|num_recv_tokens: -1"),
        "internode dispatch timed out: DeepEP was built against PyTorch's NVSHMEM, not the IBGDA build "
        "(seed 001 problem 8): nvshmemSource=source, and the build log must say 'NVSHMEM path: <root>/nvshmem'",
    ),
    (
        re.compile(r"NVSHMEM device library version does not match"),
        "two NVSHMEM copies loaded (seed 001 problem 5): run with the installer's env file, which preloads "
        "the source build's libnvshmem_host.so.3 over PyTorch's",
    ),
    (
        re.compile(r"named symbol not found"),
        "DeepEP was compiled for another GPU arch (seed 001 problem 7): rebuild with TORCH_CUDA_ARCH_LIST=10.0 "
        "on B200 (the installer's deepep phase does: run.sh --redo deepep)",
    ),
    (
        re.compile(r"IBVERBS_PRIVATE_\d+' not found|IBVERBS_PRIVATE_\d+ not found"),
        "libibverbs and libmlx5 come from different rdma-core releases (seed 003): use the env file's "
        "RDMAV_DRIVERS/LD_LIBRARY_PATH from one install, never the image's and DOCA's mixed",
    ),
    (
        re.compile(r"Failed to initialize any NET plugin|NET/\w+ : .*mismatch|shim.*mismatch", re.IGNORECASE),
        "NCCL found no usable network plugin (seed 003): on GKE the gIB plugin must match NCCL; without it "
        "unset NCCL_NET and let NCCL use IB verbs",
    ),
    (
        re.compile(r"couldn't load driver 'libmlx5|unable to load driver.*mlx5", re.IGNORECASE),
        "the mlx5 verbs provider did not load (seed 003): the env file's RDMAV_DRIVERS must point at the "
        "provider of the same rdma-core as libibverbs",
    ),
)


def known_failure_hints(lines: Iterable[str]) -> list[str]:
    """The fix of every known failure the lines show, each once, in table order."""
    text = "\n".join(lines)
    return [f"known failure: {fix}" for pattern, fix in KNOWN_FAILURES if pattern.search(text)]


# What one rank of the low-latency test prints: every rank must print all of these.
LL_METRICS = ("dispatch+combine", "dispatch", "combine", "dispatch send/recv", "combine send/recv")


def _num(text: str | None) -> float | None:
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
        "units": {k: UNITS[k] for k in vals if k in UNITS},
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


def split_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, text) for each result line; lines where ranks wrote over each other are split."""
    for n, raw in enumerate(text.splitlines(), start=1):
        line = _TIMESTAMP.sub("", raw.rstrip("\r"))
        if line.startswith("[runner] "):
            yield n, line.rstrip()
            continue
        for part in _TAG_SPLIT.split(line):
            if part:
                yield n, part.rstrip()


def segments(text: str) -> list[Segment]:
    """Splits a log at the runner's markers; a log without markers is one segment of unknown test."""
    segs: list[Segment] = []
    current: Segment | None = None
    loose = Segment(None)
    for n, line in split_lines(text):
        m = RE_RUNNER.match(line)
        if m and m["what"] in ("begin", "end"):
            try:
                body = json.loads(m["body"])
            except json.JSONDecodeError:
                body = {}
            if m["what"] == "begin":
                current = Segment(body.get("test"), begin=body)
                segs.append(current)
            elif current is not None:
                current.end = body
                current = None
            continue
        (current or loose).lines.append((n, line))
    if not segs:
        return [loose]
    return segs


def infer_test(lines: Iterable[tuple[int, str]]) -> str | None:
    """Tells which DeepEP test printed a raw log."""
    found = set()
    for _, line in lines:
        if line.startswith("[config]") and "num_topk_groups=" in line:
            return "internode"
        if RE_INTER_SWEEP.match(line) or RE_INTER_BEST.match(line):
            return "internode"
        if line.startswith("[rank ") or RE_ALLOC.match(line):
            found.add("low-latency")
        elif line.startswith(("[config]", "[layout]", "[testing]", "[tuning]")):
            found.add("intranode")
        elif line.startswith("[nccl]"):
            found.add("nccl")
    for test in ("intranode", "low-latency", "nccl"):
        if test in found:
            return test
    return None


def parse_segment(seg: Segment) -> list[dict[str, Any]]:
    """The records of one segment (no summary)."""
    test = seg.test or infer_test(seg.lines)
    out: list[dict[str, Any]] = []
    pending_sweeps: list[dict[str, Any]] = []
    open_case: dict[str, Any] | None = None
    in_traceback = False

    def close_case() -> None:
        nonlocal open_case
        if open_case is not None:
            out.append(open_case)
            open_case = None

    def label_sweeps(op: str, dtype: str | None) -> None:
        for s in pending_sweeps:
            s["name"], s["dtype"] = op, dtype
        pending_sweeps.clear()

    for n, raw in seg.lines:
        line = raw.rstrip()
        stripped = line.strip()
        if not stripped:
            continue
        if open_case is not None and stripped == "passed":
            open_case["passed"] = True  # another stream wrote between "..." and " passed"
            close_case()
            continue

        if m := RE_CASE.match(line):
            close_case()
            rest = m["rest"].strip()
            params = {
                "with_topk": m["topk"] == "with",
                "async": m["async"] == "True",
                "previous": m["previous"] == "True",
            }
            name = f"{m['dtype']} {m['topk']} top-k async={m['async']} previous={m['previous']}"
            case = record(test, "case", name, n, dtype=m["dtype"], params=params, passed=rest == "passed")
            if rest == "passed":
                out.append(case)
            else:
                open_case = case
                if rest:
                    case["after"] = rest[:300]
                    if RE_ERROR.search(rest):
                        out.append(record(test, "error", "error", n, text=rest[:500]))
            continue
        if line.startswith("[") and not line.startswith("[runner]"):
            close_case()

        if m := RE_CONFIG.match(line):
            values = {k: float(v) for k, v in (kv.split("=") for kv in m["body"].split(", "))}
            out.append(record(test, "config", "config", n, params={k: int(v) for k, v in values.items()}))
        elif m := RE_LAYOUT.match(line):
            out.append(record(test, "layout", "layout kernel", n, values={"kernel": _num(m["ms"])}))
        elif m := RE_INTRA_SWEEP.match(line):
            nvl = None if m["nvl"] == "default" else int(m["nvl"])
            rec = record(
                test,
                "sweep",
                "",
                n,
                params={"sms": int(m["sms"]), "nvl_chunk": nvl, "default_config": nvl is None},
                values={"nvl_bw": _num(m["nvl_bw"]), "time": _num(m["t"])},
            )
            pending_sweeps.append(rec)
            out.append(rec)
        elif m := RE_INTRA_BEST_DISPATCH.match(line):
            label_sweeps("dispatch", m["dtype"])
            out.append(
                record(
                    test,
                    "best",
                    "dispatch",
                    n,
                    dtype=m["dtype"],
                    params={"sms": int(m["sms"]), "nvl_chunk": int(m["nvl"])},
                    values={"nvl_bw": _num(m["nvl_bw"]), "time": _num(m["t"])},
                )
            )
        elif m := RE_INTRA_BEST_COMBINE.match(line):
            label_sweeps("combine", "BF16")
            out.append(
                record(
                    test,
                    "best",
                    "combine",
                    n,
                    dtype="BF16",
                    params={"sms": int(m["sms"]), "nvl_chunk": int(m["nvl"])},
                    values={"nvl_bw": _num(m["nvl_bw"]), "time": _num(m["t"])},
                )
            )
        elif (m := RE_INTER_BEST.match(line)) or (m := RE_INTER_SWEEP.match(line)):
            is_best = "op" in m.re.groupindex
            params = {"sms": int(m["sms"]), "nvl_chunk": int(m["nvl"]), "rdma_chunk": int(m["rdma"])}
            values = {
                "rdma_bw": _num(m["rdma_bw"]),
                "nvl_bw": _num(m["nvl_bw"]),
                "time": _num(m["t"] or m["t_old"]),
                "notify": _num(m["notify"] or m["notify_old"]),
            }
            if is_best:
                op = m["op"]
                dtype = m["dtype"] or "BF16"  # combine runs in BF16
                label_sweeps(op, dtype)
                out.append(record(test, "best", op, n, dtype=dtype, params=params, values=values))
            else:
                rec = record(test, "sweep", "", n, params=params, values=values)
                pending_sweeps.append(rec)
                out.append(rec)
        elif m := RE_LL_BOTH.match(line):
            out.append(
                record(
                    test,
                    "rank",
                    "dispatch+combine",
                    n,
                    rank=int(m["rank"]),
                    values={
                        "bw": _num(m["bw"]),
                        "avg_t": _num(m["avg"]),
                        "min_t": _num(m["min"]),
                        "max_t": _num(m["max"]),
                    },
                )
            )
        elif m := RE_LL_SPLIT.match(line):
            rank = int(m["rank"])
            out.append(
                record(test, "rank", "dispatch", n, rank=rank, values={"bw": _num(m["d_bw"]), "avg_t": _num(m["d_t"])})
            )
            out.append(
                record(test, "rank", "combine", n, rank=rank, values={"bw": _num(m["c_bw"]), "avg_t": _num(m["c_t"])})
            )
        elif m := RE_LL_SENDRECV.match(line):
            rank = int(m["rank"])
            for op in ("d", "c"):
                out.append(
                    record(
                        test,
                        "rank",
                        f"{'dispatch' if op == 'd' else 'combine'} send/recv",
                        n,
                        rank=rank,
                        values={"send": _num(m[f"{op}_send"]), "recv": _num(m[f"{op}_recv"])},
                    )
                )
        elif m := RE_ALLOC.match(line):
            out.append(record(test, "config", "buffer", n, values={"buffer": _num(m["mb"])}))
        elif m := RE_NCCL.match(line):
            out.append(
                record(
                    "nccl",
                    "nccl",
                    "all-to-all",
                    n,
                    params={"ranks": int(m["ranks"]), "size": int(m["bytes"])},
                    values={
                        "size": float(m["bytes"]),
                        "time": _num(m["t"]),
                        "algbw": _num(m["algbw"]),
                        "busbw": _num(m["busbw"]),
                    },
                )
            )
        elif m := RE_NCCL_CHECK.match(line):
            passed = m["result"] == "passed"
            out.append(record("nccl", "case", "all-to-all data check", n, passed=passed))
            if not passed:
                out.append(record("nccl", "error", "error", n, text=line))
        elif RE_NCCL_INFO.match(line) or RE_SEED.match(line) or RE_REF_HASH.match(line):
            pass
        elif RE_KNOWN_TAG.match(line):
            # A result line this parser does not know: a DeepEP version it was not written for.
            out.append(record(test, "error", "unknown result line", n, text=line[:500]))
        elif line.startswith("[runner] "):
            rm = RE_RUNNER.match(line)
            if rm and rm["what"] == "error":
                out.append(record(test, "error", "runner", n, text=rm["body"][:500]))
        elif RE_ERROR.search(stripped):
            if stripped.startswith("Traceback"):
                in_traceback = True
            else:
                out.append(record(test, "error", "error", n, text=stripped[:500]))
                in_traceback = False
        elif in_traceback and not line.startswith((" ", "\t")):
            in_traceback = False
            out.append(record(test, "error", "error", n, text=stripped[:500]))
        elif RE_WARNING.search(stripped):
            out.append(record(test, "warning", "warning", n, text=stripped[:500]))
    close_case()
    if in_traceback:
        out.append(record(test, "error", "error", seg.lines[-1][0] if seg.lines else 0, text="traceback without end"))
    return out


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
        problems += known_failure_hints(line for _, line in seg.lines)
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


@dataclass
class Result:
    test: str | None
    records: list[dict[str, Any]]
    problems: list[str]
    summary: dict[str, Any]
    begin: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return not self.problems


def parse_log(text: str, test: str | None = None, expect: Expect = Expect()) -> list[Result]:
    """Every test found in a log, with its records, its problems and a summary record."""
    results = []
    for seg in segments(text):
        if test is not None and seg.test is None:
            seg.test = test
        recs = parse_segment(seg)
        seg_test = seg.test or infer_test(seg.lines)
        exp = expect
        if seg.begin:
            exp = Expect(seg.begin.get("processes", expect.processes), seg.begin.get("nodes", expect.nodes))
        problems = check(seg_test, recs, seg, exp)
        for r in recs:
            r["test"] = r["test"] or seg_test
        results.append(Result(seg_test, recs, problems, summarize(seg_test, recs, problems), seg.begin))
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("log", help="a log file, or - for standard input")
    ap.add_argument("--test", choices=TESTS, help="the test of a raw log (told from its lines if not given)")
    ap.add_argument("--processes", type=int, help="processes per node the test ran with (checks every rank printed)")
    ap.add_argument("--nodes", type=int, help="nodes the test ran on")
    ap.add_argument("--summary", action="store_true", help="print only the summary record of each test")
    args = ap.parse_args(argv)
    if args.log == "-":
        text = sys.stdin.read()
    else:
        try:
            with open(args.log, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError as err:
            print(f"parse.py: cannot read {args.log}: {err.strerror or err}", file=sys.stderr)
            return 2
    results = parse_log(text, args.test, Expect(args.processes, args.nodes))
    for res in results:
        for r in [] if args.summary else res.records:
            print(json.dumps(r, sort_keys=True))
        print(json.dumps(res.summary, sort_keys=True))
    failed = [r for r in results if not r.passed]
    for res in failed:
        for p in res.problems:
            print(f"{res.test or 'log'}: {p}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""DeepEP V2's elastic test (deepepApi=v2): what tests/elastic/test_ep.py prints, its records, when it is complete.

The lines, as deepseek-ai/DeepEP dd758caf4518 prints them (tests/elastic/test_ep.py; `dist_print` is
deep_ep/utils/envs.py's: every rank prints, or local rank 0 only with once_in_node=True):

    Config:                                                                   line 67, once per node
     > Ranks: {scaleout} x {scaleup}                                          line 68
     > Experts: {num_topk}/{num_experts}                                      line 69
     > Tokens: {num_tokens} (max: {max}), hidden: {hidden}                    line 70
     > #SM: {num_sms}, #QPs: {num_qps}/{allocated}                            line 71
    Running all test cases:                                                   line 84, once per node
     > Testing with do_handle_copy=1, expert_alignment=128, use_fp8_dispatch=1, num_bias=0,
       with_previous_event=0, async_with_compute_stream=0, allocate_on_comm_stream=0 ...   lines 87-90, one line
       * EP: {rank:3}/{ranks} | dispatch: {SO} GB/s (SO), {SU} GB/s (SU), {t} us, {bytes} bytes |
         copy: {bw} GB/s, {t} us                                              lines 259-263, one line
       - EP: ... | expanded dispatch: ...    (line 270)     # EP: ... | cached dispatch: ...   (line 280)
       @ EP: ... | combine: ... | reduce: {bw} GB/s, {t} us  (line 342)     + EP: ... | reduced combine: ... (line 353)
    Testing with seed=N ...                                                   line 555 (pressure tests only)

The five per-rank lines come from every rank for every case unless --skip-perf-test (line 259: dispatch). A case
prints no "passed": its checks (asserts, lines 361-373) run after its perf lines, and the next case starts only
when they held, so a case passed when another follows it, or when the test ended without an error after it.
SO is the scale-out (RDMA) bandwidth, 0 on one node; SU the scale-up (NVLink) one. Stdlib only, shipped.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable
from typing import Any

_N = r"\d+(?:\.\d+)?"
TEST = "elastic"
OPS = ("dispatch", "expanded dispatch", "cached dispatch", "combine", "reduced combine")
RE_CONFIG_HEAD = re.compile(r"^Config:$")
RE_RANKS = re.compile(r"^ > Ranks: (?P<scaleout>\d+) x (?P<scaleup>\d+)$")
RE_EXPERTS = re.compile(r"^ > Experts: (?P<topk>\d+)/(?P<experts>\d+)$")
RE_TOKENS = re.compile(r"^ > Tokens: (?P<tokens>\d+) \(max: (?P<max_tokens>\d+)\), hidden: (?P<hidden>\d+)$")
RE_SMS = re.compile(r"^ > #SM: (?P<sms>\d+), #QPs: (?P<qps>\d+)/(?P<allocated_qps>\d+)$")
RE_RUNNING = re.compile(r"^Running all test cases:$")
RE_CASE = re.compile(r"^ > Testing with (?P<body>do_handle_copy=\d+(?:, \w+=\d+)*) \.\.\.$")
RE_PERF = re.compile(
    rf"^ +(?P<mark>[*\-#@+]) EP: *(?P<rank>\d+)/(?P<ranks>\d+) \| (?P<op>{'|'.join(OPS)}): "
    rf"(?P<so_bw>{_N}) GB/s \(SO\), (?P<su_bw>{_N}) GB/s \(SU\), (?P<time>{_N}) us, (?P<bytes>{_N}) bytes \| "
    rf"(?P<post>copy|reduce): (?P<post_bw>{_N}) GB/s, (?P<post_time>{_N}) us$"
)
RE_SEED = re.compile(r"^Testing with seed=\d+ \.\.\.$")
CONFIG_LINES = (RE_RANKS, RE_EXPERTS, RE_TOKENS, RE_SMS)
UNITS = {"so_bw": "GB/s", "su_bw": "GB/s", "bytes": "B", "post_bw": "GB/s", "post_time": "us"}

Record = Callable[..., dict[str, Any]]


def is_elastic(line: str) -> bool:
    """A line only V2's elastic test prints (the parser tells a raw log's test from it)."""
    return bool(RE_PERF.match(line) or RE_CASE.match(line) or RE_RUNNING.match(line))


def parse_line(line: str, n: int, state: dict[str, Any], record: Record) -> list[dict[str, Any]] | None:
    """The records of one line of the elastic test, [] for a line it prints without a figure, None for a line
    that is not its. `state` carries the current case between lines."""
    if RE_CONFIG_HEAD.match(line) or RE_RUNNING.match(line) or RE_SEED.match(line):
        return []
    for pattern in CONFIG_LINES:
        if m := pattern.match(line):
            return [record(TEST, "config", pattern.pattern.split(":")[0].strip("^ >#"), n, params=_ints(m))]
    if m := RE_CASE.match(line):
        params = {k: int(v) for k, v in (kv.split("=") for kv in m["body"].split(", "))}
        case = record(
            TEST, "case", m["body"], n, dtype="FP8" if params.get("use_fp8_dispatch") else "BF16", params=params
        )
        case["passed"] = None  # decided by what follows (finish)
        state["case"] = case
        return [case]
    if m := RE_PERF.match(line):
        case = state.get("case")
        fp8 = bool(case and case["params"].get("use_fp8_dispatch"))
        dtype = ("FP8" if fp8 else "BF16") if "dispatch" in m["op"] else "BF16"
        values = {k: float(m[k]) for k in ("so_bw", "su_bw", "time", "bytes", "post_bw", "post_time")}
        params = {"ranks": int(m["ranks"]), "case_line": case["line"] if case else None, "post": m["post"]}
        return [record(TEST, "rank", m["op"], n, dtype=dtype, rank=int(m["rank"]), params=params, values=values)]
    return None


def _ints(m: re.Match[str]) -> dict[str, int]:
    return {k: int(v) for k, v in m.groupdict().items()}


def finish(recs: list[dict[str, Any]], rc: int | None) -> None:
    """Marks each case passed or not: a case followed by another passed; the last one passed when no error
    record follows it and the process (when the runner recorded it) exited 0."""
    cases = [r for r in recs if r["kind"] == "case" and r["test"] in (TEST, None)]
    for case, after in itertools.pairwise(cases):
        case["passed"] = True
        case["next_line"] = after["line"]
    if cases:
        last = cases[-1]
        errors = [r for r in recs if r["kind"] == "error" and r["line"] >= last["line"]]
        last["passed"] = not errors and rc in (0, None)


def problems(recs: list[dict[str, Any]], processes: int | None, nodes: int | None, argv: list[str]) -> list[str]:
    """Why a parsed elastic test is not a complete, passed run (empty when it is)."""
    out = []
    kinds = {r["kind"] for r in recs}
    if "config" not in kinds:
        out.append("truncated: no 'Config:' block")
    cases = [r for r in recs if r["kind"] == "case"]
    if not cases:
        out.append("truncated: no ' > Testing with ...' line")
    out += [f"line {c['line']}: case '{c['name']}' did not pass" for c in cases if c.get("passed") is False]
    if cases and "--skip-perf-test" not in argv:
        last = cases[-1]["line"]
        perf = [r for r in recs if r["kind"] == "rank" and (r["params"].get("case_line") or 0) >= last]
        for op in ("dispatch", "combine"):
            ranks = {r["rank"] for r in perf if r["name"] == op}
            if not ranks:
                out.append(f"truncated: the last case printed no '{op}:' line")
            elif processes and (nodes or 1) == 1 and (absent := sorted(set(range(processes)) - ranks)):
                out.append(f"truncated: no '{op}:' line from rank(s) {', '.join(map(str, absent))}")
    return out


def summary_values(recs: list[dict[str, Any]]) -> dict[str, float]:
    """The headline figures: per operation and dispatch dtype, the scale-up (SU, NVLink) and scale-out (SO, RDMA)
    bandwidth over ranks, mean and min, of the first case of that dtype (the first case is FP8 dispatch with BF16
    combine, the configuration of DeepEP's README table)."""
    first_case: dict[str, int] = {}
    for r in recs:
        if r["kind"] == "case":
            first_case.setdefault(r["dtype"], r["line"])
    values: dict[str, float] = {}
    for op in ("dispatch", "combine"):
        for dtype, line in first_case.items():
            rows = [r for r in recs if r["kind"] == "rank" and r["name"] == op and r["params"].get("case_line") == line]
            if not rows:
                continue
            label = f"{op}_{dtype}" if op == "dispatch" else op
            if op == "combine" and f"{label}_su_bw_mean" in values:
                continue  # combine is BF16 in every case: the first case's figure
            for bw in ("su_bw", "so_bw"):
                got = [r["values"][bw] for r in rows]
                if bw == "so_bw" and not any(got):
                    continue  # one node: nothing crossed the scale-out network
                values[f"{label}_{bw}_mean"] = round(sum(got) / len(got), 2)
                values[f"{label}_{bw}_min"] = min(got)
    return values

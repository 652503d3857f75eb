#!/usr/bin/env python3
"""Parser of DeepEP test output (v1.2.1, the default 1.2.1+29d31c0, V2's elastic test) and of this runner's NCCL check.

    python3 parse.py LOG [--test T] [--processes N] [--nodes N] [--summary] [--no-rdma-nics]

prints one JSON record per line and exits 0 when every test in the log completed, passed and, for the
RDMA tests, carries its evidence (the transport, the NIC counters: parse_records.py); 1 when a test failed,
its output is truncated, unknown or missing, or its evidence is (the reasons go to stderr); 2 when LOG
cannot be read (no such file, a folder) or the arguments are wrong.

A log is either the raw output of one DeepEP test script (the test is then told from its lines, or
given with --test) or the output of `run_bench.py`, whose `[runner] begin {...}` / `[runner] end {...}`
markers separate the tests it ran. The records are described in parse_records.py. Stdlib only: this file
runs inside benchmark pods next to run_bench.py.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

try:  # in the package (tests, the workstation's report)
    from scripts.bench import parse_elastic as bench_elastic
    from scripts.bench import parse_patterns as bench_patterns
    from scripts.bench import parse_records as bench_records
except ImportError:  # pragma: no cover - on a node the shipped files lie in one folder, sys.path[0]
    import parse_elastic as bench_elastic  # type: ignore[no-redef]
    import parse_patterns as bench_patterns  # type: ignore[no-redef]
    import parse_records as bench_records  # type: ignore[no-redef]

# The parser's API in one place for its callers (the runner, the report, tests).
TESTS = bench_patterns.TESTS
DEEPEP_TESTS = bench_patterns.DEEPEP_TESTS
known_failure_hints = bench_patterns.known_failure_hints
LL_METRICS = bench_records.LL_METRICS
Segment = bench_records.Segment
Expect = bench_records.Expect
summarize = bench_records.summarize
spread = bench_records.spread
evidence_checks = bench_records.evidence_checks
PASS, FAIL, NOT_RUN = bench_records.PASS, bench_records.FAIL, bench_records.NOT_RUN
PASSED, FAILED, UNPROVEN = bench_records.PASSED, bench_records.FAILED, bench_records.UNPROVEN


def split_lines(text: str) -> Iterator[tuple[int, str]]:
    """(line number, text) for each result line; lines where ranks wrote over each other are split."""
    for n, raw in enumerate(text.splitlines(), start=1):
        line = bench_patterns._TIMESTAMP.sub("", raw.rstrip("\r"))
        if line.startswith("[runner] "):
            yield n, line.rstrip()
            continue
        for part in bench_patterns._TAG_SPLIT.split(line):
            if part:
                yield n, part.rstrip()


def segments(text: str) -> list[bench_records.Segment]:
    """Splits a log at the runner's markers; a log without markers is one segment of unknown test."""
    segs: list[bench_records.Segment] = []
    current: bench_records.Segment | None = None
    loose = bench_records.Segment(None)
    for n, line in split_lines(text):
        m = bench_patterns.RE_RUNNER.match(line)
        if m and m["what"] in ("begin", "end"):
            try:
                body = json.loads(m["body"])
            except json.JSONDecodeError:
                body = {}
            if m["what"] == "begin":
                current = bench_records.Segment(body.get("test"), begin=body)
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
        if bench_elastic.is_elastic(line):
            return "elastic"
        if line.startswith("[config]") and "num_topk_groups=" in line:
            return "internode"
        if bench_patterns.RE_INTER_SWEEP.match(line) or bench_patterns.RE_INTER_BEST.match(line):
            return "internode"
        if line.startswith("[rank ") or bench_patterns.RE_ALLOC.match(line):
            found.add("low-latency")
        elif line.startswith(("[config]", "[layout]", "[testing]", "[tuning]")):
            found.add("intranode")
        elif line.startswith("[nccl]"):
            found.add("nccl")
    for test in ("intranode", "low-latency", "nccl"):
        if test in found:
            return test
    return None


def rank_record(test: str | None, line: int, m: re.Match[str], name: str, **groups: str) -> dict[str, Any]:
    """A low-latency test's per-rank record: its values named as the keywords, read from the match's groups."""
    values = {key: bench_records.num(m[group]) for key, group in groups.items()}
    return bench_records.record(test, "rank", name, line, rank=int(m["rank"]), values=values)


def parse_segment(seg: bench_records.Segment) -> list[dict[str, Any]]:
    """The records of one segment (no summary)."""
    test = seg.test or infer_test(seg.lines)
    out: list[dict[str, Any]] = []
    pending_sweeps: list[dict[str, Any]] = []
    open_case: dict[str, Any] | None = None
    in_traceback = False
    elastic: dict[str, Any] = {}  # DeepEP V2's elastic test: its current case

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
        if test == "elastic" and (got := bench_elastic.parse_line(line, n, elastic, bench_records.record)) is not None:
            out += got
            continue
        if open_case is not None and stripped == "passed":
            open_case["passed"] = True  # another stream wrote between "..." and " passed"
            close_case()
            continue

        if m := bench_patterns.RE_CASE.match(line):
            close_case()
            rest = m["rest"].strip()
            params = {
                "with_topk": m["topk"] == "with",
                "async": m["async"] == "True",
                "previous": m["previous"] == "True",
            }
            name = f"{m['dtype']} {m['topk']} top-k async={m['async']} previous={m['previous']}"
            case = bench_records.record(test, "case", name, n, dtype=m["dtype"], params=params, passed=rest == "passed")
            if rest == "passed":
                out.append(case)
            else:
                open_case = case
                if rest:
                    case["after"] = rest[:300]
                    if bench_patterns.RE_ERROR.search(rest):
                        out.append(bench_records.record(test, "error", "error", n, text=rest[:500]))
            continue
        if line.startswith("[") and not line.startswith("[runner]"):
            close_case()

        if m := bench_patterns.RE_CONFIG.match(line):
            values = {k: float(v) for k, v in (kv.split("=") for kv in m["body"].split(", "))}
            out.append(bench_records.record(test, "config", "config", n, params={k: int(v) for k, v in values.items()}))
        elif m := bench_patterns.RE_LAYOUT.match(line):
            out.append(
                bench_records.record(test, "layout", "layout kernel", n, values={"kernel": bench_records.num(m["ms"])})
            )
        elif m := bench_patterns.RE_INTRA_SWEEP.match(line):
            nvl = None if m["nvl"] == "default" else int(m["nvl"])
            rec = bench_records.record(
                test,
                "sweep",
                "",
                n,
                params={"sms": int(m["sms"]), "nvl_chunk": nvl, "default_config": nvl is None},
                values={"nvl_bw": bench_records.num(m["nvl_bw"]), "time": bench_records.num(m["t"])},
            )
            pending_sweeps.append(rec)
            out.append(rec)
        elif m := bench_patterns.RE_INTRA_BEST_DISPATCH.match(line):
            label_sweeps("dispatch", m["dtype"])
            out.append(
                bench_records.record(
                    test,
                    "best",
                    "dispatch",
                    n,
                    dtype=m["dtype"],
                    params={"sms": int(m["sms"]), "nvl_chunk": int(m["nvl"])},
                    values={"nvl_bw": bench_records.num(m["nvl_bw"]), "time": bench_records.num(m["t"])},
                )
            )
        elif m := bench_patterns.RE_INTRA_BEST_COMBINE.match(line):
            label_sweeps("combine", "BF16")
            out.append(
                bench_records.record(
                    test,
                    "best",
                    "combine",
                    n,
                    dtype="BF16",
                    params={"sms": int(m["sms"]), "nvl_chunk": int(m["nvl"])},
                    values={"nvl_bw": bench_records.num(m["nvl_bw"]), "time": bench_records.num(m["t"])},
                )
            )
        elif (m := bench_patterns.RE_INTER_BEST.match(line)) or (m := bench_patterns.RE_INTER_SWEEP.match(line)):
            is_best = "op" in m.re.groupindex
            params = {"sms": int(m["sms"]), "nvl_chunk": int(m["nvl"]), "rdma_chunk": int(m["rdma"])}
            values = {
                "rdma_bw": bench_records.num(m["rdma_bw"]),
                "nvl_bw": bench_records.num(m["nvl_bw"]),
                "time": bench_records.num(m["t"] or m["t_old"]),
                "notify": bench_records.num(m["notify"] or m["notify_old"]),
            }
            if is_best:
                op = m["op"]
                dtype = m["dtype"] or "BF16"  # combine runs in BF16
                label_sweeps(op, dtype)
                out.append(bench_records.record(test, "best", op, n, dtype=dtype, params=params, values=values))
            else:
                rec = bench_records.record(test, "sweep", "", n, params=params, values=values)
                pending_sweeps.append(rec)
                out.append(rec)
        elif m := bench_patterns.RE_LL_BOTH.match(line):
            out.append(rank_record(test, n, m, "dispatch+combine", bw="bw", avg_t="avg", min_t="min", max_t="max"))
        elif m := bench_patterns.RE_LL_SPLIT.match(line):
            out.append(rank_record(test, n, m, "dispatch", bw="d_bw", avg_t="d_t"))
            out.append(rank_record(test, n, m, "combine", bw="c_bw", avg_t="c_t"))
        elif m := bench_patterns.RE_LL_SENDRECV.match(line):
            for op in ("d", "c"):
                name = f"{'dispatch' if op == 'd' else 'combine'} send/recv"
                out.append(rank_record(test, n, m, name, send=f"{op}_send", recv=f"{op}_recv"))
        elif m := bench_patterns.RE_ALLOC.match(line):
            out.append(bench_records.record(test, "config", "buffer", n, values={"buffer": bench_records.num(m["mb"])}))
        elif m := bench_patterns.RE_NCCL.match(line):
            out.append(
                bench_records.record(
                    "nccl",
                    "nccl",
                    "all-to-all",
                    n,
                    params={"ranks": int(m["ranks"]), "size": int(m["bytes"])},
                    values={
                        "size": float(m["bytes"]),
                        "time": bench_records.num(m["t"]),
                        "algbw": bench_records.num(m["algbw"]),
                        "busbw": bench_records.num(m["busbw"]),
                    },
                )
            )
        elif m := bench_patterns.RE_NCCL_CHECK.match(line):
            passed = m["result"] == "passed"
            out.append(bench_records.record("nccl", "case", "all-to-all data check", n, passed=passed))
            if not passed:
                out.append(bench_records.record("nccl", "error", "error", n, text=line))
        elif (
            bench_patterns.RE_NCCL_INFO.match(line)
            or bench_patterns.RE_SEED.match(line)
            or bench_patterns.RE_REF_HASH.match(line)
        ):
            pass
        elif bench_patterns.RE_KNOWN_TAG.match(line):
            # A result line this parser does not know: a DeepEP version it was not written for.
            out.append(bench_records.record(test, "error", "unknown result line", n, text=line[:500]))
        elif line.startswith("[runner] "):
            rm = bench_patterns.RE_RUNNER.match(line)
            if rm and rm["what"] == "error":
                out.append(bench_records.record(test, "error", "runner", n, text=rm["body"][:500]))
        elif bench_patterns.RE_ERROR.search(stripped):
            if stripped.startswith("Traceback"):
                in_traceback = True
            else:
                out.append(bench_records.record(test, "error", "error", n, text=stripped[:500]))
                in_traceback = False
        elif in_traceback and not line.startswith((" ", "\t")):
            in_traceback = False
            out.append(bench_records.record(test, "error", "error", n, text=stripped[:500]))
        elif bench_patterns.RE_WARNING.search(stripped):
            out.append(bench_records.record(test, "warning", "warning", n, text=stripped[:500]))
    close_case()
    if in_traceback:
        out.append(
            bench_records.record(
                test, "error", "error", seg.lines[-1][0] if seg.lines else 0, text="traceback without end"
            )
        )
    if test == "elastic":
        bench_elastic.finish(out, seg.end.get("rc") if seg.end else None)
    return out


DEFAULT_EXPECT = bench_records.Expect()


@dataclass
class Result:
    test: str | None
    records: list[dict[str, Any]]
    problems: list[str]
    summary: dict[str, Any]
    begin: dict[str, Any] | None = None
    status: str = bench_records.PASSED  # passed | failed | unproven (parse_records.judge)
    checks: list[dict[str, str]] = field(default_factory=list)
    end: dict[str, Any] | None = None

    @property
    def passed(self) -> bool:
        return self.status == bench_records.PASSED and not self.problems


def parse_log(text: str, test: str | None = None, expect: bench_records.Expect = DEFAULT_EXPECT) -> list[Result]:
    """Every test found in a log, with its records, its problems and a summary record."""
    results = []
    for seg in segments(text):
        if test is not None and seg.test is None:
            seg.test = test
        recs = parse_segment(seg)
        seg_test = seg.test or infer_test(seg.lines)
        exp = expect
        if seg.begin:
            exp = bench_records.Expect(
                seg.begin.get("processes", expect.processes), seg.begin.get("nodes", expect.nodes), expect.rdma_nics
            )
        status, problems, checks = bench_records.judge(seg_test, recs, seg, exp)
        for r in recs:
            r["test"] = r["test"] or seg_test
        summary = bench_records.summarize(seg_test, recs, problems, status, checks)
        results.append(Result(seg_test, recs, problems, summary, seg.begin, status, checks, seg.end))
    return results


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("log", help="a log file, or - for standard input")
    ap.add_argument("--test", choices=bench_patterns.TESTS, help="the test of a raw log (else told from its lines)")
    ap.add_argument("--processes", type=int, help="processes per node the test ran with (checks every rank printed)")
    ap.add_argument("--nodes", type=int, help="nodes the test ran on")
    ap.add_argument("--summary", action="store_true", help="print only the summary record of each test")
    ap.add_argument(
        "--no-rdma-nics",
        action="store_true",
        help="the machine has no RDMA NIC (the hardware test counted none): IBGDA's init failure is expected and the "
        "RDMA evidence checks are n/a; a CPU-handler or host-memory fallback still fails",
    )
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
    results = parse_log(text, args.test, bench_records.Expect(args.processes, args.nodes, not args.no_rdma_nics))
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

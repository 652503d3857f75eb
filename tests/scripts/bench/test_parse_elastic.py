"""The parser on DeepEP V2's elastic test (tests/elastic/test_ep.py of deepseek-ai/DeepEP dd758caf4518).

The lines the parser reads are the test's own f-strings: tests/fixtures/bench/v2_elastic_synth.log was made by
evaluating them (lines 67-71, 84, 87-90, 259-263, 270-274, 280-284, 342-346, 353-357) with invented figures, and
RE_* below are checked against the source's format text quoted here. Real logs, when a run gives them, go next to
it and are read by the last tests:

    tests/fixtures/bench/v2_elastic_<machine>.log        raw output of a passing test_ep.py run (e.g. _h100x4)
    tests/fixtures/bench/v2_elastic_crash_<machine>.log  raw output of a run that crashed (e.g. the probe's e0)
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from scripts.bench import parse as bp
from scripts.bench import parse_elastic as pe
from tests.conftest import ROOT

BENCH = ROOT / "tests/fixtures/bench"
SYNTH = (BENCH / "v2_elastic_synth.log").read_text()
CRASH = (BENCH / "v2_elastic_crash_synth.log").read_text()
# tests/elastic/test_ep.py line 259-263 at dd758ca, the dispatch line's f-string, rendered with rank 3 of 8.
SOURCE_DISPATCH = (
    "   * EP:   3/8 | dispatch: 0 GB/s (SO), 355 GB/s (SU), 398.123 us, 141295616 bytes | copy: 1234 GB/s, 45.678 us"
)


def _one(text: str, processes: int | None = 2) -> bp.Result:
    [res] = bp.parse_log(text, expect=bp.Expect(processes, 1))
    return res


def test_a_line_as_the_source_formats_it_is_read() -> None:
    m = pe.RE_PERF.match(SOURCE_DISPATCH)
    assert m and (m["op"], int(m["rank"]), int(m["ranks"]), float(m["su_bw"]), m["post"]) == (
        "dispatch",
        3,
        8,
        355.0,
        "copy",
    )
    assert pe.is_elastic(SOURCE_DISPATCH)


def test_a_complete_run_passes_with_its_figures() -> None:
    res = _one(SYNTH)
    assert (res.test, res.status, res.problems) == ("elastic", "passed", [])
    values = res.summary["values"]
    assert values["dispatch_FP8_su_bw_mean"] == 309.0 and values["dispatch_FP8_su_bw_min"] == 306.0
    assert values["combine_su_bw_mean"] == 309.0 and "dispatch_BF16_su_bw_mean" in values
    assert not any(k.startswith(("dispatch_FP8_so", "combine_so")) for k in values)  # one node: SO is 0
    assert res.summary["cases_total"] == 2 and res.summary["cases_passed"] == 2
    config = {k: v for r in res.records if r["kind"] == "config" for k, v in r["params"].items()}
    assert config == {
        "scaleout": 1,
        "scaleup": 2,
        "topk": 6,
        "experts": 256,
        "tokens": 4096,
        "max_tokens": 4096,
        "hidden": 7168,
        "sms": 24,
        "qps": 0,
        "allocated_qps": 129,
    }


def test_a_rank_that_printed_nothing_fails_the_run() -> None:
    res = _one(SYNTH, processes=4)
    assert res.status == "failed"
    assert "truncated: no 'dispatch:' line from rank(s) 2, 3" in res.problems


def test_a_run_cut_inside_its_last_case_fails() -> None:
    cut = SYNTH.split("   @ EP:   0/2 | combine", 1)[0]
    cut = cut.rsplit(" > Testing with", 1)[0] + " > Testing with" + SYNTH.split(" > Testing with")[2].split("\n")[0]
    res = _one(cut + "\nRuntimeError: DeepEP error: timeout\n")
    assert res.status == "failed"
    assert any("did not pass" in p for p in res.problems)
    assert "truncated: the last case printed no 'dispatch:' line" in res.problems


def test_the_reported_crash_fails_with_its_hint() -> None:
    res = _one(CRASH)
    assert res.test is None or res.status == "failed"
    [res] = bp.parse_log(CRASH, test="elastic")
    assert res.status == "failed"
    assert any("terminated with signal SIGSEGV" in p for p in res.problems)
    assert any(p.startswith("known failure: NCCL found no RDMA NIC") for p in res.problems)


def test_the_runner_markers_carry_the_exit_code_into_the_last_case() -> None:
    begin = '[runner] begin {"test": "elastic", "argv": ["python", "tests/elastic/test_ep.py"], "processes": 2}\n'
    res = _one(begin + SYNTH + '[runner] end {"test": "elastic", "rc": -11, "timed_out": false}\n')
    assert res.status == "failed" and "exit code -11" in res.problems
    assert any("did not pass" in p for p in res.problems)


@pytest.mark.parametrize("path", sorted(BENCH.glob("v2_elastic_h*.log")), ids=lambda p: p.name)
def test_a_real_passing_run_parses(path: Path) -> None:
    res = _one(path.read_text(errors="replace"), processes=None)
    assert (res.test, res.status) == ("elastic", "passed"), res.problems
    assert res.summary["values"]["dispatch_FP8_su_bw_mean"] > 0 and res.summary["values"]["combine_su_bw_mean"] > 0


@pytest.mark.parametrize("path", sorted(BENCH.glob("v2_elastic_crash_h*.log")), ids=lambda p: p.name)
def test_a_real_crash_fails(path: Path) -> None:
    [res] = bp.parse_log(path.read_text(errors="replace"), test="elastic")
    assert res.status == "failed" and res.problems


def test_the_format_text_of_the_source_is_what_the_patterns_expect() -> None:
    # The f-string heads of test_ep.py at dd758ca (lines 259, 270, 280, 342, 353), without their values.
    heads = {"*": "dispatch", "-": "expanded dispatch", "#": "cached dispatch", "@": "combine", "+": "reduced combine"}
    for mark, op in heads.items():
        line = SOURCE_DISPATCH.replace("* EP", f"{mark} EP").replace("| dispatch:", f"| {op}:")
        if "combine" in op:
            line = line.replace("| copy:", "| reduce:")
        m = pe.RE_PERF.match(line)
        assert m and m["op"] == op, line
    assert re.fullmatch(pe.RE_CASE, " > Testing with do_handle_copy=0, expert_alignment=1, use_fp8_dispatch=0 ...")


def test_the_runner_finds_v2s_tests_where_dd758ca_keeps_them(tmp_path: Path) -> None:
    # dd758ca's tree: tests/legacy/test_{intranode,low_latency,internode}.py and tests/elastic/test_ep.py.
    from scripts.bench import run_bench

    tests = tmp_path / "DeepEP" / "tests"
    for rel in ("legacy/test_intranode.py", "legacy/test_low_latency.py", "elastic/test_ep.py"):
        (tests / rel).parent.mkdir(parents=True, exist_ok=True)
        (tests / rel).write_text("")
    assert run_bench.find_tests_dir(str(tmp_path / "DeepEP"), {}) == tests.resolve()
    assert run_bench.script_path(tests, "intranode") == tests / "legacy/test_intranode.py"
    assert run_bench.script_path(tests, "elastic") == tests / "elastic/test_ep.py"

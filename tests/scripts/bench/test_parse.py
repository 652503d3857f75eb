"""The parser (scripts/bench/parse.py): every DeepEP v1.2.1 result line, field report samples, failed runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.bench import parse as bp
from scripts.bench import parse_records as pr
from tests.conftest import ROOT

FIX = ROOT / "tests" / "fixtures" / "bench"
PARSE = [sys.executable, str(ROOT / "scripts" / "bench" / "parse.py")]


def one(text: str, test: str | None = None, expect: bp.Expect | None = None) -> bp.Result:
    results = bp.parse_log(text, test, expect or bp.Expect())
    assert len(results) == 1, [r.test for r in results]
    return results[0]


def recs(res: bp.Result, kind: str, name: str | None = None) -> list[dict]:
    return [r for r in res.records if r["kind"] == kind and (name is None or r["name"] == name)]


# -- line formats -----------------------------------------------------------------------------------


def test_config_line_intranode_and_internode() -> None:
    intra = bp.parse_segment(bp.Segment("intranode", [(1, "[config] num_tokens=4096, hidden=7168, num_topk=8")]))
    assert intra[0]["kind"] == "config"
    assert intra[0]["params"] == {"num_tokens": 4096, "hidden": 7168, "num_topk": 8}
    inter = bp.parse_segment(
        bp.Segment(None, [(1, "[config] num_tokens=4096, hidden=7168, num_topk_groups=2, num_topk=8")])
    )
    assert inter[0]["params"]["num_topk_groups"] == 2
    assert inter[0]["test"] == "internode"


def test_layout_line() -> None:
    (r,) = bp.parse_segment(bp.Segment("intranode", [(3, "[layout] Kernel performance: 0.044 ms")]))
    assert (r["kind"], r["name"], r["values"], r["units"], r["line"]) == (
        "layout",
        "layout kernel",
        {"kernel": 0.044},
        {"kernel": "ms"},
        3,
    )


@pytest.mark.parametrize(
    ("line", "dtype", "topk", "asy", "prev"),
    [
        (
            "[testing] Running with BF16, without top-k (async=False, previous=False) ... passed",
            "BF16",
            False,
            False,
            False,
        ),
        ("[testing] Running with FP8, with top-k (async=True, previous=True) ... passed", "FP8", True, True, True),
    ],
)
def test_testing_line_passed(line: str, dtype: str, topk: bool, asy: bool, prev: bool) -> None:
    (r,) = bp.parse_segment(bp.Segment("intranode", [(1, line)]))
    assert r["kind"] == "case" and r["passed"] is True and r["dtype"] == dtype
    assert r["params"] == {"with_topk": topk, "async": asy, "previous": prev}


def test_testing_line_without_passed_is_a_failure() -> None:
    res = one(
        "[config] num_tokens=8, hidden=7168, num_topk=8\n"
        "[testing] Running with BF16, with top-k (async=False, previous=False) ...\n"
    )
    (case,) = recs(res, "case")
    assert case["passed"] is False
    assert any("did not pass" in p for p in res.problems)


def test_passed_on_the_next_line_after_another_stream_wrote_in_between() -> None:
    res = one(
        "[testing] Running with BF16, with top-k (async=False, previous=False) ...NCCL WARN something\n passed\n",
        "intranode",
    )
    (case,) = recs(res, "case")
    assert case["passed"] is True


def test_intranode_sweep_and_best_lines() -> None:
    lines = [
        "[tuning] SMs 24, NVL chunk 4: 287.42 GB/s (NVL), avg_t: 405.99 us",
        "[tuning] SMs 24, NVL chunk default: 331.75 GB/s (NVL), avg_t: 352.71 us",
        "[tuning] Best dispatch (FP8): SMs 24, NVL chunk 24, 331.56 GB/s (NVL), t: 352.91 us",
        "[tuning] SMs 24, NVL chunk 8: 291.58 GB/s (NVL), avg_t: 401.29 us",
        "[tuning] Best combine: SMs 24, NVL chunk 8: 291.58 GB/s (NVL), t: 401.29 us",
    ]
    out = bp.parse_segment(bp.Segment("intranode", list(enumerate(lines, 1))))
    s1, s2, best_d, s3, best_c = out
    assert (s1["kind"], s1["name"], s1["dtype"]) == ("sweep", "dispatch", "FP8")
    assert s1["params"] == {"sms": 24, "nvl_chunk": 4, "default_config": False}
    assert s1["values"] == {"nvl_bw": 287.42, "time": 405.99}
    assert s1["units"] == {"nvl_bw": "GB/s", "time": "us"}
    assert s2["params"]["nvl_chunk"] is None and s2["params"]["default_config"] is True
    assert (best_d["kind"], best_d["name"], best_d["dtype"]) == ("best", "dispatch", "FP8")
    assert best_d["values"] == {"nvl_bw": 331.56, "time": 352.91}
    assert (s3["name"], s3["dtype"]) == ("combine", "BF16")
    assert (best_c["name"], best_c["params"]["nvl_chunk"], best_c["values"]["nvl_bw"]) == ("combine", 8, 291.58)


def test_intranode_sweep_line_of_the_default_ref_29d31c0() -> None:
    line = "[tuning] SMs 24, NVL chunk 4: 287.42 GB/s (NVL), 405.99 us"  # no "avg_t: " since 29d31c0
    (rec,) = bp.parse_segment(bp.Segment("intranode", [(1, line)]))
    assert rec["kind"] == "sweep" and rec["values"] == {"nvl_bw": 287.42, "time": 405.99}


def test_internode_lines_v121_format() -> None:
    lines = [
        "[tuning] SMs 24, NVL chunk 4, RDMA chunk 8, transmit: 1915.00 us, notify: 134.00 us, "
        "BW: 31.50 GB/s (RDMA), 102.86 GB/s (NVL) ",
        "[tuning] Best dispatch (BF16): SMs 24, NVL chunk 32, RDMA chunk 16, transmit: 2606.00 us, notify: 135.00 us, "
        "BW: 44.89 GB/s (RDMA), 146.59 GB/s (NVL)",
        "[tuning] Best combine: SMs 24, NVL chunk 4, RDMA chunk 20, transmit: 2681.00 us, notify: 778.64 us, "
        "BW: 43.63 GB/s (RDMA), 142.49 GB/s (NVL)",
    ]
    sweep, best_d, best_c = bp.parse_segment(bp.Segment("internode", list(enumerate(lines, 1))))
    assert sweep["params"] == {"sms": 24, "nvl_chunk": 4, "rdma_chunk": 8}
    assert sweep["values"] == {"rdma_bw": 31.5, "nvl_bw": 102.86, "time": 1915.0, "notify": 134.0}
    assert (sweep["name"], sweep["dtype"]) == ("dispatch", "BF16")
    assert best_d["values"]["rdma_bw"] == 44.89 and best_d["params"]["rdma_chunk"] == 16
    assert (best_c["name"], best_c["dtype"], best_c["values"]["notify"]) == ("combine", "BF16", 778.64)


def test_internode_lines_older_format_of_the_gke_field_report() -> None:
    """'notify + transmit us': the bandwidth is computed from the second figure."""
    lines = [
        "[tuning] SMs 24, NVL chunk 4, RDMA chunk 4: 867 + 2008 us, 30.04 GB/s (RDMA), 98.10 GB/s (NVL) ",
        "[tuning] Best dispatch (FP8): SMs 24, NVL chunk 40, RDMA chunk 16: 229 + 1391 us, "
        "43.36 GB/s (RDMA), 141.61 GB/s (NVL)",
        "[tuning] Best combine: SMs 24, NVL chunk 4, RDMA chunk 20, 778.64 + 2681.00 us, "
        "43.63 GB/s (RDMA), 142.49 GB/s (NVL)",
    ]
    sweep, best_d, best_c = bp.parse_segment(bp.Segment(None, list(enumerate(lines, 1))))
    assert sweep["test"] == "internode"
    assert sweep["values"] == {"rdma_bw": 30.04, "nvl_bw": 98.1, "time": 2008.0, "notify": 867.0}
    assert (best_d["dtype"], best_d["params"]["nvl_chunk"], best_d["values"]["time"]) == ("FP8", 40, 1391.0)
    assert best_c["values"] == {"rdma_bw": 43.63, "nvl_bw": 142.49, "time": 2681.0, "notify": 778.64}


def test_low_latency_rank_lines() -> None:
    lines = [
        "[rank 0] Dispatch + combine bandwidth: 299.23 GB/s, avg_t=73.68 us, min_t=70.50 us, max_t=96.06 us",
        "[rank 0] Dispatch bandwidth: 257.67 GB/s, avg_t=29.15 us | Combine bandwidth: 366.89 GB/s, avg_t=39.62 us",
        "[rank 0] Dispatch send/recv time: 20.18 + 8.46 us | Combine send/recv time: 32.12 + 9.46 us",
    ]
    out = bp.parse_segment(bp.Segment("low-latency", list(enumerate(lines, 1))))
    by = {r["name"]: r for r in out}
    assert set(by) == set(bp.LL_METRICS)
    assert all(r["rank"] == 0 and r["kind"] == "rank" for r in out)
    assert by["dispatch+combine"]["values"] == {"bw": 299.23, "avg_t": 73.68, "min_t": 70.5, "max_t": 96.06}
    assert by["dispatch"]["values"] == {"bw": 257.67, "avg_t": 29.15}
    assert by["combine"]["values"] == {"bw": 366.89, "avg_t": 39.62}
    assert by["dispatch send/recv"]["values"] == {"send": 20.18, "recv": 8.46}
    assert by["combine send/recv"]["values"] == {"send": 32.12, "recv": 9.46}
    assert by["combine send/recv"]["units"] == {"send": "us", "recv": "us"}


def test_allocation_line_and_noise_are_not_results() -> None:
    res = one(
        "Allocating buffer size: 2146.961792 MB ...\nTesting with seed 0 ...\n+ export RANK=0\n"
        "/x/transport.cpp:nvshmemi_transport_init:282: init failed for transport: IBGDA\n",
        "low-latency",
    )
    (buf,) = recs(res, "config", "buffer")
    assert buf["values"] == {"buffer": 2146.961792}
    assert len(recs(res, "warning")) == 1
    assert recs(res, "error") == []


def test_nccl_check_lines() -> None:
    res = one(
        "[nccl] init: world 2, nodes 1, torch 2.11.0+cu130, NCCL 2.28.9\n[nccl] all-to-all check: passed\n"
        "[nccl] all-to-all: ranks 2, size 268435456 B per rank, avg_t: 478.72 us, "
        "algbw: 560.74 GB/s, busbw: 280.37 GB/s\n"
    )
    assert res.test == "nccl" and res.passed
    (r,) = recs(res, "nccl")
    assert r["values"] == {"size": 268435456.0, "time": 478.72, "algbw": 560.74, "busbw": 280.37}
    bad = one("[nccl] all-to-all check: FAILED (wrong data received)\n")
    assert not bad.passed


def test_timestamps_of_kubectl_logs_are_ignored() -> None:
    res = one("2026-11-22T15:01:02.123456789Z [layout] Kernel performance: 0.044 ms\n", "intranode")
    (r,) = recs(res, "layout")
    assert r["values"] == {"kernel": 0.044}


# -- whole logs ---------------------------------------------------------------------------------------


def test_field_report_r2_internode_sample_completes_all_32_cases_but_carries_no_evidence() -> None:
    res = one((FIX / "r2_internode_gke.log").read_text())
    assert res.test == "internode" and res.status == "unproven" and not res.passed
    assert [p.split(":")[0] for p in res.problems] == ["transport check not run", "NIC check not run"]
    assert res.summary["cases_passed"] == res.summary["cases_total"] == 32
    best = {(r["name"], r["dtype"]): r["values"] for r in recs(res, "best")}
    assert best[("dispatch", "FP8")]["rdma_bw"] == 43.36
    assert best[("dispatch", "BF16")]["nvl_bw"] == 146.59
    assert best[("combine", "BF16")]["rdma_bw"] == 43.63
    # The eight sweep lines the sample shows belong to the FP8 dispatch sweep.
    assert [(s["name"], s["dtype"]) for s in recs(res, "sweep")] == [("dispatch", "FP8")] * 8


def test_field_report_r2_low_latency_sample_is_elided_so_incomplete() -> None:
    res = one((FIX / "r2_low_latency_sample.log").read_text())
    assert res.test == "low-latency"
    assert [r["values"]["bw"] for r in recs(res, "rank", "dispatch+combine")] == [256.81, 257.06, 256.49]
    assert not res.passed
    assert any("rank 7 printed no dispatch+combine" in p for p in res.problems)


def ibgda_refused(res: bp.Result, line: int) -> bool:
    """The low-latency test completed over NVLink, but NVSHMEM refused IBGDA (no NICs on the H200 host)."""
    transport = next(c for c in res.checks if c["check"] == "transport")
    return res.status == "failed" and transport["status"] == "FAIL" and transport["detail"].startswith(f"line {line}: ")


def test_real_h200_runner_log_three_tests_complete() -> None:
    results = bp.parse_log((FIX / "h200x2_run.log").read_text())
    assert [r.test for r in results] == ["nccl", "intranode", "low-latency"]
    assert [r.status for r in results] == ["passed", "passed", "failed"]
    nccl, intra, ll = results
    assert ibgda_refused(ll, 98) and ll.summary["status"] == "failed" and ll.summary["checks"] == ll.checks
    assert nccl.summary["values"]["busbw_max"] == 280.37
    assert intra.summary["cases_passed"] == 24
    assert intra.summary["values"] == {
        "dispatch_FP8_nvl_bw": 233.3,
        "dispatch_BF16_nvl_bw": 331.99,
        "combine_nvl_bw": 292.0,
    }
    sweeps = recs(intra, "sweep")
    assert sum(1 for s in sweeps if (s["name"], s["dtype"]) == ("dispatch", "FP8")) == 16
    assert sum(1 for s in sweeps if s["name"] == "combine") == 17
    assert ll.begin is not None and ll.begin["processes"] == 2
    assert {r["rank"] for r in recs(ll, "rank", "dispatch+combine")} == {0, 1}


def test_real_h200_run_of_the_default_ref_29d31c0_with_pr466_completes() -> None:
    """Third device run (2026-11-23, 2 x H200): DeepEP 1.2.1+29d31c0 with PR #466, whose intranode sweep
    lines dropped "avg_t: ". Every sweep line must parse; none may be an unknown result line."""
    results = bp.parse_log((FIX / "h200x2_29d31c0_pr466_run.log").read_text())
    assert [r.test for r in results] == ["nccl", "intranode", "low-latency"]
    assert results[0].passed and results[1].passed and ibgda_refused(results[2], 98)
    intra = results[1]
    assert intra.summary["cases_passed"] == 24
    assert len(recs(intra, "sweep")) == 49
    assert intra.summary["values"]["dispatch_BF16_nvl_bw"] == 339.38
    assert not [r for res in results for r in res.records if r["kind"] == "error"]


def test_real_h200_run_without_capabilities_matches_the_runners_own_summary() -> None:
    """Second device run (2026-11-22, 2 x H200, no capabilities): the saved log, parsed here, gives what the
    runner recorded in summary.json on the device."""
    log = (FIX / "h200x2_nocaps_run.log").read_text()
    assert "CapEff:\t0000000000000000" in log and "NoNewPrivs:\t1" in log
    summary = json.loads((FIX / "h200x2_nocaps_summary.json").read_text())
    results = bp.parse_log(log)
    assert [r.test for r in results] == [t["test"] for t in summary["tests"]] == ["nccl", "intranode", "low-latency"]
    for res, recorded in zip(results, summary["tests"], strict=True):
        assert recorded["status"] == "passed"
        assert res.summary["values"] == recorded["values"]
    # The runner of that day passed the low-latency test; the IBGDA refusal of a host without RDMA NICs
    # now fails its transport check (it proved nothing about RDMA), though the test itself completed.
    assert log.count("init failed for transport: IBGDA") == 2
    assert results[0].passed and results[1].passed and ibgda_refused(results[2], 104)


def test_interleaved_rank_lines_of_eight_ranks() -> None:
    res = one((FIX / "low_latency_interleaved_8.log").read_text(), expect=bp.Expect(processes=8, nodes=1))
    assert res.status == "unproven", res.problems  # complete, but a raw log carries no evidence
    for metric in bp.LL_METRICS:
        assert sorted(r["rank"] for r in recs(res, "rank", metric)) == list(range(8)), metric
    assert res.summary["values"]["dispatch+combine_bw_min"] == 255.1


def test_missing_rank_is_truncated_when_the_process_count_is_known() -> None:
    res = one((FIX / "low_latency_h200x2.log").read_text(), expect=bp.Expect(processes=4, nodes=1))
    assert any("no results from rank(s) 2, 3" in p for p in res.problems)


def test_failed_case_with_traceback_names_the_error() -> None:
    res = one((FIX / "intranode_failed.log").read_text())
    assert not res.passed
    assert any("RuntimeError: DeepEP error: timeout (dispatch CPU)" in p for p in res.problems)
    assert any("did not pass" in p for p in res.problems)


def test_field_report_r1_problem_8_internode_timeout_names_its_fix() -> None:
    res = one((FIX / "internode_dispatch_timeout.log").read_text())
    assert not res.passed
    hints = [p for p in res.problems if p.startswith("known failure:")]
    assert len(hints) == 1, res.problems
    assert "troubleshooting T12" in hints[0] and "nvshmemSource=source" in hints[0]


@pytest.mark.parametrize(
    ("line", "names"),
    [
        ("RuntimeError: NVSHMEM device library version does not match with NVSHMEM host library", "T03"),
        ("RuntimeError: CUDA error: 'named symbol not found'", "TORCH_CUDA_ARCH_LIST=10.0"),
        ("python: /lib/x86_64-linux-gnu/libibverbs.so.1: version `IBVERBS_PRIVATE_34' not found", "rdma-core"),
        ("NCCL WARN Failed to initialize any NET plugin", "gIB plugin"),
        ("libibverbs: Warning: couldn't load driver 'libmlx5-rdmav34.so'", "RDMAV_DRIVERS"),
    ],
)
def test_each_known_failure_of_the_seeds_gets_its_fix(line: str, names: str) -> None:
    hints = bp.known_failure_hints(["[config] num_tokens=4096, hidden=7168, num_topk=8", line])
    assert len(hints) == 1 and names in hints[0], hints


def test_an_intranode_dispatch_timeout_gets_the_intranode_fix_not_the_internode_one() -> None:
    """Issue 19: the fixture's intranode timeout was given T12 (DeepEP built against PyTorch's NVSHMEM),
    which is about internode RDMA. Hints are keyed by the test that printed the line."""
    res = one((FIX / "intranode_failed.log").read_text())
    assert res.test == "intranode"
    hints = [p for p in res.problems if p.startswith("known failure:")]
    assert len(hints) == 1 and hints[0].startswith("known failure: intranode dispatch timed out"), res.problems
    assert "T12" not in hints[0]
    # DeepEP's own intranode message (csrc/deep_ep.cpp, v1.2.1 and 29d31c0) gets the same fix.
    real = ["[config] num_tokens=4096, hidden=7168, num_topk=8", "RuntimeError: DeepEP error: CPU recv timeout"]
    assert bp.known_failure_hints(real, "intranode") == hints
    assert bp.known_failure_hints(real, "internode") == []
    # A log whose test is unknown gets only the hints that hold for any test.
    timeout = ["RuntimeError: DeepEP error: timeout (dispatch CPU)"]
    assert bp.known_failure_hints(timeout) == []
    assert "T12" in bp.known_failure_hints(timeout, "internode")[0]
    assert "T03" in bp.known_failure_hints(["NVSHMEM device library version does not match"])[0]


def test_the_same_error_of_every_rank_is_one_reason_with_its_lines() -> None:
    lines = ["[config] num_tokens=8, hidden=7168, num_topk=8"]
    lines += ["RuntimeError: DeepEP error: CPU recv timeout"] * 8 + [
        "RuntimeError: CUDA error: an illegal memory access"
    ]
    res = one("\n".join(lines) + "\n", "intranode")
    errors = [p for p in res.problems if ": error: " in p]
    assert errors == [
        "lines 2, 3, 4, 5, 6, 7, 8, 9: error: RuntimeError: DeepEP error: CPU recv timeout",
        "line 10: error: RuntimeError: CUDA error: an illegal memory access",
    ]


def test_a_passed_run_gets_no_hint_even_with_a_matching_warning() -> None:
    text = (FIX / "h200x2_run.log").read_text()
    assert bp.parse_log(text)[0].passed
    noisy = text.replace("[config]", "NCCL WARN Failed to initialize any NET plugin\n[config]", 1)
    results = bp.parse_log(noisy)
    assert results[0].passed and not any("known failure" in p for r in results for p in r.problems)


def test_truncated_intranode_run() -> None:
    res = one((FIX / "intranode_truncated.log").read_text())
    assert not res.passed
    assert "truncated: no '[tuning] Best combine' line" in res.problems
    assert any("tuning line(s) after the last Best line" in p for p in res.problems)


def test_unknown_result_line_fails_the_run() -> None:
    res = one((FIX / "unknown_result_line.log").read_text())
    assert not res.passed
    assert any("unknown result line" in p and "p50" in p for p in res.problems)


def test_runner_timeout_is_reported() -> None:
    res = one((FIX / "runner_timeout.log").read_text())
    assert res.test == "low-latency"
    assert res.problems[0] == "timeout: killed after 1800 s"


def test_runner_begin_without_end_is_truncated() -> None:
    text = (FIX / "h200x2_run.log").read_text().split('[runner] end {"rc": 0, "seconds": 13.8')[0]
    intra = next(r for r in bp.parse_log(text) if r.test == "intranode")
    assert "truncated: the runner never reported the end of this test" in intra.problems


def test_single_nic_trap_log_parses_in_v121_format() -> None:
    res = one((FIX / "internode_v121_single_nic.log").read_text())
    assert res.test == "internode" and res.status == "unproven", res.problems
    assert res.summary["values"]["dispatch_BF16_rdma_bw"] < 10


def test_empty_log_is_a_failure() -> None:
    res = one("nothing here\n")
    assert res.problems == ["no DeepEP or NCCL result lines found"]


# -- the command ----------------------------------------------------------------------------------------


def test_cli_prints_json_records_and_exits_0_on_a_passed_run(tmp_path: Path) -> None:
    text = (FIX / "h200x2_run.log").read_text()
    proc = subprocess.run([*PARSE, str(FIX / "h200x2_run.log")], capture_output=True, text=True, check=False)
    assert proc.returncode == 1  # its low-latency test: NVSHMEM refused IBGDA
    assert proc.stderr.startswith("low-latency: transport check FAIL: line 98: NVSHMEM could not start IBGDA")
    records = [json.loads(line) for line in proc.stdout.splitlines()]
    assert {r["test"] for r in records} == {"nccl", "intranode", "low-latency"}
    assert all({"test", "kind", "name", "dtype", "rank", "params", "values", "units"} <= set(r) for r in records)
    assert sum(1 for r in records if r["kind"] == "summary") == 3
    cut = tmp_path / "nccl_intranode.log"  # the same log up to its low-latency test
    cut.write_text(text[: text.index("[runner] begin", text.index('"test": "intranode"'))])
    proc = subprocess.run([*PARSE, str(cut)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize("fixture", ["intranode_truncated.log", "intranode_failed.log", "unknown_result_line.log"])
def test_cli_exits_non_zero_on_failed_or_truncated_runs(fixture: str) -> None:
    proc = subprocess.run([*PARSE, str(FIX / fixture), "--summary"], capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert proc.stderr.strip()


def test_cli_reads_stdin_and_takes_the_test(tmp_path: Path) -> None:
    text = (FIX / "low_latency_h200x2.log").read_text()
    proc = subprocess.run(
        [*PARSE, "-", "--test", "low-latency", "--processes", "2", "--summary"],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1  # complete, but NVSHMEM refused IBGDA on that host
    summary = json.loads(proc.stdout)
    assert summary["test"] == "low-latency" and summary["status"] == "failed" and summary["cases_total"] == 0
    assert "transport check FAIL: line 2" in proc.stderr


@pytest.mark.parametrize(("name", "reason"), [("nonexistent.log", "No such file or directory"), ("", "Is a directory")])
def test_cli_unreadable_log_is_a_one_line_error_exit_2(tmp_path: Path, name: str, reason: str) -> None:
    path = tmp_path / name if name else tmp_path
    proc = subprocess.run([*PARSE, str(path)], capture_output=True, text=True, check=False)
    assert proc.returncode == 2
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip() == f"parse.py: cannot read {path}: {reason}"
    assert proc.stdout == ""


def test_cli_garbage_log_is_a_clear_failure_exit_1(tmp_path: Path) -> None:
    log = tmp_path / "garbage.log"
    log.write_bytes(b"\xff\xfe not a log\n")
    proc = subprocess.run([*PARSE, str(log)], capture_output=True, text=True, check=False)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip() == "log: no DeepEP or NCCL result lines found"


# -- the evidence around an RDMA test: missing is "not run", never a pass -------------


LL_RAW = (FIX / "low_latency_h200x2.log").read_text()  # real output; lines 2-3: NVSHMEM refused IBGDA
IBGDA = {"NVSHMEM_REMOTE_TRANSPORT": "ibgda", "NVSHMEM_IBGDA_NIC_HANDLER": "gpu"}
EIGHT = {f"mlx5_{i}/1": 10**9 for i in range(8)}


def marked(test: str, output: str, begin: dict, end: dict) -> str:
    head = {"test": test, "argv": ["python", f"test_{test}.py"], "processes": 2, "nodes": 1} | begin
    return f"[runner] begin {json.dumps(head)}\n{output}[runner] end {json.dumps({'test': test, 'rc': 0} | end)}\n"


def test_the_transport_is_judged_from_the_runners_record_and_the_log() -> None:
    assert pr.transport_verdict(None, [])[0] == "not run"
    assert pr.transport_verdict({"transport": {"NVSHMEM_REMOTE_TRANSPORT": "none"}}, [])[0] == "not run"
    status, detail = pr.transport_verdict({"transport": IBGDA}, [])
    assert status == "pass" and "NIC handler gpu" in detail
    refused = [(7, "/x/transport.cpp:nvshmemi_transport_init:282: init failed for transport: IBGDA")]
    assert pr.transport_verdict({"transport": IBGDA}, refused)[0] == "FAIL"  # the log beats the settings


def test_nvshmem_going_on_without_ibgda_fails_the_transport_check() -> None:
    # On a machine without HCAs, PyTorch's NVSHMEM 3.4.5 prints one line by default and initialises anyway
    # (the H100, tests/fixtures/install/hw/h100_nvshmem_ibgda_no_hca.log): only the log tells.
    text = (FIX.parent / "install/hw/h100_nvshmem_ibgda_no_hca.log").read_text()
    default = text.split("== default\n", 1)[1].split("== ", 1)[0].splitlines()
    assert default[-2:] == ["nvshmem initialised; torch 2.11.0+cu130", "rc=0"]
    status, detail = pr.transport_verdict({"transport": IBGDA}, list(enumerate(default, 1)))
    assert status == "FAIL" and "line 1: NVSHMEM could not start IBGDA" in detail


@pytest.mark.parametrize(
    ("nics", "status", "says"),
    [
        (None, "not run", "no record of the NIC counters"),
        ({"error": "no readable port_xmit_data under /sys/class/infiniband", "expected": 8}, "not run", "not read"),
        ({"sent": {k: v for k, v in list(EIGHT.items())[:4]}, "expected": 8}, "FAIL", "counters of 4 NIC(s)"),
        ({"sent": dict.fromkeys(EIGHT, 0), "expected": 8}, "FAIL", "none of the 8 NICs sent a byte"),
        ({"sent": dict(dict.fromkeys(EIGHT, 0), **{"mlx5_0/1": 10**9}), "expected": 8}, "FAIL", "one NIC only"),
        ({"sent": dict(EIGHT, **{"mlx5_7/1": 10}), "expected": 8}, "FAIL", "7 of 8 NICs; idle"),
        ({"sent": EIGHT, "expected": 8}, "pass", "every one of 8 NICs carried traffic: 8.00 GB"),
    ],
)
def test_nic_counters_must_have_moved_on_every_nic(nics: dict | None, status: str, says: str) -> None:
    got, detail = pr.nic_verdict(nics)
    assert got == status and says in detail, detail


def test_low_latency_over_nvlink_takes_its_nic_proof_from_the_installers_verify() -> None:
    """One node with NVLink on: NVSHMEM P2P carries every byte, so the NICs are proven by the installer's
    verify (DeepEP low-latency with NVLink off, its note in status.json) or the test is not proven."""
    clean = LL_RAW.replace(
        "/dvs/p4/build/sw/rel/gpgpu/toolkit/r13.0/main_nvshmem/src/host/transport/transport.cpp:"
        "nvshmemi_transport_init:282: init failed for transport: IBGDA\n",
        "",
    )
    assert "init failed" not in clean
    note = "RDMA path: DeepEP low-latency with NVLink off, 8 ranks, mean 41.2 GB/s, 35 s, traffic on every NIC"
    proven = one(marked("low-latency", clean, {"transport": IBGDA, "ran": {"verify_rdma": note}}, {}))
    assert proven.passed, proven.problems
    assert proven.checks[1]["detail"].endswith(note)
    unproven = one(marked("low-latency", clean, {"transport": IBGDA, "ran": {"verify_rdma": "unknown"}}, {}))
    assert unproven.status == "unproven" and "--disable-nvlink" in unproven.problems[-1]
    # With NVLink off the test itself must move every NIC's counter.
    off = {"transport": IBGDA, "argv": ["python", "test_low_latency.py", "--disable-nvlink"]}
    assert one(marked("low-latency", clean, off, {"nics": {"sent": EIGHT, "expected": 8}})).passed
    assert one(marked("low-latency", clean, off, {})).status == "unproven"


def test_only_rdma_tests_need_evidence() -> None:
    assert pr.evidence_checks("intranode", None) == [] and pr.evidence_checks("nccl", None) == []
    assert [c["status"] for c in pr.evidence_checks("internode", None)] == ["not run", "not run"]

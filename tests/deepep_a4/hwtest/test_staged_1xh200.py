"""DeepEP V2 end to end on one lent GPU through the staged user space (`deepep-a4 hwtest --node-profile supported
--deepep-api v2 --nvshmem-source pip --nvshmem-version 3.4.5`, 1 x H200, 16 cores, no RDMA NIC, 2026-12-02).

The run's files are tests/fixtures/install/hw/hwtest-v2-1xh200-*: the store builder (the NCCL 2.32.3 wheel carried in
six parts, joined and checked by sha256, replacing torch's NCCL; check_one_nccl passed on the real venv), a node
staged from that store and verified, then hwtest.sh's tests on one rank: intranode not run (its kernels take 2, 4 or 8
ranks), V1's low-latency test from tests/legacy/ and V2's tests/elastic/test_ep.py with EP_DISABLE_GIN=1 (no NIC,
DeepEP PR #630). The parser reads the committed logs again and must give the committed summaries.
"""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import ROOT

HW = ROOT / "tests/fixtures/install/hw"
P = "hwtest-v2-1xh200-"


def _read(name: str) -> str:
    return (HW / f"{P}{name}").read_text()


def test_the_builder_replaced_torchs_nccl_and_the_loaded_library_check_passed() -> None:
    status = json.loads(_read("builder.status.json"))
    assert status["ready"] is True and status["phases"]["pytorch"]["state"] == "done"
    log = _read("builder.log")
    # install_nccl_v2 logs this line only after check_one_nccl printed the venv's one library.
    assert "NCCL 2.32.3 (nvidia_nccl_cu13-2.32.3-py3-none-manylinux_2_27_x86_64.whl, sha256 pinned) replaces" in log
    assert "DeepEP V2 built against NCCL 2.32.3" in log
    loaded = _read("nccl-loaded.txt")
    assert "ncclGetVersion 23203" in loaded and "torch.cuda.nccl.version() (2, 28, 9)" in loaded


def test_the_node_staged_from_the_store_and_imports_deep_ep() -> None:
    status = json.loads(_read("node.status.json"))
    assert status["ready"] is True and set(status["phases"]) == {"stage", "verify-staged"}
    assert "the staged Python imports torch and deep_ep" in _read("node.log")


def test_every_test_is_listed_passed_or_not_run_with_why() -> None:
    assert _read("tests.txt").splitlines() == [
        "GPUs 1, RDMA NICs 0",
        "legacy/test_intranode: not run: it needs 2 GPUs, this machine has 1",
        "legacy/test_low_latency: exit 0, parser exit 0",
        "elastic/test_ep: exit 0, parser exit 0",
    ]
    rows = [json.loads(line) for line in _read("tests.json").splitlines()]
    assert [(r["test"], r["status"]) for r in rows] == [
        ("intranode", "not run"),
        ("low-latency", "passed"),
        ("elastic", "passed"),
    ]
    assert rows[0]["why"] == "needs 2 GPUs, this machine has 1"


def _parse(log: str, test: str) -> dict[str, object]:
    args = [str(HW / f"{P}{log}"), "--test", test, "--processes", "1", "--summary", "--no-rdma-nics"]
    proc = subprocess.run(
        [sys.executable, str(ROOT / "scripts/bench/parse.py"), *args], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return json.loads(proc.stdout)


def test_the_parser_reads_v2s_elastic_log_all_144_cases_passed() -> None:
    got = _parse("test_elastic.log", "elastic")
    assert got == json.loads(_read("test_elastic.json"))
    assert got["status"] == "passed" and got["cases_passed"] == got["cases_total"] == 144


def test_the_parser_reads_the_one_rank_low_latency_log() -> None:
    got = _parse("test_low_latency.log", "low-latency")
    assert got == json.loads(_read("test_low_latency.json"))
    assert got["status"] == "passed"

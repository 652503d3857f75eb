"""The RDMA tests fail when NVSHMEM's IBGDA degrades: the CPU-assisted handler or NIC buffers in host memory.

NVSHMEM_IBGDA_NIC_HANDLER=gpu is not enforced by NVSHMEM: "gpu" and "auto" both go through
ibgda_check_gpu_mapping_nic_uar and fall back to a CPU handler when the GPU cannot map the NIC's doorbell
(NVIDIA/nvshmem src/modules/transport/ibgda/ibgda.cpp, nvshmemt_init, at the 3.5 head 2d7d25f). The lines below are
NVSHMEM's own, in its own formats:
- INFO (NVSHMEM_DEBUG=INFO; src/modules/transport/common/transport_common.h: "%s %d " fmt): "NIC handler will be
  CPU with gdrcopy backend." / "... CPU with host memory backend." / "... GPU.", "NIC buffer will be on host
  memory." / "... on GPU memory." (ibgda.cpp nvshmemt_init);
- WARN, printed whatever the debug level (src/include/non_abi/nvshmemx_error.h NVSHMEMI_WARN_PRINT: "WARN: " on
  stdout): "cudaHostRegister with IoMemory failed with error=%d. We may need to use a fallback path."
  (ibgda_nic_mem_gpu_map), "ibgda_alloc_and_map_qp_uar with GPU as handler failed. We may need to enter the CPU
  fallback path." (3.5, ibgda_check_gpu_mapping_nic_uar), "ibgda_nic_mem_gpu_map failed. We may need to use the CPU
  fallback path." (v3.4.5-0, ibgda_alloc_and_map_qp_uar).

On a machine with no RDMA NIC at all (the hardware test), IBGDA's init failure is expected, and `--no-rdma-nics` makes
the RDMA evidence checks n/a; a degraded path still fails there.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from scripts.bench import parse as bp
from scripts.bench import parse_records as pr
from tests.conftest import ROOT

FIX = ROOT / "tests" / "fixtures"
SRC = "/dvs/p4/build/sw/rel/gpgpu/toolkit/r13.0/main_nvshmem/src/modules/transport/ibgda/ibgda.cpp"
GPU = {"NVSHMEM_REMOTE_TRANSPORT": "ibgda", "NVSHMEM_IBGDA_NIC_HANDLER": "gpu", "NVSHMEM_DEBUG": "INFO"}
GOOD = [f"{SRC} 4859 NIC buffer will be on GPU memory.", f"{SRC} 4873 NIC handler will be GPU."]
DEGRADED = {
    "CPU handler, host memory backend": f"{SRC} 4871 NIC handler will be CPU with host memory backend.",
    "CPU handler, gdrcopy backend": f"{SRC} 4869 NIC handler will be CPU with gdrcopy backend.",
    "NIC buffer in host memory": f"{SRC} 4862 NIC buffer will be on host memory.",
    "3.5 fallback warning": "WARN: ibgda_alloc_and_map_qp_uar with GPU as handler failed. We may need to enter the "
    "CPU fallback path.",
    "3.4.5 fallback warning": "WARN: ibgda_nic_mem_gpu_map failed. We may need to use the CPU fallback path.",
    "doorbell mapping warning": "WARN: cudaHostRegister with IoMemory failed with error=801. We may need to use a "
    "fallback path.",
}


def lines(*text: str) -> list[tuple[int, str]]:
    return list(enumerate(text, 1))


def test_the_gpu_handler_with_its_buffers_on_the_gpu_passes() -> None:
    status, detail = pr.transport_verdict({"transport": GPU}, lines(*GOOD))
    assert status == pr.PASS and "GPU handler (line 2" in detail


@pytest.mark.parametrize("what", DEGRADED)
def test_a_degraded_ibgda_path_fails_the_transport_check(what: str) -> None:
    status, detail = pr.transport_verdict({"transport": GPU}, lines(GOOD[0], DEGRADED[what]))
    assert status == pr.FAIL and "line 2" in detail and "T09" in detail, detail
    # Also in a raw log (no runner record), and on a machine the hardware test says has no NIC.
    assert pr.transport_verdict(None, lines(DEGRADED[what]))[0] == pr.FAIL
    assert pr.transport_verdict(None, lines(DEGRADED[what]), rdma_nics=False)[0] == pr.FAIL


def test_a_cpu_handler_that_was_asked_for_is_no_fallback() -> None:
    asked = {**GPU, "NVSHMEM_IBGDA_NIC_HANDLER": "cpu"}  # nicHandler: cpu, with the gdrdrv module (host-install)
    status, detail = pr.transport_verdict({"transport": asked}, lines(DEGRADED["CPU handler, gdrcopy backend"]))
    assert status == pr.PASS and "CPU-assisted" in detail


def test_with_nvshmem_info_on_a_log_that_never_names_the_path_is_not_proven() -> None:
    status, detail = pr.transport_verdict({"transport": GPU}, lines("[rank 0] Dispatch + combine bandwidth: 1 GB/s"))
    assert status == pr.NOT_RUN and "NIC handler will be" in detail
    quiet = {k: v for k, v in GPU.items() if k != "NVSHMEM_DEBUG"}  # not asked to say it: as before
    assert pr.transport_verdict({"transport": quiet}, [])[0] == pr.PASS


def test_a_full_runner_segment_with_a_cpu_fallback_fails_the_test() -> None:
    clean = (
        (FIX / "bench/low_latency_h200x2.log")
        .read_text()
        .replace(
            "/dvs/p4/build/sw/rel/gpgpu/toolkit/r13.0/main_nvshmem/src/host/transport/transport.cpp:"
            "nvshmemi_transport_init:282: init failed for transport: IBGDA\n",
            "",
        )
    )
    note = "RDMA path: DeepEP low-latency with NVLink off, 2 ranks, mean 41.2 GB/s, 35 s, traffic on every NIC"
    head = '{"test": "low-latency", "argv": ["python", "test_low_latency.py"], "processes": 2, "nodes": 1, '
    head += '"transport": {"NVSHMEM_REMOTE_TRANSPORT": "ibgda", "NVSHMEM_IBGDA_NIC_HANDLER": "gpu"}, '
    head += f'"ran": {{"verify_rdma": "{note}"}}}}'
    for extra, passes in (("", True), (DEGRADED["3.5 fallback warning"] + "\n", False)):
        log = f'[runner] begin {head}\n{extra}{clean}[runner] end {{"test": "low-latency", "rc": 0}}\n'
        [res] = bp.parse_log(log)
        assert res.passed is passes, res.problems
        if not passes:
            assert any("falls back to the CPU handler" in p for p in res.problems)


# -- the hardware test: a multi-GPU machine without any RDMA NIC -------------------------------------


def parse_cli(log: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, str(ROOT / "scripts/bench/parse.py"), str(log), "--test", "low-latency", "--summary"]
    return subprocess.run([*cmd, *args], capture_output=True, text=True, check=False)


def test_without_nics_the_ibgda_init_failure_is_expected_and_the_test_passes(tmp_path: Path) -> None:
    """DeepEP's low-latency test on 2 x H200 without NICs (real output: NVSHMEM prints 'init failed for transport:
    IBGDA' once per rank, then runs over NVLink). The hardware test says the machine has no NIC; an A4 never does."""
    log = FIX / "bench/low_latency_h200x2.log"
    on_a4 = parse_cli(log, "--processes", "2")
    assert on_a4.returncode == 1 and "NVSHMEM could not start IBGDA" in on_a4.stderr
    no_nics = parse_cli(log, "--processes", "2", "--no-rdma-nics")
    assert no_nics.returncode == 0, no_nics.stderr
    assert '"status": "n/a"' in no_nics.stdout and "IBGDA init failure (line 2) is expected" in no_nics.stdout
    # A CPU fallback still fails there, as on an A4.
    degraded = tmp_path / "degraded.log"
    degraded.write_text(DEGRADED["CPU handler, host memory backend"] + "\n" + log.read_text())
    proc = parse_cli(degraded, "--processes", "2", "--no-rdma-nics")
    assert proc.returncode == 1 and "CPU-assisted NIC handler" in proc.stderr

"""hwtest.sh on a multi-GPU machine without RDMA NICs: DeepEP's tests pass there, IBGDA's init failure expected.

DeepEP's low-latency test asks NVSHMEM for IBGDA; with no HCA NVSHMEM prints "init failed for transport: IBGDA" and
runs over NVLink (real output of 2 x H200, tests/fixtures/bench/low_latency_h200x2.log). The rendered hwtest.sh counts
the RDMA devices the kernel lists (/sys/class/infiniband) and, with none, tells the parser (--no-rdma-nics). Here
the rendered script's test stage runs for real, with stand-ins for DeepEP's test scripts that print that output and
a stand-in nvidia-smi listing two GPUs.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepep_a4.cli import main as cli
from tests.conftest import ROOT

FIX = ROOT / "tests/fixtures/bench"
RUN_LOG = (FIX / "h200x2_run.log").read_text()


def _intranode_2_ranks() -> str:
    return RUN_LOG.split('"test": "intranode"}\n', 1)[1].split("[runner] end", 1)[0]


def _machine(tmp: Path, low_latency: str, gpus: int = 2) -> tuple[Path, Path, dict[str, str]]:
    out = tmp / "out"
    result = CliRunner().invoke(cli, ["hwtest", "--out", str(out), "--root", str(tmp / "root")])
    assert result.exit_code == 0, result.output
    root = tmp / "root"
    for d in ("state", "logs", "DeepEP/tests"):
        (root / d).mkdir(parents=True, exist_ok=True)
    for name, text in (("intranode", _intranode_2_ranks()), ("low_latency", low_latency)):
        (root / f"DeepEP/tests/test_{name}.py").write_text(f"import sys\nsys.stdout.write({text!r})\n")
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "python").symlink_to(sys.executable)
    smi = bin_dir / "nvidia-smi"
    smi.write_text("#!/bin/sh\n" + "".join(f"echo 'GPU {i}: NVIDIA H200 (UUID: GPU-{i})'\n" for i in range(gpus)))
    smi.chmod(0o755)
    (root / "unified-env.sh").write_text(f"export PATH={bin_dir}:$PATH\n")
    env = {"PATH": f"{bin_dir}:/usr/bin:/bin", "HOME": str(tmp)}
    return out, root, env


@pytest.mark.skipif(any(Path("/sys/class/infiniband").glob("*")), reason="this machine has RDMA devices")
def test_the_no_nic_machines_low_latency_run_passes_and_a_cpu_fallback_would_not(tmp_path: Path) -> None:
    out, root, env = _machine(tmp_path, (FIX / "low_latency_h200x2.log").read_text())
    collected = tmp_path / "collected"
    proc = subprocess.run(
        [
            "bash",
            str(out / "hwtest.sh"),
            "--store",
            str(tmp_path / "store"),
            "--node-only",
            "--collect",
            str(collected),
        ],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "no RDMA NIC under /sys/class/infiniband" in proc.stdout
    assert (root / "state/tests.txt").read_text().splitlines() == [
        "GPUs 2, RDMA NICs 0",
        "test_intranode: exit 0, parser exit 0",
        "test_low_latency: exit 0, parser exit 0",
    ]
    summary = json.loads((root / "state/test_low_latency.json").read_text())
    assert summary["status"] == "passed" and {c["status"] for c in summary["checks"]} == {"n/a"}
    # --collect: what the run leaves to commit as fixtures, copied out at exit.
    assert {p.name for p in collected.iterdir()} >= {
        "tests.txt",
        "test_intranode.json",
        "test_low_latency.json",
        "test_intranode.log",
        "test_low_latency.log",
        "unified-env.sh",
    }
    # The same machine, but NVSHMEM took the CPU-assisted handler: the parser fails it even here.
    cpu = "/src/modules/transport/ibgda/ibgda.cpp 4871 NIC handler will be CPU with host memory backend.\n"
    out, root, env = _machine(tmp_path / "cpu", cpu + (FIX / "low_latency_h200x2.log").read_text())
    proc = subprocess.run(
        ["bash", str(out / "hwtest.sh"), "--store", str(tmp_path / "store"), "--node-only"],
        capture_output=True,
        text=True,
        env={**env, "HWTEST_TEST_TIMEOUT_S": "60"},
        check=False,
        timeout=120,
    )
    assert proc.returncode == 1 and "test_low_latency: exit 0, parser exit 1" in proc.stdout


@pytest.mark.skipif(any(Path("/sys/class/infiniband").glob("*")), reason="this machine has RDMA devices")
def test_one_gpu_runs_low_latency_on_one_rank_and_says_why_intranode_did_not_run(tmp_path: Path) -> None:
    # The real one-rank run's output (1 x H200, tests/fixtures/install/hw/hwtest-v2-1xh200-test_low_latency.log).
    one_rank = (ROOT / "tests/fixtures/install/hw/hwtest-v2-1xh200-test_low_latency.log").read_text()
    out, root, env = _machine(tmp_path, one_rank, gpus=1)
    proc = subprocess.run(
        ["bash", str(out / "hwtest.sh"), "--store", str(tmp_path / "store"), "--node-only"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (root / "state/tests.txt").read_text().splitlines() == [
        "GPUs 1, RDMA NICs 0",
        "test_intranode: not run: it needs 2 GPUs, this machine has 1",
        "test_low_latency: exit 0, parser exit 0",
    ]
    rows = [json.loads(line) for line in (root / "state/tests.json").read_text().splitlines()]
    assert [(r["test"], r["status"]) for r in rows] == [("intranode", "not run"), ("low-latency", "passed")]

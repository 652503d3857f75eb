"""`deepep-a4 hwtest --deepep-api v2`: the hardware test installs DeepEP V2 (dd758ca) with the NCCL wheel of the
machine's CUDA major from the store, and runs V2's tests where dd758ca keeps them (tests/legacy/test_intranode.py,
tests/legacy/test_low_latency.py, tests/elastic/test_ep.py)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from components.config import upstream, versions
from deepep_a4.hwtest import command as hwtest


def test_v2_renders_its_ref_its_nccl_and_its_tests(tmp_path: Path) -> None:
    out = tmp_path / "hw"
    args = ["--out", str(out), "--deepep-api", "v2", "--nvshmem-source", "pip", "--nvshmem-version", "3.4.5"]
    result = CliRunner().invoke(hwtest.command, args)
    assert result.exit_code == 0, result.output
    config = (out / "installer/config.sh").read_text()
    _, wheel, _ = versions.nccl_wheel(versions.NCCL_V2_DEFAULT, "cu130")  # --cuda 13.0, the default
    for line in (
        f"DEEPEP_REF={upstream.DEEPEP_V2}",
        f"DEEPEP_COMMIT={upstream.DEEPEP_V2}",
        "DEEPEP_API=v2",
        "NCCL_WHEEL=nvidia-nccl-cu13",
        f"NCCL_WHEEL_FILE={wheel}",
        f"DEEPEP_FMT_COMMIT={upstream.DEEPEP_V2_FMT}",
    ):
        assert line in config.splitlines(), line
    script = (out / hwtest.HWTEST_SH).read_text()
    tests = "legacy/test_intranode:intranode:2 legacy/test_low_latency:low-latency:1 elastic/test_ep:elastic:1"
    assert tests in script


def test_v1_stays_as_it_was(tmp_path: Path) -> None:
    out = tmp_path / "hw"
    result = CliRunner().invoke(hwtest.command, ["--out", str(out), "--nvshmem-version", "3.4.5"])
    assert result.exit_code == 0, result.output
    config = (out / "installer/config.sh").read_text()
    assert "DEEPEP_API" not in config and f"DEEPEP_REF={upstream.DEEPEP_NVSHMEM35_FIXES}" in config.splitlines()
    assert "test_intranode:intranode:2 test_low_latency:low-latency:1" in (out / hwtest.HWTEST_SH).read_text()

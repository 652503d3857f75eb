"""The hardware test with PyTorch from the store (docs/store.md): the committed H100 runs meet the targets,
and `deepep-a4 hwtest --sources` names every missing source at once, by the option's real name."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from components.config import upstream
from deepep_a4.cli import main as cli
from deepep_a4.store import sources as store_tool
from tests.conftest import ROOT

HW = ROOT / "tests/fixtures/install/hw"
WARM_TOTAL_S = 60.0
PYTORCH_WARM_S = 30.0


def status(name: str) -> dict:
    return json.loads((HW / f"hwtest-store-{name}.status.json").read_text())


@pytest.mark.parametrize("source", ["source", "pip"])
def test_the_warm_h100_run_is_ready_with_pytorch_from_the_store_within_a_minute(source: str) -> None:
    warm = status(f"3.4.5-{source}-warm")
    assert warm["ready"] and warm["error"] is None
    phases = warm["phases"]
    assert "from the store" in phases["pytorch"]["note"], phases["pytorch"]
    assert phases["pytorch"]["seconds"] <= PYTORCH_WARM_S
    assert sum(p["seconds"] for p in phases.values()) <= WARM_TOTAL_S
    for phase in ("gdrcopy", "deepep"):
        assert "from the store" in phases[phase]["note"]
    log = (HW / f"hwtest-store-3.4.5-{source}-warm.log").read_text()
    # Restored at another path than the builder's: a fresh venv, not the machine's PyTorch as installed.
    assert "PyTorch environment built at /tmp/builder-" in log and "restored at /tmp/deepep-" in log
    assert "as installed" not in phases["pytorch"]["note"]


def test_the_cold_run_built_what_the_warm_run_restored() -> None:
    for source in ("source", "pip"):
        cold, warm = status(f"3.4.5-{source}-cold"), status(f"3.4.5-{source}-warm")
        assert cold["ready"]
        assert "built and published" in cold["phases"]["deepep"]["note"]
        key = warm["phases"]["pytorch"]["note"].split()[1]
        assert key in (HW / f"hwtest-store-3.4.5-{source}-builder.log").read_text()


@pytest.mark.parametrize("run", ["node-1", "node-3"])
def test_the_staged_h100_node_is_ready_from_the_builders_parts_within_a_minute(run: str) -> None:
    """nodeProfile=supported on the H100: the builder packed the parts, an emptied root staged them back."""
    node = json.loads((HW / f"hwtest-staged-{run}.status.json").read_text())
    assert node["ready"] and node["error"] is None
    assert list(node["phases"]) == ["stage", "verify-staged"]  # nothing built, nothing installed on the host
    assert sum(p["seconds"] for p in node["phases"].values()) <= WARM_TOTAL_S
    assert "pytorch" in node["phases"]["stage"]["note"]
    builder = json.loads((HW / "hwtest-staged-builder.status.json").read_text())
    assert (
        builder["ready"]
        and "packed python pytorch nvshmem deepep rdma-core" in builder["phases"]["pack-userspace"]["note"]
    )
    log = (HW / "hwtest-staged-node.log").read_text()
    packed = (HW / "hwtest-staged-builder.log").read_text()
    # The venv the node restored is the one the builder packed, as 16 parts.
    venv = next(w for w in packed.split() if w.startswith("/tmp/hw-staged/store/userspace/pytorch/"))
    assert f"restored from {venv}: 16 parts" in log
    for ok in ("loads staged libraries", "loads the staged mlx5 provider", "imports torch and deep_ep"):
        assert ok in log
    assert "Dispatch + combine bandwidth" in (HW / "hwtest-staged-low-latency.log").read_text()


def test_hwtest_names_every_missing_source_at_once(tmp_path: Path) -> None:
    empty = tmp_path / "sources"  # absent: the command creates it
    result = CliRunner().invoke(
        cli, ["hwtest", "--out", str(tmp_path / "out"), "--nvshmem-version", "3.5.1", "--sources", str(empty)]
    )
    assert result.exit_code != 0
    assert empty.is_dir()
    wanted = store_tool.sources_of("2.5.1", "3.5.1", upstream.DEEPEP_NVSHMEM35_FIXES, pr466=False)
    assert len(wanted) == 3
    for src in wanted:
        assert src.name in result.output
    assert "--sources" in result.output and "--from" not in result.output
    assert "https://github.com/NVIDIA/gdrcopy" in result.output
    # NVSHMEM 3.5.1 is no release: the message says why there is no URL and how to make the file.
    assert "no release archive" in result.output and "git archive" in result.output
    assert not (tmp_path / "out" / "hwtest.sh").exists(), "nothing is rendered while sources are missing"


def test_hwtest_with_every_source_fills_its_store(tmp_path: Path) -> None:
    sources = tmp_path / "sources"
    sources.mkdir()
    for src in store_tool.sources_of("2.5.1", "", upstream.DEEPEP_NVSHMEM35_FIXES, pr466=False):
        (sources / src.name).write_bytes(b"x")
    out = tmp_path / "out"
    args = ["hwtest", "--out", str(out), "--nvshmem-version", "3.4.5", "--nvshmem-source", "pip"]
    result = CliRunner().invoke(cli, [*args, "--sources", str(sources)])
    assert result.exit_code == 0, result.output
    assert "NVSHMEM_SOURCE=pip" in (out / "installer/config.sh").read_text()
    assert sorted(p.name for p in (out / "store/sources").iterdir()) == sorted(p.name for p in sources.iterdir())


def test_store_fill_creates_its_from_folder_and_names_every_missing_file(tmp_path: Path) -> None:
    folder = tmp_path / "downloaded"
    args = ["store", "fill", "--stack", "gce-b200", "--store", str(tmp_path / "s"), "--from", str(folder)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code != 0 and folder.is_dir()
    assert result.output.count("download it from https://") >= 3


def test_hwtest_supported_renders_the_builder_and_a_node_that_agree_on_the_parts(tmp_path: Path) -> None:
    out = tmp_path / "hw"
    result = CliRunner().invoke(cli, ["hwtest", "--out", str(out), "--node-profile", "supported", "--root", "/tmp/r"])
    assert result.exit_code == 0, result.output
    build, node = (out / "installer/config.sh").read_text(), (out / "node/config.sh").read_text()
    assert "PHASES=(preflight gdrcopy nvshmem pytorch deepep pack-userspace)" in build
    assert "PHASES=(stage verify-staged)" in node and not list((out / "node/phases").glob("*-nvshmem.sh"))
    objects = [line for line in build.splitlines() if line.startswith("  [") and "userspace/" in line]
    assert len(objects) == 5 and all(line in node.splitlines() for line in objects)
    script = (out / "hwtest.sh").read_text()
    assert 'rm -rf "$root"' in script and "--node-only" in script  # the node starts from an empty root

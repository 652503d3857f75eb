"""Where the offline plan may write: it replaces its folder, so it must never replace someone's files."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path
from typing import Any

import pulumi
import pytest

from deepep_a4.plan import command as plan
from deepep_a4.plan import engine as plan_engine


def test_a_folder_with_other_files_is_refused_and_left_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    assert plan.main(["--stack", "gce-b200", "--out", str(tmp_path), "--quiet"]) == 2
    assert notes.read_text() == "mine" and sorted(p.name for p in tmp_path.iterdir()) == ["notes.txt"]
    assert "holds notes.txt, which is not a plan" in capsys.readouterr().err


def test_a_file_or_a_path_below_a_file_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    afile = tmp_path / "afile"
    afile.write_text("x")
    assert plan.main(["--stack", "gce-b200", "--out", str(afile), "--quiet"]) == 2
    assert plan.main(["--stack", "gce-b200", "--out", str(afile / "below"), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"--out {afile}: is not a folder" in err and f"{afile} is not a folder" in err
    assert afile.read_text() == "x"


def test_an_earlier_plan_is_replaced(tmp_path: Path) -> None:
    out = tmp_path / "plan"
    assert plan.main(["--stack", "gce-b200", "--out", str(out), "--quiet"]) == 0
    stale = out / "files" / "stale.txt"
    stale.write_text("from an older plan")
    assert plan.main(["--stack", "gce-b200", "--out", str(out), "--quiet"]) == 0
    assert not stale.exists() and (out / "plan.json").is_file()


def test_a_component_refusal_is_a_message_not_a_traceback(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: object) -> None:
        raise pulumi.RunError("the rendered startup script is 300000 bytes; GCE allows 262144 per metadata value")

    monkeypatch.setattr(plan_engine, "run_program", refuse)
    out = tmp_path / "plan"
    assert plan.main(["--stack", "gce-b200", "--out", str(out), "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "error: stack 'gce-b200': the rendered startup script is 300000 bytes" in err
    assert "Traceback" not in err and not out.exists()


def test_a_stack_file_whose_config_is_not_a_mapping_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "stacks").mkdir()
    (tmp_path / "stacks" / "Pulumi.odd.yaml").write_text("config: [1, 2]\n")
    monkeypatch.setattr(plan_engine, "ROOT", tmp_path)
    assert plan.main(["--stack", "odd", "--out", str(tmp_path / "out")]) == 2
    assert "`config:` must be a mapping of deepep-a4:<key>: <value>, not a list" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--poll", "--install-timeout"])
@pytest.mark.parametrize("value", ["-1", "0", "soon"])
def test_run_benchmark_refuses_a_wait_that_is_not_positive_before_anything_runs(
    flag: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from deepep_a4.run import command as run_benchmark

    def never(*_: object) -> Any:
        raise AssertionError("nothing may be created for a bad argument")

    assert run_benchmark.main(["--stack", "gce-b200", flag, value], which=never, make_stack=never) == 2
    assert f"Invalid value for '{flag}'" in capsys.readouterr().err


def test_printout_counts_the_files_written_shows_what_is_installed_and_flags_the_placeholder(tmp_path: Path) -> None:
    from deepep_a4.plan import command as plan_tool

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert plan_tool.main(["--stack", "gke-b200-ubuntu", "--out", str(tmp_path / "p")]) == 0
    text = out.getvalue()
    written = sum(1 for p in (tmp_path / "p" / "files").rglob("*") if p.is_file())
    assert text.rstrip().splitlines()[-1].split(", ")[1].startswith(f"{written} rendered files")
    for what in ("driver", "DOCA-OFED", "CUDA", "GDRCopy", "NVSHMEM", "PyTorch", "DeepEP"):
        assert f"\n  {what} " in text
    assert "NVSHMEM    3.3.9 (built from source, IBGDA)" in text and "(no PR #466)" in text
    assert "WARNING: project deepep-a4-demo is the stack files' placeholder" in text
    # No value is cut inside a word: long lists are cut between items.
    assert "-vpc-roce" in text and "..." not in text.replace("... (+", "")
    doc = json.loads((tmp_path / "p" / "plan.json").read_text())
    assert doc["pulumiProject"] == "deepep-a4" and doc["gcpProject"] == "deepep-a4-demo"
    assert doc["gcpProjectIsPlaceholder"] is True and doc["installs"]["DeepEP"].startswith("v1.2.1")


def test_kubernetes_manifests_are_numbered_in_apply_order(tmp_path: Path) -> None:
    from deepep_a4.plan import command as plan_tool

    with contextlib.redirect_stdout(io.StringIO()):
        assert plan_tool.main(["--stack", "gke-b200", "--out", str(tmp_path / "p"), "--quiet"]) == 0
    kinds = [p.name.split("-")[1] for p in sorted((tmp_path / "p" / "files" / "k8s").glob("*.yaml"))]
    order = [k.lower() for k in plan_tool.APPLY_ORDER]
    assert kinds[0] == "namespace" and kinds[-1] == "job"
    assert [order.index(k) for k in kinds] == sorted(order.index(k) for k in kinds)


def test_the_install_list_names_the_images_driver_and_the_gib_plugin_each_platform_installs() -> None:
    from components import config
    from components.config import keys
    from components.gke import gib as gke_gib
    from components.node import installer
    from tests.conftest import stack_config

    accel = "projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accelerator-2404-amd64-with-nvidia-580"

    def cfg(stack: str, **overrides: Any) -> config.StackConfig:
        return config.parse(plan_engine.project_keys(stack_config(stack, **overrides)), stack)

    gce = cfg("gce-b200-ubuntu", gceImage=accel, nvidiaDriverVersion="580", useDocaOfed=False, hcaPrefix="rocep")
    listed = dict(plan.install_list(gce))
    assert listed["driver"].startswith("the image's NVIDIA 580")
    assert listed["DOCA-OFED"] == "no (inbox rdma-core)"
    assert listed["gIB NCCL"] == f"nccl-gib {installer.NCCL_GIB_VERSION} (apt, held)"
    gke = dict(plan.install_list(cfg("gke-b200")))
    assert gke["gIB NCCL"] == f"{gke_gib.GIB_IMAGE} (DaemonSet; by the digest looked up at the first deploy)"
    off = dict(plan.install_list(cfg("gke-b200", ncclGib=False)))
    assert off["gIB NCCL"].startswith("no (ncclGib=false")
    # The supported profile lists what the image brings and what is staged, and no host install.
    staged = dict(plan.install_list(cfg("gke-b200")))
    assert staged["node image"] == "COS_CONTAINERD (GKE)" and "DOCA-OFED" not in staged
    assert staged["staged by"] == keys.STAGING_IMAGE  # pinned by digest: nothing to flag
    tagged = dict(plan.install_list(cfg("gke-b200", installerImage="buildpack-deps:noble", allowUnpinnedImages=True)))
    assert tagged["staged by"] == "buildpack-deps:noble (unpinned tag: pin a digest)"
    image = dict(plan.install_list(cfg("gce-b200")))
    assert image["node image"] == "ubuntu-accelerator-2404-amd64-with-nvidia-580"


def test_an_out_folder_that_cannot_be_created_is_refused_before_the_plan_runs(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Permission bits pass for root; /proc refuses any new folder, as a read-only mount would.
    def no_plan(*_: Any) -> None:
        raise AssertionError("the plan ran although --out cannot be written")

    monkeypatch.setattr(plan_engine, "run_program", no_plan)
    assert plan.run("gke-b200", Path("/proc/deepep-a4-plan"), quiet=True) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out /proc/deepep-a4-plan: cannot create a folder in /proc") and "\n" == err[-1]


@pytest.mark.parametrize(("stack", "made_up"), [("gke-b200", "gkeVersion"), ("gce-b200", "gceImage")])
def test_the_plan_marks_made_up_values_as_stand_ins_and_states_deadline_and_bring_up(
    stack: str, made_up: str, tmp_path: Path
) -> None:
    from deepep_a4.plan import command as plan_tool
    from deepep_a4.plan import engine

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert plan_tool.main(["--stack", stack, "--out", str(tmp_path / "p")]) == 0
    lines = out.getvalue().splitlines()
    listing = next(i for i, line in enumerate(lines) if line.startswith(("Installed on every node", "Staged on every")))
    outputs = lines[lines.index("Outputs:") + 1 : listing]
    label = f"({engine.STAND_IN})"
    marked = {line.split(":")[0].strip() for line in outputs if engine.STAND_IN in line}
    assert made_up in marked and "deadline" in marked
    for line in outputs:  # every value that holds something only the mocks invent carries the label
        assert not engine.is_stand_in(line) or engine.STAND_IN in line, line
    assert any(line.startswith(f"  {made_up}: ") and line.endswith(label) for line in outputs)
    profile = "host-install" if stack.endswith("-ubuntu") else "supported"  # the examples' nodeProfile
    assert any(line.startswith(f"Bring-up per node ({profile}): ") for line in lines)
    assert any(line.startswith("Deadline: ") and engine.STAND_IN in line for line in lines)
    saved = json.loads((tmp_path / "p" / "plan.json").read_text())
    assert made_up in saved["standIns"] and saved["bringUpSeconds"]["profile"] == profile


def test_only_mock_made_values_are_stand_ins() -> None:
    from deepep_a4.plan import engine

    assert engine.is_stand_in(engine.MOCK_ENGINE_VERSIONS["defaultClusterVersion"])
    assert engine.is_stand_in({"image": f"projects/x/global/images/{next(iter(engine.MOCK_IMAGES.values()))}"})
    assert engine.is_stand_in("my-family" + engine.INVENTED_IMAGE_SUFFIX)
    assert not engine.is_stand_in("asia-southeast1-b") and not engine.is_stand_in(["deepep-gke-b200-rdma-0"])

"""`deepep-a4 plan` end to end: the files it writes, its errors, its speed."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from deepep_a4.plan import command as plan
from deepep_a4.plan import engine as plan_engine
from tests.conftest import PlanCommand

PLAN = [sys.executable, "-m", "deepep_a4.plan.command"]


def run_plan(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*PLAN, *args], capture_output=True, text=True, timeout=120, check=False)


@pytest.mark.parametrize("stack", plan_engine.available_stacks())
def test_plan_of_every_stack_writes_plan_json(stack: str, tmp_path: Path, plan_command: PlanCommand) -> None:
    out = tmp_path / "plan"
    proc, elapsed = plan_command("deepep_a4.plan.command", "--stack", stack, out=out)
    assert proc.returncode == 0, proc.stderr
    assert elapsed < 30, f"plan of {stack} took {elapsed:.1f}s"
    doc = json.loads((out / "plan.json").read_text())
    assert doc["stack"] == stack
    assert doc["project"] == "deepep-a4"
    assert set(doc) >= {"stack", "project", "resources", "outputs"}
    for resource in doc["resources"]:
        assert set(resource) >= {"type", "name", "parent", "inputs"}
    assert "Plan of stack" in proc.stdout
    assert "gcp:compute/network:Network" in proc.stdout


def test_gke_plan_shows_roce_vpc_eight_subnets_gvnic_vpcs_router_nat(tmp_path: Path, plan_command: PlanCommand) -> None:
    proc, _ = plan_command("deepep_a4.plan.command", "--stack", "gke-b200", out=tmp_path)
    assert proc.returncode == 0, proc.stderr
    resources = json.loads((tmp_path / "plan.json").read_text())["resources"]
    networks = {r["name"]: r["inputs"] for r in resources if r["type"] == "gcp:compute/network:Network"}
    roce = [n for n in networks.values() if str(n.get("networkProfile", "")).endswith("-vpc-roce")]
    assert len(roce) == 1
    assert roce[0]["mtu"] == 8896
    rdma_subnets = [
        r
        for r in resources
        if r["type"] == "gcp:compute/subnetwork:Subnetwork" and r["inputs"]["network"] == "a4-rdma-id"
    ]
    assert len(rdma_subnets) == 8
    assert len(networks) - len(roce) == 2
    types = {r["type"] for r in resources}
    assert {"gcp:compute/router:Router", "gcp:compute/routerNat:RouterNat"} <= types


def test_plan_inputs_are_camel_case(tmp_path: Path, plan_command: PlanCommand) -> None:
    assert plan_command("deepep_a4.plan.command", "--stack", "gke-b200", out=tmp_path)[0].returncode == 0
    resources = json.loads((tmp_path / "plan.json").read_text())["resources"]
    subnet = next(r for r in resources if r["name"] == "a4-host" and r["type"].endswith("Subnetwork"))
    assert "ipCidrRange" in subnet["inputs"]
    assert "ip_cidr_range" not in subnet["inputs"]


def test_bad_stack_exits_2_names_every_wrong_key_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stack = "test-broken"
    (tmp_path / "stacks").mkdir()  # a project of its own: the repo's stacks/ folder stays as it is
    broken = tmp_path / "stacks" / f"Pulumi.{stack}.yaml"
    broken.write_text(
        "config:\n"
        "  deepep-a4:platform: aks\n"
        "  deepep-a4:project: my-gpu-project\n"
        "  deepep-a4:zone: us-central1-a\n"
        "  deepep-a4:nodeCount: 0\n"
        "  deepep-a4:cudaVersion: '12.4'\n"
        "  deepep-a4:nodeCuont: 3\n"
    )
    monkeypatch.setattr(plan_engine, "ROOT", tmp_path)
    out = tmp_path / "out"
    assert plan.main(["--stack", stack, "--out", str(out)]) == 2
    said = capsys.readouterr()
    for key in ("platform", "zone", "nodeCount", "cudaVersion", "nodeCuont"):
        assert f"deepep-a4:{key} = " in said.err
    assert "Traceback" not in said.err
    assert not out.exists()
    assert said.out == ""


def test_unknown_stack_exits_2_and_lists_stacks(tmp_path: Path) -> None:
    proc = run_plan("--stack", "nope", "--out", str(tmp_path / "x"))
    assert proc.returncode == 2
    assert "gke-b200" in proc.stderr
    assert not (tmp_path / "x").exists()


def test_failed_program_leaves_no_half_written_plan(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from deepep_a4.plan import command as plan

    out = tmp_path / "plan"
    out.mkdir()
    (out / "plan.json").write_text("{}")

    def explode(*_args: object, **_kwargs: object) -> None:
        raise RuntimeError("disk full")

    monkeypatch.setattr(plan, "kubernetes_manifests", explode)
    result, _ = plan_engine.run_program("gke-b200", plan_engine.read_stack_config("gke-b200"))
    with pytest.raises(RuntimeError):
        plan.write_plan(result, out)
    assert (out / "plan.json").read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == ["plan"]

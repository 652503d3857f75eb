"""A handful of tests/components/config/test_mistakes.py's mistakes through the real commands a new user runs on a
copy of an example stack: `deepep-a4 plan` (and for a mistyped nodeProfile also `cost` and `store build`) exits
non-zero with one line naming the key and the value, no traceback, and writes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT
from tests.deepep_a4.plan.test_refusals import GCE, GKE, GKE_HOST, NS, project

CASES: list[tuple[str, dict[str, Any], str, str]] = [
    (GKE, {"nodeProfile": "Supported"}, "nodeProfile", "'Supported'"),
    (GKE, {"platform": "GKE"}, "platform", "'GKE'"),
    (GKE, {"intranodeExperts": 100}, "intranodeExperts", "100"),
    (GKE_HOST, {"ttl": "20m"}, "ttl", "'20m'"),
    (GKE, {"artifactStore": "gs://my-google-store/deepep-a4"}, "artifactStore", "my-google-store"),
    (GCE, {"gceImage": "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-arm64"}, "gceImage", "arm64"),
    (GKE, {"gkeDnsEndpoint": False}, "gkeDnsEndpoint", "False"),
    (GKE, {"nvshmemTrafficClass": 13}, "nvshmemTrafficClass", "13"),
]


def run(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "deepep_a4.cli", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def one_line(proc: subprocess.CompletedProcess[str], key: str, value: str) -> str:
    assert proc.returncode != 0
    assert "Traceback" not in proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert f"{NS}{key} = " in lines[0] and value in lines[0], lines[0]
    return lines[0]


@pytest.mark.parametrize(("example", "changes", "key", "value"), CASES)
def test_plan_refuses_the_mistake_in_one_line(
    tmp_path: Path, example: str, changes: dict[str, Any], key: str, value: str
) -> None:
    out = tmp_path / "plan-out"
    root = project(tmp_path, example, changes)
    one_line(run(root, "plan", "--stack", "stacks/Pulumi.mine.yaml", "--out", str(out)), key, value)
    assert not out.exists()


@pytest.mark.parametrize("typo", ["Supported", "host_install"])
def test_a_mistyped_node_profile_is_one_line_in_cost_and_store_build(tmp_path: Path, typo: str) -> None:
    root = project(tmp_path, GKE, {"nodeProfile": typo, "artifactStore": "gs://my-own-artifacts/deepep-a4"})
    for args in (("cost", "--stack", "mine"), ("store", "build", "--stack", "mine", "--dry-run")):
        line = one_line(run(root, *args), "nodeProfile", repr(typo))
        assert "did you mean" in line


def test_a_key_outside_config_is_refused_by_the_plan_and_by_the_program_at_up(tmp_path: Path) -> None:
    """Pulumi reads a stack file into ProjectStack (pulumi/pulumi sdk/go/common/workspace/project.go:
    secretsprovider, encryptedkey, encryptionsalt, config, environment) and drops any other top-level key, so the
    program that `pulumi up` runs reads its own stack file and refuses one."""
    import runpy

    import pulumi

    from deepep_a4.plan import engine as plan_engine
    from tests.conftest import stack_config

    root = project(tmp_path, GKE, {}, extra_lines=f"{NS}ttl: 4h\n")  # written at the left margin, outside config:
    out = tmp_path / "plan-out"
    proc = run(root, "plan", "--stack", "stacks/Pulumi.mine.yaml", "--out", str(out))
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert f"top-level key '{NS}ttl' is outside `config:`" in proc.stderr and not out.exists()

    def program() -> None:
        runpy.run_path(str(root / "__main__.py"), run_name="__main__")

    with pytest.raises(pulumi.RunError) as err:
        plan_engine.run_program("mine", stack_config(GKE, project="my-gpu-project"), program=program)
    assert f"top-level key '{NS}ttl' is outside `config:`" in str(err.value) and "\n" not in str(err.value)

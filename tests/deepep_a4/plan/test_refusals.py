"""Every config mistake a new user made, through the real command: one error line naming key, value and what
is allowed, a non-zero exit, no traceback, and no --out folder. A versionOverrides entry is the way out of
the tables: the plan then says untested and the installer fetches the named URL and checks its digest."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ROOT

GKE = "gke-b200"
# The field reports' GKE path: the keys of the host install (driver, DOCA-OFED, Ubuntu's GKE floor) belong there.
GKE_HOST = "gke-b200-ubuntu"
GCE = "gce-b200"
NS = "deepep-a4:"
# A digest for rendering tests only: the installer would refuse the real download unless it matched.
SHA = "ab" * 32
GDRCOPY_26 = "https://github.com/NVIDIA/gdrcopy/archive/refs/tags/v2.6.tar.gz"


def project(tmp_path: Path, example: str, changes: dict[str, Any], extra_lines: str = "") -> Path:
    """A project folder like the user's: Pulumi.yaml, the program, and stacks/Pulumi.mine.yaml made from an
    example stack with `changes` (None removes a key) and `extra_lines` appended under `config:`."""
    root = tmp_path / "proj"
    (root / "stacks").mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    (root / "__main__.py").symlink_to(ROOT / "__main__.py")
    cfg = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{example}.yaml").read_text())["config"]
    cfg[f"{NS}project"] = "my-gpu-project"
    for key, value in changes.items():
        if value is None:
            cfg.pop(NS + key, None)
        else:
            cfg[NS + key] = value
    text = yaml.safe_dump({"config": cfg}, sort_keys=False) + extra_lines
    (root / "stacks" / "Pulumi.mine.yaml").write_text(text)
    return root


def plan(root: Path, out: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "deepep_a4.cli", "plan", "--stack", "stacks/Pulumi.mine.yaml", "--out", str(out)],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def override(component: str, version: str, url: str, sha256: str = SHA) -> str:
    return json.dumps({component: {"version": version, "url": url, "sha256": sha256}})


# (example, changes, extra lines, key, value as printed, what is allowed)
CASES = [
    (GKE, {"torchVersion": "2.10.0+cu126"}, "", "torchVersion", "'2.10.0+cu126'", "use a +cu129 build"),
    (GKE, {"torchVersion": "2.99.0+cu129"}, "", "torchVersion", "'2.99.0+cu129'", "cu129 builds: 2.8.0, 2.10.0"),
    (GKE, {"torchVersion": "2.99.0"}, "", "torchVersion", "'2.99.0'", "must name its CUDA wheel variant"),
    (GKE_HOST, {"nvidiaDriverVersion": "550.163.01"}, "", "nvidiaDriverVersion", "'550.163.01'", "570 branch or newer"),
    (GKE_HOST, {"docaOfedVersion": "9.9.9"}, "", "docaOfedVersion", "'9.9.9'", "DOCA-OFED release the project knows"),
    (GKE, {"gdrcopyVersion": "2.9.9"}, "", "gdrcopyVersion", "'2.9.9'", "GDRCopy release the project knows (2.0"),
    (GKE, {"cudaVersion": "12.10"}, "", "cudaVersion", "'12.10'", "CUDA toolkit the project knows"),
    (GKE, {"zone": "asia-southeast1-a"}, "", "zone", "'asia-southeast1-a'", "only in asia-northeast1-b"),
    (GCE, {"gkeVersion": "1.33.5-gke.1162000"}, "", "gkeVersion", "'1.33.5-gke.1162000'", "only on platform gke"),
    (GCE, {"gkeDeletionProtection": True}, "", "gkeDeletionProtection", "True", "only on platform gke"),
    (GKE, {"gceImage": "projects/p-123456/global/images/x"}, "", "gceImage", "'projects/", "only on platform gce"),
    (GKE, {"terminationAction": "DELETE"}, "", "terminationAction", "'DELETE'", "only on platform gce"),
    (GKE, {}, f'  {NS}cudaVersion: "12.8"\n', "cudaVersion", "'12.9' (line", "a key may be written once"),
    (GKE, {"cudaVerison": "12.9"}, "", "cudaVerison", "'12.9'", "did you mean cudaVersion?"),
    (
        GKE,
        {"provisioning": "reservation", "reservationName": "my-a4", "placement": "compact"},
        "",
        "placement",
        "'compact'",
        "reservation capacity comes placed",
    ),
    (GKE, {"artifactStore": "gs://my-bucket"}, "", "artifactStore", "'gs://my-bucket'", "must be gs://BUCKET/PREFIX"),
    (
        GKE,
        {"gkePublicEndpoint": True, "gkeAuthorizedNetworks": ["0.0.0.0/1", "128.0.0.0/1"]},
        "",
        "gkeAuthorizedNetworks",
        "['0.0.0.0/1', '128.0.0.0/1']",
        "together cover 0.0.0.0/0",
    ),
    (GKE, {"deepepRef": "v9.9.9"}, "", "deepepRef", "'v9.9.9'", "not a DeepEP tag or commit the project knows"),
    (GKE_HOST, {"gkeVersion": "1.32.4-gke.1236000"}, "", "gkeVersion", "'1.32.4-gke.1236000'", "1.32.7-gke.1067000"),
    (
        GKE,
        {"gdrcopyVersion": "2.7", "versionOverrides": override("gdrcopy", "2.7", GDRCOPY_26, "XYZ")},
        "",
        "versionOverrides.gdrcopy.sha256",
        "'XYZ'",
        "64 lower-case hex digits",
    ),
    (
        GKE,
        {"gdrcopyVersion": "2.7", "versionOverrides": override("gdrcopy", "2.7", "http://example.com/g.tgz")},
        "",
        "versionOverrides.gdrcopy.url",
        "'http://example.com/g.tgz'",
        "https://",
    ),
]


@pytest.mark.parametrize(("example", "changes", "extra", "key", "value", "allowed"), CASES)
def test_each_mistake_is_one_line_naming_key_value_and_what_is_allowed(
    tmp_path: Path, example: str, changes: dict[str, Any], extra: str, key: str, value: str, allowed: str
) -> None:
    out = tmp_path / "plan-out"
    proc = plan(project(tmp_path, example, changes, extra), out)
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    line = lines[0]
    assert line.startswith("error: ") and f"{NS}{key}" in line and value in line and allowed in line, line
    assert "Traceback" not in proc.stderr + proc.stdout
    assert not out.exists()


def test_an_override_is_installed_as_named_and_the_plan_says_untested(tmp_path: Path) -> None:
    changes = {"gdrcopyVersion": "2.7", "versionOverrides": override("gdrcopy", "2.7", GDRCOPY_26)}
    out = tmp_path / "plan-out"
    proc = plan(project(tmp_path, GKE, changes), out)
    assert proc.returncode == 0, proc.stderr
    assert "UNTESTED: gdrcopy 2.7 from versionOverrides" in proc.stdout
    doc = json.loads((out / "plan.json").read_text())
    assert doc["untested"] == [{"component": "gdrcopy", "version": "2.7", "url": GDRCOPY_26, "sha256": SHA}]
    config_sh = next(out.glob("files/**/config.sh")).read_text()
    assert f"GDRCOPY_URL={GDRCOPY_26}" in config_sh.replace("'", "")
    assert f"[gdrcopy-2.7.tar.gz]={SHA}" in config_sh


def test_a_plan_without_overrides_is_not_untested(tmp_path: Path) -> None:
    out = tmp_path / "plan-out"
    proc = plan(project(tmp_path, GKE, {}), out)
    assert proc.returncode == 0, proc.stderr
    assert "UNTESTED" not in proc.stdout
    assert json.loads((out / "plan.json").read_text())["untested"] == []

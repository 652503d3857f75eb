"""`deepep-a4 rehearse --stack gke-b200|gce-b200` through the Pulumi CLI stand-in (tests/fixtures/pulumi_standin.py,
driven by the real Automation API) up to the first Google call: the preflight, `<stack>-rehearsal` created from
the stack's config plus `rehearsal: true`, the preview under the policy pack, then the Google reads, then `up`;
the teardown (`destroy --refresh`, `stack rm`) runs although the probes could not be read, and the checklist says
so. Google's side is a recording fake here (the first call that would leave this machine)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from deepep_a4.rehearse import checklist as checklists
from deepep_a4.rehearse import command
from tests.conftest import ROOT
from tests.deepep_a4.run.test_preflight import Cli, cli  # noqa: F401 - the stand-in's fixture

MANIFEST = "a" * 64


class Reads:
    """deepep_a4/cloud/capacity_reads.py's three functions, recording each call into the stand-in's call log."""

    def __init__(self, log: Path):
        self.log = log

    def _mark(self, what: str) -> None:
        with self.log.open("a") as out:
            out.write(json.dumps(["GOOGLE", what]) + "\n")

    def machine_type_offered(self, project: str, zone: str, machine_type: str, *, client: Any = None) -> bool:
        self._mark(f"machineTypes.get {zone}/{machine_type}")
        return True

    def gpu_quota_metric(self, provisioning: str) -> str:
        return "PREEMPTIBLE_NVIDIA_B200_GPUS"

    def region_quotas(self, project: str, region: str, *, client: Any = None) -> dict[str, tuple[float, float]]:
        self._mark(f"regions.get {region}")
        return {"PREEMPTIBLE_NVIDIA_B200_GPUS": (16.0, 0.0)}


class Build:
    """cloudbuild_v1.CloudBuildClient: the store builder probe's builds.create, recorded, refused as Google would
    refuse an unknown account."""

    def __init__(self, log: Path):
        self.log = log

    def create_build(self, parent: str, project_id: str, build: Any) -> Any:
        with self.log.open("a") as out:
            out.write(json.dumps(["GOOGLE", f"builds.create {parent}"]) + "\n")
        raise PermissionError("400 invalid service account deepep-store-builder@...")


def user_root(tmp: Path, stack: str) -> Path:
    """A project folder whose stack file names a store and its pinned manifest, as a user's would."""
    root = tmp / "project"  # the `cli` fixture's copy of the project when tmp is the test's tmp_path
    (root / "stacks").mkdir(parents=True, exist_ok=True)
    shutil.copy(ROOT / "Pulumi.yaml", root / "Pulumi.yaml")
    doc = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    doc["config"]["deepep-a4:artifactStore"] = "gs://my-store/deepep"
    doc["config"]["deepep-a4:artifactStoreManifest"] = MANIFEST
    (root / "stacks" / f"Pulumi.{stack}.yaml").write_text(yaml.safe_dump(doc))
    return root


@pytest.mark.parametrize("stack", ["gke-b200", "gce-b200"])
def test_rehearse_runs_through_the_cli_standin_to_the_first_google_call_and_tears_down(
    cli: Cli,  # noqa: F811
    stack: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "")
    said: list[str] = []
    written: dict[str, Any] = {}
    real_write = command.rehearsal_stack.write_file

    def write_file(name: str, cfg: dict[str, Any], root: Path) -> Path:
        written.update(cfg)
        # The Automation API runs the CLI in the Pulumi project's folder (the `cli` fixture's copy of the
        # project): the stack file goes where it reads it.
        return real_write(name, cfg, cli.project)

    monkeypatch.setattr(command.rehearsal_stack, "write_file", write_file)
    rc = command.main(
        ["--stack", stack],
        root=user_root(tmp_path, stack),
        out_root=tmp_path,
        clients=command.Clients(reads=Reads(cli.log), build=Build(cli.log)),
        missing_probes=lambda: [],  # the probes are another engineer's files (scripts/rehearse/)
        say=said.append,
        sleep=lambda s: None,
    )
    calls = cli.calls()
    order = [c[1] if c[0] == "GOOGLE" else " ".join(c[:2]) if c[0] == "stack" else c[0] for c in calls]
    # The rehearsal's own stack, made from the stack's config plus the rehearsal key and its own names.
    assert written["deepep-a4:rehearsal"] is True and written["deepep-a4:namePrefix"].endswith("-rh")
    assert any(c[:2] == ["stack", "init"] and c[2] == f"{stack}-rehearsal" for c in calls), calls
    preview = next(c for c in calls if c[0] == "preview")
    assert "--policy-pack" in preview
    first_google = next(i for i, c in enumerate(calls) if c[0] == "GOOGLE")
    assert order.index("preview") < first_google < order.index("up"), order
    up = next(c for c in calls if c[0] == "up")
    assert "--policy-pack" in up  # under the policy pack, as `run`
    destroy = next(c for c in calls if c[0] == "destroy")
    assert "--refresh" in destroy, destroy  # certain teardown: with refresh, after a failed probe too
    assert order.index("up") < order.index("destroy") < order.index("stack rm"), order
    assert not (cli.project / "stacks" / f"Pulumi.{stack}-rehearsal.yaml").exists()
    assert not (ROOT / "stacks" / f"Pulumi.{stack}-rehearsal.yaml").exists()
    sheet = json.loads((tmp_path / "build" / "rehearsal" / stack / "checklist.json").read_text())
    seams = {s["seam"]: s["status"] for s in sheet["seams"]}
    assert seams["policy-pack"] == "PASS" and seams["google-quota"] == "PASS"
    assert seams["google-machine-type"] == "PASS"
    assert seams["build-accepted"] == "FAIL"  # Google's refusal of the build is the evidence
    assert seams["rehearsal-complete"] == "FAIL"  # the stand-in's stack has no outputs to read the probes from
    assert sheet["teardown"].startswith("destroyed") and not sheet["passed"]
    assert rc == command.EXIT_FAILED, said
    # Not passed: `run` would rehearse again.
    raw = command.stackfile.read(stack, user_root(tmp_path / "again", stack))
    assert not checklists.passed(stack, raw, tmp_path)

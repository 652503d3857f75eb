"""The store builder probe's request and its reading (deepep_a4/rehearse/build.py) against a fake Cloud Build."""

from __future__ import annotations

import base64
import json
from dataclasses import replace
from typing import Any

from components import rehearsal
from deepep_a4.plan import command as plan
from deepep_a4.rehearse import build


class Client:
    def __init__(self) -> None:
        self.builds: list[Any] = []

    def create_build(self, parent: str, project_id: str, build: Any) -> Any:
        self.builds.append((parent, build))
        return type("Op", (), {"metadata": type("M", (), {"build": type("B", (), {"id": "b1"})()})()})()

    def get_build(self, name: str) -> Any:
        return type("Build", (), {"status": type("S", (), {"name": "SUCCESS"})()})()


def post(url: str, body: dict[str, Any]) -> dict[str, Any]:
    line = 'REHEARSAL {"seam": "build-outside", "status": "PASS", "evidence": "403", "seconds": 0.2}'
    return {"entries": [{"insertId": "1", "timestamp": "t", "textPayload": line}]}


def test_the_build_runs_as_the_builder_in_the_region_and_its_lines_are_read(monkeypatch) -> None:
    monkeypatch.setattr(
        rehearsal, "probe_files", lambda: {"probe_build.py": "print('$HOME')", "common.py": "", "x.py": ""}
    )
    _, _, cfg = plan.load_stack("gke-b200")
    cfg = replace(cfg, installer=replace(cfg.installer, store_url="gs://my-store/deepep"))
    client = Client()
    seams = build.probe(cfg, "run-1", client, post, sleep=lambda s: None)
    assert [(s.seam, s.status) for s in seams] == [("build-accepted", "PASS"), ("build-outside", "PASS")]
    parent, req = client.builds[0]
    assert parent == f"projects/{cfg.project}/locations/{cfg.region}"
    assert req.service_account.endswith("serviceAccounts/deepep-store-builder@deepep-a4-demo.iam.gserviceaccount.com")
    step = req.steps[0]
    assert step.name == rehearsal.PROBE_IMAGE and "$" not in "".join(step.args)  # Cloud Build substitutes `$`
    files = json.loads(base64.b64decode(step.args[2]))
    assert set(files) == {"probe_build.py", "common.py"} and "REHEARSAL_RUN_ID=run-1" in step.env


def test_no_store_is_a_fail_with_its_reason() -> None:
    _, _, cfg = plan.load_stack("gke-b200")
    (s,) = build.probe(cfg, "run-1", client=object())
    assert s.status == "FAIL" and "no artifactStore" in s.evidence

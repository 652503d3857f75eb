"""The artifact store as a benchmark stack uses it (components/store.py, docs/store.md): opt-in in the example
stacks, nothing of ours named once the user set their project, and the bucket read before any grant."""

from __future__ import annotations

import contextlib
import io
import json
import runpy
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from components import store
from deepep_a4 import stackfile
from deepep_a4.tools import plan as plan_tool
from deepep_a4.tools import plan_engine
from tests.conftest import ROOT, of_type, plan, stack_config

EXAMPLES = ("gke-b200", "gce-b200")  # the example stacks this repository ships (a user may add others)
OURS = "deepep-a4-demo"
BUCKET_IAM = "gcp:storage/bucketIAMMember:BucketIAMMember"
FOREIGN = "gs://someone-elses-bucket/deepep-a4"
OWN = "gs://my-own-project-artifacts/deepep-a4"
# Cloud Storage's answers (the JSON API's error messages as the Go client formats them).
NOT_FOUND = "googleapi: Error 404: The specified bucket does not exist., notFound"
NO_POLICY = (
    "googleapi: Error 403: me@example.com does not have storage.buckets.getIamPolicy access to the Google Cloud "
    "Storage bucket. Permission 'storage.buckets.getIamPolicy' denied on resource (or it may not exist)., forbidden"
)


def everything(result: plan_engine.PlanResult) -> str:
    return json.dumps([result.resources, result.outputs, result.files], default=str)


@pytest.mark.parametrize("stack", EXAMPLES)
def test_an_example_with_only_its_project_changed_names_nothing_of_ours(stack: str) -> None:
    raw = yaml.safe_load(stackfile.stack_file(stack, ROOT).read_text())["config"]
    assert raw["deepep-a4:artifactStore"] == ""  # opt-in: the example names no store
    result = plan(stack, project="my-own-project")
    assert OURS not in everything(result)
    assert not [r for r in result.resources if r["parent"] == "store"]


def test_the_store_example_names_no_project_of_ours_and_its_placeholder_is_refused() -> None:
    demo = ROOT / "store" / "Pulumi.demo.yaml"
    assert OURS not in demo.read_text()
    config = yaml.safe_load(demo.read_text())["config"]
    assert config["deepep-a4-store:project"] == store.STORE_PROJECT_PLACEHOLDER

    def program() -> None:
        runpy.run_path(str(ROOT / "store" / "__main__.py"), run_name="__main__")

    with pytest.raises(pulumi.RunError) as err:
        plan_engine.run_program("demo", config, program=program)
    message = str(err.value)
    assert "\n" not in message
    assert f"deepep-a4-store:project is {store.STORE_PROJECT_PLACEHOLDER}" in message
    assert "pulumi config set deepep-a4-store:project YOUR-PROJECT" in message


@pytest.mark.parametrize("project", ["", "My_Project", "abc"])
def test_a_store_project_that_is_no_project_id_is_refused(project: str) -> None:
    class Config:
        def get(self, key: str) -> str | None:
            return project if key == "project" else None

        def get_int(self, key: str) -> int | None:
            return None

    with pytest.raises(ValueError, match="deepep-a4-store:project"):
        store.store_settings(Config())


@pytest.mark.parametrize("stack", EXAMPLES)
def test_a_bucket_of_the_stack_project_is_granted(stack: str) -> None:
    result = plan(stack, project="my-own-project", artifactStore=OWN)
    assert {g["inputs"]["bucket"] for g in of_type(result, BUCKET_IAM) if g["parent"] == "store"} == {
        "my-own-project-artifacts"
    }


def answer_bucket(monkeypatch: pytest.MonkeyPatch, answer: tuple[dict[str, Any], list[tuple[str, str]]]) -> None:
    monkeypatch.setattr(plan_engine.PlanMocks, "bucket", lambda self, name: answer)


def refusal(stack: str, store_url: str) -> str:
    with pytest.raises(pulumi.RunError) as err:
        plan(stack, artifactStore=store_url)
    message = str(err.value)
    assert "\n" not in message
    assert f"deepep-a4:artifactStore = {store_url!r}" in message
    return message


@pytest.mark.parametrize("stack", EXAMPLES)
def test_a_missing_store_bucket_stops_the_deployment_in_one_line(stack: str, monkeypatch: pytest.MonkeyPatch) -> None:
    answer_bucket(monkeypatch, ({}, [("name", NOT_FOUND)]))
    message = refusal(stack, FOREIGN)
    assert "bucket someone-elses-bucket cannot be read" in message and "The specified bucket does not exist" in message
    assert "store/" in message and "''" in message


def foreign_bucket(name: str) -> dict[str, Any]:
    return {"name": name, "project": "someone-else", "projectNumber": 987654321098, "url": f"gs://{name}"}


def test_a_bucket_of_another_project_stops_the_deployment_unless_its_policy_can_be_changed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    answer_bucket(monkeypatch, (foreign_bucket("someone-elses-bucket"), []))
    real_call = plan_engine.PlanMocks.call

    def no_policy(self: plan_engine.PlanMocks, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list]:
        if args.token == "gcp:storage/getBucketIamPolicy:getBucketIamPolicy":
            return {}, [("bucket", NO_POLICY)]
        return real_call(self, args)

    monkeypatch.setattr(plan_engine.PlanMocks, "call", no_policy)
    message = refusal("gke-b200", FOREIGN)
    assert "belongs to project number 987654321098, not to deepep-a4-demo" in message
    assert "storage.buckets.getIamPolicy" in message

    # The same bucket where this deployment may change its policy (a store shared across projects): granted.
    monkeypatch.setattr(plan_engine.PlanMocks, "call", real_call)
    result = plan("gke-b200", artifactStore=FOREIGN)
    assert len([g for g in of_type(result, BUCKET_IAM) if g["parent"] == "store"]) == 1  # read only: no publish


def plan_printout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, **overrides: Any) -> str:
    edited = stack_config("gce-b200", **overrides)
    monkeypatch.setattr(stackfile, "read", lambda name, root=None: dict(edited))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert plan_tool.main(["--stack", "gce-b200", "--out", str(tmp_path / "p"), "--quiet"]) == 0
    return out.getvalue()


def test_the_offline_plan_warns_once_when_the_store_bucket_does_not_look_like_the_project(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    text = plan_printout(monkeypatch, tmp_path, project="my-own-project", artifactStore=FOREIGN)
    warnings = [line for line in text.splitlines() if line.startswith("WARNING: artifactStore")]
    assert len(warnings) == 1 and warnings[0].startswith("WARNING: artifactStore bucket someone-elses-bucket")
    assert "my-own-project" in warnings[0]
    text = plan_printout(monkeypatch, tmp_path, project="my-own-project", artifactStore=OWN)
    assert not [line for line in text.splitlines() if line.startswith("WARNING: artifactStore")]


@pytest.mark.parametrize("stack", EXAMPLES)
@pytest.mark.parametrize("ubla", [True, False])
def test_a_store_bucket_without_uniform_access_is_refused_before_the_conditioned_grants(
    stack: str, ubla: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cloud Storage takes IAM Conditions only on buckets with uniform bucket-level access: "You can only use IAM
    Conditions on buckets that have uniform bucket-level access enabled"
    (https://cloud.google.com/storage/docs/access-control/iam#conditions); the grants are conditioned."""
    monkeypatch.setattr(plan_engine.PlanMocks, "store_ubla", ubla)
    if ubla:
        result = plan(stack, project="my-own-project", artifactStore=OWN)
        grants = [g for g in of_type(result, BUCKET_IAM) if g["parent"] == "store"]
        assert grants and all(g["inputs"]["condition"]["expression"] for g in grants)
        return
    message = refusal(stack, OWN)
    assert "uniform bucket-level access off" in message
    assert "--uniform-bucket-level-access" in message and "IAM condition" in message

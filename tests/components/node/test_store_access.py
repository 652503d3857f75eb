"""The artifact store as a benchmark stack uses it (components/node/store_grants.py, docs/store.md): opt-in in the
example stacks, nothing of ours named once the user set their project, and the bucket read before any grant."""

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

from components.node import store_grants as store
from deepep_a4 import stackfile
from deepep_a4.plan import command as plan_tool
from deepep_a4.plan import engine as plan_engine
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


# The store builder's identity (components/node/store_grants.py StoreBuilder, made by store/): what its grants let
# it do.
# Object IAM conditions see `resource.name` as projects/_/buckets/BUCKET/objects/OBJECT
# (https://cloud.google.com/iam/docs/conditions-attribute-reference#resource-name, Cloud Storage row).
# Role contents (https://cloud.google.com/storage/docs/access-control/iam-roles): objectViewer holds
# storage.objects.get/list, objectCreator storage.objects.create (and multipart uploads), neither
# storage.objects.delete, which an overwrite needs (https://cloud.google.com/storage/docs/access-control/iam-permissions).
ROLE_PERMISSIONS = {
    "roles/storage.objectViewer": {"storage.objects.get", "storage.objects.list", "storage.managedFolders.get",
                                   "storage.managedFolders.list", "resourcemanager.projects.get"},
    "roles/storage.objectCreator": {"storage.objects.create", "storage.managedFolders.create",
                                    "storage.multipartUploads.create", "storage.multipartUploads.abort",
                                    "storage.multipartUploads.listParts"},
    "roles/logging.logWriter": {"logging.logEntries.create", "logging.logEntries.route"},
}  # fmt: skip


def builder_grants() -> tuple[list[dict[str, Any]], str]:
    config = {"deepep-a4-store:project": "my-own-project", "deepep-a4-store:prefix": "deepep-a4"}

    def program() -> None:
        runpy.run_path(str(ROOT / "store" / "__main__.py"), run_name="__main__")

    result, _ = plan_engine.run_program("demo", config, program=program)
    account = [r for r in result.resources if r["type"] == "gcp:serviceaccount/account:Account"]
    assert [(a["inputs"]["accountId"], a["inputs"]["project"]) for a in account] == [
        (store.BUILDER_ACCOUNT_ID, "my-own-project")
    ]
    # The account's email (the mock's stand-in for the provider's computed one) is what every grant names.
    member = f"serviceAccount:{store.BUILDER_ACCOUNT_ID}@"
    grants = [r for r in result.resources if str(r["inputs"].get("member", "")).startswith(member)]
    return grants, member


def allowed(expression: str, name: str) -> bool:
    celpy = pytest.importorskip("celpy")
    env = celpy.Environment()
    return bool(env.program(env.compile(expression)).evaluate(celpy.json_to_cel({"resource": {"name": name}})))


def test_the_store_builder_creates_and_reads_under_the_prefix_only_and_writes_its_log() -> None:
    grants, _ = builder_grants()
    on_bucket = [g for g in grants if g["type"] == BUCKET_IAM]
    assert {g["inputs"]["role"] for g in on_bucket} == {"roles/storage.objectViewer", "roles/storage.objectCreator"}
    on_project = [g for g in grants if g["type"] == "gcp:projects/iAMMember:IAMMember"]
    assert [(g["inputs"]["role"], g["inputs"]["project"]) for g in on_project] == [
        ("roles/logging.logWriter", "my-own-project")
    ]
    assert len(grants) == 3  # nothing else: no token creator, no storage admin, no project-wide storage role
    held = set().union(*(ROLE_PERMISSIONS[g["inputs"]["role"]] for g in grants))
    assert "storage.objects.delete" not in held and "storage.objects.update" not in held  # never replaces
    objects = "projects/_/buckets/my-own-project-artifacts/objects/"
    for g in on_bucket:
        expression = g["inputs"]["condition"]["expression"]
        assert g["inputs"]["bucket"] == "my-own-project-artifacts"
        assert allowed(expression, objects + "deepep-a4/manifests/x.txt")
        assert allowed(expression, objects + "deepep-a4/staging/build-x.tar.gz")  # its own source
        assert not allowed(expression, objects + "deepep-a4-other/x")  # a sibling prefix: no
        assert not allowed(expression, objects + "results/x")  # the rest of the bucket: no
        assert not allowed(expression, "projects/_/buckets/another-bucket/objects/deepep-a4/x")


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


class StoreConfig:
    """pulumi.Config("deepep-a4-store") as store_settings reads it."""

    def __init__(self, **values: str):
        self.values = {"project": "my-own-project", **values}

    def get(self, key: str) -> str | None:
        return self.values.get(key)

    def get_int(self, key: str) -> int | None:
        return None


INJECTIONS = ['deepep-a4") || true || ("', "/", "//", "a/../b", 'x"', "a\\b", "deepep-a4\n", "team//x", "."]


@pytest.mark.parametrize("prefix", INJECTIONS)
def test_a_store_prefix_artifact_store_would_refuse_is_refused_by_the_store_project(prefix: str) -> None:
    """The store project's prefix limits the builder's grant as artifactStore's limits the nodes': the same rule
    (rules_inputs.store_prefix_problem), one line naming the key. `/` would have become the whole bucket."""
    with pytest.raises(ValueError, match="deepep-a4-store:prefix") as err:
        store.store_settings(StoreConfig(prefix=prefix))
    assert "\n" not in str(err.value).replace(repr(prefix), "")


@pytest.mark.parametrize("prefix", ["deepep-a4", "team/deepep", "team/deepep/", "a.b_c-d"])
def test_a_store_prefix_of_letters_digits_and_slashes_is_accepted(prefix: str) -> None:
    assert store.store_settings(StoreConfig(prefix=prefix)).prefix == prefix.strip("/")


@pytest.mark.parametrize("bucket", ["My-Bucket", "goog-store", "192.168.1.1", "my-google-bits", "ok-bucket\n"])
def test_a_store_bucket_is_checked_by_cloud_storages_naming_rules(bucket: str) -> None:
    with pytest.raises(ValueError, match="deepep-a4-store:bucket"):
        store.store_settings(StoreConfig(bucket=bucket))


@pytest.mark.parametrize("prefix", INJECTIONS)
def test_an_injected_prefix_stays_a_string_in_the_cel_condition(prefix: str) -> None:
    """Were a prefix to get past the settings, the condition still holds it as one CEL string literal (escaped
    per google/cel-spec doc/langdef.md): `deepep-a4") || true || ("` does not open the whole bucket."""
    expression = store.prefix_condition("my-own-project-artifacts", prefix)
    objects = "projects/_/buckets/my-own-project-artifacts/objects/"
    assert not allowed(expression, objects + "results/x")
    assert not allowed(expression, objects + "deepep-a4/x")  # not even the default prefix
    assert allowed(expression, objects + prefix + "/x")  # exactly the literal prefix, nothing else


@pytest.mark.parametrize("text", ['a"b', "a\\b", "\n", "tab\there", "é", "\U0001f600", "\x7f", "'`?"])
def test_cel_string_literals_round_trip_through_a_cel_implementation(text: str) -> None:
    celpy = pytest.importorskip("celpy")
    env = celpy.Environment()
    got = env.program(env.compile(f"{store.cel_string(text)} == x")).evaluate({"x": celpy.celtypes.StringType(text)})
    assert bool(got)

"""RBAC by its rules and shared or foreign identities (deepep_a4/policy/identities.py), and IAM conditions read as
CEL (deepep_a4/policy/conditions.py)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deepep_a4.policy import conditions, identities

CR = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
RB = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
CRB = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
OURS = {"kind": "ServiceAccount", "name": "deepep-installer", "namespace": "deepep-a4"}


def cr(*rules: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {"metadata": {"name": "x", **meta}, "rules": list(rules)}


def r(resources: list[str], verbs: list[str], groups: list[str] | None = None) -> dict[str, Any]:
    return {"apiGroups": groups if groups is not None else [""], "resources": resources, "verbs": verbs}


def bind(role: str, *subjects: dict[str, Any], kind: str = CRB, namespace: str | None = None) -> tuple[str, dict]:
    meta = {"name": "x", **({"namespace": namespace} if namespace else {})}
    return kind, {"metadata": meta, "roleRef": {"kind": "ClusterRole", "name": role}, "subjects": list(subjects)}


@pytest.mark.parametrize(
    ("type_", "props"),
    [
        (CR, cr(r(["nodes"], ["*"]))),
        (CR, cr(r(["*"], ["get"]))),
        (CR, cr(r(["nodes"], ["get"], ["*"]))),
        (CR, cr(r(["clusterroles"], ["escalate"], ["rbac.authorization.k8s.io"]))),
        (CR, cr(r(["clusterrolebindings"], ["bind"], ["rbac.authorization.k8s.io"]))),
        (CR, cr(r(["users"], ["impersonate"]))),
        (CR, cr(r(["secrets"], ["get"]))),
        (CR, cr(r(["pods/exec"], ["create"]))),
        (CR, cr(r(["nodes/proxy"], ["get"]))),
        (CR, cr(r(["serviceaccounts/token"], ["create"]))),
        (CR, cr(r(["pods"], ["get"]), labels={"rbac.authorization.k8s.io/aggregate-to-view": "true"})),
        (CR, {"metadata": {"name": "x"}, "aggregationRule": {"clusterRoleSelectors": []}}),
        (CR, cr({"nonResourceURLs": ["/metrics"], "verbs": ["get"]})),
        bind("admin", OURS),
        bind("edit", OURS),
        bind("cluster-admin", OURS),
        bind("deepep-x", {"kind": "ServiceAccount", "name": "default", "namespace": "deepep-a4"}),
        bind("deepep-x", {"kind": "ServiceAccount", "name": "deepep-installer", "namespace": "kube-system"}),
        bind("deepep-x", {"kind": "ServiceAccount", "name": "deepep-installer"}),  # no namespace: default
        bind("deepep-x", {"kind": "User", "name": "alice@example.com"}),
        bind("deepep-x", OURS, kind=RB),  # a RoleBinding without a namespace is in default
        bind("deepep-x", OURS, kind=RB, namespace="kube-system"),
    ],
)
def test_rbac_is_judged_by_its_rules_and_subjects(type_: str, props: dict[str, Any]) -> None:
    assert identities.rbac_by_rules(type_, props)


@pytest.mark.parametrize(
    ("type_", "props"),
    [
        (CR, cr(r(["nodes"], ["get", "patch"]))),  # the installer's own role
        (CR, cr(r(["pods"], ["get", "list", "watch"]), labels={"app.kubernetes.io/part-of": "deepep-a4"})),
        bind("deepep-installer-label-nodes-1a2b3c4d", OURS),
        bind("deepep-x", OURS, kind=RB, namespace="deepep-a4"),
    ],
)
def test_narrow_rbac_passes(type_: str, props: dict[str, Any]) -> None:
    assert identities.rbac_by_rules(type_, props) == []


@pytest.mark.parametrize(
    "text",
    [
        "123456789012-compute@developer.gserviceaccount.com",
        "my-proj@appspot.gserviceaccount.com",
        "service-123456789012@gcp-sa-cloudscheduler.iam.gserviceaccount.com",
        "123456789012@cloudservices.gserviceaccount.com",
        "my-proj.svc.id.goog[deepep-a4/default]",
        "principal://iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/p.svc.id.goog/subject/ns/x/sa/default",
    ],
)
def test_shared_identities_are_refused_wherever_they_appear(text: str) -> None:
    assert identities.shared_identities("gcp:projects/iAMMember:IAMMember", {"role": "roles/x", "member": text})
    assert identities.shared_identities("gcp:anything/new:New", {"deep": {"serviceAccount": text}})


def test_our_accounts_run_only_in_their_place() -> None:
    sa = "deepep-s-deadline@p1-demo.iam.gserviceaccount.com"
    job = {"httpTarget": {"oauthToken": {"serviceAccountEmail": sa}}}
    assert identities.runs_as_ours_elsewhere("gcp:cloudscheduler/job:Job", job) == []
    assert identities.runs_as_ours_elsewhere("gcp:cloudbuild/trigger:Trigger", {"serviceAccount": sa})
    assert identities.runs_as_ours_elsewhere("gcp:compute/instance:Instance", {"serviceAccount": {"email": sa}})
    assert (
        identities.runs_as_ours_elsewhere("gcp:projects/iAMMember:IAMMember", {"member": f"serviceAccount:{sa}"}) == []
    )


def test_custom_roles_must_be_the_stack_s_own() -> None:
    grant = ("gcp:projects/iAMMember:IAMMember", "g", {"role": "projects/p1-demo/roles/deepep_s_deadline_1a2b3c4d"})
    role = ("gcp:projects/iAMCustomRole:IAMCustomRole", "r", {"roleId": "deepep_s_deadline_1a2b3c4d"})
    assert identities.custom_roles_defined([grant, role]) == []
    assert identities.custom_roles_defined([grant])
    foreign = {
        "role": "organizations/1234/roles/securityReviewer",
        "member": "serviceAccount:a@p1-demo.iam.gserviceaccount.com",
    }
    assert identities.shared_identities("gcp:projects/iAMMember:IAMMember", foreign)


# -- IAM conditions as CEL ------------------------------------------------------------------------------

GOOD = 'resource.name.startsWith("projects/_/buckets/b-artifacts/objects/deepep-a4/")'


@pytest.mark.parametrize(
    "expression",
    [
        'resource.name.startsWith("projects/_/buckets/b-artifacts/objects/deepep-a4") || true || ("")',
        'resource.name.startsWith("projects/_/buckets/b-artifacts/objects/")',  # prefix "/" or empty: whole bucket
        'resource.name.startsWith("projects/_/buckets/b-artifacts/objects/deepep-a4\\") || true || (\\"/")',
        'resource.name.startsWith("projects/_/buckets/b-artifacts/objects/deepep-a4/") || true',
        'resource.name.startsWith("projects/_/buckets/b-artifacts/objects/deepep-a4/") && true',
        'resource.name.startsWith("projects/_/buckets/other/objects/deepep-a4/")',  # another bucket
        'resource.name.startsWith("projects/_/buckets/b-artifacts/objects/../")',
        'resource.name.startsWith("projects/_/buckets/b-artifacts/objects/a\\nb/")',  # a control character
        'resource.name.startsWith("projects/_/buckets/b-artifacts/objects/deepep-a4/\\q")',  # not a CEL escape
        'resource.name.startsWith("projects/_/buckets/b-artifacts/objects/other/")',  # not the declared prefix
    ],
)
def test_an_open_condition_is_refused(expression: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(
        "PULUMI_CONFIG", json.dumps({"deepep-a4-store:project": "p", "deepep-a4-store:prefix": "deepep-a4"})
    )
    grant: dict[str, Any] = {
        "bucket": "b-artifacts",
        "role": "roles/storage.objectCreator",
        "member": "serviceAccount:x@p.iam.gserviceaccount.com",
    }
    grant["condition"] = {"title": "t", "expression": expression}
    assert conditions.storage_conditions("gcp:storage/bucketIAMMember:BucketIAMMember", grant)
    grant["condition"]["expression"] = GOOD
    assert conditions.storage_conditions("gcp:storage/bucketIAMMember:BucketIAMMember", grant) == []


def test_cel_escapes_decode_as_cel_defines_them() -> None:
    assert conditions.cel_string(r"a\x2fb\u002fc\\d\"e") == 'a/b/c\\d"e'
    assert conditions.cel_string(r"bad\q") is None
    # an escaped but harmless literal still names the same prefix
    escaped = 'resource.name.startsWith("projects/_/buckets/b-artifacts/objects/deepep\\x2da4/")'
    assert conditions.judge(escaped, "b-artifacts", "deepep-a4") is None


def test_an_unconditioned_writer_is_refused_but_on_the_stack_s_results_bucket() -> None:
    member = "serviceAccount:x@p.iam.gserviceaccount.com"
    for role in ("roles/storage.objectCreator", "roles/storage.objectAdmin"):
        grant = {"bucket": "p-artifacts", "role": role, "member": member}
        assert conditions.storage_conditions("gcp:storage/bucketIAMMember:BucketIAMMember", grant)
    results = {"bucket": "deepep-gce-b200-results-p", "role": "roles/storage.objectAdmin", "member": member}
    assert conditions.storage_conditions("gcp:storage/bucketIAMMember:BucketIAMMember", results) == []
    reader = {"bucket": "p-artifacts", "role": "roles/storage.objectViewer", "member": member}
    assert conditions.storage_conditions("gcp:storage/bucketIAMMember:BucketIAMMember", reader) == []

"""The installer's ValidatingAdmissionPolicy: rendered in the plan, and its CEL run (cel-python) against the
requests the API server would hand it: the installer's own label patch passes, anything else is refused."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.gke import node_policy as policy
from components.gke.objects import INSTALLED_LABEL, NAMESPACE, installer_ksa
from tests.components.gke.test_workloads import DS, INSTALLER_DS, STACK, Built, build

KSA = installer_ksa(STACK)

VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"

# A GKE node as the API server holds it (the fields the rules read), and the installer's request on it.
NODE: dict[str, Any] = {
    "metadata": {
        "name": "gke-a4-node-1",
        "labels": {"cloud.google.com/gke-nodepool": "a4-highgpu-8g", INSTALLED_LABEL: "0123"},
        "annotations": {"node.alpha.kubernetes.io/ttl": "0"},
    },
    "spec": {"podCIDR": "10.64.1.0/24", "taints": [{"key": "nvidia.com/gpu", "effect": "NoSchedule"}]},
}


@pytest.fixture(scope="module")
def b() -> Built:
    return build()


def request(node_name: str | None, change: Any) -> dict[str, Any]:
    new = copy.deepcopy(NODE)
    change(new)
    extra = {policy.NODE_NAME_EXTRA: [node_name]} if node_name else {}
    user = {"username": f"system:serviceaccount:{NAMESPACE}:{KSA}", "extra": extra}
    return {"request": {"userInfo": user}, "object": new, "oldObject": NODE}


def admitted(activation: dict[str, Any]) -> bool:
    celpy = pytest.importorskip("celpy")
    env = celpy.Environment()
    return all(
        bool(env.program(env.compile(v["expression"])).evaluate(celpy.json_to_cel(activation)))
        for v in policy.validations()
    )


def relabel(n: dict[str, Any]) -> None:
    n["metadata"]["labels"][INSTALLED_LABEL] = "4567"


def test_the_policy_binds_deny_for_the_installer_only_and_comes_before_the_daemonset(b: Built) -> None:
    vap = b.one(VAP)
    spec = vap.inputs["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
    ]
    [cond] = spec["matchConditions"]
    assert cond["expression"] == f"request.userInfo.username == 'system:serviceaccount:{NAMESPACE}:{KSA}'"
    binding = b.one(BINDING).inputs["spec"]
    assert binding == {"policyName": policy.POLICY_NAME, "validationActions": ["Deny"]}
    deps = b.one(DS, INSTALLER_DS).deps
    assert vap.urn in deps and b.one(BINDING).urn in deps


def test_the_installers_own_label_patch_is_admitted() -> None:
    assert admitted(request("gke-a4-node-1", relabel))


@pytest.mark.parametrize(
    "node_name, change",
    [
        ("gke-a4-node-2", relabel),  # another node's token
        (None, relabel),  # a token without the node claim
        ("gke-a4-node-1", lambda n: n["metadata"]["labels"].update({"cloud.google.com/gke-nodepool": "x"})),
        ("gke-a4-node-1", lambda n: n["metadata"]["labels"].update({"evil": "1"})),
        ("gke-a4-node-1", lambda n: n["spec"].pop("taints")),
        ("gke-a4-node-1", lambda n: n["spec"].update({"unschedulable": True})),
        ("gke-a4-node-1", lambda n: n["metadata"].pop("annotations")),
        ("gke-a4-node-1", lambda n: n["metadata"].update({"finalizers": ["x"]})),
    ],
)
def test_anything_else_is_refused(node_name: str | None, change: Any) -> None:
    assert not admitted(request(node_name, change))

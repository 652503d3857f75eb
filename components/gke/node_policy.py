"""The installer's Kubernetes token may change one label of its own node, nothing else.

RBAC cannot say "your own node" or "this label only": the installer's ClusterRole grants get/patch on every
node (gke_installer.py). A ValidatingAdmissionPolicy narrows that patch (admissionregistration.k8s.io/v1,
stable and on by default since Kubernetes 1.30,
https://kubernetes.io/docs/reference/access-authn-authz/validating-admission-policy/; the stack's GKE is at
least the floor of components/config/versions.py). For a request of the installer's service account it requires:

- the node is the one the token was issued on: a pod-bound token carries its node, which the API server adds
  to the user's extra as `authentication.kubernetes.io/node-name` (k8s.io/apiserver
  pkg/authentication/serviceaccount NodeNameKey; ServiceAccountTokenPodNodeInfo, beta and on in 1.30, GA
  in 1.32);
- the node's spec (taints, unschedulable, podCIDR), annotations, finalizers and every other label are as
  they were: only `deepep-a4/installed` may appear, change or go.

A token without the node claim is refused (fail closed), and so is any error in the expressions.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.gke.objects import INSTALLED_LABEL, INSTALLER_LABELS, INSTALLER_NAME, NAMESPACE, child_opts, k8s_spec

NODE_NAME_EXTRA = "authentication.kubernetes.io/node-name"
POLICY_NAME = "deepep-installer-own-node-label"


def _same(field: str) -> str:
    """CEL: `field` of the node is unchanged, absent on both sides counting as equal."""
    new, old = f"object.metadata.{field}", f"oldObject.metadata.{field}"
    return (
        f"(has({new}) ? {new} : {{}}) == (has({old}) ? {old} : {{}})"
        if field == "annotations"
        else f"(has({new}) ? {new} : []) == (has({old}) ? {old} : [])"
    )


def validations() -> list[dict[str, str]]:
    """The CEL rules, each with the message the installer's curl sees when it is broken."""
    label = INSTALLED_LABEL
    labels_new = "(has(object.metadata.labels) ? object.metadata.labels : {})"
    labels_old = "(has(oldObject.metadata.labels) ? oldObject.metadata.labels : {})"
    return [
        {
            "expression": f"'{NODE_NAME_EXTRA}' in request.userInfo.extra && "
            f"request.userInfo.extra['{NODE_NAME_EXTRA}'].exists(n, n == object.metadata.name)",
            "message": "the installer may patch only the node its pod runs on",
        },
        {
            "expression": "object.spec == oldObject.spec",
            "message": "the installer may not change a node's spec (taints, unschedulable)",
        },
        {"expression": _same("annotations"), "message": "the installer may not change a node's annotations"},
        {"expression": _same("finalizers"), "message": "the installer may not change a node's finalizers"},
        {"expression": _same("ownerReferences"), "message": "the installer may not change a node's owners"},
        {
            "expression": f"{labels_new}.all(k, k == '{label}' || "
            f"(k in {labels_old} && {labels_old}[k] == {labels_new}[k])) && "
            f"{labels_old}.all(k, k == '{label}' || k in {labels_new})",
            "message": f"the installer may change only the {label} label of a node",
        },
    ]


def installer_username(namespace: str, ksa: str = INSTALLER_NAME) -> str:
    return f"system:serviceaccount:{namespace}:{ksa}"


def policy_spec(namespace: str, ksa: str = INSTALLER_NAME) -> dict[str, Any]:
    return {
        "failure_policy": "Fail",
        "match_constraints": {
            "resource_rules": [
                {"api_groups": [""], "api_versions": ["v1"], "operations": ["UPDATE"], "resources": ["nodes"]}
            ]
        },
        # Only the installer's requests: the kubelet, GKE and the deployer patch nodes as before.
        "match_conditions": [
            {
                "name": "installer-only",
                "expression": f"request.userInfo.username == '{installer_username(namespace, ksa)}'",
            }
        ],
        "validations": validations(),
    }


class InstallerNodePolicy(pulumi.ComponentResource):
    """The ValidatingAdmissionPolicy and its binding (Deny) that hold the installer to its node's label."""

    def __init__(self, name: str, ksa: str, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:InstallerNodePolicy", name, None, opts)
        self.policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            name,
            metadata={"name": POLICY_NAME, "labels": INSTALLER_LABELS},
            spec=k8s_spec(policy_spec(NAMESPACE, ksa)),
            opts=child_opts(self),
        )
        self.binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            name,
            metadata={"name": POLICY_NAME, "labels": INSTALLER_LABELS},
            spec={"policy_name": self.policy.metadata.name, "validation_actions": ["Deny"]},
            opts=child_opts(self),
        )
        self.register_outputs({"policy": self.policy.metadata.name})

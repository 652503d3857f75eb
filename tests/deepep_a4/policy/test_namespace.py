"""A Kubernetes object without `metadata.namespace` lands in `default` (the provider sets no namespace and the
kubeconfig's context names none: components/gke/cluster.py), so every rule that asks "is this ours?" reads a
missing namespace as `default`, never as deepep-a4. Issue 44: three rules said deepep-a4, the fourth default."""

from __future__ import annotations

from typing import Any

import pytest

from deepep_a4.policy import powers, rules, trust
from scripts import names

IMG = "ubuntu:24.04@sha256:" + "ab" * 32
DS = "kubernetes:apps/v1:DaemonSet"


def daemonset(namespace: str | None, **spec: Any) -> dict[str, Any]:
    meta = {"name": names.INSTALLER_NAME, **({"namespace": namespace} if namespace else {})}
    spec = {"containers": [{"name": "c", "image": IMG}], **spec}
    return {"metadata": meta, "spec": {"template": {"spec": spec}}}


OURS = names.STAGED_ROOTS["gke"]
# (rule, the pod spec it judges): allowed in our namespace only.
CASES = [
    ("host-namespaces-only-where-needed", {"hostPID": True}),
    ("host-paths-allowed", {"volumes": [{"name": "v", "hostPath": {"path": OURS}}]}),
    (
        "capabilities-and-host-ipc",
        {"containers": [{"name": "c", "image": IMG, "securityContext": {"capabilities": {"add": ["CHOWN"]}}}]},
    ),
    (
        "privileged-only-installer-namespace",
        {"containers": [{"name": "c", "image": IMG, "securityContext": {"privileged": True}}]},
    ),
]


def check_of(rule: str) -> Any:
    for table in (rules.RESOURCE_RULES, trust.RESOURCE_RULES, powers.RESOURCE_RULES):
        if rule in table:
            return table[rule][1]
    raise KeyError(rule)


@pytest.mark.parametrize(("rule", "spec"), CASES)
def test_a_missing_namespace_is_default_not_ours(rule: str, spec: dict[str, Any]) -> None:
    check = check_of(rule)
    assert not check(DS, daemonset(names.NAMESPACE, **spec)), "allowed in our namespace"
    assert check(DS, daemonset(None, **spec)), "refused without a namespace: the object lands in default"
    assert check(DS, daemonset("default", **spec))


def test_the_pod_identity_reads_default() -> None:
    who, _ = trust.pods_of(DS, daemonset(None))
    assert who[1] == "default"

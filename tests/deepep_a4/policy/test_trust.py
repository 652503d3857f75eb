"""The pack's trust rules (deepep_a4/policy/trust.py): for each, a resource it must refuse and one it must
allow; and the plans of every stack pass them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from deepep_a4.plan import engine as plan_engine
from deepep_a4.policy import rules, trust
from tests.conftest import plan, stack_config

DIGEST = "ubuntu:24.04@sha256:" + "ab" * 32
SA = "serviceAccount:x@p.iam.gserviceaccount.com"


def pod(kind: str, name: str, namespace: str | None = "deepep-a4", **spec: Any) -> tuple[str, dict[str, Any]]:
    spec = {"containers": [{"name": "c", "image": DIGEST}], **spec}
    meta = {"name": name, **({"namespace": namespace} if namespace else {})}
    if kind == "Job":
        return "kubernetes:batch/v1:Job", {"metadata": meta, "spec": {"template": {"spec": spec}}}
    if kind == "DaemonSet":
        return "kubernetes:apps/v1:DaemonSet", {"metadata": meta, "spec": {"template": {"spec": spec}}}
    return "kubernetes:core/v1:Pod", {"metadata": meta, "spec": spec}


CASES: list[tuple[str, str, dict[str, Any], bool]] = [
    # rule, type, props, refused
    ("no-public-iam", "gcp:storage/bucketIAMMember:BucketIAMMember", {"member": "allUsers"}, True),
    ("no-public-iam", "gcp:projects/iAMMember:IAMMember", {"member": "allAuthenticatedUsers"}, True),
    ("no-public-iam", "gcp:storage/bucketIAMBinding:BucketIAMBinding", {"members": [SA, "allUsers"]}, True),
    (
        "no-public-iam",
        "gcp:storage/bucketIAMPolicy:BucketIAMPolicy",
        {"policyData": json.dumps({"bindings": [{"role": "r", "members": ["allUsers"]}]})},
        True,
    ),
    (
        "no-public-iam",
        "gcp:storage/defaultObjectAccessControl:DefaultObjectAccessControl",
        {"entity": "allUsers"},
        True,
    ),
    ("no-public-iam", "gcp:projects/iAMMember:IAMMember", {"member": SA}, False),
    ("no-public-bucket", trust.BUCKET, {"uniformBucketLevelAccess": True}, True),
    ("no-public-bucket", trust.BUCKET, {"publicAccessPrevention": "enforced"}, True),
    ("no-public-bucket", trust.BUCKET, {"publicAccessPrevention": "enforced", "uniformBucketLevelAccess": True}, False),
    ("no-service-account-key", trust.SA_KEY, {"serviceAccountId": "x"}, True),
    ("no-service-account-key", "gcp:serviceaccount/account:Account", {"accountId": "x"}, False),
    ("no-every-address", trust.FIREWALL, {"allows": [{"protocol": "tcp"}], "sourceRanges": ["0.0.0.0/0"]}, True),
    (
        "no-every-address",
        trust.FIREWALL,
        {"allows": [{"protocol": "tcp"}], "sourceRanges": ["0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/2"]},
        True,
    ),
    ("no-every-address", trust.FIREWALL, {"allows": [{"protocol": "tcp"}], "sourceRanges": ["::/1", "8000::/1"]}, True),
    ("no-every-address", trust.FIREWALL, {"allows": [{"protocol": "tcp"}], "sourceRanges": ["0.0.0.0/1"]}, False),
    # A deny rule for every address closes, it does not open.
    ("no-every-address", trust.FIREWALL, {"denies": [{"protocol": "tcp"}], "sourceRanges": ["0.0.0.0/0"]}, False),
    (
        "no-every-address",
        trust.CLUSTER,
        {"masterAuthorizedNetworksConfig": {"cidrBlocks": [{"cidrBlock": "0.0.0.0/1"}, {"cidrBlock": "128.0.0.0/1"}]}},
        True,
    ),
    (
        "no-every-address",
        trust.CLUSTER,
        {"masterAuthorizedNetworksConfig": {"cidrBlocks": [{"cidrBlock": "203.0.113.0/24"}]}},
        False,
    ),
    ("host-namespaces-only-where-needed", *pod("Pod", "x", hostPID=True), True),
    ("host-namespaces-only-where-needed", *pod("DaemonSet", "deepep-installer", hostPID=True), False),
    ("host-namespaces-only-where-needed", *pod("DaemonSet", "deepep-installer", "other", hostPID=True), True),
    (
        "host-namespaces-only-where-needed",
        *pod("Job", "x", volumes=[{"name": "root", "hostPath": {"path": "/"}}]),
        True,
    ),
    (
        "host-namespaces-only-where-needed",
        *pod("Job", "x", volumes=[{"name": "gib", "hostPath": {"path": "/home/kubernetes/bin/gib"}}]),
        False,
    ),
    ("host-namespaces-only-where-needed", *pod("Job", "deepep-intranode", hostNetwork=True), True),
    ("host-namespaces-only-where-needed", *pod("Job", "deepep-internode", hostNetwork=True), False),
    ("host-namespaces-only-where-needed", *pod("Job", "deepep-low-latency", hostNetwork=True), False),
    ("images-by-digest", *pod("Pod", "x", containers=[{"name": "c", "image": "ubuntu:24.04"}]), True),
    ("images-by-digest", *pod("Pod", "x", initContainers=[{"name": "i", "image": "busybox"}]), True),
    ("images-by-digest", *pod("Pod", "x"), False),
]


@pytest.mark.parametrize(("rule", "type_", "props", "refused"), CASES)
def test_each_trust_rule_refuses_and_allows(rule: str, type_: str, props: dict[str, Any], refused: bool) -> None:
    _, check = rules.RESOURCE_RULES[rule]
    problems = check(type_, props)
    assert bool(problems) == refused, problems
    others = [n for n, (_, c) in trust.RESOURCE_RULES.items() if n != rule and c(type_, props)]
    assert not others, f"{others} also fire: each case tests one rule"


def test_every_trust_rule_has_a_refused_and_an_allowed_case() -> None:
    for rule in trust.RESOURCE_RULES:
        assert {refused for r, _, _, refused in CASES if r == rule} == {True, False}, rule


@pytest.mark.parametrize("stack", plan_engine.available_stacks())
@pytest.mark.parametrize("pod_networking", ["hostNetwork", "multiNetwork"])
def test_the_stacks_plans_pass_the_trust_rules(stack: str, pod_networking: str) -> None:
    if stack_config(stack).get("deepep-a4:platform", "gke") != "gke":
        if pod_networking != "hostNetwork":
            pytest.skip("podNetworking is a GKE key")
        result = plan(stack)
    else:
        result = plan(stack, podNetworking=pod_networking)
    problems = [
        (name, r["name"], msg)
        for r in result.resources
        for name, (_, check) in trust.RESOURCE_RULES.items()
        for msg in check(r["type"], r["inputs"])
    ]
    assert problems == []

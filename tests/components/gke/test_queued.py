"""GKE flex-start brings every A4 node up at once: queued provisioning (components/gke/queued.py), rendered and
validated by the CRD schema gate (schemas/autoscaling.x-k8s.io, from kubernetes/autoscaler's CRD)."""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from ci.gates import k8s_schemas
from components.gke import queued
from deepep_a4.plan import engine as plan_engine
from deepep_a4.plan.command import kubernetes_manifests
from tests.conftest import plan

DEFS = k8s_schemas._definitions("1.33")


@pytest.fixture(scope="module")
def flex() -> plan_engine.PlanResult:
    return plan("gke-b200", provisioning="flex-start")


def one(result: plan_engine.PlanResult, type_: str, name_part: str = "") -> dict[str, Any]:
    (found,) = [r for r in result.resources if r["type"] == type_ and name_part in r["name"]]
    return found["inputs"]


def test_the_pool_is_as_gke_requires_for_queued_provisioning(flex: plan_engine.PlanResult) -> None:
    pool = one(flex, "gcp:container/nodePool:NodePool", "a4")
    assert pool["queuedProvisioning"] == {"enabled": True}
    assert pool["nodeConfig"]["flexStart"] is True  # both flags: --flex-start --enable-queued-provisioning
    assert pool["nodeConfig"]["reservationAffinity"] == {"consumeReservationType": "NO_RESERVATION"}
    assert pool["initialNodeCount"] == 0 and "nodeCount" not in pool
    assert pool["autoscaling"] == {"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "ANY"}
    assert pool["management"]["autoRepair"] is False


def test_the_request_asks_for_every_node_with_the_ttl_and_the_jobs_consume_it(flex: plan_engine.PlanResult) -> None:
    request = one(flex, "kubernetes:autoscaling.x-k8s.io/v1:ProvisioningRequest")
    assert request["spec"]["provisioningClassName"] == "queued-provisioning.gke.io"
    assert request["spec"]["parameters"] == {"maxRunDurationSeconds": str(8 * 3600)}
    (pod_set,) = request["spec"]["podSets"]
    assert pod_set == {"count": 2, "podTemplateRef": {"name": queued.REQUEST_NAME}}
    template = one(flex, "kubernetes:core/v1:PodTemplate")
    spec = template["template"]["spec"]
    assert spec["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == 8
    for job in [r["inputs"] for r in flex.resources if r["type"] == "kubernetes:batch/v1:Job"]:
        annotations = job["spec"]["template"]["metadata"]["annotations"]
        assert annotations[queued.CONSUME_ANNOTATION] == queued.REQUEST_NAME
        assert annotations[queued.CLASS_ANNOTATION] == "queued-provisioning.gke.io"


def test_up_does_not_wait_for_the_daemon_sets_whose_nodes_come_later(flex: plan_engine.PlanResult) -> None:
    daemon_sets = [r["inputs"] for r in flex.resources if r["type"] == "kubernetes:apps/v1:DaemonSet"]
    assert daemon_sets
    for ds in daemon_sets:
        assert ds["metadata"]["annotations"]["pulumi.com/skipAwait"] == "true", ds["metadata"]["name"]


def test_spot_is_not_queued() -> None:
    spot = plan("gke-b200")
    assert not [r for r in spot.resources if "ProvisioningRequest" in r["type"]]
    for r in spot.resources:
        if r["type"] == "kubernetes:apps/v1:DaemonSet":
            assert "pulumi.com/skipAwait" not in r["inputs"]["metadata"]["annotations"]


def test_the_rendered_request_and_template_pass_the_schema_gate(flex: plan_engine.PlanResult) -> None:
    manifests = kubernetes_manifests(flex.resources)
    kinds = [next(iter(yaml.safe_load_all(t)))["kind"] for t in manifests.values()]
    assert kinds.index("PodTemplate") < kinds.index("ProvisioningRequest")  # the request names the template
    for rel, text in manifests.items():
        for doc in yaml.safe_load_all(text):
            assert k8s_schemas.validate_doc(doc, "1.33", DEFS) == [], rel


def test_the_gate_refuses_a_request_the_crd_refuses(flex: plan_engine.PlanResult) -> None:
    manifests = kubernetes_manifests(flex.resources)
    (text,) = [t for t in manifests.values() if "kind: ProvisioningRequest" in t]
    doc = yaml.safe_load(text)
    doc["spec"]["podSets"][0]["count"] = 0  # the CRD's minimum: 1
    assert k8s_schemas.validate_doc(doc, "1.33", DEFS)
    doc = yaml.safe_load(text)
    doc["spec"]["maxRunDurationSeconds"] = "3600"  # a parameter outside `parameters`: unknown field
    assert k8s_schemas.validate_doc(doc, "1.33", DEFS)

"""`pulumi destroy` leaves nothing: every resource type either stack registers is known to be removable.

The one exception is on purpose and lives outside these stacks: the artifact store's bucket (docs/store.md)
belongs to its own project (store/), so destroying a benchmark stack removes only the nodes' grants on it.

A new resource type fails here until it is added to DESTROYABLE with the reason destroy can remove it
(and the check that keeps it so). Nothing may be protected or retained on delete; Kubernetes objects go
through the cluster's explicit provider, so Pulumi deletes them before the cluster they live in.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from deepep_a4.plan import engine as plan_engine
from tests.conftest import stack_config

ROOT = Path(__file__).resolve().parents[2]
STACKS = ("gke-b200", "gce-b200")
Inputs = dict[str, Any]


def always(_: Inputs) -> bool:
    return True


# type -> (why destroy removes it, the check on its inputs that keeps that true)
DESTROYABLE: dict[str, tuple[str, Callable[[Inputs], bool]]] = {
    "pulumi:providers:gcp": ("a provider holds no cloud state", always),
    "pulumi:providers:kubernetes": ("a provider holds no cloud state", always),
    "pulumi:index:Stash": (
        "a value in the stack's state (the GCE boot image chosen once, the deadline, gIB's digest), no cloud state",
        always,
    ),
    "gcp:cloudscheduler/job:Job": ("plain delete (before the node pool its URI names)", always),
    "gcp:compute/network:Network": ("deleted after its subnets, firewalls and router (dependencies)", always),
    "gcp:compute/subnetwork:Subnetwork": ("deleted after the VMs and node pools using it", always),
    "gcp:compute/firewall:Firewall": ("plain delete", always),
    "gcp:compute/router:Router": ("deleted after its NAT", always),
    "gcp:compute/routerNat:RouterNat": ("plain delete", always),
    "gcp:compute/address:Address": ("internal address, released once its VM is gone", always),
    "gcp:compute/resourcePolicy:ResourcePolicy": ("deleted after the VMs placed by it", always),
    "gcp:compute/instance:Instance": (
        "deletion protection off; boot disk auto-deleted with the VM",
        lambda i: i.get("deletionProtection") in (None, False) and i["bootDisk"].get("autoDelete") in (None, True),
    ),
    "gcp:container/cluster:Cluster": (
        "deletion protection explicitly off (the provider defaults it to on)",
        lambda i: i.get("deletionProtection") is False,
    ),
    # When the deadline job deleted the A4 pool first, the provider's delete finds it gone (404) and succeeds
    # (terraform-provider-google, google/services/container/resource_container_node_pool.go).
    "gcp:container/nodePool:NodePool": ("deleted before its cluster; already gone after the deadline is fine", always),
    "gcp:serviceaccount/account:Account": ("plain delete", always),
    "gcp:projects/iAMMember:IAMMember": ("removes only its own binding", always),
    # Soft-deleted for 7 days; the id carries the deadline's hash, so the next `up` never needs it back
    # (components/gke/deadline.py role_id).
    "gcp:projects/iAMCustomRole:IAMCustomRole": ("deleted (soft, 7 days) after the grant that names it", always),
    "gcp:storage/bucket:Bucket": (
        "force_destroy empties it on delete; no soft-deleted copies stay",
        lambda i: (
            i.get("forceDestroy") is True
            and (i.get("softDeletePolicy") or {}).get("retentionDurationSeconds") in (None, 0)
        ),
    ),
    "gcp:storage/bucketIAMMember:BucketIAMMember": ("removes only its own binding", always),
}
K8S_DESTROYABLE = {
    "kubernetes:core/v1:Namespace",
    "kubernetes:core/v1:ServiceAccount",
    "kubernetes:core/v1:ConfigMap",
    "kubernetes:core/v1:ResourceQuota",
    "kubernetes:core/v1:Service",
    "kubernetes:apps/v1:DaemonSet",
    "kubernetes:batch/v1:Job",
    "kubernetes:networking.k8s.io/v1:NetworkPolicy",
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole",
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding",
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy",
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding",
    "kubernetes:networking.gke.io/v1:Network",
    "kubernetes:networking.gke.io/v1:GKENetworkParamSet",
}


class OptionsMonitor(plan_engine.RecordingMonitor):
    """Also records each registration's protect and retainOnDelete options."""

    options: ClassVar[dict[tuple[str, str], tuple[bool, bool]]] = {}

    def RegisterResource(self, request):  # the gRPC method's name
        OptionsMonitor.options[(request.type, request.name)] = (
            bool(getattr(request, "protect", False)),
            bool(getattr(request, "retainOnDelete", False)),
        )
        return super().RegisterResource(request)


@pytest.fixture(scope="module", params=STACKS)
def registered(request: pytest.FixtureRequest) -> tuple[str, list[dict[str, Any]], dict[tuple[str, str], Any]]:
    mp = pytest.MonkeyPatch()
    mp.setattr(plan_engine, "RecordingMonitor", OptionsMonitor)
    OptionsMonitor.options = {}
    try:
        result, _ = plan_engine.run_program(request.param, stack_config(request.param))
    finally:
        mp.undo()
    return request.param, result.resources, dict(OptionsMonitor.options)


def test_every_registered_type_is_known_destroyable(registered: tuple[str, list[dict[str, Any]], Any]) -> None:
    stack, resources, _ = registered
    unknown = sorted(
        {
            r["type"]
            for r in resources
            if not r["type"].startswith("deepep-a4:")  # components: no cloud state of their own
            and r["type"] not in DESTROYABLE
            and r["type"] not in K8S_DESTROYABLE
        }
    )
    assert unknown == [], f"{stack}: add these to tests/components/test_teardown.py with how destroy removes them"
    failing = [
        (r["type"], r["name"], DESTROYABLE[r["type"]][0])
        for r in resources
        if r["type"] in DESTROYABLE and not DESTROYABLE[r["type"]][1](r["inputs"])
    ]
    assert failing == []


def test_nothing_is_protected_or_retained(registered: tuple[str, list[dict[str, Any]], Any]) -> None:
    stack, resources, options = registered
    assert len(options) >= len(resources) > 0
    held = [key for key, (protect, retain) in options.items() if protect or retain]
    assert held == [], f"{stack}: protect/retainOnDelete would make destroy leave these behind"


def test_kubernetes_objects_go_through_the_clusters_provider(registered: tuple[str, list[dict[str, Any]], Any]) -> None:
    stack, resources, _ = registered
    k8s = [r for r in resources if r["type"].startswith("kubernetes:")]
    providers = {r["name"]: r for r in resources if r["type"] == "pulumi:providers:kubernetes"}
    if stack == "gce-b200":
        assert k8s == [] and providers == {}
        return
    assert k8s, "the GKE stack registers Kubernetes objects"
    clusters = [r for r in resources if r["type"] == "gcp:container/cluster:Cluster"]
    assert len(clusters) == 1
    for r in k8s:
        assert r["provider"] in providers, f"{r['name']} uses {r['provider']!r}, not the cluster's provider"
    # The provider is built from the cluster's (DNS) endpoint: it depends on the cluster, so destroy removes
    # every object through it before the cluster goes (the mocks give a <hash>.<region>.gke.goog endpoint).
    for provider in providers.values():
        assert ".gke.goog" in json.dumps(provider["inputs"])
        assert clusters[0]["name"] in provider["dependsOn"]


@pytest.mark.parametrize("pod_networking", ["multiNetwork", "hostNetwork"])
def test_benchmark_jobs_are_deleted_before_the_networks_their_pods_attach_to(pod_networking: str) -> None:
    """Destroy deletes a resource before what it depends on: every Job depends on every multi-network object."""
    result, _ = plan_engine.run_program("gke-b200", stack_config("gke-b200", podNetworking=pod_networking))
    networks = {
        r["name"]
        for r in result.resources
        if r["type"]
        in ("kubernetes:networking.gke.io/v1:Network", "kubernetes:networking.gke.io/v1:GKENetworkParamSet")
    }
    jobs = [r for r in result.resources if r["type"] == "kubernetes:batch/v1:Job"]
    assert len(networks) == 18 and jobs
    for job in jobs:
        assert networks <= set(job["dependsOn"]), job["name"]


def test_a_protected_resource_would_be_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    import pulumi
    import pulumi_gcp as gcp

    monkeypatch.setattr(plan_engine, "RecordingMonitor", OptionsMonitor)
    OptionsMonitor.options = {}

    def program() -> None:
        gcp.compute.Network("kept", opts=pulumi.ResourceOptions(protect=True))
        gcp.compute.Network("free")

    plan_engine.run_program("gce-b200", stack_config("gce-b200"), program)
    assert OptionsMonitor.options[("gcp:compute/network:Network", "kept")] == (True, False)
    assert OptionsMonitor.options[("gcp:compute/network:Network", "free")] == (False, False)


def test_the_program_creates_cloud_objects_only_as_resources() -> None:
    """No shell-outs from the program: what destroy cannot see, it cannot remove."""
    program = [ROOT / "__main__.py", *sorted((ROOT / "components").glob("*.py"))]
    pattern = re.compile(r"\b(subprocess|os\.system|os\.popen|pulumi_command|local\.Command)\b")
    offenders = [f"{p.name}: {m.group(0)}" for p in program for m in pattern.finditer(p.read_text())]
    assert offenders == []


def test_the_artifact_store_is_the_one_exception_and_not_in_a_benchmark_stack() -> None:
    """A benchmark stack only grants its nodes access to the store; the bucket is the store project's,
    protected there, so `pulumi destroy` of a benchmark stack never empties it (docs/store.md)."""
    for stack in STACKS:
        result, _ = plan_engine.run_program(stack, stack_config(stack, artifactStore="gs://my-store/deepep-a4"))
        store = [r for r in result.resources if r["parent"] == "store"]
        assert store and {r["type"] for r in store} == {"gcp:storage/bucketIAMMember:BucketIAMMember"}
        buckets = [r["inputs"]["name"] for r in result.resources if r["type"] == "gcp:storage/bucket:Bucket"]
        assert "deepep-a4-demo-artifacts" not in buckets
    program = (ROOT / "store/__main__.py").read_text() + (ROOT / "components/node/store_grants.py").read_text()
    assert "protect=True" in program

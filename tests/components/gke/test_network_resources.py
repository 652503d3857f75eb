"""Multi-network benchmark pods schedule on what an A4 node advertises (issue 42 item 3, troubleshooting T27).

The real rules, each from its source:
- GKE's webhook (GKE Warden) adds, for every network a pod names in `networking.gke.io/interfaces`, a request and
  limit of 1 for `networking.gke.io.networks/<network>` and for `<network>.IP` (llm-d/llm-d#1730, the requests it
  shows on a Pending pod); a resource the container already names is left as it is, which is what llm-d's fix
  relies on (llm-d guides/wide-ep-lws/modelserver/gpu/vllm-deepseek-r1-0528/gke/kustomization.yaml at
  2812018fc2002bd5dabff92eaae97281489889aa: "Setting the legacy non-.IP resource limit to 0 bypasses the request
  while GKE Warden still injects the .IP variant").
- The scheduler (kubernetes/kubernetes pkg/scheduler/framework/plugins/noderesources/fit.go `fitsRequest`): an
  extended resource's request of 0 is skipped; any other must not exceed allocatable minus requested, and a
  resource the node does not list has allocatable 0.
- What a node advertises, as the staging init records it (scripts/gke/stage-init.sh `advertised_networks`, run
  here in bash on the Node JSON): llm-d#1730's H200 nodes list only `.IP`; others list both.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml

from components.gke.network_resources import RESOURCE_PREFIX, named_networks
from deepep_a4.plan.command import kubernetes_manifests
from tests.conftest import plan
from tests.scripts.test_stage_init_networks import advertised

RDMA_TESTS = ("deepep-low-latency", "deepep-internode")


def job_pods(networking: str = "multiNetwork") -> dict[str, dict[str, Any]]:
    result = plan("gke-b200", podNetworking=networking)
    objects = [yaml.safe_load(t) for t in kubernetes_manifests(result.resources).values()]
    return {o["metadata"]["name"]: o["spec"]["template"] for o in objects if o["kind"] == "Job"}


def webhook(template: dict[str, Any]) -> dict[str, Any]:
    """GKE Warden's mutation of a pod that names networks (module doc): 1 of each entry it lacks."""
    pod = copy.deepcopy(template)
    resources = pod["spec"]["containers"][0].setdefault("resources", {})
    for network in named_networks(pod["metadata"].get("annotations") or {}):
        for name in (f"{RESOURCE_PREFIX}{network}", f"{RESOURCE_PREFIX}{network}.IP"):
            for kind in ("requests", "limits"):
                resources.setdefault(kind, {}).setdefault(name, "1")
    return pod


def node_allocatable(record: str) -> dict[str, int]:
    """stage-init's `network=quantity ...` record back into the node's allocatable entries."""
    pairs = (item.split("=", 1) for item in record.split())
    return {f"{RESOURCE_PREFIX}{name}": int(qty) for name, qty in pairs}


def unfit(pod: dict[str, Any], allocatable: dict[str, int]) -> list[str]:
    """fitsRequest for the networking.gke.io.networks extended resources of the pod's containers."""
    requested: dict[str, int] = {}
    for c in pod["spec"]["containers"]:
        for name, qty in ((c.get("resources") or {}).get("requests") or {}).items():
            if name.startswith(RESOURCE_PREFIX):
                requested[name] = requested.get(name, 0) + int(qty)
    return [f"Insufficient {n}" for n, q in sorted(requested.items()) if q != 0 and q > allocatable.get(n, 0)]


def a4_node(networks: list[str], with_plain: bool) -> dict[str, int]:
    entries = {f"{RESOURCE_PREFIX}{n}.IP": "1" for n in networks}
    if with_plain:
        entries |= {f"{RESOURCE_PREFIX}{n}": "1" for n in networks}
    return node_allocatable(advertised({"status": {"allocatable": {"cpu": "224", **entries}}}))


@pytest.fixture(scope="module")
def multi() -> dict[str, dict[str, Any]]:
    return job_pods()


def test_rdma_pods_schedule_on_nodes_advertising_only_ip_or_both(multi: dict[str, dict[str, Any]]) -> None:
    pods = multi
    for name in RDMA_TESTS:
        pod = webhook(pods[name])
        networks = named_networks(pods[name]["metadata"]["annotations"])
        assert len(networks) == 8 and all(n.endswith(f"rdma-{i}") for i, n in enumerate(networks))
        for with_plain in (False, True):
            assert unfit(pod, a4_node(networks, with_plain)) == [], (name, with_plain)
        # The webhook still asks for the `.IP` entry: a node without the networks takes no pod.
        assert unfit(pod, {}) == [f"Insufficient {RESOURCE_PREFIX}{n}.IP" for n in sorted(networks)]


def test_without_the_zeros_an_ip_only_node_leaves_the_pod_pending(multi: dict[str, dict[str, Any]]) -> None:
    """llm-d#1730 as it happened: the pod as the Jobs rendered it before the fix."""
    template = copy.deepcopy(multi["deepep-low-latency"])
    resources = template["spec"]["containers"][0]["resources"]
    for kind in ("requests", "limits"):
        resources[kind] = {k: v for k, v in resources[kind].items() if not k.startswith(RESOURCE_PREFIX)}
    networks = named_networks(template["metadata"]["annotations"])
    pod = webhook(template)
    assert unfit(pod, a4_node(networks, with_plain=False)) == [
        f"Insufficient {RESOURCE_PREFIX}{n}" for n in sorted(networks)
    ]
    assert unfit(pod, a4_node(networks, with_plain=True)) == []


def test_zeros_only_where_networks_are_named(multi: dict[str, dict[str, Any]]) -> None:
    """The zero is set in requests and limits alike (an extended resource's request equals its limit) and only
    on pods that name networks: not intranode, not any pod with `podNetworking: hostNetwork`."""
    for pods in (multi, job_pods("hostNetwork")):
        for name, template in pods.items():
            resources = template["spec"]["containers"][0]["resources"]
            zeros = {k: v for k, v in resources["requests"].items() if k.startswith(RESOURCE_PREFIX)}
            named = named_networks(template["metadata"].get("annotations") or {})
            assert zeros == {f"{RESOURCE_PREFIX}{n}": "0" for n in named}, name
            assert {k: v for k, v in resources["limits"].items() if k.startswith(RESOURCE_PREFIX)} == zeros, name
    assert not named_networks(multi["deepep-intranode"]["metadata"].get("annotations") or {})

"""The multi-network resources of a benchmark pod: a "0" for each plain `networking.gke.io.networks/<network>`.

A pod that names GKE networks in `networking.gke.io/interfaces` gets, from GKE's mutating webhook (GKE Warden),
a request for two extended resources per network: `networking.gke.io.networks/<network>` and
`networking.gke.io.networks/<network>.IP` (llm-d/llm-d#1730: "Pod requests (auto-injected by GKE):
networking.gke.io.networks/rdma-0: 1, networking.gke.io.networks/rdma-0.IP: 1"). Nodes that advertise only the
`.IP` entry leave such a pod Pending: the scheduler finds no allocatable for the plain one (#1730 saw it on H200
nodes; GKE's node IPAM writes only the `.IP` capacity, kubernetes/cloud-provider-gcp
pkg/controller/nodeipam/ipam/multinetwork_cloud_cidr_allocator.go `allocateIPCapacity`, troubleshooting T27).

llm-d's fix (llm-d/llm-d#1738; the GKE overlay guides/wide-ep-lws/modelserver/gpu/vllm-deepseek-r1-0528/gke/
kustomization.yaml at 2812018fc2002bd5dabff92eaae97281489889aa): set the plain resource's request and limit to
"0" for every RDMA network; the webhook leaves a resource the container already names alone and still adds the
`.IP` one, and the scheduler skips a zero request (kubernetes/kubernetes pkg/scheduler/framework/plugins/
noderesources/fit.go `fitsRequest`: "Skip in case request quantity is zero"). A zero fits a node that
advertises both entries as well, so the Jobs set it always: which kind of node the pool has is recorded by the
staging init (`advertisedNetworks` in state/node.json, scripts/gke/stage-init.sh) but not known at plan time.
The interface itself comes from the annotation, not from the request.
"""

from __future__ import annotations

import json
from typing import Any

RESOURCE_PREFIX = "networking.gke.io.networks/"
POD_NETWORK = "default"  # the pod network's entry in the annotation: no resource


def named_networks(annotations: dict[str, str]) -> list[str]:
    """The GKE networks a pod names in `networking.gke.io/interfaces`, in order, the pod network left out."""
    raw = annotations.get("networking.gke.io/interfaces")
    if not raw:
        return []
    return [i["network"] for i in json.loads(raw) if i["network"] != POD_NETWORK]


def plain_network_zeros(annotations: dict[str, str]) -> dict[str, str]:
    """`networking.gke.io.networks/<network>: "0"` for each network the pod names (llm-d's overlay)."""
    return {f"{RESOURCE_PREFIX}{n}": "0" for n in named_networks(annotations)}


def with_network_zeros(spec: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    """The pod spec with the zeros in its first container's requests and limits (llm-d sets both: an extended
    resource's request must equal its limit)."""
    zeros = plain_network_zeros(annotations)
    if zeros:
        resources = spec["containers"][0]["resources"]
        resources["limits"] = {**resources.get("limits", {}), **zeros}
        resources["requests"] = {**resources.get("requests", {}), **zeros}
    return spec

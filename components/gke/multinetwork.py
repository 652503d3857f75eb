"""GkeMultiNetwork: one GKENetworkParamSet + Network per additional A4 NIC, so pods can take the NICs.

GKE multi-networking hands a node's extra NICs to pods that name a `Network` in their
`networking.gke.io/interfaces` annotation: `NetDevice` mode moves the second gVNIC into the pod,
`RDMA` mode gives it an RDMA NIC with its /dev/infiniband device. Pods without the annotation (and
hostNetwork pods, the field reports' way) are unaffected, so the objects exist whatever `podNetworking` says.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.network import NicNetwork

API_VERSION = "networking.gke.io/v1"
GVNIC_DEVICE_MODE = "NetDevice"
RDMA_DEVICE_MODE = "RDMA"


@dataclass(frozen=True)
class NetworkObject:
    """One additional NIC as Kubernetes sees it: object name, device mode, VPC and subnet."""

    key: str  # gvnic-1, rdma-0 .. rdma-7: the names GKE's A4 guides use
    name: str  # the key behind the stack's prefix
    device_mode: str
    nic: NicNetwork


def network_objects(name_prefix: str, additional_networks: Sequence[NicNetwork]) -> list[NetworkObject]:
    """nic1 (gVNIC) and nic2..nic9 (RDMA) as named objects, in NIC order."""
    gvnic, *rdma = additional_networks
    keyed = [("gvnic-1", GVNIC_DEVICE_MODE, gvnic)] + [(f"rdma-{i}", RDMA_DEVICE_MODE, n) for i, n in enumerate(rdma)]
    return [NetworkObject(key, f"{name_prefix}-{key}", mode, nic) for key, mode, nic in keyed]


@dataclass(frozen=True)
class GkeMultiNetworkArgs:
    name_prefix: str
    additional_networks: Sequence[NicNetwork]


class GkeMultiNetwork(pulumi.ComponentResource):
    """The GKENetworkParamSet and Network objects of every additional NIC; the children take the cluster's
    Kubernetes provider from `opts` (providers) through their parent."""

    param_sets: list[k8s.apiextensions.CustomResource]
    networks: list[k8s.apiextensions.CustomResource]

    def __init__(self, name: str, args: GkeMultiNetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:MultiNetwork", name, None, opts)
        name_prefix, additional_networks = args.name_prefix, args.additional_networks
        self.objects = network_objects(name_prefix, additional_networks)
        self.param_sets = []
        self.networks = []
        for obj in self.objects:
            params = k8s.apiextensions.CustomResource(
                f"{name}-{obj.key}-params",
                api_version=API_VERSION,
                kind="GKENetworkParamSet",
                metadata={"name": obj.name},
                spec={"vpc": obj.nic.network.name, "vpcSubnet": obj.nic.subnetwork.name, "deviceMode": obj.device_mode},
                opts=pulumi.ResourceOptions(parent=self),
            )
            network = k8s.apiextensions.CustomResource(
                f"{name}-{obj.key}",
                api_version=API_VERSION,
                kind="Network",
                metadata={"name": obj.name},
                spec={
                    "type": "Device",
                    "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": obj.name},
                },
                opts=pulumi.ResourceOptions(parent=self, depends_on=[params]),
            )
            self.param_sets.append(params)
            self.networks.append(network)
        self.register_outputs({"networks": self.network_names})

    @property
    def network_names(self) -> list[str]:
        """Every Network object's name in NIC order (gVNIC first)."""
        return [o.name for o in self.objects]

    @property
    def rdma_network_names(self) -> list[str]:
        """The eight RDMA Network objects' names in NIC order: what a pod names to get the RDMA NICs."""
        return [o.name for o in self.objects if o.device_mode == RDMA_DEVICE_MODE]

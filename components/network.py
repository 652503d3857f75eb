"""A4Network: the three VPCs an a4-highgpu-8g needs, plus NAT and a closed firewall.

An A4 machine has ten NICs: two gVNIC NICs, each of which must sit in its own VPC, and eight RDMA
(MRDMA) NICs that live in one RoCE VPC created from the zone's `<zone>-vpc-roce` network profile.
The RoCE VPC is zonal and takes only MRDMA NICs, so the two gVNIC VPCs are separate networks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components.config import IAP_SOURCE_RANGE, NetworkConfig, StackConfig

# Largest MTU Google allows; the RoCE profile needs it and gVNIC gains from it.
A4_MTU = 8896
PODS_RANGE_NAME = "pods"
SERVICES_RANGE_NAME = "services"


def roce_network_profile(project: str, zone: str) -> str:
    """There is no data source for network profiles: the value is this well-known path."""
    return f"projects/{project}/global/networkProfiles/{zone}-vpc-roce"


@dataclass(frozen=True)
class A4NetworkArgs:
    """The network reads the stack's place (project, region, zone, names) and its `network` section."""

    cfg: StackConfig


@dataclass(frozen=True)
class NicNetwork:
    """One (network, subnetwork) pair a NIC attaches to."""

    network: gcp.compute.Network
    subnetwork: gcp.compute.Subnetwork


class A4Network(pulumi.ComponentResource):
    """Host VPC (nic0, GKE ranges, NAT), second gVNIC VPC (nic1) and RoCE VPC with 8 subnets (nic2-9)."""

    host: NicNetwork
    gvnic: NicNetwork
    rdma_network: gcp.compute.Network
    rdma_subnets: list[gcp.compute.Subnetwork]

    def __init__(self, name: str, args: A4NetworkArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:network:A4Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cfg = args.cfg
        c: NetworkConfig = cfg.network

        def vpc(suffix: str, description: str, profile: str | None = None) -> gcp.compute.Network:
            return gcp.compute.Network(
                f"{name}-{suffix}",
                name=cfg.name(suffix),
                auto_create_subnetworks=False,
                mtu=A4_MTU,
                network_profile=profile,
                description=description,
                opts=child,
            )

        def subnet(suffix: str, network: gcp.compute.Network, cidr: str, **extra: Any) -> gcp.compute.Subnetwork:
            return gcp.compute.Subnetwork(
                f"{name}-{suffix}",
                name=cfg.name(suffix),
                region=cfg.region,
                network=network.id,
                ip_cidr_range=cidr,
                opts=child,
                **extra,
            )

        host_net = vpc("host", "A4 nic0: nodes, GKE pods and services")
        host_subnet = subnet(
            "host",
            host_net,
            c.host_cidr,
            private_ip_google_access=True,
            secondary_ip_ranges=[
                gcp.compute.SubnetworkSecondaryIpRangeArgs(range_name=PODS_RANGE_NAME, ip_cidr_range=c.pods_cidr),
                gcp.compute.SubnetworkSecondaryIpRangeArgs(
                    range_name=SERVICES_RANGE_NAME, ip_cidr_range=c.services_cidr
                ),
            ],
        )
        self.host = NicNetwork(host_net, host_subnet)

        gvnic_net = vpc("gvnic", "A4 nic1: the second gVNIC NIC needs a VPC of its own")
        gvnic_subnet = subnet("gvnic", gvnic_net, c.gvnic_cidr, private_ip_google_access=True)
        self.gvnic = NicNetwork(gvnic_net, gvnic_subnet)

        self.rdma_network = vpc(
            "rdma", f"A4 nic2-9: RoCE VPC of zone {cfg.zone}", roce_network_profile(cfg.project, cfg.zone)
        )
        self.rdma_subnets = [subnet(f"rdma-{i}", self.rdma_network, cidr) for i, cidr in enumerate(c.rdma_subnet_cidrs)]

        # Private nodes have no external IP: NAT is how they reach apt, PyPI and GitHub.
        self.router = gcp.compute.Router(
            f"{name}-router", name=cfg.name("router"), region=cfg.region, network=host_net.id, opts=child
        )
        self.nat = gcp.compute.RouterNat(
            f"{name}-nat",
            name=cfg.name("nat"),
            region=cfg.region,
            router=self.router.name,
            nat_ip_allocate_option="AUTO_ONLY",
            source_subnetwork_ip_ranges_to_nat="ALL_SUBNETWORKS_ALL_IP_RANGES",
            log_config=gcp.compute.RouterNatLogConfigArgs(enable=True, filter="ERRORS_ONLY"),
            opts=child,
        )

        self.firewalls = [
            _allow_internal(
                f"{name}-host-internal", cfg.name("host-internal"), host_net, [c.host_cidr, c.pods_cidr], child
            ),
            _allow_internal(f"{name}-gvnic-internal", cfg.name("gvnic-internal"), gvnic_net, [c.gvnic_cidr], child),
        ]
        if c.ssh_via_iap:
            self.firewalls.append(
                gcp.compute.Firewall(
                    f"{name}-iap-ssh",
                    name=cfg.name("iap-ssh"),
                    network=host_net.id,
                    direction="INGRESS",
                    source_ranges=[IAP_SOURCE_RANGE],
                    allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
                    description="SSH through Identity-Aware Proxy only",
                    opts=child,
                )
            )

        self.register_outputs(
            {
                "hostNetwork": host_net.name,
                "gvnicNetwork": gvnic_net.name,
                "rdmaNetwork": self.rdma_network.name,
                "rdmaSubnets": [s.name for s in self.rdma_subnets],
            }
        )

    @property
    def additional_networks(self) -> list[NicNetwork]:
        """The networks of nic1..nic9 in NIC order: the second gVNIC, then the eight RDMA subnets."""
        return [self.gvnic] + [NicNetwork(self.rdma_network, s) for s in self.rdma_subnets]


def _allow_internal(
    name: str, gcp_name: str, network: gcp.compute.Network, sources: list[str], opts: pulumi.ResourceOptions
) -> gcp.compute.Firewall:
    return gcp.compute.Firewall(
        name,
        name=gcp_name,
        network=network.id,
        direction="INGRESS",
        source_ranges=sources,
        allows=[
            gcp.compute.FirewallAllowArgs(protocol="tcp"),
            gcp.compute.FirewallAllowArgs(protocol="udp"),
            gcp.compute.FirewallAllowArgs(protocol="icmp"),
        ],
        description="Traffic between the stack's own nodes and pods",
        opts=opts,
    )

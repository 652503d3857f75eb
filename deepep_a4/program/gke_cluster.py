"""GkeCluster: the GKE control plane an A4 RDMA node pool needs, and the explicit Kubernetes provider.

A4's eight RDMA NICs reach pods only through GKE multi-networking, which needs a VPC-native cluster
with Dataplane V2. Nodes are private (they reach the internet through the network's NAT). The
default node pool is removed: the A4 and system pools are managed on their own (gke_nodepool.py).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from deepep_a4.config import StackConfig
from deepep_a4.program.network import PODS_RANGE_NAME, SERVICES_RANGE_NAME, A4Network

AUTH_PLUGIN = "gke-gcloud-auth-plugin"
AUTH_PLUGIN_HINT = (
    "Install gke-gcloud-auth-plugin (gcloud components install gke-gcloud-auth-plugin), see "
    "https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl"
)


@dataclass(frozen=True)
class GkeClusterArgs:
    """The cluster-relevant values of the stack config."""

    name: str
    project: str
    region: str
    zone: str
    master_cidr: str
    version: str
    release_channel: str
    public_endpoint: bool
    authorized_networks: tuple[str, ...]
    deletion_protection: bool
    network: A4Network

    @staticmethod
    def from_config(cfg: StackConfig, network: A4Network) -> GkeClusterArgs:
        return GkeClusterArgs(
            network=network,
            name=cfg.name("gke"),
            project=cfg.project,
            region=cfg.region,
            zone=cfg.zone,
            master_cidr=cfg.network.master_cidr,
            version=cfg.gke.version,
            release_channel=cfg.gke.release_channel,
            public_endpoint=cfg.gke.public_endpoint,
            authorized_networks=cfg.gke.authorized_networks,
            deletion_protection=cfg.gke.deletion_protection,
        )


def render_kubeconfig(context: str, endpoint: str, ca_certificate: str) -> str:
    """A kubeconfig that authenticates as the caller's gcloud identity: no key is ever stored."""
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": context,
                "cluster": {"server": f"https://{endpoint}", "certificate-authority-data": ca_certificate},
            }
        ],
        "contexts": [{"name": context, "context": {"cluster": context, "user": context}}],
        "current-context": context,
        "users": [
            {
                "name": context,
                "user": {
                    "exec": {
                        "apiVersion": "client.authentication.k8s.io/v1beta1",
                        "command": AUTH_PLUGIN,
                        "installHint": AUTH_PLUGIN_HINT,
                        "provideClusterInfo": True,
                        "interactiveMode": "Never",
                    }
                },
            }
        ],
    }
    return json.dumps(doc, indent=2)  # JSON is YAML: kubectl and the provider both read it


def get_credentials_command(args: GkeClusterArgs) -> str:
    """What a user runs for kubectl; a private-only control plane is reached on its internal address."""
    command = f"gcloud container clusters get-credentials {args.name} --location {args.region} --project {args.project}"
    return command if args.public_endpoint else f"{command} --internal-ip"


class GkeCluster(pulumi.ComponentResource):
    """The regional control plane, its node-less start, and one Kubernetes provider bound to it."""

    cluster: gcp.container.Cluster
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:Cluster", name, None, opts)
        network = args.network
        child = pulumi.ResourceOptions(parent=self)

        authorized = None
        if args.authorized_networks:
            authorized = gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
                cidr_blocks=[
                    gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                        cidr_block=cidr, display_name=f"gkeAuthorizedNetworks[{i}]"
                    )
                    for i, cidr in enumerate(args.authorized_networks)
                ]
            )
        # A pinned version has no channel to follow: the stack sets UNSPECIFIED with it.
        self.cluster = gcp.container.Cluster(
            name,
            name=args.name,
            location=args.region,
            # The temporary default pool (and nothing else) lands in the A4 zone only.
            node_locations=[args.zone],
            network=network.host.network.id,
            subnetwork=network.host.subnetwork.id,
            networking_mode="VPC_NATIVE",
            ip_allocation_policy=gcp.container.ClusterIpAllocationPolicyArgs(
                cluster_secondary_range_name=PODS_RANGE_NAME,
                services_secondary_range_name=SERVICES_RANGE_NAME,
            ),
            # Multi-networking (the RDMA NICs as pod interfaces) requires Dataplane V2.
            datapath_provider="ADVANCED_DATAPATH",
            enable_multi_networking=True,
            private_cluster_config=gcp.container.ClusterPrivateClusterConfigArgs(
                enable_private_nodes=True,
                enable_private_endpoint=not args.public_endpoint,
                master_ipv4_cidr_block=args.master_cidr,
            ),
            master_authorized_networks_config=authorized,
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{args.project}.svc.id.goog"
            ),
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=args.release_channel),
            min_master_version=args.version or None,
            remove_default_node_pool=True,
            initial_node_count=1,
            # The provider defaults to true, which makes `pulumi destroy` fail: off unless the stack asks.
            deletion_protection=args.deletion_protection,
            opts=child,
        )

        context = f"gke_{args.project}_{args.region}_{args.name}"
        self.kubeconfig = pulumi.Output.secret(
            pulumi.Output.all(self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate).apply(
                lambda v: render_kubeconfig(context, v[0], v[1] or "")
            )
        )
        self.get_credentials_command = get_credentials_command(args)
        # The only Kubernetes provider of the program (Pulumi.yaml disables the default one).
        self.provider = k8s.Provider(f"{name}-k8s", kubeconfig=self.kubeconfig, opts=child)

        self.register_outputs(
            {
                "clusterName": self.cluster.name,
                "location": self.cluster.location,
                "endpoint": self.cluster.endpoint,
                "kubeconfig": self.kubeconfig,
            }
        )

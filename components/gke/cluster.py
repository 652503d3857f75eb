"""GkeCluster: the GKE control plane an A4 RDMA node pool needs, and the explicit Kubernetes provider.

A4's eight RDMA NICs reach pods only through GKE multi-networking, which needs a VPC-native cluster
with Dataplane V2. Nodes are private (they reach the internet through the network's NAT). The
default node pool is removed: the A4 and system pools are managed on their own (gke_nodepool.py).

Version: with `gkeVersion` empty, the version is chosen when the stack is first deployed, from what GKE
offers in the release channel (the provider's engine-versions lookup; the offline plan mocks it), never
below A4's minimum, and then kept: `ignore_changes` stops a later `pulumi up` from upgrading because the
lookup moved. Node upgrades are held back by a maintenance exclusion as Google's gke-a4 blueprint does.

Control plane access: by default GKE's DNS-based endpoint, authorized by IAM (the caller's Google
credentials through gke-gcloud-auth-plugin), and a private IP endpoint for the nodes; a public IP endpoint
only on request, and then only with authorized networks (config/rules.py refuses it without).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.config import StackConfig, versions
from components.gke.nodepool import NODE_SCOPES, NodeServiceAccount
from components.network import PODS_RANGE_NAME, SERVICES_RANGE_NAME, A4Network

# The kubeconfig's exec credential: the Pulumi Kubernetes provider (and kubectl) run this program on the
# machine that runs `pulumi` to turn the caller's gcloud login into a short-lived token; no key is stored
# in the stack. It must be on PATH there (docs/deploy.md, "On your machine").
AUTH_PLUGIN = "gke-gcloud-auth-plugin"
AUTH_PLUGIN_HINT = (
    "Install gke-gcloud-auth-plugin (gcloud components install gke-gcloud-auth-plugin), see "
    "https://cloud.google.com/kubernetes-engine/docs/how-to/cluster-access-for-kubectl"
)

NO_CHANNEL = "UNSPECIFIED"
# Google's gke-a4 blueprint (cluster-toolkit examples/gke-a4/gke-a4.yaml): no minor or node upgrades until the
# minor's end of support; only control-plane patches happen. Its start date is the blueprint's own (a start in
# the past is accepted); nothing in this policy depends on when the stack is deployed.
EXCLUSION_NAME = "no-minor-or-node-upgrades-indefinite"
EXCLUSION_START = "2025-12-01T00:00:00Z"
EXCLUSION_SCOPE = "NO_MINOR_OR_NODE_UPGRADES"
EXCLUSION_END = "UNTIL_END_OF_SUPPORT"
# The daily window (GMT) of the toolkit's gke-cluster module: when control-plane patches may happen.
MAINTENANCE_START = "09:00"


@dataclass(frozen=True)
class GkeClusterArgs:
    """The stack config (its place, the `gke` section, the control plane's range) and what the cluster uses."""

    cfg: StackConfig
    network: A4Network
    service_account: NodeServiceAccount

    @property
    def name(self) -> str:
        return self.cfg.name("gke")


def choose_version(
    channel: str, location: str, offered: gcp.container.GetEngineVersionsResult, image_type: str = versions.UBUNTU
) -> str:
    """The version a new cluster gets: the channel's default (what GKE itself would create), else the channel's
    newest, whichever first reaches A4's floor for the pool's image type; without a channel the location's
    default, else its newest."""
    if channel == NO_CHANNEL:
        candidates = [offered.default_cluster_version, offered.latest_master_version]
    else:
        defaults: Mapping[str, str] = offered.release_channel_default_version or {}
        latest: Mapping[str, str] = offered.release_channel_latest_version or {}
        candidates = [defaults.get(channel), latest.get(channel)]
    for version in candidates:
        if version and not versions.below_gke_floor(version, image_type):
            return version
    found = ", ".join(v for v in candidates if v) or "nothing"
    raise pulumi.RunError(
        f"deepep-a4:gkeReleaseChannel = {channel!r}: GKE offers {found} in {location}, below A4's floor on "
        f"{image_type} ({versions.gke_floor_text(image_type)}): use a newer channel (RAPID) or pin gkeVersion"
    )


def render_kubeconfig(context: str, server: str, ca_certificate: str | None) -> str:
    """A kubeconfig that authenticates as the caller's gcloud identity: no key is ever stored.

    The DNS-based endpoint presents a certificate from a public CA, so its kubeconfig carries no
    certificate-authority-data (the cluster CA would make every handshake fail), as
    `gcloud container clusters get-credentials --dns-endpoint` writes it; the IP endpoints need the cluster CA.
    """
    cluster: dict[str, Any] = {"server": f"https://{server}"}
    if ca_certificate is not None:
        cluster["certificate-authority-data"] = ca_certificate
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
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
    """What a user runs for kubectl: the same endpoint the stack's kubeconfig uses."""
    cfg = args.cfg
    command = f"gcloud container clusters get-credentials {args.name} --location {cfg.region} --project {cfg.project}"
    if cfg.gke.dns_endpoint:
        return f"{command} --dns-endpoint"
    return command if cfg.gke.public_endpoint else f"{command} --internal-ip"


def maintenance_policy(release_channel: str) -> gcp.container.ClusterMaintenancePolicyArgs | None:
    """Node upgrades wait for the minor's end of support, so GKE does not recreate an A4 node mid-run (and
    rerun its install). GKE offers this exclusion scope only to clusters in a release channel; without one
    the A4 pool turns node auto-upgrade off instead (gke_nodepool.py)."""
    if release_channel == NO_CHANNEL:
        return None
    return gcp.container.ClusterMaintenancePolicyArgs(
        daily_maintenance_window=gcp.container.ClusterMaintenancePolicyDailyMaintenanceWindowArgs(
            start_time=MAINTENANCE_START
        ),
        maintenance_exclusions=[
            gcp.container.ClusterMaintenancePolicyMaintenanceExclusionArgs(
                exclusion_name=EXCLUSION_NAME,
                start_time=EXCLUSION_START,
                exclusion_options=gcp.container.ClusterMaintenancePolicyMaintenanceExclusionExclusionOptionsArgs(
                    scope=EXCLUSION_SCOPE, end_time_behavior=EXCLUSION_END
                ),
            )
        ],
    )


def default_pool_config(service_account: NodeServiceAccount) -> gcp.container.ClusterNodeConfigArgs:
    """The temporary default pool (GKE creates it, the provider removes it) runs as the node account: cluster
    creation must not need the Compute Engine default account, which some projects disable."""
    return gcp.container.ClusterNodeConfigArgs(
        service_account=service_account.account.email,
        oauth_scopes=list(NODE_SCOPES),
        metadata={"disable-legacy-endpoints": "true"},
        workload_metadata_config=gcp.container.ClusterNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
        shielded_instance_config=gcp.container.ClusterNodeConfigShieldedInstanceConfigArgs(
            enable_secure_boot=True, enable_integrity_monitoring=True
        ),
    )


class GkeCluster(pulumi.ComponentResource):
    """The regional control plane, its node-less start, and one Kubernetes provider bound to it."""

    cluster: gcp.container.Cluster
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    version: pulumi.Output[str]

    def __init__(self, name: str, args: GkeClusterArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:Cluster", name, None, opts)
        network, cfg, gke = args.network, args.cfg, args.cfg.gke

        if gke.version:
            self.version = pulumi.Output.from_input(gke.version)
        else:
            offered = gcp.container.get_engine_versions_output(
                location=cfg.region, project=cfg.project, opts=pulumi.InvokeOutputOptions(parent=self)
            )
            self.version = offered.apply(lambda o: choose_version(gke.release_channel, cfg.region, o, gke.image_type))

        # Always present, even empty: it is what limits the public IP endpoint (and the private one to the VPC);
        # the DNS endpoint is authorized by IAM instead.
        authorized = gcp.container.ClusterMasterAuthorizedNetworksConfigArgs(
            cidr_blocks=[
                gcp.container.ClusterMasterAuthorizedNetworksConfigCidrBlockArgs(
                    cidr_block=cidr, display_name=f"gkeAuthorizedNetworks[{i}]"
                )
                for i, cidr in enumerate(gke.authorized_networks)
            ]
        )
        self.cluster = gcp.container.Cluster(
            name,
            name=args.name,
            location=cfg.region,
            # The temporary default pool (and nothing else) lands in the A4 zone only.
            node_locations=[cfg.zone],
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
                # Off by default: the control plane has no public IP address.
                enable_private_endpoint=not gke.public_endpoint,
                master_ipv4_cidr_block=cfg.network.master_cidr,
            ),
            control_plane_endpoints_config=gcp.container.ClusterControlPlaneEndpointsConfigArgs(
                dns_endpoint_config=gcp.container.ClusterControlPlaneEndpointsConfigDnsEndpointConfigArgs(
                    allow_external_traffic=gke.dns_endpoint
                ),
                # The nodes reach the control plane on its private IP endpoint.
                ip_endpoints_config=gcp.container.ClusterControlPlaneEndpointsConfigIpEndpointsConfigArgs(enabled=True),
            ),
            master_authorized_networks_config=authorized,
            workload_identity_config=gcp.container.ClusterWorkloadIdentityConfigArgs(
                workload_pool=f"{cfg.project}.svc.id.goog"
            ),
            release_channel=gcp.container.ClusterReleaseChannelArgs(channel=gke.release_channel),
            min_master_version=self.version,
            maintenance_policy=maintenance_policy(gke.release_channel),
            remove_default_node_pool=True,
            initial_node_count=1,
            node_config=default_pool_config(args.service_account),
            # The provider defaults to true, which makes `pulumi destroy` fail: off unless the stack asks.
            deletion_protection=gke.deletion_protection,
            opts=pulumi.ResourceOptions(
                parent=self,
                # The default pool's nodes boot with the node account's roles in place.
                depends_on=list(args.service_account.grants),
                # Chosen once: a later lookup that moved (or GKE's own upgrades) never upgrades the control plane
                # through `pulumi up`; the removed default pool's node_config is not compared (as Google's
                # gke-cluster module does), since changing it would replace the cluster.
                ignore_changes=["minMasterVersion", "nodeConfig"],
            ),
        )

        context = f"gke_{cfg.project}_{cfg.region}_{args.name}"
        if gke.dns_endpoint:
            dns = self.cluster.control_plane_endpoints_config.apply(
                lambda c: (c.dns_endpoint_config.endpoint if c and c.dns_endpoint_config else None) or ""
            )
            kubeconfig = dns.apply(lambda host: render_kubeconfig(context, host, None))
        else:
            kubeconfig = pulumi.Output.all(
                self.cluster.endpoint, self.cluster.master_auth.cluster_ca_certificate
            ).apply(lambda v: render_kubeconfig(context, v[0], v[1] or ""))
        self.kubeconfig = pulumi.Output.secret(kubeconfig)
        self.get_credentials_command = get_credentials_command(args)
        # The only Kubernetes provider of the program (Pulumi.yaml disables the default one).
        # delete_unreachable: once the cluster is gone (its deadline, a manual delete), `pulumi refresh` and
        # `pulumi destroy` drop its objects from the state instead of failing on an unreachable API server
        # (pulumi-kubernetes Provider deleteUnreachable: "delete resources associated with an unreachable
        # Kubernetes cluster from Pulumi state").
        self.provider = k8s.Provider(
            f"{name}-k8s",
            kubeconfig=self.kubeconfig,
            delete_unreachable=True,
            opts=pulumi.ResourceOptions(parent=self),
        )

        self.register_outputs(
            {
                "clusterName": self.cluster.name,
                "location": self.cluster.location,
                "endpoint": self.cluster.endpoint,
                "version": self.cluster.master_version,
                "kubeconfig": self.kubeconfig,
            }
        )

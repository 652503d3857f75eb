"""GKE platform: cluster, node identity, system and A4 node pools, multi-network objects, workloads.

The Kubernetes side (multi-network objects, installer DaemonSet, benchmark Jobs) goes through the
cluster's one explicit provider; the GCP side through the stack's gcp provider (`gcp_opts`).
"""

from __future__ import annotations

from typing import Any

import pulumi

from components.config import StackConfig
from components.deadline import StackDeadline
from components.gke import workloads as gke_workloads
from components.gke.cluster import GkeCluster, GkeClusterArgs
from components.gke.deadline import PoolDeadline, PoolDeadlineArgs
from components.gke.multinetwork import GkeMultiNetwork, GkeMultiNetworkArgs
from components.gke.nodepool import (
    A4NodePool,
    A4NodePoolArgs,
    NodeServiceAccount,
    NodeServiceAccountArgs,
    SystemNodePool,
    SystemNodePoolArgs,
)
from components.gke.rendezvous import RendezvousFirewall
from components.gke.staging_access import staging_principal
from components.network import A4Network
from components.node.store_grants import store_access


def gcp_provider_of(opts: pulumi.ResourceOptions) -> pulumi.ProviderResource | None:
    providers = opts.providers
    found = list(providers.values()) if isinstance(providers, dict) else list(providers or [])
    return next((p for p in found if isinstance(p, pulumi.ProviderResource) and p.package == "gcp"), None)


def build_gke_platform(
    cfg: StackConfig, network: A4Network, gcp_opts: pulumi.ResourceOptions, deadline: StackDeadline | None
) -> dict[str, Any]:
    """Creates the GKE side of the stack and returns the stack outputs it adds."""
    # First: even the cluster's temporary default pool runs as the node account.
    nodes_sa = NodeServiceAccount("gke-nodes", NodeServiceAccountArgs(cfg), gcp_opts)
    # The system pool has its own account: a pod there reaches neither the A4 nodes' grants nor the store.
    system_sa = NodeServiceAccount("gke-system-nodes", NodeServiceAccountArgs.system(cfg), gcp_opts)
    gke = GkeCluster("gke", GkeClusterArgs(cfg, network, nodes_sa), gcp_opts)
    system = SystemNodePool("gke-system", SystemNodePoolArgs(cfg, gke.cluster, system_sa), gcp_opts)
    # Who reads the store: the staging pod's own Workload Identity principal where it stages on the pod
    # network (nodeProfile supported, gke_stage_access.py); the node's account where the installer runs in
    # the host's namespaces (host-install).
    if cfg.staged:
        # The principal's pool (PROJECT.svc.id.goog) exists once a cluster of the project enables Workload
        # Identity: the grant comes after the cluster.
        reader = staging_principal(cfg, gcp_provider_of(gcp_opts))
        grant_opts = pulumi.ResourceOptions.merge(gcp_opts, pulumi.ResourceOptions(depends_on=[gke.cluster]))
    else:
        reader, grant_opts = nodes_sa.account.member, gcp_opts
    store_grants = store_access(cfg, reader, grant_opts)
    a4 = A4NodePool(
        "gke-a4",
        A4NodePoolArgs(cfg, gke.cluster, nodes_sa, network.additional_networks),
        # NAT first: private nodes download drivers and wheels at boot; the store grant before they use it.
        pulumi.ResourceOptions.merge(gcp_opts, pulumi.ResourceOptions(depends_on=[network.nat, *store_grants])),
    )
    if cfg.gke.pod_networking == "hostNetwork":
        # The host-network rendezvous: NetworkPolicies do not reach it, the host VPC's firewall does.
        RendezvousFirewall("gke-rendezvous", cfg, network, nodes_sa.account.email, gcp_opts)
    if deadline:
        PoolDeadline("gke-deadline", PoolDeadlineArgs(cfg, deadline.at, gke.cluster, a4.pool), gcp_opts)
    multinet = GkeMultiNetwork(
        "gke-net",
        GkeMultiNetworkArgs(cfg.name_prefix, network.additional_networks),
        pulumi.ResourceOptions(providers=[gke.provider]),
    )
    # The Jobs depend on the Network objects their pods name, so `pulumi destroy` deletes them first.
    workloads = gke_workloads.build_gke_workloads(
        cfg,
        gke.provider,
        node_pool=a4.pool,
        network_names=multinet.rdma_network_names,
        networks=[*multinet.param_sets, *multinet.networks],
        gcp_provider=gcp_provider_of(gcp_opts),
    )
    return {
        "clusterName": gke.cluster.name,
        "clusterLocation": gke.cluster.location,
        # The control plane's actual version (what was chosen once, plus GKE's patches), not today's lookup.
        "gkeVersion": gke.cluster.master_version,
        "nodePool": a4.pool.name,
        "systemNodePool": system.pool.name,
        "nodeServiceAccount": nodes_sa.account.email,
        "systemNodeServiceAccount": system_sa.account.email,
        "podNetworking": cfg.gke.pod_networking,
        "multiNetworks": multinet.network_names,
        "getCredentials": gke.get_credentials_command,
        "kubeconfig": gke.kubeconfig,
        **workloads,
    }

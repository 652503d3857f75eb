"""The A4 node pool (every flag of field report R2's `node-pools create` line), its identity, a system pool.

NodeServiceAccount
    The nodes' own service account with only the roles a GKE node needs, instead of field report R2's default
    compute account (project Editor) with the cloud-platform scope: a pod that reaches the metadata
    server of a node then holds what GKE's node role grants (logs, metrics, node health) and read access
    to images, nothing else. The cluster's temporary default pool runs as it too (gke_cluster.py).
SystemNodePool
    One small on-demand node for kube-dns, konnectivity and metrics-server: they do not tolerate the
    GPU taint, so a cluster of A4 nodes alone would have no DNS and no `kubectl logs`.
A4NodePool
    Field report R2's pool, with the provisioning model, placement, bill cap and GPU driver taken from config.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components import rehearsal
from components.config import StackConfig, provisioning, versions
from components.network import NicNetwork
from components.options import depends_of
from scripts import names

NODE_POOL_LABEL_KEY = names.NODE_POOL_LABEL_KEY
NODE_POOL_LABEL_VALUE = names.NODE_POOL_LABEL_VALUE
GPU_TAINT_KEY = names.GPU_TAINT_KEY
GPU_TAINT_VALUE = names.GPU_TAINT_VALUE
GPU_TAINT_EFFECT = "NO_SCHEDULE"  # NoSchedule in Kubernetes spelling

# Every project role the nodes hold. Later issues add theirs here, explicitly.
NODE_ROLES = (
    # The minimum GKE documents for a node service account (logs, metrics, node metadata): "Grant the minimum
    # required role for GKE", https://cloud.google.com/kubernetes-engine/security/configure-node-service-accounts
    # It covers what logging.logWriter and monitoring.metricWriter granted here before.
    "roles/container.defaultNodeServiceAccount",
)
# No project-wide Artifact Registry read: every image the nodes pull is public (gIB's
# us-docker.pkg.dev/gce-ai-infra, GKE's gke.gcr.io pause, the staging and benchmark images on Docker Hub).
# A stack whose containerImage or installerImage lives in a Docker repository of its own project gets read
# on that one repository (repository_grants), nothing wider.
REPOSITORY_ROLE = "roles/artifactregistry.reader"
# LOCATION-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE (https://cloud.google.com/artifact-registry/docs/docker/names)
AR_IMAGE = re.compile(r"^(?P<location>[a-z0-9-]+)-docker\.pkg\.dev/(?P<project>[^/]+)/(?P<repository>[^/@:]+)/")
# The system pool's own account: it runs kube-dns, konnectivity and metrics-server, and any pod that lands on
# it can reach its token; it needs GKE's node minimum only (no image pulls from private repositories, no store).
SYSTEM_NODE_ROLES = ("roles/container.defaultNodeServiceAccount",)
# Access scopes are a legacy second gate; Google recommends cloud-platform plus IAM roles on a dedicated
# account, which is what limits the nodes here (NODE_ROLES).
NODE_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)

# host-install: our installer pins the driver, so GKE must not install its own (field report R2's
# gpu-driver-version=disabled). supported: GKE installs it on COS, as Google's A4 GPUDirect-RDMA guide requires
# (cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-rdma: COS node image,
# gpu-driver-version DEFAULT or LATEST).
GPU_DRIVER_VERSIONS = {
    "installer": "INSTALLATION_DISABLED",  # ours (host-install)
    "cos-installer": "INSTALLATION_DISABLED",  # Google's COS installer DaemonSet (components/gke/cos_driver.py)
    "DEFAULT": "DEFAULT",
    "LATEST": "LATEST",
}
RESERVATION_KEY = "compute.googleapis.com/reservation-name"

# Node upgrades replace one node at a time without a surge node: Google's default for GPU pools
# (cluster-toolkit modules/compute/gke-node-pool: max_surge 0, max_unavailable 1). A surge node would be one
# more spot A4 inside the compact placement, which often does not exist.
UPGRADE_MAX_SURGE = 0
UPGRADE_MAX_UNAVAILABLE = 1

SYSTEM_POOL_NAME = names.SYSTEM_POOL_NAME
SYSTEM_MACHINE_TYPE = names.SYSTEM_MACHINE_TYPE
SYSTEM_NODE_COUNT = names.SYSTEM_NODE_COUNT


def project_repositories(cfg: StackConfig) -> list[tuple[str, str]]:
    """(location, repository) of each Artifact Registry repository of the stack's project that an image of the
    stack (containerImage, installerImage) is pulled from."""
    found: list[tuple[str, str]] = []
    for image in (cfg.gke.container_image, cfg.gke.installer_image):
        m = AR_IMAGE.match(image or "")
        if m and m["project"] == cfg.project and (m["location"], m["repository"]) not in found:
            found.append((m["location"], m["repository"]))
    return found


def service_account_id(name_prefix: str, suffix: str = "nodes") -> str:
    """A 6-30 character account id derived from the stack's prefix."""
    return f"{name_prefix[: 29 - len(suffix)].rstrip('-')}-{suffix}"


@dataclass(frozen=True)
class NodeServiceAccountArgs:
    cfg: StackConfig
    suffix: str = "nodes"
    roles: tuple[str, ...] = NODE_ROLES
    purpose: str = "GKE nodes: write logs and metrics; nothing else"
    repositories: bool = True  # read on the project's repositories the stack's images come from

    @staticmethod
    def system(cfg: StackConfig) -> NodeServiceAccountArgs:
        """The system pool's account: GKE's node minimum only, never the A4 nodes' grants (store, images)."""
        purpose = "GKE system pool: write logs and metrics; nothing else"
        return NodeServiceAccountArgs(cfg, "system", SYSTEM_NODE_ROLES, purpose, repositories=False)


class NodeServiceAccount(pulumi.ComponentResource):
    """A GKE node pool's service account and its project roles (`args.roles`, nothing else)."""

    account: gcp.serviceaccount.Account
    grants: list[gcp.projects.IAMMember | gcp.artifactregistry.RepositoryIamMember]

    def __init__(self, name: str, args: NodeServiceAccountArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:NodeServiceAccount", name, None, opts)
        project, name_prefix = args.cfg.project, args.cfg.name_prefix
        child = pulumi.ResourceOptions(parent=self)
        self.account = gcp.serviceaccount.Account(
            name,
            account_id=service_account_id(name_prefix, args.suffix),
            display_name=f"deepep-a4 GKE {args.suffix} of {name_prefix}",
            description=args.purpose,
            opts=child,
        )
        self.grants = [
            gcp.projects.IAMMember(
                f"{name}-{role.rsplit('/', 1)[1]}", project=project, role=role, member=self.account.member, opts=child
            )
            for role in args.roles
        ]
        repositories = project_repositories(args.cfg) if args.repositories else []
        self.grants += [
            gcp.artifactregistry.RepositoryIamMember(
                f"{name}-read-{location}-{repository}",
                project=project,
                location=location,
                repository=repository,
                role=REPOSITORY_ROLE,
                member=self.account.member,
                opts=child,
            )
            for location, repository in repositories
        ]
        self.register_outputs({"email": self.account.email, "roles": list(args.roles)})


def node_identity(service_account: NodeServiceAccount, secure_boot: bool) -> dict[str, Any]:
    """What every node of the cluster runs as: our least-privilege account, GKE's metadata server in
    front of the VM's, no legacy metadata endpoints, shielded VM integrity monitoring."""
    return {
        "metadata": {"disable-legacy-endpoints": "true"},
        "service_account": service_account.account.email,
        "oauth_scopes": list(NODE_SCOPES),
        "workload_metadata_config": gcp.container.NodePoolNodeConfigWorkloadMetadataConfigArgs(mode="GKE_METADATA"),
        "shielded_instance_config": gcp.container.NodePoolNodeConfigShieldedInstanceConfigArgs(
            enable_integrity_monitoring=True, enable_secure_boot=secure_boot
        ),
    }


@dataclass(frozen=True)
class A4NodePoolArgs:
    """The stack config (shape, capacity, bill cap, disks, the `gke` section) and what the pool attaches to."""

    cfg: StackConfig
    cluster: gcp.container.Cluster
    service_account: NodeServiceAccount
    additional_networks: Sequence[NicNetwork]


def capacity_settings(cfg: StackConfig) -> tuple[dict[str, Any], dict[str, Any]]:
    """(node_config fields, node pool fields) of the provisioning model: how the machines are obtained."""
    model = provisioning.MODELS[cfg.provisioning]
    node: dict[str, Any] = {model.gke_flag: True} if model.gke_flag else {}
    pool: dict[str, Any] = {"node_count": cfg.node_count}
    # Spot pools say NO_RESERVATION (provisioning.py): spot VMs never consume a reservation.
    affinity = model.gke_reservation_affinity or model.reservation_affinity
    if affinity == "SPECIFIC_RESERVATION":
        node["reservation_affinity"] = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type=affinity, key=RESERVATION_KEY, values=[cfg.reservation_name]
        )
    elif affinity:
        node["reservation_affinity"] = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type=affinity
        )
    if model.gke_flag == "flex_start":
        # GKE's flex-start pools start empty and grow when pods ask for GPUs (Dynamic Workload Scheduler);
        # repair would recreate VMs that flex-start hands out once.
        pool = {
            "initial_node_count": 0,
            "autoscaling": gcp.container.NodePoolAutoscalingArgs(
                total_min_node_count=0, total_max_node_count=cfg.node_count, location_policy="ANY"
            ),
            # All nodes at once: a ProvisioningRequest brings up nodeCount nodes together or none
            # (components/gke/queued.py, GKE's flex-start with queued provisioning page).
            "queued_provisioning": gcp.container.NodePoolQueuedProvisioningArgs(enabled=True),
        }
    if cfg.ttl_seconds is not None:
        # The bill cap: GKE deletes each node this long after it was created.
        node["max_run_duration"] = f"{cfg.ttl_seconds}s"
    return node, pool


class A4NodePool(pulumi.ComponentResource):
    """a4-highgpu-8g nodes with nine additional NICs, tainted and labelled for the DeepEP workloads."""

    pool: gcp.container.NodePool

    def __init__(self, name: str, args: A4NodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:A4NodePool", name, None, opts)
        cfg = args.cfg
        cluster, service_account, additional_networks = args.cluster, args.service_account, args.additional_networks
        node_capacity, pool_capacity = capacity_settings(cfg)
        placement = None
        if cfg.placement == "compact" and not provisioning.MODELS[cfg.provisioning].placed_by_capacity:
            placement = gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT")
        # With a release channel GKE keeps node auto-upgrade on; the cluster's maintenance exclusion
        # (gke_cluster.py) holds node upgrades back instead. Without a channel the pool may turn it off.
        auto_upgrade = cfg.gke.release_channel != "UNSPECIFIED"
        local_ssd = (
            gcp.container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(local_ssd_count=cfg.local_ssd_count)
            if cfg.local_ssd_count
            else None
        )
        self.pool = gcp.container.NodePool(
            name,
            name=cfg.machine_type,
            cluster=cluster.name,
            location=cfg.region,
            node_locations=[cfg.zone],
            # The control plane's version when the pool is created (GKE's own default), shown in the plan;
            # later control-plane patches do not make `pulumi up` upgrade the nodes (ignore_changes below).
            version=cluster.master_version,
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=rehearsal.machine_type(cfg),
                # The rehearsal's CPU machine has no GPU and no driver to install (components/rehearsal.py).
                guest_accelerators=[]
                if cfg.rehearsal
                else [
                    gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                        type=cfg.shape.accelerator,
                        count=cfg.shape.gpus,
                        gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                            gpu_driver_version=GPU_DRIVER_VERSIONS[cfg.gke.gpu_driver]
                        ),
                    )
                ],
                image_type=cfg.gke.image_type,
                disk_type=rehearsal.boot_disk_type(cfg, "hyperdisk-balanced"),
                disk_size_gb=cfg.boot_disk_gb,
                ephemeral_storage_local_ssd_config=local_ssd,
                # The gVNIC flag only on COS, as cluster-toolkit's gke-node-pool sets it (GKE documents it for COS
                # images only; field report R2's Ubuntu node-pool command has none); A4's NICs are gVNIC anyway.
                gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True)
                if cfg.gke.image_type == versions.COS
                else None,
                # host-install: secure boot is off because the installer loads unsigned kernel modules
                # (DOCA-OFED, the NVIDIA driver, gdrdrv). COS loads only GKE's signed driver: secure boot on, as
                # on the system pool. Integrity monitoring stays on either way.
                **node_identity(service_account, secure_boot=cfg.gke.image_type == versions.COS),
                labels={NODE_POOL_LABEL_KEY: NODE_POOL_LABEL_VALUE},
                # The provider's default labels stop at the pool: these mark the node VMs themselves.
                resource_labels=cfg.labels,
                taints=[]
                if cfg.rehearsal
                else [
                    gcp.container.NodePoolNodeConfigTaintArgs(
                        key=GPU_TAINT_KEY, value=GPU_TAINT_VALUE, effect=GPU_TAINT_EFFECT
                    )
                ],
                **node_capacity,
            ),
            network_config=gcp.container.NodePoolNetworkConfigArgs(
                enable_private_nodes=True,
                # nic1..nic9 in NIC order: the second gVNIC VPC, then the eight RDMA subnets.
                additional_node_network_configs=[
                    gcp.container.NodePoolNetworkConfigAdditionalNodeNetworkConfigArgs(
                        network=nic.network.name, subnetwork=nic.subnetwork.name
                    )
                    for nic in rehearsal.nic_networks(cfg, list(additional_networks))
                ],
            ),
            placement_policy=placement,
            # Auto-repair recreates a node that stays NotReady for about 10 minutes
            # (https://cloud.google.com/kubernetes-engine/docs/how-to/node-auto-repair). The installer's one
            # reboot (DOCA-OFED, PeerMappingOverride) leaves the node NotReady for 1-2 minutes, far below that,
            # so repair stays on: it replaces nodes that really fail. Flex-start VMs are handed out once.
            management=gcp.container.NodePoolManagementArgs(
                auto_repair=cfg.provisioning != "flex-start", auto_upgrade=auto_upgrade
            ),
            upgrade_settings=gcp.container.NodePoolUpgradeSettingsArgs(
                strategy="SURGE", max_surge=UPGRADE_MAX_SURGE, max_unavailable=UPGRADE_MAX_UNAVAILABLE
            ),
            **pool_capacity,
            opts=pulumi.ResourceOptions(
                parent=self,
                # Nodes boot with their roles in place (logs from the first minute), and after what the
                # component waits for (the NAT their downloads need, the artifact store grant).
                depends_on=[*depends_of(opts), *service_account.grants],
                # The version is chosen once, at creation: a later `pulumi up` neither upgrades the nodes
                # because the control plane moved nor undoes an upgrade GKE made. The local SSD block is tied
                # to the machine type (A4 bundles its SSDs): Google's gke-node-pool module ignores it for that
                # reason (cluster-toolkit modules/compute/gke-node-pool/main.tf, lifecycle ignore_changes,
                # [TK-POOL] in docs/conformance.md), so GKE reporting it differently never replaces the pool.
                ignore_changes=["version", "nodeConfig.ephemeralStorageLocalSsdConfig"],
            ),
        )
        self.register_outputs({"name": self.pool.name})


@dataclass(frozen=True)
class SystemNodePoolArgs:
    cfg: StackConfig
    cluster: gcp.container.Cluster
    service_account: NodeServiceAccount


class SystemNodePool(pulumi.ComponentResource):
    """One small untainted node for the cluster's own pods (DNS, konnectivity, metrics)."""

    pool: gcp.container.NodePool

    def __init__(self, name: str, args: SystemNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:SystemNodePool", name, None, opts)
        cluster, location, zone = args.cluster, args.cfg.region, args.cfg.zone
        service_account, resource_labels = args.service_account, args.cfg.labels
        self.pool = gcp.container.NodePool(
            name,
            name=SYSTEM_POOL_NAME,
            cluster=cluster.name,
            location=location,
            node_locations=[zone],
            node_count=SYSTEM_NODE_COUNT,
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=SYSTEM_MACHINE_TYPE,
                disk_type="pd-balanced",
                disk_size_gb=50,
                image_type="COS_CONTAINERD",
                resource_labels=resource_labels,
                **node_identity(service_account, secure_boot=True),
            ),
            network_config=gcp.container.NodePoolNetworkConfigArgs(enable_private_nodes=True),
            management=gcp.container.NodePoolManagementArgs(auto_repair=True, auto_upgrade=True),
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(service_account.grants)),
        )
        self.register_outputs({"name": self.pool.name})

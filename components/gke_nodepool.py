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

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components.config import StackConfig, provisioning
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
    # Pulls from the project's private Artifact Registry repositories, which the role above does not cover.
    "roles/artifactregistry.reader",
)
# Access scopes are a legacy second gate; Google recommends cloud-platform plus IAM roles on a dedicated
# account, which is what limits the nodes here (NODE_ROLES).
NODE_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)

# host-install: our installer pins the driver, so GKE must not install its own (field report R2's
# gpu-driver-version=disabled). supported: GKE installs it on COS, as Google's A4 GPUDirect-RDMA guide requires
# (cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-rdma: COS node image,
# gpu-driver-version DEFAULT or LATEST).
GPU_DRIVER_VERSIONS = {"installer": "INSTALLATION_DISABLED", "DEFAULT": "DEFAULT", "LATEST": "LATEST"}
# supported: COS, the only image Google supports GPUDirect RDMA on for A4 (cluster-toolkit modules/compute/
# gke-node-pool's default image_type COS_CONTAINERD, which examples/gke-a4/gke-a4.yaml keeps); host-install: Ubuntu.
NODE_IMAGE_TYPES = {"supported": "COS_CONTAINERD", "host-install": "UBUNTU_CONTAINERD"}
RESERVATION_KEY = "compute.googleapis.com/reservation-name"

# Node upgrades replace one node at a time without a surge node: Google's default for GPU pools
# (cluster-toolkit modules/compute/gke-node-pool: max_surge 0, max_unavailable 1). A surge node would be one
# more spot A4 inside the compact placement, which often does not exist.
UPGRADE_MAX_SURGE = 0
UPGRADE_MAX_UNAVAILABLE = 1

SYSTEM_POOL_NAME = names.SYSTEM_POOL_NAME
SYSTEM_MACHINE_TYPE = names.SYSTEM_MACHINE_TYPE
SYSTEM_NODE_COUNT = names.SYSTEM_NODE_COUNT


def service_account_id(name_prefix: str) -> str:
    """A 6-30 character account id derived from the stack's prefix."""
    return f"{name_prefix[:24].rstrip('-')}-nodes"


@dataclass(frozen=True)
class NodeServiceAccountArgs:
    project: str
    name_prefix: str

    @staticmethod
    def from_config(cfg: StackConfig) -> NodeServiceAccountArgs:
        return NodeServiceAccountArgs(cfg.project, cfg.name_prefix)


class NodeServiceAccount(pulumi.ComponentResource):
    """The GKE nodes' service account and its project roles (NODE_ROLES, nothing else)."""

    account: gcp.serviceaccount.Account
    grants: list[gcp.projects.IAMMember]

    def __init__(self, name: str, args: NodeServiceAccountArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:NodeServiceAccount", name, None, opts)
        project, name_prefix = args.project, args.name_prefix
        child = pulumi.ResourceOptions(parent=self)
        self.account = gcp.serviceaccount.Account(
            name,
            account_id=service_account_id(name_prefix),
            display_name=f"deepep-a4 GKE nodes of {name_prefix}",
            description="GKE nodes: write logs and metrics, pull images; nothing else",
            opts=child,
        )
        self.grants = [
            gcp.projects.IAMMember(
                f"{name}-{role.rsplit('/', 1)[1]}", project=project, role=role, member=self.account.member, opts=child
            )
            for role in NODE_ROLES
        ]
        self.register_outputs({"email": self.account.email, "roles": list(NODE_ROLES)})


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
    """The node-pool-relevant values of the stack config."""

    location: str
    zone: str
    machine_type: str
    accelerator: str
    gpus: int
    node_count: int
    provisioning: str
    reservation_name: str
    placement: str
    ttl_seconds: int | None
    boot_disk_gb: int
    local_ssd_count: int
    gpu_driver: str
    image_type: str
    release_channel: str
    resource_labels: dict[str, str]
    cluster: gcp.container.Cluster
    service_account: NodeServiceAccount
    additional_networks: Sequence[NicNetwork]

    @staticmethod
    def from_config(
        cfg: StackConfig,
        cluster: gcp.container.Cluster,
        service_account: NodeServiceAccount,
        additional_networks: Sequence[NicNetwork],
    ) -> A4NodePoolArgs:
        return A4NodePoolArgs(
            cluster=cluster,
            service_account=service_account,
            additional_networks=additional_networks,
            location=cfg.region,
            zone=cfg.zone,
            machine_type=cfg.machine_type,
            accelerator=cfg.shape.accelerator,
            gpus=cfg.shape.gpus,
            node_count=cfg.node_count,
            provisioning=cfg.provisioning,
            reservation_name=cfg.reservation_name,
            placement=cfg.placement,
            ttl_seconds=cfg.ttl_seconds,
            boot_disk_gb=cfg.boot_disk_gb,
            local_ssd_count=cfg.local_ssd_count,
            gpu_driver=cfg.gke.gpu_driver,
            image_type=NODE_IMAGE_TYPES[cfg.node_profile],
            release_channel=cfg.gke.release_channel,
            resource_labels=cfg.labels,
        )

    @property
    def pool_name(self) -> str:
        return self.machine_type


def capacity_settings(args: A4NodePoolArgs) -> tuple[dict[str, Any], dict[str, Any]]:
    """(node_config fields, node pool fields) of the provisioning model: how the machines are obtained."""
    model = provisioning.MODELS[args.provisioning]
    node: dict[str, Any] = {model.gke_flag: True} if model.gke_flag else {}
    pool: dict[str, Any] = {"node_count": args.node_count}
    # Spot pools say NO_RESERVATION (provisioning.py): spot VMs never consume a reservation.
    affinity = model.gke_reservation_affinity or model.reservation_affinity
    if affinity == "SPECIFIC_RESERVATION":
        node["reservation_affinity"] = gcp.container.NodePoolNodeConfigReservationAffinityArgs(
            consume_reservation_type=affinity, key=RESERVATION_KEY, values=[args.reservation_name]
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
                total_min_node_count=0, total_max_node_count=args.node_count, location_policy="ANY"
            ),
        }
    if args.ttl_seconds is not None:
        # The bill cap: GKE deletes each node this long after it was created.
        node["max_run_duration"] = f"{args.ttl_seconds}s"
    return node, pool


class A4NodePool(pulumi.ComponentResource):
    """a4-highgpu-8g nodes with nine additional NICs, tainted and labelled for the DeepEP workloads."""

    pool: gcp.container.NodePool

    def __init__(self, name: str, args: A4NodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:A4NodePool", name, None, opts)
        cluster, service_account, additional_networks = args.cluster, args.service_account, args.additional_networks
        node_capacity, pool_capacity = capacity_settings(args)
        placement = None
        if args.placement == "compact" and not provisioning.MODELS[args.provisioning].placed_by_capacity:
            placement = gcp.container.NodePoolPlacementPolicyArgs(type="COMPACT")
        # With a release channel GKE keeps node auto-upgrade on; the cluster's maintenance exclusion
        # (gke_cluster.py) holds node upgrades back instead. Without a channel the pool may turn it off.
        auto_upgrade = args.release_channel != "UNSPECIFIED"
        local_ssd = (
            gcp.container.NodePoolNodeConfigEphemeralStorageLocalSsdConfigArgs(local_ssd_count=args.local_ssd_count)
            if args.local_ssd_count
            else None
        )
        self.pool = gcp.container.NodePool(
            name,
            name=args.pool_name,
            cluster=cluster.name,
            location=args.location,
            node_locations=[args.zone],
            # The control plane's version when the pool is created (GKE's own default), shown in the plan;
            # later control-plane patches do not make `pulumi up` upgrade the nodes (ignore_changes below).
            version=cluster.master_version,
            node_config=gcp.container.NodePoolNodeConfigArgs(
                machine_type=args.machine_type,
                guest_accelerators=[
                    gcp.container.NodePoolNodeConfigGuestAcceleratorArgs(
                        type=args.accelerator,
                        count=args.gpus,
                        gpu_driver_installation_config=gcp.container.NodePoolNodeConfigGuestAcceleratorGpuDriverInstallationConfigArgs(
                            gpu_driver_version=GPU_DRIVER_VERSIONS[args.gpu_driver]
                        ),
                    )
                ],
                image_type=args.image_type,
                disk_type="hyperdisk-balanced",
                disk_size_gb=args.boot_disk_gb,
                ephemeral_storage_local_ssd_config=local_ssd,
                # The gVNIC flag only on COS, as cluster-toolkit's gke-node-pool sets it (GKE documents it for COS
                # images only; field report R2's Ubuntu node-pool command has none); A4's NICs are gVNIC anyway.
                gvnic=gcp.container.NodePoolNodeConfigGvnicArgs(enabled=True)
                if args.image_type == "COS_CONTAINERD"
                else None,
                # host-install: secure boot is off because the installer loads unsigned kernel modules
                # (DOCA-OFED, the NVIDIA driver, gdrdrv). COS loads only GKE's signed driver: secure boot on, as
                # on the system pool. Integrity monitoring stays on either way.
                **node_identity(service_account, secure_boot=args.image_type == "COS_CONTAINERD"),
                labels={NODE_POOL_LABEL_KEY: NODE_POOL_LABEL_VALUE},
                # The provider's default labels stop at the pool: these mark the node VMs themselves.
                resource_labels=args.resource_labels,
                taints=[
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
                    for nic in additional_networks
                ],
            ),
            placement_policy=placement,
            # Auto-repair recreates a node that stays NotReady for about 10 minutes
            # (https://cloud.google.com/kubernetes-engine/docs/how-to/node-auto-repair). The installer's one
            # reboot (DOCA-OFED, PeerMappingOverride) leaves the node NotReady for 1-2 minutes, far below that,
            # so repair stays on: it replaces nodes that really fail. Flex-start VMs are handed out once.
            management=gcp.container.NodePoolManagementArgs(
                auto_repair=args.provisioning != "flex-start", auto_upgrade=auto_upgrade
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
                # because the control plane moved nor undoes an upgrade GKE made.
                ignore_changes=["version"],
            ),
        )
        self.register_outputs({"name": self.pool.name})


@dataclass(frozen=True)
class SystemNodePoolArgs:
    cluster: gcp.container.Cluster
    location: str
    zone: str
    service_account: NodeServiceAccount
    resource_labels: dict[str, str]

    @staticmethod
    def from_config(
        cfg: StackConfig, cluster: gcp.container.Cluster, service_account: NodeServiceAccount
    ) -> SystemNodePoolArgs:
        return SystemNodePoolArgs(cluster, cfg.region, cfg.zone, service_account, cfg.labels)


class SystemNodePool(pulumi.ComponentResource):
    """One small untainted node for the cluster's own pods (DNS, konnectivity, metrics)."""

    pool: gcp.container.NodePool

    def __init__(self, name: str, args: SystemNodePoolArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:SystemNodePool", name, None, opts)
        cluster, location, zone = args.cluster, args.location, args.zone
        service_account, resource_labels = args.service_account, args.resource_labels
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

"""GCE side of the stack: the A4 VM fleet (the results bucket is in gce_results.py).

`GceA4Fleet`: an optional compact placement policy and `nodeCount` plain `gcp.compute.Instance`s of
a4-highgpu-8g, each with a reserved internal address on the host subnet, the ten NICs in A4 order, no
external IP, scheduling from the provisioning setting, shielded VM settings as on GKE, a dedicated
service account and the startup script (installer + benchmarks, see gce_bench.py).

What a later `pulumi up` may do to a VM: update it live (metadata, labels) or replace it, never
stop it. GCE stops a VM with local SSD only with an explicit discard choice, which the provider's stop for
an update does not make, so `allow_stopping_for_update` is off and every field whose update needs a stop
replaces the VM instead (`replace_on_changes`). A4 attaches its 32 local SSDs by itself; the program
declares none, as Google's A4 VM blueprint does, and ignores the scratch disks the provider reads back
(their field forces replacement: hashicorp/terraform-provider-google#19648). The boot image is chosen
from its family once (a `pulumi.Stash`), so a newer image in the family replaces nothing and a recreated
VM boots the same image as its peers.

One Instance resource per VM (not a managed instance group) on purpose: a spot VM that GCE deleted
at preemption disappears from the cloud only, so `pulumi up --refresh` (before the stack's deadline,
deadline.py) sees exactly that VM missing and recreates it alone, with the same name, address, rank and
metadata; everything else is left as it is. A VM stopped instead (terminationAction=STOP) is started
again by the same command, because every VM declares `desired_status = RUNNING`.
"""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components import rehearsal
from components.config import GCE_FIRST_HOST_OFFSET, StackConfig, provisioning
from components.config.model import ImageRef
from components.network import A4Network, NicNetwork
from components.options import depends_of

# Host addresses start here in the host subnet (GCE keeps the first two for itself; config checks the room).
FIRST_HOST_OFFSET = GCE_FIRST_HOST_OFFSET
RESERVATION_KEY = "compute.googleapis.com/reservation-name"
# Instance fields whose update the provider can only apply to a stopped VM (terraform-provider-google,
# resource_compute_instance.go: needToStopInstanceBeforeUpdating, and addResourcePolicies on a running VM):
# a change to any of them replaces the VM. Everything else the fleet sets either updates live or already
# forces replacement in the provider's schema (tests/components/gce/test_fleet.py keeps the list complete).
REPLACE_INSTEAD_OF_STOP = (
    "machineType",
    "minCpuPlatform",
    "serviceAccount",
    "shieldedInstanceConfig",
    "advancedMachineFeatures",
    "scheduling",
    "networkInterfaces",
    "resourcePolicies",
)
# Read back from the API but never declared (A4 attaches them): a diff on them would replace every VM.
IGNORED_INSTANCE_FIELDS = ("scratchDisks",)
# The VMs' API scopes: Cloud Storage read/write (the results bucket, the artifact store) and read-only
# access to Google Cloud, which the apt transport of the nccl-gib phase needs: it sends the VM's token to
# Artifact Registry, whose API takes cloud-platform or cloud-platform.read-only. Scopes are only a second
# gate: the account holds no project role, so IAM leaves it the bucket grants and public repositories.
# Always both, whatever ncclGib says: a scope change needs a stopped VM, and no update may stop one.
VM_SCOPES = (
    "https://www.googleapis.com/auth/devstorage.read_write",
    "https://www.googleapis.com/auth/cloud-platform.read-only",
)


def host_ips(cfg: StackConfig) -> list[str]:
    """The static host (nic0) address of every VM, in rank order: known before anything boots."""
    net = ipaddress.ip_network(cfg.network.host_cidr)
    # GCE reserves the network, gateway, second-to-last and broadcast addresses of a subnet.
    usable = net.num_addresses - FIRST_HOST_OFFSET - 2
    if cfg.node_count > usable:
        raise ValueError(
            f"hostCidr {cfg.network.host_cidr} has room for {max(usable, 0)} VMs from offset {FIRST_HOST_OFFSET}, "
            f"nodeCount is {cfg.node_count}: use a larger hostCidr"
        )
    return [str(net[FIRST_HOST_OFFSET + i]) for i in range(cfg.node_count)]


def service_account_id(name_prefix: str) -> str:
    """A 6-30 character account id derived from the stack's prefix."""
    return f"{name_prefix[:26].rstrip('-')}-vms"


def vm_service_account(name: str, name_prefix: str, opts: pulumi.ResourceOptions) -> gcp.serviceaccount.Account:
    """The VMs' own service account. It holds no project role at all: its one grant is on the bucket."""
    return gcp.serviceaccount.Account(
        name,
        account_id=service_account_id(name_prefix),
        display_name=f"deepep-a4 GCE VMs of {name_prefix}",
        description="A4 VMs: writes benchmark results to the stack's bucket, nothing else",
        opts=opts,
    )


def instance_name(name_prefix: str, index: int) -> str:
    return f"{name_prefix}-vm-{index}"


@dataclass(frozen=True)
class GceA4FleetArgs:
    """The stack config (shape, capacity, bill cap, disks, the `gce` section), the network and the scripts."""

    cfg: StackConfig
    network: A4Network
    startup_script: pulumi.Input[str]
    service_account: gcp.serviceaccount.Account
    # Metadata every VM gets besides the startup script and its rank keys (bucket, run id, bench).
    common_metadata: Mapping[str, pulumi.Input[str]] = field(default_factory=dict)
    # The stack's kept deadline (components/deadline.py; RFC 3339 UTC): every VM's terminationTime.
    deadline: pulumi.Input[str] | None = None


def scheduling(cfg: StackConfig, deadline: pulumi.Input[str] | None = None) -> gcp.compute.InstanceSchedulingArgs:
    """Scheduling of every VM from its provisioning model's row; the TTL (bill cap) applies to all models.

    The bill cap is ONE field, never both: gcloud refuses `--max-run-duration` with `--termination-time`
    ("Must specify exactly one of --max-run-duration or --termination-time as these fields are mutually
    exclusive": google-cloud-sdk lib/googlecloudsdk/command_lib/compute/instances/flags.py,
    ValidateInstanceScheduling, google-cloud-sdk-unofficial/google-cloud-sdk@01f043c2289d). With the stack's
    kept deadline (the program always passes it when `ttl` is set) that field is `terminationTime`: absolute,
    so a VM recreated after a preemption keeps the first deadline, and Compute Engine refuses to rerun a VM
    whose termination time has passed (the same file's --termination-time help: "the terminationTimestamp
    remains the same whenever the VM is rerun, but any requests to rerun the VM fail if the specified
    timestamp is in the past"). `maxRunDuration` restarts its clock at every rerun (its help: "the sum of
    MAX_RUN_DURATION and the time when the VM last entered the RUNNING state"), so it is used only where no
    deadline is given (the fleet built alone). Either needs a termination action
    (https://cloud.google.com/compute/docs/instances/limit-vm-runtime, RFC 3339 for the time)."""
    model = provisioning.MODELS[cfg.provisioning]
    ttl = gcp.compute.InstanceSchedulingMaxRunDurationArgs(seconds=cfg.ttl_seconds) if cfg.ttl_seconds else None
    # Only an instance with a termination action may carry a max run duration; spot, flex-start and
    # reservation-bound VMs need one anyway.
    action = model.termination_action or (
        cfg.gce.termination_action if (ttl or model.gce_model != "STANDARD") else None
    )
    # A VM stopped at its TTL keeps no local SSD data: GCE needs that choice for a VM with local SSD, and the
    # provider accepts only `true` (nothing of ours lives on the local SSDs).
    discard = (
        gcp.compute.InstanceSchedulingOnInstanceStopActionArgs(discard_local_ssd=True)
        if ttl and action == "STOP"
        else None
    )
    return gcp.compute.InstanceSchedulingArgs(
        provisioning_model=model.gce_model,
        preemptible=True if model.gce_model == "SPOT" else None,
        automatic_restart=model.gce_automatic_restart,
        on_host_maintenance="TERMINATE",  # GPU VMs cannot live-migrate
        instance_termination_action=action,
        # One of the two, never both (gcloud's ValidateInstanceScheduling, above).
        max_run_duration=ttl if deadline is None else None,
        termination_time=deadline if ttl else None,
        on_instance_stop_action=discard,
    )


def reservation_affinity(cfg: StackConfig) -> gcp.compute.InstanceReservationAffinityArgs | None:
    affinity = provisioning.MODELS[cfg.provisioning].reservation_affinity
    if affinity == "SPECIFIC_RESERVATION":
        return gcp.compute.InstanceReservationAffinityArgs(
            type=affinity,
            specific_reservation=gcp.compute.InstanceReservationAffinitySpecificReservationArgs(
                key=RESERVATION_KEY, values=[cfg.reservation_name]
            ),
        )
    return gcp.compute.InstanceReservationAffinityArgs(type=affinity) if affinity else None


def network_interfaces(
    host: NicNetwork, additional: list[NicNetwork], address: pulumi.Input[str]
) -> list[gcp.compute.InstanceNetworkInterfaceArgs]:
    """nic0 gVNIC (host subnet, static address), nic1 gVNIC (second VPC), nic2-9 MRDMA (RDMA subnets).

    No access_configs anywhere: no external IP, SSH goes through IAP. The RDMA addresses are left to
    GCE: nothing needs them before boot (NVSHMEM exchanges its RDMA endpoints over the nic0 bootstrap),
    and reserving eight more addresses per VM would add 8 x nodeCount resources for nothing.
    """
    nics = [
        gcp.compute.InstanceNetworkInterfaceArgs(
            network=host.network.id, subnetwork=host.subnetwork.id, nic_type="GVNIC", network_ip=address
        )
    ]
    for i, nic in enumerate(additional):
        nics.append(
            gcp.compute.InstanceNetworkInterfaceArgs(
                network=nic.network.id,
                subnetwork=nic.subnetwork.id,
                nic_type="GVNIC" if i == 0 else "MRDMA",
            )
        )
    return nics


class GceA4Fleet(pulumi.ComponentResource):
    """`nodeCount` A4 VMs with ten NICs, static host addresses and (optionally) compact placement."""

    service_account: gcp.serviceaccount.Account
    placement_policy: gcp.compute.ResourcePolicy | None
    image: pulumi.Output[str]
    addresses: list[gcp.compute.Address]
    instances: list[gcp.compute.Instance]

    def __init__(self, name: str, args: GceA4FleetArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gce:GceA4Fleet", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cfg, host = args.cfg, args.network.host
        n = cfg.node_count
        ips = host_ips(cfg)

        self.service_account = args.service_account

        self.placement_policy = None
        if cfg.placement == "compact" and not provisioning.MODELS[cfg.provisioning].placed_by_capacity:
            # Google's A4 guidance (cloud.google.com/ai-hypercomputer/docs/placement-policy-and-workload-policy):
            # a compact policy without maxDistance places the VMs as close as capacity allows (best effort).
            # No vmCount: with it, exactly that many VMs must be created together (the provider's
            # group_placement_policy docs), so one VM recreated after a preemption could never join. The name
            # does not follow nodeCount either: a running VM cannot move to another compact policy.
            # A reservation comes densely placed already; Google's blueprints add no policy to it.
            self.placement_policy = gcp.compute.ResourcePolicy(
                f"{name}-placement",
                name=cfg.name("compact"),
                region=cfg.region,
                description="Compact placement of the stack's A4 VMs: best effort, any number of VMs",
                group_placement_policy=gcp.compute.ResourcePolicyGroupPlacementPolicyArgs(collocation="COLLOCATED"),
                opts=child,
            )

        self.image = self._boot_image(name, cfg.gce.image_ref)

        self.addresses = [
            gcp.compute.Address(
                f"{name}-ip-{i}",
                name=cfg.name(f"vm-{i}-ip"),
                region=cfg.region,
                subnetwork=host.subnetwork.id,
                address_type="INTERNAL",
                purpose="GCE_ENDPOINT",
                address=ip,
                description=f"Host (nic0) address of VM {i}" + (": the benchmark master" if i == 0 else ""),
                opts=child,
            )
            for i, ip in enumerate(ips)
        ]

        # Fixed names: a change that replaces a VM must delete the old one first (GPUs are scarce too).
        vm_opts = pulumi.ResourceOptions(
            parent=self,
            delete_before_replace=True,
            depends_on=depends_of(opts),
            replace_on_changes=list(REPLACE_INSTEAD_OF_STOP),
            ignore_changes=list(IGNORED_INSTANCE_FIELDS),
        )
        self.instances = []
        for i in range(n):
            metadata: dict[str, pulumi.Input[str]] = {
                "startup-script": args.startup_script,
                "enable-oslogin": "TRUE",
                "deepep-rank": str(i),
                "deepep-world-size": str(n),
                "deepep-master-addr": ips[0],
                # The boot image as chosen once: the results record it as what ran.
                "deepep-image": self.image,
                **args.common_metadata,
            }
            self.instances.append(
                gcp.compute.Instance(
                    f"{name}-vm-{i}",
                    name=instance_name(cfg.name_prefix, i),
                    zone=cfg.zone,
                    machine_type=rehearsal.machine_type(cfg),
                    boot_disk=gcp.compute.InstanceBootDiskArgs(
                        auto_delete=True,
                        initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                            image=self.image,
                            size=cfg.boot_disk_gb,
                            type=rehearsal.boot_disk_type(cfg, "hyperdisk-balanced"),
                        ),
                    ),
                    network_interfaces=network_interfaces(
                        host,
                        rehearsal.nic_networks(cfg, list(args.network.additional_networks)),
                        self.addresses[i].address,
                    ),
                    scheduling=scheduling(cfg, args.deadline),
                    reservation_affinity=reservation_affinity(cfg),
                    resource_policies=self.placement_policy.self_link if self.placement_policy else None,
                    shielded_instance_config=gcp.compute.InstanceShieldedInstanceConfigArgs(
                        # As on the GKE node pool: integrity monitoring on, secure boot off (the installer
                        # loads unsigned kernel modules: DOCA-OFED, the open driver, gdrdrv), vTPM on.
                        enable_integrity_monitoring=True,
                        enable_secure_boot=False,
                        enable_vtpm=True,
                    ),
                    service_account=gcp.compute.InstanceServiceAccountArgs(
                        email=self.service_account.email, scopes=list(VM_SCOPES)
                    ),
                    metadata=metadata,
                    labels={**cfg.labels, "deepep-a4-platform": "gce", "deepep-a4-rank": str(i)},
                    desired_status="RUNNING",
                    # Never stop a VM to update it (see the module doc): such changes replace it instead.
                    allow_stopping_for_update=False,
                    deletion_protection=False,
                    opts=vm_opts,
                )
            )

        self.register_outputs(
            {
                "instanceNames": [vm.name for vm in self.instances],
                "hostIps": [a.address for a in self.addresses],
                "serviceAccount": self.service_account.email,
                "image": self.image,
            }
        )

    def _boot_image(self, name: str, ref: ImageRef) -> pulumi.Output[str]:
        """The self link every VM boots: looked up at the first deploy, then kept in the stack's state.

        A family names its newest image, which moves; the Stash keeps the first answer, so a later
        `pulumi up` replaces no VM and a VM recreated after a preemption boots what its peers booted.
        The reference is part of the Stash's name: a new gceImage makes a new choice (and new VMs).
        """
        found = gcp.compute.get_image_output(
            project=ref.project,
            family=ref.family or None,
            name=ref.name or None,
            opts=pulumi.InvokeOutputOptions(parent=self),
        )
        digest = hashlib.sha256(f"{ref.project}/{ref.family}/{ref.name}".encode()).hexdigest()[:8]
        # ignore_changes: the input is the lookup's answer of today (unknown in a preview); without it every
        # preview shows `~ update` although the kept `output` never changes.
        kept = pulumi.Stash(
            f"{name}-image-{digest}",
            input=found.self_link,
            opts=pulumi.ResourceOptions(parent=self, ignore_changes=["input"]),
        )
        return kept.output

    @property
    def rdma_ips(self) -> pulumi.Output[list[list[Any]]]:
        """Per VM, the addresses GCE gave nic2-nic9 (known once the VMs exist; the offline plan says so)."""

        def rdma(nics: Sequence[gcp.compute.outputs.InstanceNetworkInterface]) -> list[str]:
            return [nic.network_ip or "(assigned by GCE at creation)" for nic in nics[2:]]

        return pulumi.Output.all(*[vm.network_interfaces.apply(rdma) for vm in self.instances])

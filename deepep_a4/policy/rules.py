"""The policy pack's rules as plain functions: engine-free, so tests feed them resource fixtures.

Each resource rule takes a resource type token and its properties (camelCase, as the engine and the
offline plan both show them) and returns the violations as messages; an empty list passes. The one
stack rule takes every resource. `__main__.py` wraps them as pulumi-policy policies.

Properties can be unknown during a preview (computed outputs): a rule only judges what it can see.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from components.config import provisioning
from deepep_a4.policy import conditions, declared, exposure, grants, identities, powers, trust

# The shapes both rule sets read (pod specs by kind, nested properties) live in trust.py, which this imports.
from deepep_a4.policy.trust import Props, as_list, containers, get_path, pod_specs

# The namespace of the installer DaemonSet (scripts.names.NAMESPACE; a test keeps them equal).
# The pack runs in its own virtualenv and cannot import the program's modules.
INSTALLER_NAMESPACE = "deepep-a4"
A4_PREFIX = "a4-"
OPEN_RANGES = ("0.0.0.0/0", "::/0")

INSTANCE = "gcp:compute/instance:Instance"
INSTANCE_TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
FIREWALL = "gcp:compute/firewall:Firewall"
NETWORK = "gcp:compute/network:Network"
ADDRESS = "gcp:compute/address:Address"


@dataclass(frozen=True)
class Resource:
    """What the stack rule needs of a resource: its type, name and properties."""

    type: str
    name: str
    props: Props


def _is_a4(machine_type: Any) -> bool:
    # A self link (zones/Z/machineTypes/a4-highgpu-8g) or the bare name.
    return isinstance(machine_type, str) and machine_type.rsplit("/", 1)[-1].startswith(A4_PREFIX)


def _last(ref: Any) -> str | None:
    """The name at the end of a resource reference (id, self link or name)."""
    return ref.rstrip("/").rsplit("/", 1)[-1] if isinstance(ref, str) and ref else None


# -- 1. capacity model ---------------------------------------------------------------------------------


def a4_capacity_model(type_: str, props: Props) -> list[str]:
    """A4 capacity is spot, flex-start or a reservation: never plain on-demand."""
    if type_ in (INSTANCE, INSTANCE_TEMPLATE) and _is_a4(props.get("machineType")):
        sched = props.get("scheduling") or {}
        model = sched.get("provisioningModel")
        affinity = get_path(props, "reservationAffinity", "type")
        if model in provisioning.A4_GCE_MODELS or sched.get("preemptible") is True:
            return []
        if affinity == "SPECIFIC_RESERVATION":
            return []
        return [
            f"A4 VM uses provisioning model {model or 'STANDARD'}: use provisioning spot, flex-start or "
            "reservation (A4 capacity is not sold as plain on-demand)"
        ]
    if type_ == NODE_POOL:
        nc = props.get("nodeConfig") or {}
        if not _is_a4(nc.get("machineType")):
            return []
        reserved = get_path(nc, "reservationAffinity", "consumeReservationType") == "SPECIFIC_RESERVATION"
        if nc.get("spot") is True or nc.get("flexStart") is True or nc.get("preemptible") is True or reserved:
            return []
        return ["A4 node pool is neither spot, flex-start nor bound to a reservation: set provisioning accordingly"]
    return []


# -- 2. spot has a TTL -------------------------------------------------------------------------------


def spot_has_ttl(type_: str, props: Props) -> list[str]:
    """Spot capacity carries a max run duration, so a forgotten stack stops billing by itself."""
    if type_ in (INSTANCE, INSTANCE_TEMPLATE):
        sched = props.get("scheduling") or {}
        if sched.get("provisioningModel") != "SPOT" and sched.get("preemptible") is not True:
            return []
        seconds = get_path(sched, "maxRunDuration", "seconds")
        at = sched.get("terminationTime")
        problems = []
        # Either limit ends the VM (components/gce/fleet.py scheduling): the stack's deadline as
        # terminationTime, or a maxRunDuration. A time still unknown in a preview raises on reading, and
        # pulumi-policy then skips the rule (powers.py says the same).
        has_time = isinstance(at, str) and bool(at)
        has_duration = isinstance(seconds, (int, float)) and seconds > 0
        if not (has_time or has_duration):
            problems.append(
                "spot VM has neither scheduling.terminationTime nor scheduling.maxRunDuration: "
                "set the stack's ttl (e.g. 8h)"
            )
        if sched.get("instanceTerminationAction") not in ("DELETE", "STOP"):
            problems.append("spot VM has no instanceTerminationAction (DELETE or STOP) for its TTL")
        return problems
    if type_ == NODE_POOL:
        nc = props.get("nodeConfig") or {}
        if nc.get("spot") is not True and nc.get("preemptible") is not True:
            return []
        ttl = nc.get("maxRunDuration")
        if isinstance(ttl, str) and ttl.endswith("s") and ttl[:-1].isdigit() and int(ttl[:-1]) > 0:
            return []
        return [f"spot node pool has no nodeConfig.maxRunDuration ('<seconds>s'), got {ttl!r}: set the stack's ttl"]
    return []


def gce_one_run_limit(type_: str, props: Props) -> list[str]:
    """A VM carries at most one of maxRunDuration and terminationTime: gcloud refuses the pair ("Must specify
    exactly one of --max-run-duration or --termination-time as these fields are mutually exclusive":
    google-cloud-sdk lib/googlecloudsdk/command_lib/compute/instances/flags.py ValidateInstanceScheduling,
    google-cloud-sdk-unofficial/google-cloud-sdk@01f043c2289d), and a limit needs a termination action (the
    same function: --instance-termination-action with either)."""
    if type_ not in (INSTANCE, INSTANCE_TEMPLATE):
        return []
    sched = props.get("scheduling") or {}
    given = [key for key in ("maxRunDuration", "terminationTime") if sched.get(key) not in (None, "", {})]
    if len(given) == 2:
        return [
            "VM scheduling carries both maxRunDuration and terminationTime: Compute Engine's tools take exactly "
            "one (gcloud: mutually exclusive); the stack's deadline goes into terminationTime alone"
        ]
    if given and sched.get("instanceTerminationAction") not in ("DELETE", "STOP"):
        return [f"VM scheduling has {given[0]} but no instanceTerminationAction (DELETE or STOP)"]
    return []


# -- 3. no external IPs ------------------------------------------------------------------------------


def no_external_ip(type_: str, props: Props) -> list[str]:
    """Nothing gets a public address: SSH goes through IAP, egress through Cloud NAT."""
    if type_ in (INSTANCE, INSTANCE_TEMPLATE):
        bad = [
            i
            for i, nic in enumerate(as_list(props.get("networkInterfaces")))
            if as_list(get_path(nic, "accessConfigs")) or as_list(get_path(nic, "ipv6AccessConfigs"))
        ]
        return [f"nic{i} has an access config (an external IP): remove it" for i in bad]
    if type_ == ADDRESS and props.get("addressType", "EXTERNAL") == "EXTERNAL":
        return ["an EXTERNAL address is reserved: only INTERNAL addresses are allowed"]
    if type_ == CLUSTER:
        private = get_path(props, "privateClusterConfig", "enablePrivateNodes")
        if private is not True:
            return ["cluster nodes are not private (privateClusterConfig.enablePrivateNodes): public IPs"]
    if type_ == NODE_POOL and get_path(props, "networkConfig", "enablePrivateNodes") is False:
        return ["node pool turns private nodes off (networkConfig.enablePrivateNodes: false)"]
    return []


# -- 4. no firewall open to the world ----------------------------------------------------------------


def no_open_firewall(type_: str, props: Props) -> list[str]:
    """No ingress allow rule takes traffic from 0.0.0.0/0 (or ::/0)."""
    if type_ != FIREWALL or props.get("disabled") is True:
        return []
    if str(props.get("direction") or "INGRESS").upper() != "INGRESS" or not as_list(props.get("allows")):
        return []
    open_ = [r for r in as_list(props.get("sourceRanges")) if r in OPEN_RANGES]
    if open_:
        return [f"firewall allows ingress from {', '.join(open_)}: narrow sourceRanges (SSH: IAP's 35.235.240.0/20)"]
    return []


# -- 5. privileged containers only in the installer namespace -----------------------------------------


def privileged_only_in_installer_namespace(type_: str, props: Props) -> list[str]:
    privileged = [
        str(c.get("name", "?"))
        for spec in pod_specs(type_, props)
        for c in containers(spec)
        if get_path(c, "securityContext", "privileged") is True
    ]
    namespace = get_path(props, "metadata", "namespace") or "default"
    if privileged and namespace != INSTALLER_NAMESPACE:
        return [
            f"privileged container(s) {', '.join(privileged)} in namespace {namespace!r}: "
            f"only the installer namespace {INSTALLER_NAMESPACE!r} may run privileged containers"
        ]
    return []


# Warnings, not refusals: the stack config accepts `provisioning: on-demand` (for a project that was granted
# on-demand A4 quota), so the pack reminds rather than blocks; every other rule is mandatory.
ADVISORY_RULES = frozenset({"a4-capacity-model"})

RESOURCE_RULES: dict[str, tuple[str, Callable[[str, Props], list[str]]]] = {
    "a4-capacity-model": ("A4 capacity is spot, flex-start or a reservation.", a4_capacity_model),
    "spot-has-ttl": ("Spot capacity has a TTL (max run duration) so it cannot bill forever.", spot_has_ttl),
    "gce-one-run-limit": (
        "A VM ends by one run limit, terminationTime or maxRunDuration, never both (gcloud's rule).",
        gce_one_run_limit,
    ),
    "no-external-ip": ("No external IPs: no access configs, private GKE nodes, no EXTERNAL addresses.", no_external_ip),
    "no-open-firewall": ("No firewall rule allows ingress from 0.0.0.0/0.", no_open_firewall),
    "privileged-only-installer-namespace": (
        "Privileged containers run only in the installer namespace.",
        privileged_only_in_installer_namespace,
    ),
}


# -- 6. the RDMA VPC's profile zone is the nodes' zone (stack rule) ----------------------------------


def _profile_zone(profile: Any) -> str | None:
    """projects/P/global/networkProfiles/<zone>-vpc-roce -> <zone>."""
    name = _last(profile)
    if name and name.endswith("-vpc-roce"):
        return name[: -len("-vpc-roce")]
    return None


def rdma_zone_matches_nodes(resources: Iterable[Resource]) -> list[str]:
    """Every VM or node pool on a RoCE VPC runs in the zone of that VPC's network profile."""
    resources = list(resources)
    rdma: dict[str, str] = {}
    for r in resources:
        zone = _profile_zone(r.props.get("networkProfile")) if r.type == NETWORK else None
        if zone:
            for key in filter(None, (r.props.get("name"), r.name, _last(r.props.get("id")))):
                rdma[str(key)] = zone
    problems = []
    for r in resources:
        refs: Sequence[Any]
        if r.type == INSTANCE:
            refs = [get_path(nic, "network") for nic in as_list(r.props.get("networkInterfaces"))]
            zones = [_last(r.props.get("zone"))]
        elif r.type == NODE_POOL:
            extra = as_list(get_path(r.props, "networkConfig", "additionalNodeNetworkConfigs"))
            refs = [get_path(c, "network") for c in extra]
            zones = [_last(z) for z in as_list(r.props.get("nodeLocations"))]
        else:
            continue
        for ref in refs:
            want = rdma.get(_last(ref) or "")
            if want is None:
                continue
            wrong = sorted({z for z in zones if z and z != want})
            if wrong or not any(zones):
                problems.append(
                    f"{r.name} uses RDMA network {_last(ref)} (profile zone {want}) but runs in "
                    f"{', '.join(wrong) or 'no pinned zone'}: the RoCE VPC is zonal, put every node in {want}"
                )
    return problems


# What no one should deploy (trust.py): public grants and buckets, keys, every-address rules, host
# namespaces outside the installer and the RDMA Jobs, images without digests. All mandatory.
RESOURCE_RULES.update(trust.RESOURCE_RULES)

STACK_RULES: dict[str, tuple[str, Callable[[Iterable[Resource]], list[str]]]] = {
    "rdma-zone-matches-nodes": (
        "The RDMA VPC's network profile zone is the zone of every node using it.",
        rdma_zone_matches_nodes,
    ),
}

# What a resource grants or mounts, whatever it is called (powers.py): roles by member, RBAC subjects,
# hostPath, capabilities, node identity, global addresses. All mandatory.
RESOURCE_RULES.update(powers.RESOURCE_RULES)

# Default-deny from the declared bill of powers (declared.py over lock.py's locks), and what grants, roles and
# settings allow read from their content (identities.py, exposure.py, conditions.py, grants.py). All mandatory.
RESOURCE_RULES.update(identities.RESOURCE_RULES)
RESOURCE_RULES.update(exposure.RESOURCE_RULES)
RESOURCE_RULES.update(conditions.RESOURCE_RULES)
RESOURCE_RULES["roles-resolved"] = (
    "A predefined role granted is one whose permissions the pinned role definitions list.",
    grants.roles_resolved,
)
RESOURCE_RULES["declared-types"] = (
    "Every resource's type, properties and power values are in a lock of policy/powers/.",
    declared.declared_types,
)
STACK_RULES["declared-powers"] = (
    "The stack adds no resource, property or power to its shape's lock (policy/powers/<shape>.lock).",
    declared.declared_powers,
)
# Rules that read the resource's logical name too (the pack hands it): the exact default-deny check.
NAMED_RESOURCE_RULES: dict[str, tuple[str, Callable[[str, str, Props], list[str]]]] = {
    "declared-resource": (
        "Each resource is in its shape's lock by type and name, with no new property or power.",
        declared.declared_resource,
    ),
}

"""Values checked against the rule of the system that receives them: Cloud Storage bucket names, VPC subnet and
GKE ranges, control-plane reachability, GCE boot images, the RoCE traffic class, a TTL against the node's own
bring-up (DeepEP's test shapes: rules/bench.py). Each rule cites where the receiving system states it.

Each check appends a Problem for every rule a value breaks (one line per mistake), as rules.py does.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Any

from components.config.images import ACCELERATOR_IMAGE_PROJECT, PLAIN_UBUNTU_IMAGE
from components.config.keys import Problem
from components.config.model import parse_image_ref
from scripts import names

# -- Cloud Storage bucket names -----------------------------------------------------------------------
# https://cloud.google.com/storage/docs/buckets#naming: only lowercase letters, digits, dashes, underscores and
# dots; start and end with a letter or digit; 3-63 characters, or up to 222 with dots, each dot-separated
# component at most 63; not an IP address in dotted-decimal notation; not beginning with the "goog" prefix;
# not containing "google" or close misspellings such as "g00gle".
_BUCKET_CHARS = re.compile(r"[a-z0-9][a-z0-9._-]*[a-z0-9]")
# "google" with letters doubled, swapped or dropped, after digits read as the letters they look like.
_GOOGLE_LIKE = re.compile(r"g+o{2,}g+l+e|googel|goolge|gogle")
_BUCKET_RULE = (
    "a Cloud Storage bucket name: 3-63 characters (222 with dots, 63 between dots) of a-z, 0-9, -, _ and ., "
    "starting and ending with a letter or digit, no IP address, no 'goog' prefix, no 'google' or look-alike "
    "(https://cloud.google.com/storage/docs/buckets#naming)"
)
BUCKET_RULE = _BUCKET_RULE


def bucket_name_problem(name: str) -> str:
    """What breaks Cloud Storage's bucket naming rules in `name` ("" when nothing does)."""
    if not _BUCKET_CHARS.fullmatch(name):
        return "has characters, or a first or last character, a bucket name may not have"
    if "." not in name and not 3 <= len(name) <= 63:
        return f"is {len(name)} characters long"
    if "." in name and (len(name) > 222 or any(not 1 <= len(part) <= 63 for part in name.split("."))):
        return "has a dot-separated part longer than 63 characters (or empty), or is over 222 characters"
    try:
        ipaddress.IPv4Address(name)
    except ValueError:
        pass
    else:
        return "is an IP address"
    plain = name.replace("0", "o").replace("1", "l").replace("3", "e")
    if plain.startswith("goog"):
        return "begins with the reserved 'goog' prefix"
    if _GOOGLE_LIKE.search(plain):
        return "contains 'google' or a close misspelling of it"
    return ""


def check_store_url(v: dict[str, Any], problems: list[Problem]) -> None:
    """artifactStore: gs://BUCKET/PREFIX, the bucket by Cloud Storage's rules, a prefix (the grant's limit)."""
    url = v["artifactStore"]
    if not url:
        return
    bucket, slash, prefix = url.removeprefix("gs://").partition("/")
    segments = prefix.rstrip("/").split("/") if prefix.strip("/") else []
    if not url.startswith("gs://") or not slash or not segments:
        problems.append(
            Problem(
                "artifactStore",
                url,
                "must be gs://BUCKET/PREFIX: the prefix limits the nodes' access grant to the store; or empty",
            )
        )
        return
    broken = bucket_name_problem(bucket)
    if broken:
        problems.append(Problem("artifactStore", url, f"bucket {bucket!r} {broken}: must be {_BUCKET_RULE}"))
        return
    if store_prefix_problem(prefix):
        problems.append(Problem("artifactStore", url, f"prefix {prefix!r} {store_prefix_problem(prefix)}"))


def store_prefix_problem(prefix: str) -> str:
    """What is wrong with a store's PREFIX ("" when nothing): the store project's `prefix` and artifactStore's
    share this rule. Our rule: the prefix limits every grant on the bucket (an IAM condition on the object
    name), so it may not be empty or `/` (the whole bucket), and it travels in shell and CEL."""
    segments = prefix.rstrip("/").split("/") if prefix.strip("/") else []
    if not segments:
        return "must not be empty: the prefix limits the grants on the bucket, an empty one grants the whole bucket"
    if any(not re.fullmatch(r"[A-Za-z0-9._-]+", s) or s in (".", "..") for s in segments):
        return "must be /-separated parts of letters, digits, . _ - (no empty part, no . or ..)"
    return ""


# -- subnets and GKE ranges ---------------------------------------------------------------------------
# https://cloud.google.com/vpc/docs/subnets#valid-ranges: an IPv4 subnet range (primary or secondary) is /29 or
# larger; #reserved_ip_addresses_in_every_subnet: four addresses of every primary range are Google's.
SUBNET_MIN_PREFIX = 29
SUBNET_RESERVED = 4
# GKE gives each node a /24 of the pods range at the default 110 pods per node (the pools set no maxPods):
# https://cloud.google.com/kubernetes-engine/docs/how-to/flexible-pod-cidr ("Pod CIDR ranges per node").
POD_ADDRESSES_PER_NODE = 256


def _net(value: str) -> ipaddress.IPv4Network | None:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError:
        return None
    return net if isinstance(net, ipaddress.IPv4Network) and "/" in value else None


def check_range_sizes(v: dict[str, Any], problems: list[Problem]) -> None:
    """Every range big enough for GCE's minimum and for the nodes it holds (forms are checked by rules.py)."""
    if not isinstance(v["nodeCount"], int) or v["nodeCount"] < 1:
        return
    nodes = v["nodeCount"]
    gke = v["platform"] == "gke"
    # GKE: the A4 nodes and the system pool's nodes share the host subnet and the pods range.
    hosts = nodes + (names.SYSTEM_NODE_COUNT if gke else 0)
    need = {"hostCidr": hosts + SUBNET_RESERVED, "gvnicCidr": nodes + SUBNET_RESERVED}
    if gke:
        need["podsCidr"] = hosts * POD_ADDRESSES_PER_NODE
    for key in ("hostCidr", "podsCidr", "servicesCidr", "gvnicCidr"):
        net = _net(v[key])
        if net is None or (key in ("podsCidr", "servicesCidr") and not gke):
            continue
        if net.prefixlen > SUBNET_MIN_PREFIX:
            problems.append(
                Problem(key, v[key], "a VPC subnet range is /29 or larger (https://cloud.google.com/vpc/docs/subnets)")
            )
        elif key == "hostCidr" and not gke:
            continue  # GCE's fixed host addresses: rules.check_network counts them
        elif net.num_addresses < need.get(key, 0):
            bits = 32 - math.ceil(math.log2(need[key]))
            why = (
                f"a /24 per node for {hosts} nodes (GKE's default 110 pods per node)"
                if key == "podsCidr"
                else f"{need[key] - SUBNET_RESERVED} nodes plus the 4 addresses GCE reserves"
            )
            problems.append(Problem(key, v[key], f"is too small: it needs {why}, a /{bits} or larger"))
    rdma = _net(v["rdmaCidr"])
    if rdma is not None and rdma.prefixlen <= 26:
        each = rdma.num_addresses // 8
        if each < nodes + SUBNET_RESERVED:
            bits = 32 - math.ceil(math.log2(nodes + SUBNET_RESERVED)) - 3
            problems.append(
                Problem(
                    "rdmaCidr",
                    v["rdmaCidr"],
                    f"is split into 8 subnets of {each} addresses; each needs {nodes} nodes plus the 4 GCE reserves: "
                    f"a /{bits} or larger",
                )
            )


# -- the GKE control plane ---------------------------------------------------------------------------


def check_authorized_networks(cidrs: tuple[str, ...], problems: list[Problem]) -> None:
    """Each entry a CIDR with its prefix length; all of them together never the whole address space."""
    nets: dict[int, list[Any]] = {4: [], 6: []}
    for cidr in cidrs:
        try:
            if "/" not in cidr:
                raise ValueError
            net = ipaddress.ip_network(cidr, strict=True)
        except ValueError:
            # GKE's masterAuthorizedNetworksConfig takes CIDR blocks
            # (https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters
            # #CidrBlock): a bare address is not one, and a /32 should be written as one.
            problems.append(
                Problem(
                    "gkeAuthorizedNetworks",
                    cidr,
                    "every entry must be a CIDR with its prefix length, such as 203.0.113.0/24 (one address: /32), "
                    "with no host bits set",
                )
            )
        else:
            nets[net.version].append(net)
    for version, found in nets.items():
        merged = list(ipaddress.collapse_addresses(found))
        if any(n.prefixlen == 0 for n in merged):
            whole = "0.0.0.0/0" if version == 4 else "::/0"
            problems.append(
                Problem(
                    "gkeAuthorizedNetworks",
                    list(cidrs),
                    f"together cover {whole}, every address: list only your own ranges (e.g. 203.0.113.0/24)",
                )
            )


def check_endpoint(v: dict[str, Any], problems: list[Problem]) -> None:
    """The control plane must be reachable from where `pulumi up` runs: it creates the workloads through it.

    GKE's private IP endpoint is reachable only from the cluster's VPC (and peered or connected networks):
    https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation; this stack makes no bastion.
    Authorized networks limit the IP endpoints only, never the DNS-based one (same page, "DNS-based endpoint").
    """
    if v["platform"] != "gke":
        return
    if not v["gkeDnsEndpoint"] and not v["gkePublicEndpoint"] and not v["gkeAuthorizedNetworks"]:
        problems.append(
            Problem(
                "gkeDnsEndpoint",
                False,
                "with gkePublicEndpoint false and no gkeAuthorizedNetworks the control plane has only its private IP "
                "endpoint, reachable from inside the new VPC alone (this stack makes no bastion), so pulumi cannot "
                "create the workloads: set gkeDnsEndpoint true (IAM-authorized), or gkePublicEndpoint true with "
                "gkeAuthorizedNetworks (your public address, e.g. 203.0.113.5/32)",
            )
        )
    internal = [c for c in v["gkeAuthorizedNetworks"] if (n := _any_net(c)) is not None and _internal(n)]
    if not v["gkeDnsEndpoint"] and internal and len(internal) == len(v["gkeAuthorizedNetworks"]):
        # Without the DNS endpoint pulumi reaches the control plane by IP. A private (RFC 1918) source reaches
        # only the private endpoint, and only from the cluster's VPC or networks connected to it (same page,
        # "Private endpoint"); this stack makes that VPC in the same `pulumi up`, with no VPN, Interconnect or
        # peering, so no private range (a home or office LAN, behind its public NAT address) is one pulumi runs in.
        problems.append(
            Problem(
                "gkeAuthorizedNetworks",
                internal,
                "private ranges reach only the private endpoint, from inside the stack's own new VPC (it has no VPN, "
                "Interconnect or peering; a home or office LAN reaches Google from its public address), so with "
                "gkeDnsEndpoint false pulumi could not reach the control plane: set gkeDnsEndpoint true, or "
                "gkePublicEndpoint true with your public address (e.g. 203.0.113.5/32)",
            )
        )
    if not v["gkePublicEndpoint"] and not any(p.key == "gkeAuthorizedNetworks" for p in problems):
        public = [c for c in v["gkeAuthorizedNetworks"] if (n := _any_net(c)) is not None and not _internal(n)]
        if public:
            problems.append(
                Problem(
                    "gkeAuthorizedNetworks",
                    public,
                    "a public range reaches only the public IP endpoint, which gkePublicEndpoint false leaves closed: "
                    "set gkePublicEndpoint true, or list only private (VPC) ranges",
                )
            )


# VPC-internal IPv4 ranges: RFC 1918 and the shared space of RFC 6598 (https://cloud.google.com/vpc/docs/subnets
# #valid-ranges). Python's is_private also counts documentation ranges such as 203.0.113.0/24, which are not.
_INTERNAL = tuple(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10"))


def _internal(net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    return isinstance(net, ipaddress.IPv4Network) and any(net.subnet_of(r) for r in _INTERNAL)  # type: ignore[arg-type]


def _any_net(text: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network | None:
    try:
        return ipaddress.ip_network(text, strict=True) if "/" in text else None
    except ValueError:
        return None


# -- GCE boot images ---------------------------------------------------------------------------------
# A4 machines are x86-64 (Intel Emerald Rapids: https://cloud.google.com/compute/docs/accelerator-optimized-machines
# #a4-vms); the installer and the staged user space are for Ubuntu 24.04 (DOCA-OFED's ubuntu24.04 repository, the
# store builder's glibc). Google's public image projects and their OS: https://cloud.google.com/compute/docs/images/
# os-details; Canonical names release and architecture in each family and image (ubuntu-2404-lts-amd64,
# ubuntu-2404-noble-arm64-v..., ubuntu-accelerator-2404-amd64-with-nvidia-580).
UBUNTU_IMAGE_PROJECTS = ("ubuntu-os-cloud", "ubuntu-os-pro-cloud", ACCELERATOR_IMAGE_PROJECT)
OTHER_OS_PROJECTS = {
    "cos-cloud": "Container-Optimized OS",
    "debian-cloud": "Debian",
    "centos-cloud": "CentOS",
    "rhel-cloud": "RHEL",
    "rhel-sap-cloud": "RHEL",
    "rocky-linux-cloud": "Rocky Linux",
    "rocky-linux-accelerator-cloud": "Rocky Linux",
    "almalinux-cloud": "AlmaLinux",
    "suse-cloud": "SLES",
    "suse-sap-cloud": "SLES",
    "opensuse-cloud": "openSUSE",
    "oracle-linux-cloud": "Oracle Linux",
    "fedora-coreos-cloud": "Fedora CoreOS",
    "windows-cloud": "Windows",
    "windows-sql-cloud": "Windows",
    "freebsd-org-cloud-dev": "FreeBSD",
}


def check_gce_image_os(v: dict[str, Any], problems: list[Problem]) -> None:
    if v["platform"] != "gce":
        return
    ref = parse_image_ref(v["gceImage"])
    if ref is None:
        return  # the form: rules.check_gce
    if v["nodeProfile"] == "supported" and ref.project != ACCELERATOR_IMAGE_PROJECT:
        return  # rules.check_node_profile names the accelerator image
    name = ref.family or ref.name
    fix = f"use an Ubuntu 24.04 x86-64 image such as {PLAIN_UBUNTU_IMAGE}"
    if v["nodeProfile"] == "supported":
        fix = "use the ubuntu-accelerator-2404-amd64-with-nvidia-<branch> family"
    release = re.search(r"ubuntu-(?:[a-z]+-)*(\d{4})(?:-|$)", name)
    if ref.project in OTHER_OS_PROJECTS:
        why = f"is a {OTHER_OS_PROJECTS[ref.project]} image"
    elif re.search(r"arm64|aarch64", name):
        why = "is an Arm (arm64) image; A4 machines are x86-64"
    elif release and release[1] != "2404":
        why = f"is Ubuntu {release[1][:2]}.{release[1][2:]}, not 24.04"
    elif ref.project in UBUNTU_IMAGE_PROJECTS and not release:
        why = "names no Ubuntu release (ubuntu-2404-...)"
    else:
        return
    problems.append(
        Problem("gceImage", v["gceImage"], f"{why}; the installer and the staged user space need Ubuntu 24.04: {fix}")
    )


# -- the RoCE traffic class --------------------------------------------------------------------------
# On RoCE v2 the traffic class is the IP header's DS field: DSCP in its upper six bits, ECN in the lower two
# (RFC 2474, RFC 3168), and NVSHMEM sets DSCP to the value >> 2 (NVIDIA/nvshmem src/modules/transport/ibgda).
# Google's A4 NCCL settings (cluster-toolkit examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml at 1047080,
# [TK-VM] in docs/conformance.md) give RDMA data NCCL_IB_TC=52 (DSCP 13) and its FIFO NCCL_IB_FIFO_TC=84
# (DSCP 21); 0 is NVSHMEM's default (best effort), what the field reports ran.
ROCE_TRAFFIC_CLASSES = (0, 52, 84)


def check_traffic_class(v: dict[str, Any], problems: list[Problem]) -> None:
    tc = v["nvshmemTrafficClass"]
    if tc in ROCE_TRAFFIC_CLASSES:
        return
    if 0 <= tc <= 63 and tc << 2 in ROCE_TRAFFIC_CLASSES:
        why = f"looks like a DSCP: the traffic class is DSCP << 2, {tc << 2}"
    elif 0 <= tc <= 255 and tc & 3:
        why = "sets the two ECN bits, which are not part of the class"
    else:
        why = "is not a class Google's A4 RoCE fabric uses"
    problems.append(
        Problem(
            "nvshmemTrafficClass",
            tc,
            f"{why}; use 52 (DSCP 13, Google's A4 RDMA data class), 84 (DSCP 21, its FIFO class) or 0 "
            "(NVSHMEM's default)",
        )
    )


# -- a TTL against the node's own bring-up -----------------------------------------------------------
# The upper end of "node created -> installer ready" per platform and profile: deepep_a4/expected_times.yaml
# (docs/installer.md#bring-up-time), which config may not import; tests/components/config/test_mistakes.py keeps
# these equal to the table's totals, rounded up to the second.
BRINGUP_MAX_SECONDS = {
    ("gke", "supported"): 389,
    ("gke", "host-install"): 1643,
    ("gce", "supported"): 294,
    ("gce", "host-install"): 1523,
}


def _minutes(seconds: int) -> str:
    return f"{math.ceil(seconds / 60)}m"


def check_ttl_bringup(v: dict[str, Any], ttl: int | None, problems: list[Problem]) -> None:
    bringup = BRINGUP_MAX_SECONDS.get((v["platform"], v["nodeProfile"]))
    if ttl is None or bringup is None or ttl >= bringup:
        return
    problems.append(
        Problem(
            "ttl",
            v["ttl"],
            f"is shorter than the node's own bring-up on {v['platform']} {v['nodeProfile']} (up to "
            f"{_minutes(bringup)}, docs/installer.md#bring-up-time): the TTL would delete the node before its "
            f"install ends; set {_minutes(bringup)} or more, plus the benchmarks' time",
        )
    )

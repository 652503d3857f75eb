"""Rules across keys: identity, capacity, network, runtime, store, benchmarks, GCE; versions in rules/version_forms.py.

Each check appends a Problem for every rule a value breaks, so the user sees all of them at once.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

from components.config import provisioning, upstream, versions
from components.config.images import ACCELERATOR_IMAGE, ACCELERATOR_IMAGE_PROJECT, PLAIN_UBUNTU_IMAGE
from components.config.keys import (
    BENCHMARK_TESTS,
    COMPACT_PLACEMENT_MAX_NODES,
    GKE_GPU_DRIVERS,
    MACHINE_SHAPES,
    PLATFORM_KEYS,
    Problem,
)
from components.config.model import parse_image_ref
from components.config.rules.images import check_gce as check_gce
from components.config.rules.images import check_installer_image as check_installer_image
from components.config.rules.inputs import check_authorized_networks, check_store_url
from components.config.rules.version_forms import HCA_PREFIX_SINCE, VERSION_RE

BENCH_MAX_REPEATS = 10
BENCH_MAX_TIMEOUT_MINUTES = 240

_PROJECT_RE = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
_NAME_PREFIX_RE = re.compile(r"[a-z][a-z0-9-]{0,28}[a-z0-9]")
_GCP_NAME_RE = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_TTL_RE = re.compile(r"(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?")
# registry/name[:tag][@sha256:digest], lower case, as Kubernetes pulls it.
_IMAGE_RE = re.compile(r"[a-z0-9]+([._/-][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?")
# GCE's max_run_duration accepts at most 120 days.
# The first host (nic0) address a GCE VM of the stack takes; the ones below stay free for the network.
GCE_FIRST_HOST_OFFSET = 10
_TTL_MAX_SECONDS = 120 * 24 * 3600


def parse_ttl(text: str) -> int | None:
    """'8h' -> 28800; 'off' -> None; raises ValueError on anything else."""
    if text.strip().lower() in ("off", "none", "0"):
        return None
    m = _TTL_RE.fullmatch(text.strip())
    if not text.strip() or not m or not any(m.groups()):
        raise ValueError(text)
    d, h, mi, s = (int(g or 0) for g in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


def check_identity(v: dict[str, Any], problems: list[Problem]) -> None:
    if not _PROJECT_RE.fullmatch(v["project"]):
        problems.append(Problem("project", v["project"], "must be a Google Cloud project ID (6-30 chars: a-z, 0-9, -)"))
    if not re.fullmatch(r"[a-z]+-[a-z]+\d+", v["region"]):
        problems.append(Problem("region", v["region"], "must be a region name such as asia-southeast1"))
    elif not re.fullmatch(rf"{re.escape(v['region'])}-[a-z]", v["zone"]):
        problems.append(Problem("zone", v["zone"], f"must be a zone of region {v['region']} (e.g. {v['region']}-b)"))
    elif v["zone"] not in versions.A4_ZONES.get(v["machineType"], (v["zone"],)):
        offered = ", ".join(versions.A4_ZONES[v["machineType"]])
        problems.append(
            Problem("zone", v["zone"], f"Google offers {v['machineType']} only in {offered} (GPU regions and zones)")
        )
    if not _IMAGE_RE.fullmatch(v["containerImage"]):
        problems.append(
            Problem("containerImage", v["containerImage"], "must be an image reference: name[:tag][@sha256:<64 hex>]")
        )
    else:
        _require_digest("containerImage", v, problems)
    if v["namePrefix"] and not _NAME_PREFIX_RE.fullmatch(v["namePrefix"]):
        problems.append(
            Problem("namePrefix", v["namePrefix"], "must be 2-30 chars of a-z, 0-9 and -, starting with a letter")
        )


def _require_digest(key: str, v: dict[str, Any], problems: list[Problem]) -> None:
    if "@sha256:" not in v[key] and not v["allowUnpinnedImages"]:
        pinned = "name[:tag]@sha256:<64 hex> (a tag can move; allowUnpinnedImages: true accepts it)"
        problems.append(Problem(key, v[key], f"must be pinned by digest, {pinned}"))


def check_explicit(v: dict[str, Any], written: set[str], problems: list[Problem]) -> None:
    """Rules on what the stack writes, not on the values it ends up with: a key the platform never reads
    would be silently ignored, and an explicit compact placement on reservation capacity silently dropped."""
    for platform, names in PLATFORM_KEYS.items():
        if platform == v["platform"]:
            continue
        for name in sorted(written & set(names)):
            problems.append(
                Problem(name, v[name], f"is read only on platform {platform}, not {v['platform']}: remove it")
            )
    model = provisioning.MODELS.get(v["provisioning"])
    if "placement" in written and v["placement"] == "compact" and model and model.placed_by_capacity:
        problems.append(
            Problem(
                "placement",
                "compact",
                f"{v['provisioning']} capacity comes placed (a reservation is a dense block) and no placement policy "
                "is added to it: remove placement or set none",
            )
        )


def check_capacity(v: dict[str, Any], problems: list[Problem]) -> None:
    n = v["nodeCount"]
    if n < 1:
        problems.append(Problem("nodeCount", n, "must be at least 1"))
    if v["placement"] == "compact" and n > COMPACT_PLACEMENT_MAX_NODES:
        problems.append(
            Problem(
                "nodeCount",
                n,
                f"compact placement allows at most {COMPACT_PLACEMENT_MAX_NODES} nodes; use fewer or placement=none",
            )
        )
    prov, res = v["provisioning"], v["reservationName"]
    if prov == "reservation" and not res:
        problems.append(Problem("reservationName", res, "provisioning=reservation needs the name of a reservation"))
    elif prov == "reservation" and not _GCP_NAME_RE.fullmatch(res):
        # Compute Engine resource names: RFC 1035 labels, 1-63 characters, [a-z]([-a-z0-9]*[a-z0-9])?
        # (https://cloud.google.com/compute/docs/naming-resources#resource-name-format; the reservations API's
        # `name` field states the same regex: https://cloud.google.com/compute/docs/reference/rest/v1/reservations).
        problems.append(
            Problem(
                "reservationName",
                res,
                "must be a Compute Engine resource name as the reservation was created: 1-63 characters, a lower-case "
                "letter first, then lower-case letters, digits and -, not ending in - (RFC 1035 "
                "[a-z]([-a-z0-9]*[a-z0-9])?); Compute Engine never stores capitals, so a name with them matches none",
            )
        )
    if prov != "reservation" and res:
        problems.append(Problem("reservationName", res, f"only used with provisioning=reservation, not {prov}"))
    try:
        ttl = parse_ttl(v["ttl"])
    except ValueError:
        problems.append(Problem("ttl", v["ttl"], "must be a duration such as 8h, 90m, 1d12h, or 'off'"))
    else:
        model = provisioning.MODELS.get(prov)
        max_ttl = model.max_ttl_seconds if model else None
        if ttl is None and model is not None and model.needs_ttl:
            problems.append(Problem("ttl", v["ttl"], f"{prov} capacity needs a bill cap: set a duration such as 8h"))
        elif ttl is not None and not 600 <= ttl <= _TTL_MAX_SECONDS:
            problems.append(Problem("ttl", v["ttl"], "must be between 10m and 120d"))
        elif ttl is not None and max_ttl is not None and ttl > max_ttl:
            days = max_ttl // 86400
            problems.append(Problem("ttl", v["ttl"], f"{prov} capacity runs at most {days}d: set {days}d or less"))
    forced = provisioning.MODELS[prov].termination_action if prov in provisioning.MODELS else ""
    if forced and v["terminationAction"] != forced:
        problems.append(
            Problem(
                "terminationAction", v["terminationAction"], f"{prov} capacity always ends with {forced}: use {forced}"
            )
        )
    if v["bootDiskGb"] < 100 or v["bootDiskGb"] > 65536:
        problems.append(
            Problem("bootDiskGb", v["bootDiskGb"], "must be 100-65536 (CUDA, NVSHMEM and DeepEP builds need room)")
        )
    if v["localSsdCount"] not in (0, 32):
        problems.append(Problem("localSsdCount", v["localSsdCount"], "a4-highgpu-8g has 32 local SSDs: use 32 or 0"))


def _parse_net(key: str, value: str, problems: list[Problem]) -> ipaddress.IPv4Network | None:
    if "/" not in value:  # ipaddress reads a bare address as a /32; Google's ranges are CIDRs with a length
        problems.append(Problem(key, value, "must be an IPv4 CIDR with its prefix length, such as 10.0.0.0/20"))
        return None
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as err:
        problems.append(Problem(key, value, f"must be an IPv4 CIDR with no host bits set ({err})"))
        return None
    if not isinstance(net, ipaddress.IPv4Network) or not net.is_private:
        problems.append(Problem(key, value, "must be a private IPv4 range (RFC 1918)"))
        return None
    return net


def check_network(v: dict[str, Any], problems: list[Problem]) -> None:
    names = ("hostCidr", "podsCidr", "servicesCidr", "gvnicCidr", "rdmaCidr", "masterCidr")
    nets = {k: _parse_net(k, v[k], problems) for k in names}
    rdma = nets["rdmaCidr"]
    if rdma is not None and rdma.prefixlen > 26:
        problems.append(
            Problem("rdmaCidr", v["rdmaCidr"], "must be /26 or larger: it is split into 8 subnets of at least /29")
        )
    host = nets["hostCidr"]
    if host is not None and v["platform"] == "gce" and isinstance(v["nodeCount"], int):
        # GCE VMs take fixed host addresses from GCE_FIRST_HOST_OFFSET on; GCE reserves two at the end.
        room = max(host.num_addresses - GCE_FIRST_HOST_OFFSET - 2, 0)
        if v["nodeCount"] > room:
            problems.append(
                Problem(
                    "hostCidr",
                    v["hostCidr"],
                    f"has room for {room} VMs, nodeCount is {v['nodeCount']}: use a larger range",
                )
            )
    master = nets["masterCidr"]
    if master is not None and master.prefixlen != 28:
        problems.append(Problem("masterCidr", v["masterCidr"], "GKE needs a /28 for the control plane"))
    checked = [(k, n) for k, n in nets.items() if n is not None]
    for i, (ka, a) in enumerate(checked):
        for kb, b in checked[i + 1 :]:
            if a.overlaps(b):
                problems.append(Problem(kb, v[kb], f"overlaps {ka} ({v[ka]}); every range must be distinct"))
    check_authorized_networks(v["gkeAuthorizedNetworks"], problems)
    if v["platform"] == "gke" and v["gkePublicEndpoint"] and not v["gkeAuthorizedNetworks"]:
        # A public IP endpoint without authorized networks accepts connections from any address.
        problems.append(
            Problem(
                "gkePublicEndpoint",
                True,
                "a public IP endpoint needs gkeAuthorizedNetworks (your CIDRs); or leave it off and use gkeDnsEndpoint",
            )
        )


def check_runtime(v: dict[str, Any], problems: list[Problem]) -> None:
    if not 0 <= v["gidIndex"] <= 255:
        problems.append(Problem("gidIndex", v["gidIndex"], "must be 0-255 (3 is RoCE v2 on GCP)"))
    if v["nicHandler"] == "cpu" and not v["gdrcopyKernelModule"]:
        problems.append(
            Problem(
                "nicHandler",
                "cpu",
                "the cpu NIC handler needs the GDRCopy kernel module, which only nodeProfile=host-install loads: "
                "use gpu"
                if v["nodeProfile"] == "supported"
                else "the cpu NIC handler needs the GDRCopy kernel module: set gdrcopyKernelModule=true or use gpu",
            )
        )
    if v["nodeProfile"] == "supported":
        # hcaPrefix and useDocaOfed are host-install keys there (check_node_profile refuses them, and an old
        # NVSHMEM): advice to set them would be refused by the next check (issue 41).
        return
    if v["hcaPrefix"] == "mlx5" and not v["useDocaOfed"]:
        problems.append(
            Problem(
                "hcaPrefix", "mlx5", "mlx5_* HCA names come from DOCA-OFED: set useDocaOfed=true or hcaPrefix=rocep"
            )
        )
    if v["hcaPrefix"] == "rocep" and v["useDocaOfed"]:
        problems.append(
            Problem("hcaPrefix", "rocep", "DOCA-OFED renames HCAs to mlx5_*: set hcaPrefix=mlx5 or useDocaOfed=false")
        )
    nvshmem = v["nvshmemVersion"]
    old_nvshmem = VERSION_RE.fullmatch(nvshmem) and upstream.version_tuple(nvshmem) < HCA_PREFIX_SINCE
    if v["hcaPrefix"] != "mlx5" and old_nvshmem:
        problems.append(
            Problem(
                "hcaPrefix",
                v["hcaPrefix"],
                f"NVSHMEM reads NVSHMEM_HCA_PREFIX from 3.4.5 on, nvshmemVersion is {nvshmem}: use NVSHMEM 3.4.5 "
                "or newer, or DOCA-OFED with hcaPrefix=mlx5",
            )
        )


def check_store(v: dict[str, Any], problems: list[Problem]) -> None:
    url = v["artifactStore"]
    check_store_url(v, problems)  # gs://BUCKET/PREFIX, the bucket by Cloud Storage's naming rules
    if v["artifactStoreOnly"] and not url:
        problems.append(Problem("artifactStoreOnly", True, "needs artifactStore: without a store nodes must download"))
    manifest = v["artifactStoreManifest"]
    if manifest and not re.fullmatch(r"[0-9a-fA-F]{64}", manifest):
        problems.append(Problem("artifactStoreManifest", manifest, "must be a sha256 (64 hex digits) or empty"))
    if manifest and not url:
        problems.append(Problem("artifactStoreManifest", manifest, "needs artifactStore: the manifest lives there"))
    if v["artifactStorePublish"] and (v["platform"], v["nodeProfile"]) == ("gke", "supported"):
        # On GKE's supported profile only the staging container touches the store, and it reads (restore
        # only: components/gke/stage.py); no installer downloads sources to publish (scripts/install/lib.sh
        # publishes what `download` fetched). The publish grant (roles/storage.objectCreator, components/node/
        # store.py) would be a write power nothing uses.
        problems.append(
            Problem(
                "artifactStorePublish",
                True,
                "nothing publishes on platform gke with nodeProfile supported (the staging container only reads the "
                "store), so it would only grant the nodes write access: remove it (deepep-a4 store build fills the "
                "store)",
            )
        )


def check_benchmarks(v: dict[str, Any], problems: list[Problem]) -> None:
    for test in v["benchmarks"]:
        if test not in BENCHMARK_TESTS:
            problems.append(Problem("benchmarks", test, f"every entry must be one of: {', '.join(BENCHMARK_TESTS)}"))
    if "internode" in v["benchmarks"] and v["nodeCount"] == 1:
        problems.append(Problem("benchmarks", "internode", "the internode test needs nodeCount of 2 or more"))
    shape = MACHINE_SHAPES.get(v["machineType"])
    processes_ok = bool(shape) and 1 <= v["benchProcesses"] <= shape.gpus
    if shape and not processes_ok:
        problems.append(Problem("benchProcesses", v["benchProcesses"], f"must be 1-{shape.gpus} (GPUs per node)"))
    for key in (
        "benchHidden",
        "benchTopk",
        "intranodeTokens",
        "intranodeExperts",
        "lowLatencyTokens",
        "lowLatencyExperts",
        "internodeTokens",
        "internodeExperts",
        "benchTimeoutMinutes",
    ):
        if v[key] < 1:
            problems.append(Problem(key, v[key], "must be at least 1"))
    for key in ("intranodeExperts", "lowLatencyExperts"):  # internode: rules/inputs.py (ranks of every node)
        if processes_ok and v[key] >= 1 and v[key] % v["benchProcesses"]:
            problems.append(Problem(key, v[key], f"must be a multiple of benchProcesses ({v['benchProcesses']})"))
    timeout = v["benchTimeoutMinutes"]
    if timeout > BENCH_MAX_TIMEOUT_MINUTES:
        # Our bound, for the bill: a test that hangs (a stuck dispatch never returns) is killed only at its
        # timeout while every node bills, and each start of each test may take it in full (docs/benchmarks.md).
        seconds = f" if you meant {timeout} seconds, write {timeout // 60}" if timeout % 60 == 0 else ""
        problems.append(
            Problem(
                "benchTimeoutMinutes",
                timeout,
                f"is minutes ({timeout} min = {timeout / 60:g} h per test start); at most {BENCH_MAX_TIMEOUT_MINUTES} "
                f"(a hung test bills every node until its timeout; the default is 30):{seconds or ' use fewer'}",
            )
        )
    # The runner's MAX_REPEATS (scripts/bench/settings.py, which config may not import); a test keeps them equal.
    if not 1 <= v["benchRepeats"] <= BENCH_MAX_REPEATS:
        problems.append(Problem("benchRepeats", v["benchRepeats"], f"must be 1 to {BENCH_MAX_REPEATS}"))
    try:
        ratio = float(v["benchGateRatio"])
        if not 0 <= ratio <= 1:
            raise ValueError
    except ValueError:
        problems.append(Problem("benchGateRatio", v["benchGateRatio"], "must be a fraction between 0 and 1, e.g. 0.5"))


# -- node profiles -------------------------------------------------------------------------------------

# Keys only the host-install profile reads: on `supported` the driver comes from GKE or the image, nothing is
# installed on the host, and the HCA names are whatever the node's kernel gives (verify records them).
HOST_INSTALL_KEYS = (
    "docaOfedVersion",
    "nvidiaDriverVersion",
    "gdrcopyKernelModule",
    "useDocaOfed",
    "allowReboot",
    "hcaPrefix",
)
# NVSHMEM reads NVSHMEM_HCA_PREFIX (mlx5 or rocep, whichever the node has) and falls back to CPU-assisted
# IBGDA where the GPU may not map the NIC from 3.4.5 on (troubleshooting T09).
SUPPORTED_MIN_NVSHMEM = HCA_PREFIX_SINCE
SUPPORTED_GKE_DRIVERS = ("DEFAULT", "LATEST", "cos-installer")


def profile_defaults(v: dict[str, Any], given: set[str]) -> None:
    """The keys whose empty default means "the profile's own": GKE's driver and the GCE boot image."""
    supported = v["nodeProfile"] == "supported"
    if not v["gkeGpuDriver"]:
        v["gkeGpuDriver"] = "LATEST" if supported else "installer"
    if not v["gceImage"]:
        v["gceImage"] = ACCELERATOR_IMAGE if supported else PLAIN_UBUNTU_IMAGE


def check_node_profile(v: dict[str, Any], given: set[str], problems: list[Problem]) -> None:
    """What each node profile allows: supported takes no host-install key, GKE's driver, the accelerator image."""
    supported = v["nodeProfile"] == "supported"
    if supported:
        for key in HOST_INSTALL_KEYS:
            if key in given:
                problems.append(
                    Problem(
                        key,
                        v[key],
                        "a host-install key: nodeProfile=supported installs nothing on the host (driver from GKE or "
                        "the image, HCA names as the node has them); remove it or set nodeProfile=host-install",
                    )
                )
        nvshmem = v["nvshmemVersion"]
        if VERSION_RE.fullmatch(nvshmem) and upstream.version_tuple(nvshmem) < SUPPORTED_MIN_NVSHMEM:
            since = ".".join(map(str, SUPPORTED_MIN_NVSHMEM))
            problems.append(
                Problem(
                    "nvshmemVersion",
                    nvshmem,
                    f"nodeProfile=supported needs NVSHMEM {since} or newer (NVSHMEM_HCA_PREFIX for rocep/mlx5 names, "
                    "CPU-assisted IBGDA fallback: troubleshooting T09); or set nodeProfile=host-install",
                )
            )
    if v["platform"] == "gke" and v["gkeGpuDriver"] in GKE_GPU_DRIVERS:  # another value: parse names it once
        driver = v["gkeGpuDriver"]
        if supported and driver not in SUPPORTED_GKE_DRIVERS:
            problems.append(
                Problem(
                    "gkeGpuDriver",
                    driver,
                    "nodeProfile=supported runs GKE's own driver on COS (Google's A4 GPUDirect-RDMA guide): use "
                    "DEFAULT, LATEST or cos-installer, or set nodeProfile=host-install",
                )
            )
        if not supported and driver != "installer":
            # GKE's own driver installer loads the module with insmod: /etc/modprobe.d options never apply, so
            # the host-install path's PeerMappingOverride (troubleshooting T09) could never be active.
            problems.append(
                Problem(
                    "gkeGpuDriver",
                    driver,
                    "nodeProfile=host-install sets PeerMappingOverride, which GKE's insmod-loaded driver never "
                    "takes (troubleshooting T09): use installer, or nodeProfile=supported",
                )
            )
    if v["platform"] == "gce" and supported:
        ref = parse_image_ref(v["gceImage"])
        if ref is not None and ref.project != ACCELERATOR_IMAGE_PROJECT:
            problems.append(
                Problem(
                    "gceImage",
                    v["gceImage"],
                    f"nodeProfile=supported runs Google's accelerator image (the driver in the image): use an "
                    f"{ACCELERATOR_IMAGE_PROJECT} image such as {ACCELERATOR_IMAGE}, or set nodeProfile=host-install",
                )
            )

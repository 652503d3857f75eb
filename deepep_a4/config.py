"""The stack's config model: every key of the `deepep-a4` namespace, typed, frozen, validated.

All keys are flat (Pulumi's project config schema knows no objects) and grouped into nested frozen
dataclasses here. `KEYS` is the single table of key, type, default and description; `Pulumi.yaml`
mirrors it and a test keeps the two equal. `parse()` collects *every* problem before it raises, so a
user fixes a stack in one pass, and nothing is created while any problem remains.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deepep_a4 import upstream

PROJECT_NAME = "deepep-a4"

PLATFORMS = ("gke", "gce")
PROVISIONING_MODELS = ("spot", "reservation", "flex-start", "on-demand")
PLACEMENTS = ("compact", "none")
NVSHMEM_SOURCES = ("pip", "source")
NIC_HANDLERS = ("gpu", "cpu")
HCA_PREFIXES = ("mlx5", "rocep")
TERMINATION_ACTIONS = ("DELETE", "STOP")
RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE", "UNSPECIFIED")
GKE_GPU_DRIVERS = ("installer", "DEFAULT", "LATEST")
POD_NETWORKING = ("hostNetwork", "multiNetwork")
BENCHMARK_TESTS = ("intranode", "low-latency", "internode")

# Google documents at most 150 VMs per compact placement policy.
COMPACT_PLACEMENT_MAX_NODES = 150
# Google's IAP TCP-forwarding range: the only source SSH is ever opened to.
IAP_SOURCE_RANGE = "35.235.240.0/20"
RDMA_NICS_PER_NODE = 8


@dataclass(frozen=True)
class MachineShape:
    """What a machine type implies for the rest of the stack."""

    accelerator: str
    gpus: int
    rdma_nics: int
    torch_cuda_arch: str  # TORCH_CUDA_ARCH_LIST for DeepEP
    cuda_arch: str  # CMAKE_CUDA_ARCHITECTURES for NVSHMEM
    min_cuda: tuple[int, int]


MACHINE_SHAPES: dict[str, MachineShape] = {
    # B200 is sm_100: CUDA 12.8 is the first toolkit that can compile for it.
    "a4-highgpu-8g": MachineShape("nvidia-b200", 8, 8, "10.0", "100", (12, 8)),
}


@dataclass(frozen=True)
class Key:
    """One config key of the project namespace."""

    name: str
    kind: type  # str, int, bool or list
    default: Any
    description: str
    choices: tuple[str, ...] = ()


KEYS: tuple[Key, ...] = (
    # -- where and what --------------------------------------------------------------------------
    Key("platform", str, "gke", "Where the A4 machines run: a GKE node pool or plain GCE VMs.", PLATFORMS),
    Key("project", str, "", "Google Cloud project ID that receives every resource (required)."),
    Key("region", str, "asia-southeast1", "Region of the subnets, router and cluster."),
    Key("zone", str, "asia-southeast1-b", "Zone of the A4 machines and of the RoCE network profile."),
    Key("namePrefix", str, "", "Prefix of every cloud resource name; empty means deepep-<stack>."),
    Key("machineType", str, "a4-highgpu-8g", "Machine type of the GPU nodes.", tuple(MACHINE_SHAPES)),
    Key("nodeCount", int, 2, "Number of A4 machines (8 B200 GPUs each)."),
    Key("provisioning", str, "spot", "How capacity is obtained.", PROVISIONING_MODELS),
    Key("reservationName", str, "", "Reservation to consume; required with provisioning=reservation."),
    Key("placement", str, "compact", "Compact placement keeps nodes close (at most 150 nodes).", PLACEMENTS),
    Key(
        "ttl", str, "8h", "Bill cap: the cloud deletes the machines after this long (e.g. 8h, 90m); 'off' disables it."
    ),
    Key("bootDiskGb", int, 1000, "Boot disk size in GB (hyperdisk-balanced)."),
    Key("localSsdCount", int, 32, "Local SSDs per node used as ephemeral storage (GKE)."),
    # -- network ---------------------------------------------------------------------------------
    Key("hostCidr", str, "10.0.0.0/20", "Primary range of the host subnet (nic0)."),
    Key("podsCidr", str, "10.4.0.0/14", "Secondary range for GKE pods on the host subnet."),
    Key("servicesCidr", str, "10.8.0.0/20", "Secondary range for GKE services on the host subnet."),
    Key("gvnicCidr", str, "10.1.0.0/20", "Range of the second gVNIC subnet (nic1)."),
    Key("rdmaCidr", str, "192.168.0.0/16", "Range split into eight equal RDMA subnets (nic2-nic9)."),
    Key("masterCidr", str, "172.16.0.0/28", "GKE control plane range (a /28)."),
    Key("sshViaIap", bool, True, "Allow SSH to nodes from Google's IAP range only."),
    # -- versions of the stack the installer puts on every node ------------------------------------
    Key("docaOfedVersion", str, "3.2.1", "DOCA-OFED version (turns rocep* HCAs into mlx5_*)."),
    Key("nvidiaDriverVersion", str, "580.126.09", "NVIDIA open kernel driver version."),
    Key("cudaVersion", str, "12.9", "CUDA toolkit version (B200 needs 12.8 or newer)."),
    Key("gdrcopyVersion", str, "2.5.1", "GDRCopy version."),
    Key("nvshmemVersion", str, "3.5.19", "NVSHMEM version (pip wheel or source tag)."),
    Key(
        "nvshmemSource",
        str,
        "source",
        "NVSHMEM built from source with IBGDA, or NVIDIA's pip wheel (single node only: seed 001 problem 8).",
        NVSHMEM_SOURCES,
    ),
    Key("torchVersion", str, "2.10.0+cu129", "PyTorch version with its CUDA variant."),
    Key(
        "deepepRef",
        str,
        upstream.DEEPEP_NVSHMEM35_FIXES,
        "DeepEP tag or full commit hash, never a branch (default: 1.2.1+29d31c0, what the seeds ran).",
    ),
    Key("deepepPr466", bool, True, "Apply DeepEP PR #466 (explicit GPU-to-NIC mapping; ~6.5 GB/s RDMA without)."),
    # -- installer and NVSHMEM runtime -------------------------------------------------------------
    Key("useDocaOfed", bool, True, "Install DOCA-OFED where the node shows rocep* HCAs."),
    Key("gdrcopyKernelModule", bool, False, "Build and load the gdrdrv kernel module (needed by nicHandler=cpu)."),
    Key("allowReboot", bool, True, "Let the installer reboot a node once (DOCA-OFED, PeerMappingOverride)."),
    Key("nicHandler", str, "gpu", "NVSHMEM_IBGDA_NIC_HANDLER.", NIC_HANDLERS),
    Key("hcaPrefix", str, "mlx5", "NVSHMEM_HCA_PREFIX (mlx5 with DOCA-OFED, rocep without).", HCA_PREFIXES),
    Key("gidIndex", int, 3, "NVSHMEM_IB_GID_INDEX (3 is RoCE v2 on GCP)."),
    # -- GKE ---------------------------------------------------------------------------------------
    Key("gkeVersion", str, "", "Pinned GKE version (e.g. 1.33.5-gke.1162000); empty follows the channel."),
    Key("gkeReleaseChannel", str, "REGULAR", "GKE release channel.", RELEASE_CHANNELS),
    Key("gkePublicEndpoint", bool, True, "Keep the control plane's public endpoint (with authorized networks)."),
    Key("gkeAuthorizedNetworks", list, [], "CIDRs allowed to reach the control plane's public endpoint."),
    Key("gkeDeletionProtection", bool, False, "Protect the cluster from deletion (pulumi destroy then fails)."),
    Key("gkeGpuDriver", str, "installer", "Who installs the GPU driver: our installer or GKE.", GKE_GPU_DRIVERS),
    Key("podNetworking", str, "multiNetwork", "How benchmark pods reach the RDMA NICs.", POD_NETWORKING),
    Key(
        "containerImage",
        str,
        "ubuntu:24.04",
        "Image of the installer and benchmark containers (bash and coreutils; the stack comes from the host). "
        "Pin it as name@sha256:<digest>.",
    ),
    # -- GCE ---------------------------------------------------------------------------------------
    Key(
        "gceImage", str, "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64", "Boot image of the VMs."
    ),
    Key(
        "terminationAction",
        str,
        "DELETE",
        "What happens to a VM at spot preemption or at its TTL.",
        TERMINATION_ACTIONS,
    ),
    # -- benchmarks --------------------------------------------------------------------------------
    Key("benchmarks", list, ["intranode", "low-latency", "internode"], "DeepEP tests to run after install."),
    Key("benchHidden", int, 7168, "Hidden size for every test."),
    Key("benchTopk", int, 8, "Top-k for every test."),
    Key("benchProcesses", int, 8, "GPUs (processes) per node for every test."),
    Key("intranodeTokens", int, 4096, "Tokens of test_intranode.py."),
    Key("intranodeExperts", int, 256, "Experts of test_intranode.py."),
    Key("lowLatencyTokens", int, 128, "Tokens of test_low_latency.py."),
    Key("lowLatencyExperts", int, 288, "Experts of test_low_latency.py."),
    Key("internodeTokens", int, 4096, "Tokens of test_internode.py."),
    Key("internodeExperts", int, 256, "Experts of test_internode.py."),
    Key("benchTimeoutMinutes", int, 30, "Timeout of one benchmark test."),
    Key("benchGateRatio", str, "0.5", "A result below this fraction of the B200 baseline fails the report."),
)

KEYS_BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the stack config: which key, what value, what is allowed."""

    key: str
    value: Any
    allowed: str

    def __str__(self) -> str:
        return f"{PROJECT_NAME}:{self.key} = {self.value!r}: {self.allowed}"


class ConfigError(Exception):
    """Raised with every problem of a stack config at once."""

    def __init__(self, problems: list[Problem]):
        self.problems = problems
        super().__init__("invalid stack config:\n" + "\n".join(f"  - {p}" for p in problems))


@dataclass(frozen=True)
class NetworkConfig:
    host_cidr: str
    pods_cidr: str
    services_cidr: str
    gvnic_cidr: str
    rdma_cidr: str
    master_cidr: str
    ssh_via_iap: bool

    @property
    def rdma_subnet_cidrs(self) -> tuple[str, ...]:
        """The RDMA range split into one equal subnet per RDMA NIC, in NIC order."""
        net = ipaddress.ip_network(self.rdma_cidr)
        return tuple(str(s) for s in net.subnets(prefixlen_diff=3))


@dataclass(frozen=True)
class Versions:
    doca_ofed: str
    nvidia_driver: str
    cuda: str
    gdrcopy: str
    nvshmem: str
    nvshmem_source: str
    torch: str
    deepep_ref: str
    deepep_pr466: bool

    @property
    def torch_cuda_variant(self) -> str:
        """The wheel index variant of PyTorch, e.g. cu129 for 2.10.0+cu129."""
        return self.torch.partition("+")[2]


@dataclass(frozen=True)
class NvshmemRuntime:
    nic_handler: str
    hca_prefix: str
    gid_index: int


@dataclass(frozen=True)
class InstallerOptions:
    use_doca_ofed: bool
    gdrcopy_kernel_module: bool
    allow_reboot: bool


@dataclass(frozen=True)
class GkeOptions:
    version: str
    release_channel: str
    public_endpoint: bool
    authorized_networks: tuple[str, ...]
    deletion_protection: bool
    gpu_driver: str
    pod_networking: str
    container_image: str


@dataclass(frozen=True)
class GceOptions:
    image: str
    termination_action: str


@dataclass(frozen=True)
class BenchCase:
    tokens: int
    experts: int


@dataclass(frozen=True)
class BenchmarkOptions:
    tests: tuple[str, ...]
    hidden: int
    topk: int
    processes: int
    intranode: BenchCase
    low_latency: BenchCase
    internode: BenchCase
    timeout_minutes: int
    gate_ratio: float


@dataclass(frozen=True)
class StackConfig:
    stack: str
    platform: str
    project: str
    region: str
    zone: str
    name_prefix: str
    machine_type: str
    node_count: int
    provisioning: str
    reservation_name: str
    placement: str
    ttl_seconds: int | None
    boot_disk_gb: int
    local_ssd_count: int
    network: NetworkConfig
    versions: Versions
    nvshmem: NvshmemRuntime
    installer: InstallerOptions
    gke: GkeOptions
    gce: GceOptions
    benchmarks: BenchmarkOptions

    @property
    def shape(self) -> MachineShape:
        return MACHINE_SHAPES[self.machine_type]

    @property
    def is_spot(self) -> bool:
        return self.provisioning == "spot"

    def name(self, suffix: str) -> str:
        """A cloud resource name derived from the stack, so two stacks can share a project."""
        return f"{self.name_prefix}-{suffix}"

    @property
    def labels(self) -> dict[str, str]:
        return {"deepep-a4-stack": self.stack, "managed-by": "pulumi"}


# -- parsing ---------------------------------------------------------------------------------------

_VERSION_RE = re.compile(r"^\d+(\.\d+){0,3}(-\d+)?(\+[a-z0-9]+)?$")
_PROJECT_RE = re.compile(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
_NAME_PREFIX_RE = re.compile(r"^[a-z][a-z0-9-]{0,28}[a-z0-9]$")
_GCP_NAME_RE = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_DEEPEP_REF_RE = re.compile(r"^(v\d+\.\d+\.\d+([-.][a-z0-9]+)?|[0-9a-f]{40})$")
_TTL_RE = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
# registry/name[:tag][@sha256:digest], lower case, as Kubernetes pulls it.
_IMAGE_RE = re.compile(r"^[a-z0-9]+([._/-][a-z0-9]+)*(:[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(@sha256:[0-9a-f]{64})?$")
_GKE_VERSION_RE = re.compile(r"^\d+\.\d+(\.\d+(-gke\.\d+)?)?$")
# GCE's max_run_duration accepts at most 120 days.
# The first host (nic0) address a GCE VM of the stack takes; the ones below stay free for the network.
GCE_FIRST_HOST_OFFSET = 10
_TTL_MAX_SECONDS = 120 * 24 * 3600
_FLEX_START_MAX_SECONDS = 7 * 24 * 3600  # GCE's limit on a flex-start VM's max run duration


def _coerce(key: Key, value: Any, problems: list[Problem]) -> Any:
    """Turns a raw config value (a string from Pulumi, or a native YAML value) into the key's type."""
    try:
        if key.kind is bool:
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "false"):
                return str(value).lower() == "true"
            raise ValueError
        if key.kind is int:
            if isinstance(value, bool):
                raise ValueError
            return int(str(value).strip())
        if key.kind is list:
            if isinstance(value, str):
                value = json.loads(value) if value.strip() else []
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError
            return tuple(value)
        if isinstance(value, (dict, list)):
            raise ValueError
        return str(value)
    except (ValueError, json.JSONDecodeError):
        kinds = {bool: "true or false", int: "a whole number", list: "a list of strings", str: "a string"}
        problems.append(Problem(key.name, value, f"must be {kinds[key.kind]}"))
        return key.default if key.kind is not list else tuple(key.default)


def parse_ttl(text: str) -> int | None:
    """'8h' -> 28800; 'off' -> None; raises ValueError on anything else."""
    if text.strip().lower() in ("off", "none", "0"):
        return None
    m = _TTL_RE.match(text.strip())
    if not text.strip() or not m or not any(m.groups()):
        raise ValueError(text)
    d, h, mi, s = (int(g or 0) for g in m.groups())
    return ((d * 24 + h) * 60 + mi) * 60 + s


def parse(raw: Mapping[str, Any], stack: str) -> StackConfig:
    """Builds the validated config of `stack` from raw key/value pairs (keys without namespace).

    Raises ConfigError listing every problem found.
    """
    problems: list[Problem] = []
    for unknown in sorted(set(raw) - set(KEYS_BY_NAME)):
        near = [k for k in KEYS_BY_NAME if k.lower() == unknown.lower()]
        hint = f"did you mean '{near[0]}'? " if near else ""
        problems.append(Problem(unknown, raw[unknown], f"unknown key; {hint}see Pulumi.yaml for the allowed keys"))

    v: dict[str, Any] = {}
    for key in KEYS:
        value = _coerce(key, raw[key.name], problems) if key.name in raw else key.default
        if key.kind is list and isinstance(value, list):
            value = tuple(value)
        if key.choices and value not in key.choices:
            problems.append(Problem(key.name, value, f"must be one of: {', '.join(key.choices)}"))
        v[key.name] = value

    _check_identity(v, problems)
    _check_capacity(v, problems)
    _check_network(v, problems)
    _check_versions(v, problems)
    _check_runtime(v, problems)
    _check_benchmarks(v, problems)

    ttl_seconds: int | None = None
    try:
        ttl_seconds = parse_ttl(v["ttl"])
    except ValueError:
        pass  # reported by _check_capacity

    if problems:
        raise ConfigError(problems)

    return StackConfig(
        stack=stack,
        platform=v["platform"],
        project=v["project"],
        region=v["region"],
        zone=v["zone"],
        name_prefix=v["namePrefix"] or _default_prefix(stack),
        machine_type=v["machineType"],
        node_count=v["nodeCount"],
        provisioning=v["provisioning"],
        reservation_name=v["reservationName"],
        placement=v["placement"],
        ttl_seconds=ttl_seconds,
        boot_disk_gb=v["bootDiskGb"],
        local_ssd_count=v["localSsdCount"],
        network=NetworkConfig(
            host_cidr=v["hostCidr"],
            pods_cidr=v["podsCidr"],
            services_cidr=v["servicesCidr"],
            gvnic_cidr=v["gvnicCidr"],
            rdma_cidr=v["rdmaCidr"],
            master_cidr=v["masterCidr"],
            ssh_via_iap=v["sshViaIap"],
        ),
        versions=Versions(
            doca_ofed=v["docaOfedVersion"],
            nvidia_driver=v["nvidiaDriverVersion"],
            cuda=v["cudaVersion"],
            gdrcopy=v["gdrcopyVersion"],
            nvshmem=v["nvshmemVersion"],
            nvshmem_source=v["nvshmemSource"],
            torch=v["torchVersion"],
            deepep_ref=v["deepepRef"],
            deepep_pr466=v["deepepPr466"],
        ),
        nvshmem=NvshmemRuntime(nic_handler=v["nicHandler"], hca_prefix=v["hcaPrefix"], gid_index=v["gidIndex"]),
        installer=InstallerOptions(
            use_doca_ofed=v["useDocaOfed"],
            gdrcopy_kernel_module=v["gdrcopyKernelModule"],
            allow_reboot=v["allowReboot"],
        ),
        gke=GkeOptions(
            version=v["gkeVersion"],
            release_channel=v["gkeReleaseChannel"],
            public_endpoint=v["gkePublicEndpoint"],
            authorized_networks=tuple(v["gkeAuthorizedNetworks"]),
            deletion_protection=v["gkeDeletionProtection"],
            gpu_driver=v["gkeGpuDriver"],
            pod_networking=v["podNetworking"],
            container_image=v["containerImage"],
        ),
        gce=GceOptions(image=v["gceImage"], termination_action=v["terminationAction"]),
        benchmarks=BenchmarkOptions(
            tests=tuple(v["benchmarks"]),
            hidden=v["benchHidden"],
            topk=v["benchTopk"],
            processes=v["benchProcesses"],
            intranode=BenchCase(v["intranodeTokens"], v["intranodeExperts"]),
            low_latency=BenchCase(v["lowLatencyTokens"], v["lowLatencyExperts"]),
            internode=BenchCase(v["internodeTokens"], v["internodeExperts"]),
            timeout_minutes=v["benchTimeoutMinutes"],
            gate_ratio=float(v["benchGateRatio"]),
        ),
    )


def _default_prefix(stack: str) -> str:
    cleaned = re.sub(r"[^a-z0-9-]", "-", stack.lower()).strip("-")
    return f"deepep-{cleaned}"[:30].rstrip("-")


def _check_identity(v: dict[str, Any], problems: list[Problem]) -> None:
    if not _PROJECT_RE.match(v["project"]):
        problems.append(Problem("project", v["project"], "must be a Google Cloud project ID (6-30 chars: a-z, 0-9, -)"))
    if not re.match(r"^[a-z]+-[a-z]+\d+$", v["region"]):
        problems.append(Problem("region", v["region"], "must be a region name such as asia-southeast1"))
    elif not re.match(rf"^{re.escape(v['region'])}-[a-z]$", v["zone"]):
        problems.append(Problem("zone", v["zone"], f"must be a zone of region {v['region']} (e.g. {v['region']}-b)"))
    if not _IMAGE_RE.match(v["containerImage"]):
        problems.append(
            Problem("containerImage", v["containerImage"], "must be an image reference: name[:tag][@sha256:<64 hex>]")
        )
    if v["namePrefix"] and not _NAME_PREFIX_RE.match(v["namePrefix"]):
        problems.append(
            Problem("namePrefix", v["namePrefix"], "must be 2-30 chars of a-z, 0-9 and -, starting with a letter")
        )


def _check_capacity(v: dict[str, Any], problems: list[Problem]) -> None:
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
    if prov == "reservation" and not _GCP_NAME_RE.match(res):
        problems.append(Problem("reservationName", res, "provisioning=reservation needs the name of a reservation"))
    if prov != "reservation" and res:
        problems.append(Problem("reservationName", res, f"only used with provisioning=reservation, not {prov}"))
    try:
        ttl = parse_ttl(v["ttl"])
    except ValueError:
        problems.append(Problem("ttl", v["ttl"], "must be a duration such as 8h, 90m, 1d12h, or 'off'"))
    else:
        if ttl is None and prov in ("spot", "flex-start"):
            problems.append(Problem("ttl", v["ttl"], f"{prov} capacity needs a bill cap: set a duration such as 8h"))
        elif ttl is not None and not 600 <= ttl <= _TTL_MAX_SECONDS:
            problems.append(Problem("ttl", v["ttl"], "must be between 10m and 120d"))
        elif ttl is not None and prov == "flex-start" and ttl > _FLEX_START_MAX_SECONDS:
            problems.append(Problem("ttl", v["ttl"], "flex-start capacity runs at most 7d: set 7d or less"))
    if prov == "flex-start" and v["terminationAction"] != "DELETE":
        problems.append(
            Problem("terminationAction", v["terminationAction"], "flex-start capacity is always deleted: use DELETE")
        )
    if v["bootDiskGb"] < 100 or v["bootDiskGb"] > 65536:
        problems.append(
            Problem("bootDiskGb", v["bootDiskGb"], "must be 100-65536 (CUDA, NVSHMEM and DeepEP builds need room)")
        )
    if v["localSsdCount"] not in (0, 32):
        problems.append(Problem("localSsdCount", v["localSsdCount"], "a4-highgpu-8g has 32 local SSDs: use 32 or 0"))


def _parse_net(key: str, value: str, problems: list[Problem]) -> ipaddress.IPv4Network | None:
    try:
        net = ipaddress.ip_network(value, strict=True)
    except ValueError as err:
        problems.append(Problem(key, value, f"must be an IPv4 CIDR with no host bits set ({err})"))
        return None
    if not isinstance(net, ipaddress.IPv4Network) or not net.is_private:
        problems.append(Problem(key, value, "must be a private IPv4 range (RFC 1918)"))
        return None
    return net


def _check_network(v: dict[str, Any], problems: list[Problem]) -> None:
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
    for cidr in v["gkeAuthorizedNetworks"]:
        try:
            ipaddress.ip_network(cidr, strict=True)
        except ValueError:
            problems.append(Problem("gkeAuthorizedNetworks", cidr, "every entry must be a CIDR such as 203.0.113.0/24"))
        else:
            if cidr.endswith("/0"):
                problems.append(
                    Problem("gkeAuthorizedNetworks", cidr, "must not open the control plane to the whole internet")
                )


def _check_versions(v: dict[str, Any], problems: list[Problem]) -> None:
    for key in (
        "docaOfedVersion",
        "nvidiaDriverVersion",
        "cudaVersion",
        "gdrcopyVersion",
        "nvshmemVersion",
        "torchVersion",
    ):
        if not _VERSION_RE.match(v[key]):
            problems.append(Problem(key, v[key], "must be a version such as 12.9, 3.2.1 or 2.10.0+cu129"))
    shape = MACHINE_SHAPES.get(v["machineType"])
    cuda = re.match(r"^(\d+)\.(\d+)", v["cudaVersion"])
    if shape and cuda and (int(cuda[1]), int(cuda[2])) < shape.min_cuda:
        need = ".".join(map(str, shape.min_cuda))
        problems.append(
            Problem(
                "cudaVersion",
                v["cudaVersion"],
                f"{shape.accelerator} (sm_{shape.cuda_arch}) needs CUDA {need} or newer",
            )
        )
    torch_variant = v["torchVersion"].partition("+")[2]
    if _VERSION_RE.match(v["torchVersion"]) and not re.match(r"^cu\d{3}$", torch_variant):
        problems.append(
            Problem("torchVersion", v["torchVersion"], "must name its CUDA wheel variant, e.g. 2.10.0+cu129")
        )
    elif cuda and torch_variant and torch_variant[2:4] != cuda[1]:
        problems.append(
            Problem(
                "torchVersion",
                v["torchVersion"],
                f"CUDA variant {torch_variant} does not match cudaVersion {v['cudaVersion']}",
            )
        )
    ref = v["deepepRef"]
    if not _DEEPEP_REF_RE.match(ref):
        problems.append(
            Problem(
                "deepepRef",
                ref,
                "must be a tag such as v1.2.1 or a full 40-hex commit hash (git cannot fetch a short one); "
                "branches like main move",
            )
        )
    if _VERSION_RE.match(v["nvshmemVersion"]):
        _check_nvshmem_pairing(v, problems)
    if v["gkeVersion"] and not _GKE_VERSION_RE.match(v["gkeVersion"]):
        problems.append(
            Problem("gkeVersion", v["gkeVersion"], "must be a GKE version such as 1.33.5-gke.1162000, or empty")
        )


def _check_nvshmem_pairing(v: dict[str, Any], problems: list[Problem]) -> None:
    """NVSHMEM against what the DeepEP ref was checked with, and against where its source can be found."""
    version, source = v["nvshmemVersion"], v["nvshmemSource"]
    have = upstream.version_tuple(version)
    known = upstream.DEEPEP_REFS.get(v["deepepRef"])
    if known and have < known.min_nvshmem:
        problems.append(
            Problem(
                "nvshmemVersion",
                version,
                f"DeepEP {v['deepepRef'][:12]} needs NVSHMEM {upstream.dotted(known.min_nvshmem)} or newer",
            )
        )
    limit = known.nvshmem_before.get(source) if known else None
    if known and limit and have >= limit:
        problems.append(
            Problem(
                "deepepRef",
                v["deepepRef"],
                f"runs NVSHMEM ({source}) only before {upstream.dotted(limit)}, not {version}: {known.why_before}",
            )
        )
    if source == "source" and have >= upstream.NVSHMEM_GITHUB_SINCE and version not in upstream.NVSHMEM_GITHUB_TAGS:
        tags = ", ".join(upstream.NVSHMEM_GITHUB_TAGS)
        problems.append(
            Problem(
                "nvshmemVersion",
                version,
                f"has no checked NVIDIA/nvshmem release tag (known: {tags}); add it to components/upstream.py",
            )
        )
    if source == "pip" and "internode" in v["benchmarks"]:
        problems.append(
            Problem(
                "nvshmemSource",
                "pip",
                "DeepEP built against the pip/PyTorch NVSHMEM timed out in internode dispatch on A4 (seed 001 "
                "problem 8): use nvshmemSource=source, or drop internode from benchmarks",
            )
        )


def _check_runtime(v: dict[str, Any], problems: list[Problem]) -> None:
    if v["nicHandler"] == "cpu" and not v["gdrcopyKernelModule"]:
        problems.append(
            Problem(
                "nicHandler",
                "cpu",
                "the cpu NIC handler needs the GDRCopy kernel module: set gdrcopyKernelModule=true or use gpu",
            )
        )
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
    if not 0 <= v["gidIndex"] <= 255:
        problems.append(Problem("gidIndex", v["gidIndex"], "must be 0-255 (3 is RoCE v2 on GCP)"))


def _check_benchmarks(v: dict[str, Any], problems: list[Problem]) -> None:
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
    for key in ("intranodeExperts", "lowLatencyExperts", "internodeExperts"):
        if processes_ok and v[key] >= 1 and v[key] % v["benchProcesses"]:
            problems.append(Problem(key, v[key], f"must be a multiple of benchProcesses ({v['benchProcesses']})"))
    try:
        ratio = float(v["benchGateRatio"])
        if not 0 <= ratio <= 1:
            raise ValueError
    except ValueError:
        problems.append(Problem("benchGateRatio", v["benchGateRatio"], "must be a fraction between 0 and 1, e.g. 0.5"))


# -- loading from Pulumi ---------------------------------------------------------------------------


def raw_from_pulumi() -> dict[str, Any]:
    """Every key of our namespace that the engine hands the program, without the namespace prefix."""
    from pulumi.runtime import config as runtime_config

    merged: dict[str, Any] = dict(runtime_config.get_config_env())
    merged.update(runtime_config.CONFIG.get())
    prefix = f"{PROJECT_NAME}:"
    return {k[len(prefix) :]: val for k, val in merged.items() if k.startswith(prefix)}


def load() -> StackConfig:
    """The validated config of the running stack; raises ConfigError before any resource exists."""
    import pulumi

    return parse(raw_from_pulumi(), pulumi.get_stack())

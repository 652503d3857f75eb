"""Every key of the `deepep-a4` namespace: name, type, default, allowed values, description.

This table is the one declaration of the stack config: parsing (parse.py), the Pulumi.yaml schema and
docs/settings.md (schema.py) all come from it, and tests keep the generated files equal to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.config import cloud_build, provisioning, upstream, versions
from components.config.images import ACCELERATOR_IMAGE, STAGING_IMAGE, UBUNTU_IMAGE

PROJECT_NAME = "deepep-a4"
# The Google Cloud project ID the stack files ship with: valid, but nobody's. The plan warns about it.
PLACEHOLDER_PROJECT = "deepep-a4-demo"

PLATFORMS = ("gke", "gce")
PROVISIONING_MODELS = provisioning.NAMES
PLACEMENTS = ("compact", "none")
NVSHMEM_SOURCES = ("pip", "source")
NIC_HANDLERS = ("gpu", "cpu")
HCA_PREFIXES = ("mlx5", "rocep")
TERMINATION_ACTIONS = ("DELETE", "STOP")
RELEASE_CHANNELS = ("RAPID", "REGULAR", "STABLE", "UNSPECIFIED")
GKE_GPU_DRIVERS = ("installer", "DEFAULT", "LATEST", "cos-installer")
POD_NETWORKING = ("hostNetwork", "multiNetwork")
# supported: the node image Google supports for A4 RDMA (GKE: COS with GKE's driver; GCE: the accelerator image),
# user space staged from the store; host-install: the field reports' path (Ubuntu, own driver, DOCA-OFED, regkey).
NODE_PROFILES = ("supported", "host-install")
BENCHMARK_TESTS = ("intranode", "low-latency", "internode", "elastic")  # elastic: DeepEP V2 only
DEEPEP_APIS = ("v1", "v2")

# Google documents at most 150 VMs per compact placement policy.
COMPACT_PLACEMENT_MAX_NODES = 150
# The components whose version `versionOverrides` may name beyond the tables of versions.py, and the key
# that holds each one's version.
OVERRIDE_COMPONENTS: dict[str, str] = {
    "docaOfed": "docaOfedVersion",
    "nvidiaDriver": "nvidiaDriverVersion",
    "cuda": "cudaVersion",
    "gdrcopy": "gdrcopyVersion",
    "nvshmem": "nvshmemVersion",
    "torch": "torchVersion",
}
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
    Key(
        "nodeProfile",
        str,
        "supported",
        "What the A4 node runs: supported (GKE: COS with GKE's driver and gIB; GCE: Google's accelerator image; "
        "user space staged from the artifact store, nothing installed on the host) or host-install (the field "
        "reports' path: Ubuntu, own driver, DOCA-OFED, PeerMappingOverride, one reboot; docs/platforms.md).",
        NODE_PROFILES,
    ),
    Key("project", str, "", "Google Cloud project ID that receives every resource (required)."),
    Key("region", str, "asia-southeast1", "Region of the subnets, router and cluster."),
    Key(
        "zone",
        str,
        "asia-southeast1-b",
        "Zone of the A4 machines and of the RoCE network profile: one where Google offers the machine type "
        "(components/config/versions.py, from Google's GPU regions and zones page).",
    ),
    Key("namePrefix", str, "", "Prefix of every cloud resource name; empty means deepep-<stack>."),
    Key("machineType", str, "a4-highgpu-8g", "Machine type of the GPU nodes.", tuple(MACHINE_SHAPES)),
    Key("nodeCount", int, 2, "Number of A4 machines (8 B200 GPUs each)."),
    Key("provisioning", str, "spot", "How capacity is obtained.", PROVISIONING_MODELS),
    Key("reservationName", str, "", "Reservation to consume; required with provisioning=reservation."),
    Key(
        "capacity",
        list,
        [],
        "Ordered capacity fallback for `deepep-a4 run`: ZONE/MODEL entries (e.g. asia-southeast1-b/spot), one of "
        "them zone/provisioning, every zone in the stack's region; run moves to the next only on a stockout or "
        "quota error (docs/deploy.md#no-capacity). Empty: zone/provisioning only.",
    ),
    Key(
        "placement",
        str,
        "compact",
        "Compact placement keeps nodes close (at most 150 nodes); reservation capacity comes placed, so with "
        "provisioning=reservation leave it unset or none.",
        PLACEMENTS,
    ),
    Key(
        "ttl",
        str,
        "8h",
        "Bill cap: the cloud deletes the machines after this long (e.g. 8h, 90m), at least the node's own bring-up "
        "(docs/installer.md#bring-up-time); 'off' disables it.",
    ),
    Key(
        "bootDiskGb",
        int,
        200,
        "Boot disk size in GB (hyperdisk-balanced): the installer writes at most about 60 GB (CUDA, driver, DOCA-OFED, "
        "the PyTorch venv and pip's cache, builds; docs/conformance.md), 200 is Google's A4 VM default.",
    ),
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
    Key(
        "docaOfedVersion",
        str,
        "3.2.1",
        "DOCA-OFED version (turns rocep* HCAs into mlx5_*), one of the releases in components/config/versions.py.",
    ),
    Key(
        "nvidiaDriverVersion",
        str,
        "580.126.09",
        "NVIDIA open driver: a build (580.126.09) pins it; a branch (580) takes the branch's newest build at install. "
        "B200 needs the 570 branch or newer; the known branches are in components/config/versions.py.",
    ),
    Key("cudaVersion", str, "12.9", "CUDA toolkit version, major.minor (B200 needs 12.8 or newer)."),
    Key("gdrcopyVersion", str, "2.5.1", "GDRCopy version: a NVIDIA/gdrcopy release tag without its v."),
    Key("nvshmemVersion", str, "3.5.19", "NVSHMEM version (pip wheel or source tag), one NVIDIA has released."),
    Key(
        "nvshmemSource",
        str,
        "source",
        "NVSHMEM built from source with IBGDA, or NVIDIA's pip wheel (single node only: troubleshooting T12).",
        NVSHMEM_SOURCES,
    ),
    Key(
        "torchVersion",
        str,
        "2.10.0+cu129",
        "PyTorch version with its CUDA variant, which must be cudaVersion's (2.10.0+cu129 with CUDA 12.9); the "
        "builds PyTorch's wheel index serves per CUDA tag are in components/config/versions.py.",
    ),
    Key(
        "deepepRef",
        str,
        upstream.DEEPEP_NVSHMEM35_FIXES,
        "DeepEP tag or full commit hash the project knows (components/config/upstream.py), never a branch "
        "(default: 1.2.1+29d31c0, what the field reports ran).",
    ),
    Key(
        "versionOverrides",
        str,
        "",
        "A version the project's tables (components/config/versions.py) do not know, named with what the installer "
        'downloads: a JSON object such as {"gdrcopy": {"version": "2.6", "url": "https://...", "sha256": "<64 hex>"}} '
        f"for the components {', '.join(OVERRIDE_COMPONENTS)}; version equals the component's version key, url is "
        "https, sha256 the download's digest. The installer fetches exactly that URL and checks that digest; the "
        "plan is then marked untested (a line in its output, `untested` in plan.json). docs/installer.md, "
        '"Versions the project does not know".',
    ),
    Key("deepepPr466", bool, True, "Apply DeepEP PR #466 (explicit GPU-to-NIC mapping; ~6.5 GB/s RDMA without)."),
    Key(
        "deepepApi",
        str,
        "v1",
        "DeepEP generation: v1 (deep_ep.Buffer on NVSHMEM, the field reports' DeepEP) or v2 (EPv2: ElasticBuffer on "
        "NCCL's Gin, kernels compiled at run time; needs deepepRef dd758caf4518..., its default, PyTorch 2.10 or "
        "newer and ncclVersion 2.30.4 or newer; its package also builds the V1 kernels). V2 is untested on A4 "
        "(docs/benchmarks.md).",
        DEEPEP_APIS,
    ),
    Key(
        "ncclVersion",
        str,
        "",
        "deepepApi=v2 only: the NCCL wheel (nvidia-nccl-cu12/-cu13 as torchVersion's CUDA, pinned by sha256 in "
        "components/config/versions.py) installed into the PyTorch environment in place of PyTorch's own, so one "
        "NCCL runs in the process (empty: 2.32.3). v1 keeps PyTorch's NCCL and refuses a value.",
    ),
    # -- installer and NVSHMEM runtime -------------------------------------------------------------
    Key(
        "useDocaOfed",
        bool,
        True,
        "Install NVIDIA DOCA-OFED (mlx5_* HCA names, its own rdma-core) as field report R1 did on plain Ubuntu; "
        "false keeps the inbox RDMA stack (rocep*) that Google's A4 images and blueprints use, with hcaPrefix=rocep "
        "(the documented choice on the accelerator gceImage).",
    ),
    Key("gdrcopyKernelModule", bool, False, "Build and load the gdrdrv kernel module (needed by nicHandler=cpu)."),
    Key("allowReboot", bool, True, "Let the installer reboot a node once (DOCA-OFED, PeerMappingOverride)."),
    Key(
        "artifactStore",
        str,
        "",
        "gs://BUCKET/PREFIX of the artifact store (docs/store.md): sources and prebuilt GDRCopy, NVSHMEM, DeepEP; "
        "the prefix is required (the nodes' access grant is limited to it); empty builds on every node.",
    ),
    Key(
        "artifactStorePublish",
        bool,
        False,
        "Nodes publish the sources they download to the store (write-once; gives the nodes objectCreator). Off: "
        "nodes only read. Artifacts come only from `deepep-a4 store build` (docs/store.md).",
    ),
    Key(
        "artifactStoreManifest",
        str,
        "",
        "sha256 of the store manifest `deepep-a4 store build` wrote (64 hex digits): nodes take only the store "
        "objects it lists, each checked against its digest; empty: nodes restore no artifact (the cold path).",
    ),
    Key("artifactStoreOnly", bool, False, "Nodes take sources only from the store, never from the internet."),
    Key(
        cloud_build.KEY,
        str,
        cloud_build.DEFAULT_REGION,
        "Region of `deepep-a4 store build --remote` (Cloud Build): some projects may build only in six regions "
        "(cloud.google.com/build/docs/locations), the default is one of them; the store bucket may lie elsewhere.",
        cloud_build.AVAILABLE,
    ),
    Key("nicHandler", str, "gpu", "NVSHMEM_IBGDA_NIC_HANDLER.", NIC_HANDLERS),
    Key(
        "hcaPrefix",
        str,
        "mlx5",
        "NVSHMEM_HCA_PREFIX: mlx5 with DOCA-OFED, rocep with the inbox stack (NVSHMEM 3.4.5 or newer reads it).",
        HCA_PREFIXES,
    ),
    Key("gidIndex", int, 3, "NVSHMEM_IB_GID_INDEX (3 is RoCE v2 on GCP)."),
    Key(
        "nvshmemTrafficClass",
        int,
        52,
        "NVSHMEM_IB_TRAFFIC_CLASS: 52, 84 or 0 (on RoCE NVSHMEM sets the IP traffic class to it and DSCP to it >> 2): "
        "52 (DSCP 13) is the class Google's A4 settings give NCCL's RDMA data (NCCL_IB_TC=52), 84 (DSCP 21) its "
        "FIFO class; 0 is NVSHMEM's default, what the field reports ran.",
    ),
    Key(
        "ncclGib",
        bool,
        True,
        "Install Google's gIB NCCL plugin (GKE: the NCCL RDMA installer DaemonSet; GCE: the nccl-gib apt package) "
        "and run NCCL with Google's A4 settings; false leaves NCCL its built-in IB transport. Google pairs gIB 1.1 "
        "with NCCL 2.27, which PyTorch 2.10 brings; results record the pairing that ran.",
    ),
    # -- GKE ---------------------------------------------------------------------------------------
    Key(
        "gkeVersion",
        str,
        "",
        f"Pinned GKE version: A4 on Ubuntu nodes needs {versions.gke_floor_text(versions.UBUNTU)}, on COS "
        f"{versions.gke_floor_text(versions.COS)} (Google's A4 GPUDirect RDMA requirements); empty takes the "
        "channel's default at the first deploy (never below that floor) and keeps it.",
    ),
    Key(
        "gkeReleaseChannel",
        str,
        "REGULAR",
        "GKE release channel; with one, node upgrades wait for the minor's end of support (maintenance exclusion).",
        RELEASE_CHANNELS,
    ),
    Key(
        "gkeDnsEndpoint",
        bool,
        True,
        "Reach the control plane through GKE's DNS-based endpoint, authorized by IAM (pulumi and kubectl use it).",
    ),
    Key(
        "gkePublicEndpoint",
        bool,
        False,
        "Also open the control plane's public IP endpoint (needs gkeAuthorizedNetworks); off: private IP only.",
    ),
    Key(
        "gkeAuthorizedNetworks",
        list,
        [],
        "CIDRs allowed to reach the control plane's public IP endpoint; together they must not cover every address.",
    ),
    Key("gkeDeletionProtection", bool, False, "Protect the cluster from deletion (pulumi destroy then fails)."),
    Key(
        "gkeGpuDriver",
        str,
        "",
        "Who installs the GPU driver: empty takes the profile's (supported: LATEST, GKE's own; host-install: "
        "installer, ours with PeerMappingOverride). supported takes DEFAULT, LATEST or cos-installer (GKE's "
        "installation disabled, Google's COS driver installer DaemonSet installs gkeCosDriverVersion), "
        "host-install only installer.",
        GKE_GPU_DRIVERS,
    ),
    Key(
        "gkeCosDriverVersion",
        str,
        "",
        "With gkeGpuDriver cos-installer only (required there): the NVIDIA driver build Google's COS installer "
        "installs (570.172.08 form), one COS publishes for the node's image; troubleshooting T31.",
    ),
    Key(
        "podNetworking",
        str,
        "hostNetwork",
        "How benchmark pods reach the RDMA NICs: hostNetwork (privileged pods on the node's network, as Google's "
        "A4 recipes and field report R2 ran) or multiNetwork (unproven on Ubuntu with DOCA-OFED: every Google "
        "multi-network A4 example runs on COS).",
        POD_NETWORKING,
    ),
    Key(
        "containerImage",
        str,
        UBUNTU_IMAGE,
        "Image of the installer and benchmark containers (bash and coreutils; the stack comes from the host), "
        "pinned as name[:tag]@sha256:<digest>. Default: Docker Hub's ubuntu:24.04 index of 2026-09.",
    ),
    Key(
        "allowUnpinnedImages",
        bool,
        False,
        "Accept a containerImage or installerImage without @sha256:<digest> (a tag can be moved to other bytes "
        "under the privileged installer); for trying an image only.",
    ),
    Key(
        "installerImage",
        str,
        STAGING_IMAGE,
        "Image of the supported profile's staging container on GKE (bash, curl, coreutils, tar; no Python: it "
        "fetches the user space from the store and enters no host namespace), pinned as name[:tag]@sha256:<digest>. "
        "Default: Docker's buildpack-deps:noble-curl index of 2026-09 (Ubuntu 24.04, as the builder).",
    ),
    # -- GCE ---------------------------------------------------------------------------------------
    Key(
        "gceImage",
        str,
        "",
        "Boot image of the VMs: projects/P/global/images/family/F (the family's newest image at the first deploy, "
        "then kept) or projects/P/global/images/NAME. Empty takes the profile's: supported "
        f"{ACCELERATOR_IMAGE} (the NVIDIA driver in the image); host-install plain Ubuntu 24.04, the field "
        "reports' image.",
    ),
    Key(
        "terminationAction",
        str,
        "DELETE",
        "What happens to a VM at spot preemption or at its TTL.",
        TERMINATION_ACTIONS,
    ),
    # -- benchmarks --------------------------------------------------------------------------------
    Key("benchmarks", list, ["intranode", "low-latency", "internode"], "DeepEP tests to run after install, each once."),
    Key(
        "benchHidden",
        int,
        7168,
        "Hidden size for every test: with low-latency one of 2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192 "
        "(DeepEP's kernels), else a multiple of 16.",
    ),
    Key("benchTopk", int, 8, "Top-k for every test: at most 11 with low-latency, else 32 (DeepEP's kernels)."),
    Key(
        "benchProcesses",
        int,
        8,
        "GPUs (processes) per node for every test: intranode runs 2, 4 or 8, internode 8 (DeepEP's tests).",
    ),
    Key("intranodeTokens", int, 4096, "Tokens of test_intranode.py."),
    Key("intranodeExperts", int, 256, "Experts of test_intranode.py."),
    Key("lowLatencyTokens", int, 128, "Tokens of test_low_latency.py."),
    Key("lowLatencyExperts", int, 288, "Experts of test_low_latency.py."),
    Key("internodeTokens", int, 4096, "Tokens of test_internode.py."),
    Key("internodeExperts", int, 256, "Experts of test_internode.py: a multiple of 8 x nodeCount (its ranks)."),
    Key("benchTimeoutMinutes", int, 30, "Timeout of one benchmark test."),
    Key("benchRepeats", int, 1, "Starts of each DeepEP test in a row (1-10); from 3 the report gives min/median/max."),
    Key("benchGateRatio", str, "0.5", "A result below this fraction of the B200 baseline fails the report."),
    # -- rehearsal (deepep-a4 rehearse) -----------------------------------------------------------------
    Key(
        "rehearsal",
        bool,
        False,
        "Set only by `deepep-a4 rehearse` in the stack <stack>-rehearsal: the same plan on cheap CPU machines "
        "(e2-standard-4 spot, no GPU, no RDMA NIC), a short TTL, probes in place of the GPU phases and the "
        "benchmarks (components/rehearsal.py, docs/rehearsal.md).",
    ),
)

KEYS_BY_NAME: dict[str, Key] = {k.name: k for k in KEYS}
# Keys only one platform reads: setting one on the other platform is refused, not ignored.
PLATFORM_KEYS: dict[str, tuple[str, ...]] = {
    # localSsdCount: the GKE pool's ephemeral storage; containerImage: the GKE pods' image (a GCE VM runs both
    # on the host: components/gce reads neither).
    "gke": (*(k.name for k in KEYS if k.name.startswith("gke")), "podNetworking", "localSsdCount", "containerImage"),
    "gce": ("gceImage", "terminationAction"),
}


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

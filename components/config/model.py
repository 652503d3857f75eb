"""The validated stack config: flat keys grouped into frozen dataclasses the components read."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

from components.config import versions as known_versions
from components.config.images import ACCELERATOR_IMAGE_PROJECT, IMAGE_REF_PATTERN
from components.config.keys import MACHINE_SHAPES, MachineShape


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
class VersionOverride:
    """A version the tables do not know, with the download the installer fetches for it and its sha256."""

    component: str  # a key of keys.OVERRIDE_COMPONENTS
    version: str
    url: str
    sha256: str


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
    deepep_api: str = "v1"  # "v2": EPv2 (ElasticBuffer on NCCL Gin) with its own NCCL wheel, `nccl`
    nccl: str = ""  # the NCCL wheel version a v2 stack installs into the PyTorch environment; "" for v1
    overrides: tuple[VersionOverride, ...] = ()

    @property
    def torch_cuda_variant(self) -> str:
        """The wheel index variant of PyTorch, e.g. cu129 for 2.10.0+cu129."""
        return self.torch.partition("+")[2]

    def override(self, component: str) -> VersionOverride | None:
        return next((o for o in self.overrides if o.component == component), None)


@dataclass(frozen=True)
class NvshmemRuntime:
    nic_handler: str
    hca_prefix: str
    gid_index: int
    traffic_class: int  # NVSHMEM_IB_TRAFFIC_CLASS (RoCE: the IP traffic class, DSCP = value >> 2)


@dataclass(frozen=True)
class InstallerOptions:
    use_doca_ofed: bool
    gdrcopy_kernel_module: bool
    allow_reboot: bool
    store_url: str
    store_publish: bool
    store_only: bool
    store_manifest: str  # sha256 of the builder's manifest (docs/store.md); "": nodes restore no artifact
    nccl_gib: bool  # Google's gIB NCCL plugin: the GKE DaemonSet or the GCE apt package, and its NCCL settings
    store_build_region: str = "us-central1"  # artifactStoreBuildRegion: where `store build --remote` runs


@dataclass(frozen=True)
class GkeOptions:
    version: str
    release_channel: str
    dns_endpoint: bool
    public_endpoint: bool
    authorized_networks: tuple[str, ...]
    deletion_protection: bool
    gpu_driver: str
    cos_driver_version: str  # gpu_driver cos-installer: the build Google's COS installer installs
    pod_networking: str
    container_image: str
    allow_unpinned_images: bool
    installer_image: str  # the supported profile's staging container (no host namespaces)
    # The A4 node pool's image type, from the node profile: COS (supported) or Ubuntu, where the installer
    # builds DOCA-OFED and the driver (host-install, field report R2's pool). The GKE version floor for A4
    # depends on it (versions.GKE_FLOORS).
    image_type: str = known_versions.UBUNTU


@dataclass(frozen=True)
class ImageRef:
    """A GCE boot image reference: an image family (resolved at deploy) or one image by name."""

    project: str
    family: str  # "" when the reference names one image
    name: str  # "" when the reference names a family

    @property
    def driver_branch(self) -> str:
        """The NVIDIA driver branch an accelerator image ships (`...-with-nvidia-580...` -> "580"), else ""."""
        if self.project != ACCELERATOR_IMAGE_PROJECT:
            return ""
        m = re.search(r"-with-nvidia-(\d+)(?:-|$)", self.family or self.name)
        return m[1] if m else ""


def parse_image_ref(text: str) -> ImageRef | None:
    """`projects/P/global/images/family/F` or `projects/P/global/images/NAME` as an ImageRef, else None."""
    m = re.fullmatch(IMAGE_REF_PATTERN, text)
    return ImageRef(m["project"], m["family"] or "", m["name"] or "") if m else None


@dataclass(frozen=True)
class GceOptions:
    image: str
    termination_action: str

    @property
    def image_ref(self) -> ImageRef:
        """`gceImage` split into project and family or name (config validation guarantees the form)."""
        ref = parse_image_ref(self.image)
        if ref is None:
            raise ValueError(f"gceImage {self.image!r} is not projects/P/global/images/[family/]NAME")
        return ref

    @property
    def image_ships_driver(self) -> bool:
        """Google's accelerator images come with the NVIDIA driver (and the inbox RDMA stack, no DOCA-OFED)."""
        return self.image_ref.project == ACCELERATOR_IMAGE_PROJECT


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
    repeats: int = 1  # starts of each test (the runner's BENCH_REPEATS)

    @property
    def test_budget_seconds(self) -> int:
        """How long one test may take in all: every start under its own timeout."""
        return self.timeout_minutes * 60 * self.repeats


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
    # supported: Google's node image and driver, user space staged from the store; host-install: the field
    # reports' path (keys.py NODE_PROFILES).
    node_profile: str = "supported"
    # `capacity`: the ordered (zone, provisioning) tries of `deepep-a4 run` (components/config/rules/capacity.py).
    capacity: tuple[tuple[str, str], ...] = ()
    # `deepep-a4 rehearse`: the plan on CPU machines with probes (components/rehearsal.py).
    rehearsal: bool = False

    @property
    def staged(self) -> bool:
        """The supported profile: nothing is installed on the host, the user space is staged from the store."""
        return self.node_profile == "supported"

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
    def untested(self) -> tuple[str, ...]:
        """What the stack installs beyond the project's tables (versionOverrides): the plan says so."""
        return tuple(f"{o.component} {o.version}" for o in self.versions.overrides)

    @property
    def stack_label(self) -> str:
        """The stack name as a Google Cloud label value. Pulumi allows stack names of letters (either case),
        digits, `-`, `_` and `.`, up to 100 characters (pulumi/pulumi pkg/backend/diy/backend.go, once
        filestate/backend.go: validateStackName, `^[A-Za-z0-9_.-]{1,100}$`); a GCE label value takes only
        lowercase letters, digits, `_` and `-`, at most 63 characters
        (https://cloud.google.com/compute/docs/labeling-resources#requirements): upper case is lowered, `.`
        becomes `-`, the rest is cut at 63 (`Acme.B200` -> `acme-b200`)."""
        return stack_label(self.stack)

    @property
    def labels(self) -> dict[str, str]:
        return {"deepep-a4-stack": self.stack_label, "managed-by": "pulumi"}


def stack_label(stack: str) -> str:
    """A Pulumi stack name as a GCE label value (StackConfig.stack_label)."""
    return re.sub(r"[^a-z0-9_-]", "-", stack.lower())[:63]

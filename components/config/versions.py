"""The versions, zones and floors the project knows, each table with where it was read.

A stack names versions from these tables, or names a version the tables lack in `versionOverrides`
together with the URL and sha256 of what the installer downloads (the plan is then marked untested).
Each table is a fact that ages: extend it from the source named beside it, never from memory.
"""

from __future__ import annotations

import re

Version = tuple[int, ...]

# CUDA toolkits by major.minor, as `cudaVersion` names them (the installer installs cuda-toolkit-X-Y from
# NVIDIA's apt repository). NVIDIA's CUDA Toolkit Archive (developer.nvidia.com/cuda-toolkit-archive) lists
# 12.0-12.6, then 12.8 and 12.9 (there is no 12.7), 13.0 and 13.1; 13.1 is also named by the NVSHMEM 3.5.21
# release notes (docs.nvidia.com/nvshmem/release-notes-install-guide, "tested with CUDA 13.1").
CUDA_VERSIONS: tuple[str, ...] = (
    "12.0",
    "12.1",
    "12.2",
    "12.3",
    "12.4",
    "12.5",
    "12.6",
    "12.8",
    "12.9",
    "13.0",
    "13.1",
)

# NVIDIA driver branches that drive B200 (Blackwell, sm_100), with the CUDA toolkit each first shipped with.
# CUDA Toolkit release notes, table "CUDA Toolkit and Corresponding Driver Versions"
# (docs.nvidia.com/cuda/cuda-toolkit-release-notes): CUDA 12.8 GA needs >= 570.26 (the first branch with
# Blackwell data-center support, also NVIDIA's data-center driver 570 release notes), 12.9 GA >= 575.51.03,
# 13.0 GA >= 580.65.06, 13.1 GA >= 590.44.01. Older branches (550, 560) cannot drive a B200.
B200_MIN_DRIVER_BRANCH = 570
DRIVER_BRANCHES: dict[str, str] = {"570": "12.8", "575": "12.9", "580": "13.0", "590": "13.1"}
# CUDA 13 runs on a driver older than its own only from the 580 branch on (minor-version compatibility
# of CUDA 13.x, same release notes): a CUDA 13 toolkit with a 570/575 driver fails at the first kernel.
CUDA13_MIN_DRIVER_BRANCH = 580

# GDRCopy: NVIDIA/gdrcopy release tags (`git tag` in a clone of github.com/NVIDIA/gdrcopy, 2026-11-25:
# v2.0 ... v2.6, betas left out). The installer downloads archive/refs/tags/v<version>.tar.gz.
GDRCOPY_VERSIONS: tuple[str, ...] = (
    "2.0",
    "2.1",
    "2.2",
    "2.3",
    "2.3.1",
    "2.4",
    "2.4.1",
    "2.4.2",
    "2.4.3",
    "2.4.4",
    "2.5",
    "2.5.1",
    "2.5.2",
    "2.6",
)

# DOCA-OFED (DOCA-Host) releases with an Ubuntu 24.04 x86_64 repository under
# linux.mellanox.com/public/repo/doca/<version>/ubuntu24.04/x86_64 (the folder listing of
# linux.mellanox.com/public/repo/doca/ and NVIDIA's DOCA archive docs.nvidia.com/doca/archive/, e.g.
# archive/3-2-1). Field report R1 ran 3.2.1, R2 3.0.0.
DOCA_OFED_VERSIONS: tuple[str, ...] = (
    "2.9.0",
    "2.9.1",
    "2.9.2",
    "2.9.3",
    "2.10.0",
    "3.0.0",
    "3.1.0",
    "3.2.0",
    "3.2.1",
)

# Where DOCA-OFED's apt repositories live: <base>/<version>/ubuntu<release>/x86_64 with the repository's key
# GPG-KEY-Mellanox.pub in it (the installer's DOCA-OFED phase).
DOCA_REPO_BASE = "https://linux.mellanox.com/public/repo/doca"

# NVSHMEM releases: NVIDIA's release notes index (docs.nvidia.com/nvshmem/release-notes-install-guide/,
# "Release Notes" and "NVSHMEM Prior Releases": 3.2.5 ... 3.8.0). Where a source build downloads from is in
# upstream.py: NVIDIA's redist tarballs before 3.4.5, GitHub tags (upstream.NVSHMEM_GITHUB_TAGS) after.
NVSHMEM_VERSIONS: tuple[str, ...] = (
    "3.2.5",
    "3.3.9",
    "3.3.20",
    "3.3.24",
    "3.4.5",
    "3.5.19",
    "3.5.21",
    "3.6.5",
    "3.7.0",
    "3.7.1",
    "3.7.2",
    "3.8.0",
)

# PyTorch builds per CUDA wheel tag: which torch versions download.pytorch.org/whl/<tag> serves (PyTorch's
# get-started/previous-versions page lists the pip command of each: 2.4-2.6 cu124; 2.7 cu126/cu128;
# 2.8 cu126/cu128/cu129; 2.9 cu126/cu128/cu130; 2.10 cu126/cu128/cu129/cu130 (2.10.0+cu129 is what field
# reports R1/R2 ran); 2.11 cu126/cu128/cu130 (2.11.0+cu130 ran on the H100 here,
# tests/fixtures/pytorch/torch-2.11.0_metadata.txt).
TORCH_BUILDS: dict[str, tuple[str, ...]] = {
    "cu124": ("2.4.0", "2.4.1", "2.5.0", "2.5.1", "2.6.0"),
    "cu126": ("2.7.0", "2.7.1", "2.8.0", "2.9.0", "2.9.1", "2.10.0", "2.11.0"),
    "cu128": ("2.7.0", "2.7.1", "2.8.0", "2.9.0", "2.9.1", "2.10.0", "2.11.0"),
    "cu129": ("2.8.0", "2.10.0"),
    "cu130": ("2.9.0", "2.9.1", "2.10.0", "2.11.0"),
}

# PyTorch builds with a locked requirements file (every wheel by sha256) for the host-install pytorch phase,
# by torchVersion: the file under scripts/install/locks/, whose header cites where each pin comes from. A
# host-install stack whose torch has none takes PyTorch from the store's artifact (rules/version_forms.py).
TORCH_LOCKS: dict[str, str] = {"2.10.0+cu129": "torch-2.10.0-cu129-cp312-x86_64.txt"}

# NCCL wheels a DeepEP V2 stack installs into the PyTorch environment in place of PyTorch's own NCCL
# (torch 2.10 pins nvidia-nccl-cu12==2.27.5, 2.11 nvidia-nccl-cu13==2.28.9: tests/fixtures/pytorch/), by version
# and CUDA major: the sha256 of nvidia_nccl_<cu>-<version>-py3-none-manylinux_2_27_x86_64.whl as PyPI serves it
# (`pip download --no-deps nvidia-nccl-cu13==2.32.3`, then sha256sum, 2026-11-27; `pip index versions` lists
# 2.30.4 ... 2.32.3 for both). The wheel's own page: pypi.org/project/nvidia-nccl-cu13/2.32.3/#files.
NCCL_V2_DEFAULT = "2.32.3"
NCCL_WHEELS: dict[str, dict[str, str]] = {
    "2.32.3": {
        "cu12": "bb94b2348e4861d5e8aa00b36c3d12d9bdf9c6369b82cbb723de0b582280a21c",
        "cu13": "1459723080ac889d73a26edfa3e04383a7928ab31ac8f0ec43b3ea9548b04ff3",
    },
}
NCCL_WHEEL_TAG = "py3-none-manylinux_2_27_x86_64"


def nccl_wheel(version: str, torch_variant: str) -> tuple[str, str, str]:
    """(package, file name, sha256) of the NCCL wheel for a torch CUDA variant such as cu129; KeyError if unknown."""
    cu = torch_variant[:4]  # cu129 -> cu12, cu130 -> cu13
    sha = NCCL_WHEELS[version][cu]
    return f"nvidia-nccl-{cu}", f"nvidia_nccl_{cu}-{version}-{NCCL_WHEEL_TAG}.whl", sha


# Zones where Compute Engine offers a4-highgpu-8g (B200): Google's "GPU regions and zones" page
# (cloud.google.com/compute/docs/gpus/gpu-regions-zones, the NVIDIA B200 row); asia-southeast1-b and
# us-central1-b are also the A4 zones of Batch's Dynamic Workload Scheduler table
# (docs.cloud.google.com/batch/docs/locations). Google adds zones: extend this from that page.
A4_ZONES: dict[str, tuple[str, ...]] = {
    "a4-highgpu-8g": (
        "asia-northeast1-b",
        "asia-southeast1-b",
        "europe-west4-b",
        "us-central1-b",
        "us-east1-b",
        "us-east4-b",
        "us-south1-b",
        "us-west2-c",
        "us-west3-b",
    ),
}

# The oldest GKE version whose node image runs A4 with GPUDirect RDMA, per node image type. Google's GKE
# page "Maximize GPU network bandwidth with GPUDirect and multi-networking"
# (cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-rdma, requirements for A4):
# Ubuntu node pools need 1.32.7-gke.1067000 or later on 1.32, 1.33.3-gke.1247000 or later on 1.33. COS, which
# Google's A4 recipes run, needs 1.32.4-gke.1236000 (AI-Hypercomputer/gpu-recipes
# docs/configuring-environment-gke-a4.md at 2e1fd5e, [GR-ENV] in docs/conformance.md). A minor newer than the
# last one listed takes no floor of its own.
COS = "COS_CONTAINERD"
UBUNTU = "UBUNTU_CONTAINERD"
# The A4 pool's image per node profile. supported: COS, the only image Google supports GPUDirect RDMA on for
# A4 (cluster-toolkit modules/compute/gke-node-pool's default image_type COS_CONTAINERD, which
# examples/gke-a4/gke-a4.yaml keeps); host-install: Ubuntu, where the installer builds DOCA-OFED and the driver.
NODE_IMAGE_TYPES = {"supported": COS, "host-install": UBUNTU}
GKE_FLOORS: dict[str, tuple[str, ...]] = {
    COS: ("1.32.4-gke.1236000",),
    UBUNTU: ("1.32.7-gke.1067000", "1.33.3-gke.1247000"),
}

_GKE_VERSION_RE = re.compile(r"\d+\.\d+(\.\d+(-gke\.\d+)?)?")


def gke_version_key(version: str) -> tuple[int, ...]:
    """'1.33.5-gke.1162000' -> (1, 33, 5, 1162000); a prefix such as '1.33' -> (1, 33). Raises ValueError."""
    if not _GKE_VERSION_RE.fullmatch(version):
        raise ValueError(version)
    return tuple(int(p) for p in re.split(r"[.]|-gke[.]", version))


def gke_floor(version: str, image_type: str) -> str:
    """The oldest version of `version`'s minor that runs A4 on `image_type` ("" when the minor has none).

    A minor older than the first floor gets the first floor (it cannot run A4 at all).
    """
    floors = GKE_FLOORS[image_type]
    minor = gke_version_key(version)[:2]
    for floor in floors:
        if gke_version_key(floor)[:2] >= minor:
            return floor
    return ""


def below_gke_floor(version: str, image_type: str) -> bool:
    """True when `version` (or any version of a prefix such as '1.32') may be older than the floor."""
    floor = gke_floor(version, image_type)
    if not floor:
        return False
    have, least = gke_version_key(version), gke_version_key(floor)
    if have[:2] != least[:2]:
        return have[:2] < least[:2]
    return have < least[: len(have)] or (have == least[: len(have)] and len(have) < len(least))


def gke_floor_text(image_type: str) -> str:
    """'1.32.7-gke.1067000 (1.32) or 1.33.3-gke.1247000 (1.33)' for messages."""
    return " or ".join(f"{f} ({'.'.join(f.split('.')[:2])})" for f in GKE_FLOORS[image_type])


def driver_branch(version: str) -> str:
    """'580.126.09' -> '580'; '580' -> '580'."""
    return version.split(".", 1)[0]

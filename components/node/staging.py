"""What the supported profile stages on a node: the user space from the artifact store, nothing else.

The node image brings the kernel, the NVIDIA driver and the in-kernel mlx5 driver (GKE on COS with its
managed driver; GCE on Google's accelerator image). Everything a benchmark process loads above that comes
from the store, one object per part, unpacked under the node's staged root (scripts/names.py STAGED_ROOTS)
by the phases `stage` and `verify-staged` (scripts/install/phases/13-stage.sh, 14-...):

    python    a self-contained CPython (bin/python3, lib/python3.12, the libraries it links beyond glibc):
              COS has no Python
    pytorch   the venv (torch, nvidia-*, triton, numpy), made from that CPython at R/venv: its interpreter
              link and pyvenv.cfg name R, so the key holds the root (another root is another key, never a
              relocation). 4.5 GB: stored as 16 uncompressed tar parts unpacked side by side (docs/store.md)
    nvshmem   NVSHMEM (lib/, bin/), built for the stack's CUDA and arch with R/nvshmem as its prefix
    deepep    the DeepEP tree with its built extension and tests (unpacked as DeepEP/), RPATH into nvshmem/lib
    rdma-core libibverbs, the mlx5 provider (lib/libibverbs/libmlx5-rdmav*.so), libmlx5, librdmacm and the
              libnl-3 / libnl-route-3 they link, as Ubuntu 24.04 ships them. libibverbs reads its provider
              list from a folder fixed at build time (/etc/libibverbs.d, absent in the pods' image), and also
              loads every driver named in RDMAV_DRIVERS, an absolute name as that path plus
              "-rdmav<ABI>.so" (rdma-core libibverbs/dynamic_driver.c, load_drivers and load_driver): the
              env file names the staged provider so, and no folder of the container matters.

Each part's object is `userspace/<part>/<key>.tar.gz` (the venv: `<key>.parts`, listing its tar parts), the
key a digest of exactly what determines its bytes (versions, CUDA, arch, Python ABI, platform and, for parts
with absolute paths, the staged root). The builder (`deepep-a4 store build`, phase pack-userspace) and the
node agree without talking, and the node takes only what the stack's store manifest pins. Stdlib-free of Pulumi.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from components.config import StackConfig, upstream
from scripts import names

# The CPython the PyTorch environment is built for (its ABI is part of the pytorch key).
PYTHON_ABI = "cp312"
PLATFORM = "manylinux_2_28_x86_64"
# rdma-core as Ubuntu 24.04 ships it (provider ABI rdmav34, troubleshooting T16): the builder's image's packages.
RDMA_CORE_VERSION = "50.0"
PARTS = ("python", "pytorch", "nvshmem", "deepep", "rdma-core")
# Parts that hold absolute paths of the staged root (RPATH, the venv's interpreter link and pyvenv.cfg).
ROOTED = ("pytorch", "nvshmem", "deepep")
# Parts stored as tar parts with a list (scripts/install/store.sh _publish_parts): gigabytes unpack in seconds.
SPLIT = ("pytorch",)


def staged_root(cfg: StackConfig, target: str) -> str:
    return names.STAGED_ROOTS[target]


def _inputs(cfg: StackConfig, target: str) -> dict[str, dict[str, Any]]:
    v, shape = cfg.versions, cfg.shape
    # DeepEP V2: its NCCL wheel replaces PyTorch's in the venv, and DeepEP builds against it (V1 keys unchanged).
    v2: dict[str, object] = {"deepepApi": "v2", "nccl": v.nccl} if v.deepep_api == "v2" else {}
    nvshmem: dict[str, object] = {
        "version": v.nvshmem,
        "source": v.nvshmem_source,
        "cuda": v.cuda,
        "arch": shape.cuda_arch,
        "gdrcopy": v.gdrcopy,
    }
    return {
        "python": {"abi": PYTHON_ABI, "platform": PLATFORM},
        # The pip NVSHMEM is a constraint of the venv's install (scripts/install/phases/08-pytorch.sh).
        "pytorch": {"torch": v.torch, "abi": PYTHON_ABI, "platform": PLATFORM}
        | ({"nvshmem": v.nvshmem} if v.nvshmem_source == "pip" else {})
        | v2,
        "nvshmem": nvshmem,
        "deepep": {
            "commit": upstream.DEEPEP_REFS[v.deepep_ref].commit
            if v.deepep_ref in upstream.DEEPEP_REFS
            else v.deepep_ref,
            "pr466": v.deepep_pr466,
            "nvshmem": nvshmem,
            "torch": v.torch,
            "arch": shape.torch_cuda_arch,
            "abi": PYTHON_ABI,
        }
        | v2,
        "rdma-core": {"version": RDMA_CORE_VERSION, "platform": PLATFORM},
    }


def part_key(cfg: StackConfig, target: str, part: str, root: str = "") -> str:
    """`root`: a staged root other than the target's (the hardware test's)."""
    doc = dict(_inputs(cfg, target)[part])
    if part in ROOTED:
        doc["root"] = root or staged_root(cfg, target)
    return hashlib.sha256(json.dumps({part: doc}, sort_keys=True).encode()).hexdigest()[:24]


def objects(cfg: StackConfig, target: str, root: str = "") -> dict[str, str]:
    """part -> its object under the store (`userspace/<part>/<key>.tar.gz`, or `.parts` for a split part)."""
    return {p: f"userspace/{p}/{part_key(cfg, target, p, root)}.{'parts' if p in SPLIT else 'tar.gz'}" for p in PARTS}

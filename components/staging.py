"""What the supported profile stages on a node: the user space from the artifact store, nothing else.

The node image brings the kernel, the NVIDIA driver and the in-kernel mlx5 driver (GKE on COS with its
managed driver; GCE on Google's accelerator image). Everything a benchmark process loads above that comes
from the store as one tarball per part, unpacked under the node's staged root (scripts/names.py
STAGED_ROOTS), by the phases `stage` and `verify-staged` (scripts/install/phases/13-stage.sh, 14-...):

    python    a relocatable CPython (bin/python3, lib/): COS has no Python
    pytorch   the PyTorch environment's site-packages (torch, nvidia-*, triton)
    nvshmem   NVSHMEM (lib/, bin/), built for the stack's CUDA and sm_100
    deepep    the DeepEP tree with its built extension and tests (unpacked as DeepEP/), RPATH into nvshmem/lib
    rdma-core libibverbs, the mlx5 provider, librdmacm, libnl-3 and libnl-route-3 (lib/, lib/libibverbs/,
              etc/libibverbs.d/). libibverbs reads its provider configuration from a folder fixed when it is
              built (IBV_CONFIG_DIR = SYSCONFDIR/libibverbs.d, a compile-time path in rdma-core's
              libibverbs/dynamic_driver.c, not an environment variable), so the builder configures rdma-core
              with this root as its prefix; stage writes mlx5.driver with the provider's absolute path.

Each part's object is `userspace/<part>/<key>.tar.gz`, the key a digest of exactly what determines its
bytes (versions, CUDA, arch, Python ABI, platform and, for parts with absolute paths, the staged root), so a
builder (`deepep-a4 store build`) and the node agree without talking. Stdlib-free of Pulumi.
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
# rdma-core as Ubuntu 24.04 ships it (provider ABI rdmav34, troubleshooting T16), built with the staged root.
RDMA_CORE_VERSION = "50.0"
PARTS = ("python", "pytorch", "nvshmem", "deepep", "rdma-core")
# Parts that hold absolute paths of the staged root (RPATH, libibverbs' configuration folder).
ROOTED = ("nvshmem", "deepep", "rdma-core")


def staged_root(cfg: StackConfig, target: str) -> str:
    return names.STAGED_ROOTS[target]


def _inputs(cfg: StackConfig, target: str) -> dict[str, dict[str, Any]]:
    v, shape = cfg.versions, cfg.shape
    nvshmem: dict[str, object] = {
        "version": v.nvshmem,
        "source": v.nvshmem_source,
        "cuda": v.cuda,
        "arch": shape.cuda_arch,
        "gdrcopy": v.gdrcopy,
    }
    return {
        "python": {"abi": PYTHON_ABI, "platform": PLATFORM},
        "pytorch": {"torch": v.torch, "abi": PYTHON_ABI, "platform": PLATFORM},
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
        },
        "rdma-core": {"version": RDMA_CORE_VERSION, "platform": PLATFORM},
    }


def part_key(cfg: StackConfig, target: str, part: str) -> str:
    doc = dict(_inputs(cfg, target)[part])
    if part in ROOTED:
        doc["root"] = staged_root(cfg, target)
    return hashlib.sha256(json.dumps({part: doc}, sort_keys=True).encode()).hexdigest()[:24]


def objects(cfg: StackConfig, target: str) -> dict[str, str]:
    """part -> its object under the store (`userspace/<part>/<key>.tar.gz`)."""
    return {p: f"userspace/{p}/{part_key(cfg, target, p)}.tar.gz" for p in PARTS}

"""Rules on versions: each a version, the pairings upstream says fail, GKE's minimum for A4.

Each check appends a Problem for every rule a value breaks, so the user sees all of them at once.
"""

from __future__ import annotations

import re
from typing import Any

from components.config import upstream
from components.config.keys import GKE_MIN_VERSION, MACHINE_SHAPES, Problem

VERSION_RE = re.compile(r"^\d+(\.\d+){0,3}(-\d+)?(\+[a-z0-9]+)?$")
_DEEPEP_REF_RE = re.compile(r"^(v\d+\.\d+\.\d+([-.][a-z0-9]+)?|[0-9a-f]{40})$")
_GKE_VERSION_RE = re.compile(r"^\d+\.\d+(\.\d+(-gke\.\d+)?)?$")
# NVSHMEM takes the HCA name prefix from NVSHMEM_HCA_PREFIX since 3.4.5 (NVIDIA/nvshmem changelog, "Changes in
# 3.4.5"); older releases open mlx5* devices only, which the inbox RDMA stack's rocep* names are not.
HCA_PREFIX_SINCE = (3, 4, 5)


def gke_version_key(version: str) -> tuple[int, ...]:
    """'1.33.5-gke.1162000' -> (1, 33, 5, 1162000); a prefix such as '1.33' -> (1, 33). Raises ValueError."""
    if not _GKE_VERSION_RE.match(version):
        raise ValueError(version)
    return tuple(int(p) for p in re.split(r"[.]|-gke[.]", version))


def check_versions(v: dict[str, Any], problems: list[Problem]) -> None:
    for key in (
        "docaOfedVersion",
        "nvidiaDriverVersion",
        "cudaVersion",
        "gdrcopyVersion",
        "nvshmemVersion",
        "torchVersion",
    ):
        if not VERSION_RE.match(v[key]):
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
    if VERSION_RE.match(v["torchVersion"]) and not re.match(r"^cu\d{3}$", torch_variant):
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
    if VERSION_RE.match(v["nvshmemVersion"]):
        check_nvshmem_pairing(v, problems)
    if v["gkeVersion"] and not _GKE_VERSION_RE.match(v["gkeVersion"]):
        problems.append(
            Problem("gkeVersion", v["gkeVersion"], "must be a GKE version such as 1.33.5-gke.1162000, or empty")
        )
    elif v["gkeVersion"] and _below_gke_minimum(v["gkeVersion"]):
        problems.append(
            Problem("gkeVersion", v["gkeVersion"], f"A4 nodes need GKE {GKE_MIN_VERSION} or later (or empty)")
        )


def _below_gke_minimum(version: str) -> bool:
    """True when the version (or every version of a prefix such as '1.32') may be older than A4's minimum."""
    have, least = gke_version_key(version), gke_version_key(GKE_MIN_VERSION)
    return have < least[: len(have)] or (have == least[: len(have)] and len(have) < len(least))


def check_nvshmem_pairing(v: dict[str, Any], problems: list[Problem]) -> None:
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
                f"has no checked NVIDIA/nvshmem release tag (known: {tags}); add it to components/config/upstream.py",
            )
        )
    if source == "pip" and "internode" in v["benchmarks"]:
        problems.append(
            Problem(
                "nvshmemSource",
                "pip",
                "DeepEP built against the pip/PyTorch NVSHMEM timed out in internode dispatch on A4 (troubleshooting "
                "T12): use nvshmemSource=source, or drop internode from benchmarks",
            )
        )

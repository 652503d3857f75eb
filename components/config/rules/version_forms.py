"""Rules on versions: each from a known-version table (versions.py) or an override, the pairings upstream
says fail, GKE's floor for A4 per node image type.

Each check appends a Problem for every rule a value breaks, so the user sees all of them at once.
"""

from __future__ import annotations

import json
import re
from typing import Any

from components.config import upstream, versions
from components.config.keys import MACHINE_SHAPES, OVERRIDE_COMPONENTS, Problem
from components.config.versions import gke_version_key

__all__ = ["HCA_PREFIX_SINCE", "VERSION_RE", "check_versions", "gke_version_key", "parse_overrides"]

VERSION_RE = re.compile(r"\d+(\.\d+){0,3}(-\d+)?(\+[a-z0-9]+)?")
# NVIDIA's Linux driver versions: branch.minor[.patch], the patch two digits (580.126.09, 575.57.08, 390.157):
# https://download.nvidia.com/XFree86/Linux-x86_64/ lists them so; a branch (580) takes its newest build.
# NVIDIA's Linux driver builds are branch.minor.patch, the patch two digits (580.126.09, 570.195.03), as
# https://download.nvidia.com/XFree86/Linux-x86_64/ lists them (read 2026-12-02: every build of branches 570 to
# 590 has three parts); `580.126` names no build, so the installer's download would 404 at deploy.
_DRIVER_RE = re.compile(r"\d{3}(\.\d{2,3}\.\d{2})?")
_DRIVER_CUT_SHORT_RE = re.compile(r"\d{3}\.\d{2,3}")
_SHA256_RE = re.compile(r"[0-9a-f]{64}")
_GKE_VERSION_RE = re.compile(r"\d+\.\d+(\.\d+(-gke\.\d+)?)?")
# NVSHMEM takes the HCA name prefix from NVSHMEM_HCA_PREFIX since 3.4.5 (NVIDIA/nvshmem changelog, "Changes in
# 3.4.5"); older releases open mlx5* devices only, which the inbox RDMA stack's rocep* names are not.
HCA_PREFIX_SINCE = (3, 4, 5)
_OVERRIDE_FIELDS = ("version", "url", "sha256")
_OVERRIDE_HINT = "or name it in versionOverrides with its url and sha256 (docs/installer.md)"


def _known(values: tuple[str, ...] | list[str]) -> str:
    return ", ".join(values)


def parse_overrides(v: dict[str, Any], problems: list[Problem]) -> dict[str, dict[str, str]]:
    """`versionOverrides` (a JSON object: component -> {version, url, sha256}), each entry checked."""
    text = v["versionOverrides"].strip()
    if not text:
        return {}
    try:
        data = json.loads(text)
    except json.JSONDecodeError:
        data = None
    shape = 'a JSON object such as {"gdrcopy": {"version": "2.6", "url": "https://...", "sha256": "<64 hex>"}}'
    if not isinstance(data, dict):
        problems.append(Problem("versionOverrides", text, f"must be {shape}"))
        return {}
    found: dict[str, dict[str, str]] = {}
    # A component named here skips its table even when its entry is refused: one mistake, one line.
    v["_overridesNamed"] = set(data)
    for component, entry in data.items():
        where = f"versionOverrides.{component}"
        if component not in OVERRIDE_COMPONENTS:
            problems.append(Problem(where, entry, f"unknown component: use one of {_known(list(OVERRIDE_COMPONENTS))}"))
            continue
        fields = sorted(entry) if isinstance(entry, dict) else []
        if fields != sorted(_OVERRIDE_FIELDS) or not all(isinstance(entry[f], str) for f in fields):
            problems.append(Problem(where, entry, "must be an object of three strings: version, url, sha256"))
            continue
        key = OVERRIDE_COMPONENTS[component]
        if entry["version"] != v[key]:
            problems.append(
                Problem(f"{where}.version", entry["version"], f"must equal {key} ({v[key]}), the version it overrides")
            )
        elif not entry["url"].startswith("https://") or any(c.isspace() for c in entry["url"]):
            problems.append(Problem(f"{where}.url", entry["url"], "must be an https:// URL of the download"))
        elif not _SHA256_RE.fullmatch(entry["sha256"]):
            problems.append(Problem(f"{where}.sha256", entry["sha256"], "must be 64 lower-case hex digits"))
        elif component == "docaOfed" and not _doca_key_url(entry["url"], entry["version"]):
            problems.append(
                Problem(
                    f"{where}.url",
                    entry["url"],
                    f"must be the repository's key {versions.DOCA_REPO_BASE}/{entry['version']}/ubuntu24.04/x86_64/"
                    "GPG-KEY-Mellanox.pub (the digest pins the key that verifies the repository)",
                )
            )
        else:
            found[component] = dict(entry)
    return found


def _doca_key_url(url: str, version: str) -> bool:
    return url.startswith(f"{versions.DOCA_REPO_BASE}/{version}/") and url.endswith("/GPG-KEY-Mellanox.pub")


def check_versions(v: dict[str, Any], problems: list[Problem], valid: dict[str, dict[str, str]]) -> None:
    overrides = {c: valid.get(c, {}) for c in v.get("_overridesNamed", ())}
    before = len(problems)
    for key in ("docaOfedVersion", "cudaVersion", "gdrcopyVersion", "nvshmemVersion", "torchVersion"):
        if not VERSION_RE.fullmatch(v[key]):
            problems.append(Problem(key, v[key], "must be a version such as 12.9, 3.2.1 or 2.10.0+cu129"))
    _check_tables(v, problems, overrides)
    _check_driver(v, problems, overrides)
    _check_cuda_and_torch(v, problems, overrides)
    if len(problems) == before:  # one line for one mistake: a wrong version first
        _check_torch_lock(v, problems)
    _check_deepep_ref(v, problems)
    if VERSION_RE.fullmatch(v["nvshmemVersion"]):
        check_nvshmem_pairing(v, problems, overrides)
    _check_gke_version(v, problems)


def _check_tables(v: dict[str, Any], problems: list[Problem], overrides: dict[str, dict[str, str]]) -> None:
    tables = (
        ("docaOfed", versions.DOCA_OFED_VERSIONS, "DOCA-OFED"),
        ("gdrcopy", versions.GDRCOPY_VERSIONS, "GDRCopy"),
        ("nvshmem", versions.NVSHMEM_VERSIONS, "NVSHMEM"),
    )
    for component, known, what in tables:
        key = OVERRIDE_COMPONENTS[component]
        if component in overrides or not VERSION_RE.fullmatch(v[key]) or v[key] in known:
            continue
        if component == "docaOfed" and not v["useDocaOfed"]:
            continue
        problems.append(
            Problem(key, v[key], f"is not a {what} release the project knows ({_known(known)}); {_OVERRIDE_HINT}")
        )


def _check_driver(v: dict[str, Any], problems: list[Problem], overrides: dict[str, dict[str, str]]) -> None:
    driver = v["nvidiaDriverVersion"]
    if _DRIVER_CUT_SHORT_RE.fullmatch(driver):
        problems.append(
            Problem(
                "nvidiaDriverVersion",
                driver,
                f"is cut short: NVIDIA's driver builds have three parts ({driver}.NN, e.g. 580.126.09, as "
                f"download.nvidia.com/XFree86/Linux-x86_64/ lists them): write the whole build, or the branch "
                f"{driver.split('.')[0]} alone",
            )
        )
        return
    if not _DRIVER_RE.fullmatch(driver):
        problems.append(
            Problem(
                "nvidiaDriverVersion",
                driver,
                "must be NVIDIA's driver branch (580) or build (580.126.09), as NVIDIA writes it: no R prefix, no "
                "package revision (-1), no -open/-server suffix, no latest",
            )
        )
        return
    branch = versions.driver_branch(driver)
    if int(branch) < versions.B200_MIN_DRIVER_BRANCH:
        problems.append(
            Problem(
                "nvidiaDriverVersion",
                driver,
                f"branch {branch} cannot drive a B200: Blackwell needs the {versions.B200_MIN_DRIVER_BRANCH} branch "
                f"or newer (known: {_known(list(versions.DRIVER_BRANCHES))})",
            )
        )
    elif branch not in versions.DRIVER_BRANCHES and "nvidiaDriver" not in overrides:
        problems.append(
            Problem(
                "nvidiaDriverVersion",
                driver,
                f"branch {branch} is not one the project knows ({_known(list(versions.DRIVER_BRANCHES))}); "
                f"{_OVERRIDE_HINT}",
            )
        )
    cuda = re.match(r"^(\d+)\.", v["cudaVersion"])
    if (
        cuda
        and int(cuda[1]) >= 13
        and versions.B200_MIN_DRIVER_BRANCH <= int(branch) < versions.CUDA13_MIN_DRIVER_BRANCH
    ):
        problems.append(
            Problem(
                "nvidiaDriverVersion",
                driver,
                f"CUDA {v['cudaVersion']} needs driver branch {versions.CUDA13_MIN_DRIVER_BRANCH} or newer",
            )
        )


def _check_cuda_and_torch(v: dict[str, Any], problems: list[Problem], overrides: dict[str, dict[str, str]]) -> None:
    cuda_text = v["cudaVersion"]
    shape = MACHINE_SHAPES.get(v["machineType"])
    cuda = re.fullmatch(r"(\d+)\.(\d+)", cuda_text)
    if VERSION_RE.fullmatch(cuda_text) and "cuda" not in overrides and cuda_text not in versions.CUDA_VERSIONS:
        cuda = None  # one line for one mistake: PyTorch is not matched against a CUDA that does not exist
        problems.append(
            Problem(
                "cudaVersion",
                cuda_text,
                f"is not a CUDA toolkit the project knows (major.minor: {_known(versions.CUDA_VERSIONS)}); "
                f"{_OVERRIDE_HINT}",
            )
        )
    elif shape and cuda and (int(cuda[1]), int(cuda[2])) < shape.min_cuda:
        need = ".".join(map(str, shape.min_cuda))
        problems.append(
            Problem("cudaVersion", cuda_text, f"{shape.accelerator} (sm_{shape.cuda_arch}) needs CUDA {need} or newer")
        )
    torch = v["torchVersion"]
    release, _, tag = torch.partition("+")
    if not VERSION_RE.fullmatch(torch):
        return
    if not re.fullmatch(r"cu\d{3}", tag):
        problems.append(Problem("torchVersion", torch, "must name its CUDA wheel variant, e.g. 2.10.0+cu129"))
        return
    if cuda and tag != f"cu{cuda[1]}{cuda[2]}":
        problems.append(
            Problem(
                "torchVersion",
                torch,
                f"CUDA variant {tag} does not match cudaVersion {cuda_text}: use a +cu{cuda[1]}{cuda[2]} build",
            )
        )
    elif "torch" not in overrides and release not in versions.TORCH_BUILDS.get(tag, ()):
        builds = versions.TORCH_BUILDS.get(tag)
        known = f"{tag} builds: {_known(builds)}" if builds else f"known tags: {_known(list(versions.TORCH_BUILDS))}"
        problems.append(
            Problem("torchVersion", torch, f"PyTorch has no such build the project knows ({known}); {_OVERRIDE_HINT}")
        )


def _check_torch_lock(v: dict[str, Any], problems: list[Problem]) -> None:
    """host-install puts PyTorch on the node with pip: only from a locked file with hashes, or from the store's
    artifact, whose digest the stack's manifest pins (docs/installer.md, "What is pinned")."""
    torch = v["torchVersion"]
    if v["nodeProfile"] != "host-install" or torch in versions.TORCH_LOCKS:
        return
    if v["artifactStore"]:  # the store builder makes the artifact, the manifest pins it (docs/store.md)
        return
    problems.append(
        Problem(
            "torchVersion",
            torch,
            f"has no locked requirements file with hashes (locks exist for {_known(list(versions.TORCH_LOCKS))}): "
            "a host-install node would install it unhashed. Take PyTorch from the store (set artifactStore, run "
            "deepep-a4 store build, pin artifactStoreManifest), or add a lock (scripts/install/locks/, "
            "TORCH_LOCKS in components/config/versions.py)",
        )
    )


def _check_deepep_ref(v: dict[str, Any], problems: list[Problem]) -> None:
    ref = v["deepepRef"]
    if ref in upstream.DEEPEP_REFS:
        return
    known = _known([r if r.startswith("v") else r[:12] + "..." for r in upstream.DEEPEP_REFS])
    problems.append(
        Problem(
            "deepepRef",
            ref,
            f"is not a DeepEP tag or commit the project knows ({known}); a new one goes into "
            "components/config/upstream.py DEEPEP_REFS with the NVSHMEM it was checked with",
        )
    )


def _check_gke_version(v: dict[str, Any], problems: list[Problem]) -> None:
    pinned = v["gkeVersion"]
    if not pinned:
        return
    if not _GKE_VERSION_RE.fullmatch(pinned):
        problems.append(Problem("gkeVersion", pinned, "must be a GKE version such as 1.33.5-gke.1162000, or empty"))
        return
    image = v["_gkeImageType"]
    if versions.below_gke_floor(pinned, image):
        problems.append(
            Problem(
                "gkeVersion",
                pinned,
                f"A4 nodes on {image} need GKE {versions.gke_floor_text(image)} or a newer minor (or empty)",
            )
        )


def check_nvshmem_pairing(v: dict[str, Any], problems: list[Problem], overrides: dict[str, dict[str, str]]) -> None:
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
    in_table = version in versions.NVSHMEM_VERSIONS
    no_tag = have >= upstream.NVSHMEM_GITHUB_SINCE and version not in upstream.NVSHMEM_GITHUB_TAGS
    if source == "source" and in_table and no_tag and "nvshmem" not in overrides:
        tags = ", ".join(upstream.NVSHMEM_GITHUB_TAGS)
        problems.append(
            Problem(
                "nvshmemVersion",
                version,
                f"has no checked NVIDIA/nvshmem source tag (known: {tags}); {_OVERRIDE_HINT}",
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

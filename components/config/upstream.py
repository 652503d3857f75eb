"""What we checked by hand about upstream releases, shared by the config model and the installer.

Each fact names where it was checked, so the next pin can be checked the same way. A DeepEP ref that is
not listed here is refused (config/rules/version_forms.py); the release tables are in config/versions.py.
"""

from __future__ import annotations

from dataclasses import dataclass

Version = tuple[int, ...]


@dataclass(frozen=True)
class DeepEPRef:
    commit: str  # full hash: `git fetch origin <hash>` takes nothing shorter
    min_nvshmem: Version
    # First NVSHMEM this ref cannot run with, by where NVSHMEM comes from; absent means no known limit.
    nvshmem_before: dict[str, Version]
    why_before: str = ""
    # "v1": deep_ep.Buffer on NVSHMEM; "v2": EPv2's deep_ep.ElasticBuffer on NCCL's Gin (JIT kernels), whose
    # package still builds the V1 kernels (tests/legacy/). A V2 ref also names the NCCL and PyTorch it needs.
    api: str = "v1"
    min_nccl: Version = ()
    min_torch: Version = ()


# deepseek-ai/DeepEP, checked in a clone (`git tag` in a snapshot of 2026-11-25 lists v1.2.1 -> 9af0e0d;
# 29d31c0 is a commit of its history): third-party/README.md of each ref says "NVSHMEM v3.3.9 or
# later"; commit 29d31c0 "Nvshmem 3 5 runtime fixes (#564)" is what v1.2.1 lacks for newer NVSHMEM:
# NVSHMEM 3.5 moved the RC QPs inside the IBGDA device state, and a source build from 3.3.20 on defines
# the device state a second time unless DeepEP compiles with RDC. The field reports ran 1.2.1+29d31c0.
DEEPEP_V1_2_1 = "v1.2.1"
DEEPEP_NVSHMEM35_FIXES = "29d31c095796f3c8ece47ee9cdcc167051bbeed9"
_WHY_564 = f"it predates DeepEP #564 (NVSHMEM 3.5 QP layout, RDC): use deepepRef {DEEPEP_NVSHMEM35_FIXES}"
DEEPEP_REFS: dict[str, DeepEPRef] = {
    DEEPEP_V1_2_1: DeepEPRef(
        "9af0e0d0e74f3577af1979c9b9e1ac2cad0104ee",
        (3, 3, 9),
        {"source": (3, 3, 20), "pip": (3, 5, 0)},
        _WHY_564,
    ),
    DEEPEP_NVSHMEM35_FIXES: DeepEPRef(DEEPEP_NVSHMEM35_FIXES, (3, 3, 9), {}),
}

# DeepEP V2 (EPv2): deepseek-ai/DeepEP main at dd758ca "NCCL Device API compat: use runtime version for
# ncclDevCommCreate (#688)", 2026-07-14 (`git log` in a snapshot of 2026-11-27). Its README.md, "Requirements":
# "PyTorch 2.10 and above", "NCCL 2.30.4 and above"; csrc/kernels/backend/nccl.cu asserts that compile-time and
# runtime NCCL match before 2.31. It does not build against torch 2.11's NCCL 2.28.9 (Gin types missing: issue 36,
# measured on 2 x H100). third-party/fmt is a submodule (fmtlib/fmt at DEEPEP_V2_FMT): `git archive` leaves it
# out, so the installer fetches it beside the DeepEP archive. The legacy kernels link NVSHMEM as V1 does.
DEEPEP_V2 = "dd758caf451848bd150e1046af3d0a73e5fff38d"
DEEPEP_V2_FMT = "a4c7e17133ee9cb6a2f45545f6e974dd3c393efa"
DEEPEP_REFS[DEEPEP_V2] = DeepEPRef(DEEPEP_V2, (3, 3, 9), {}, api="v2", min_nccl=(2, 30, 4), min_torch=(2, 10))

# DeepEP PR #466 (explicit GPU-to-NIC mapping, DEEP_EP_DEVICE_TO_HCA_MAPPING): two commits on top of
# 29d31c0, fetched from refs/pull/466/head and applied as the diff base..head, so a force-push to the PR
# is refused instead of built. It applies to v1.2.1 and to 29d31c0 (checked with `git apply --check`).
DEEPEP_PR466_REF = "refs/pull/466/head"
DEEPEP_PR466_BASE = DEEPEP_NVSHMEM35_FIXES
DEEPEP_PR466_HEAD = "8a07e7e7ed57cfc63005f670d64d410cb30b061b"
DEEPEP_PR466_APPLIES_TO = (DEEPEP_V1_2_1, DEEPEP_NVSHMEM35_FIXES)

# NVIDIA/nvshmem on GitHub starts at 3.4.5; its tags carry a packaging revision the version does not
# say (v3.4.5-0, and v3.5.19-1 as field report R1 cloned). Older sources are NVIDIA's redist tarballs.
NVSHMEM_GITHUB_TAGS = {"3.4.5": "v3.4.5-0", "3.5.19": "v3.5.19-1"}
NVSHMEM_GITHUB_SINCE: Version = (3, 4, 5)
NVSHMEM_REDIST = "https://developer.download.nvidia.com/compute/redist/nvshmem"


def version_tuple(text: str) -> Version:
    """'3.5.19' -> (3, 5, 19); the part after '+' or '-' is ignored."""
    core = text.split("+", 1)[0].split("-", 1)[0]
    return tuple(int(p) for p in core.split(".") if p.isdigit())


def dotted(version: Version) -> str:
    return ".".join(map(str, version))


def nvshmem_source_url(version: str) -> str:
    """Where the source of an NVSHMEM version lives; a version without a known GitHub tag raises KeyError."""
    v = version_tuple(version)
    if v < (3, 3):
        return f"{NVSHMEM_REDIST}/{version}/source/nvshmem_src_{version}-1.txz"
    if v < NVSHMEM_GITHUB_SINCE:
        return f"{NVSHMEM_REDIST}/{version}/source/nvshmem_src_cuda12-all-all-{version}.tar.gz"
    return f"https://github.com/NVIDIA/nvshmem/archive/refs/tags/{NVSHMEM_GITHUB_TAGS[version]}.tar.gz"

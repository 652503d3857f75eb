"""DeepEP's generation (deepepApi): V1 (Buffer on NVSHMEM) or V2 (EPv2, ElasticBuffer on NCCL's Gin), checked
against the refs upstream.py knows: a V2 ref with PyTorch 2.10+ and one NCCL 2.30.4+ wheel the project pins,
a V1 ref with PyTorch's own NCCL. Every other combination is refused with one line.
"""

from __future__ import annotations

from typing import Any

from components.config import upstream, versions
from components.config.keys import Problem

__all__ = ["check_deepep_api", "deepep_defaults"]


def deepep_defaults(v: dict[str, Any], given: set[str]) -> None:
    """deepepApi=v2 takes the V2 ref, no PR #466 (a V1 patch) and NCCL 2.32.3 unless the stack names them."""
    if v["deepepApi"] != "v2":
        return
    if "deepepRef" not in given:
        v["deepepRef"] = upstream.DEEPEP_V2
    if "deepepPr466" not in given:
        v["deepepPr466"] = False
    if not v["ncclVersion"]:
        v["ncclVersion"] = versions.NCCL_V2_DEFAULT


def check_deepep_api(v: dict[str, Any], problems: list[Problem]) -> None:
    ref = upstream.DEEPEP_REFS.get(v["deepepRef"])
    if ref is None or v["deepepApi"] not in ("v1", "v2"):
        return  # an unknown ref or api has its own line already
    if v["deepepApi"] == "v1" and "elastic" in v["benchmarks"]:
        problems.append(
            Problem(
                "benchmarks", "elastic", "the elastic test is DeepEP V2's (tests/elastic/test_ep.py): set deepepApi=v2"
            )
        )
    if v["deepepApi"] == "v1":
        if ref.api == "v2":
            problems.append(
                Problem(
                    "deepepRef",
                    v["deepepRef"],
                    "is DeepEP V2 (ElasticBuffer on NCCL Gin, needs its own NCCL): set deepepApi=v2, or use a V1 ref",
                )
            )
        elif v["ncclVersion"]:
            problems.append(
                Problem(
                    "ncclVersion",
                    v["ncclVersion"],
                    "only deepepApi=v2 installs its own NCCL; V1 runs with PyTorch's NCCL: remove it",
                )
            )
        return
    v2_refs = ", ".join(r[:12] + "..." for r, known in upstream.DEEPEP_REFS.items() if known.api == "v2")
    if ref.api != "v2":
        problems.append(
            Problem(
                "deepepApi",
                "v2",
                f"needs a DeepEP V2 ref ({v2_refs}); deepepRef {v['deepepRef'][:12]} is V1 (Buffer on NVSHMEM)",
            )
        )
        return
    if v["deepepPr466"]:
        applies = ", ".join(r[:12] for r in upstream.DEEPEP_PR466_APPLIES_TO)
        problems.append(
            Problem("deepepPr466", True, f"PR #466 patches the V1 refs ({applies}) only: set it false for v2")
        )
    _check_torch(v, ref, problems)
    _check_nccl(v, ref, problems)


def _check_torch(v: dict[str, Any], ref: upstream.DeepEPRef, problems: list[Problem]) -> None:
    release = v["torchVersion"].partition("+")[0]
    if release and upstream.version_tuple(release) < ref.min_torch:
        problems.append(
            Problem(
                "torchVersion",
                v["torchVersion"],
                f"DeepEP V2 ({ref.commit[:12]}) needs PyTorch {upstream.dotted(ref.min_torch)} or newer "
                "(its README, Requirements)",
            )
        )


def _check_nccl(v: dict[str, Any], ref: upstream.DeepEPRef, problems: list[Problem]) -> None:
    nccl, variant = v["ncclVersion"], v["torchVersion"].partition("+")[2]
    known = ", ".join(f"{n} ({'/'.join(sorted(w))})" for n, w in versions.NCCL_WHEELS.items())
    try:
        have = upstream.version_tuple(nccl)
    except ValueError:
        have = ()
    if not have:
        problems.append(Problem("ncclVersion", nccl, f"must be an NCCL version such as {versions.NCCL_V2_DEFAULT}"))
    elif have < ref.min_nccl:
        problems.append(
            Problem(
                "ncclVersion",
                nccl,
                f"DeepEP V2 ({ref.commit[:12]}) needs NCCL {upstream.dotted(ref.min_nccl)} or newer (its README; "
                "older NCCL lacks the Gin device API it compiles against)",
            )
        )
    elif variant.startswith("cu") and variant[:4] not in versions.NCCL_WHEELS.get(nccl, {}):
        problems.append(
            Problem(
                "ncclVersion",
                nccl,
                f"is not an NCCL wheel the project pins for {variant} (known: {known}); add it with its sha256 to "
                "NCCL_WHEELS in components/config/versions.py",
            )
        )

"""DeepEP V2's Gin: the elastic test's NCCL settings, the class NCCL gives Gin, the Gin transport NCCL took.
NVIDIA/nccl 5067397c: net_ib/gin.cc:283, gdaki/gin_host_gdaki.cc:511, plugin/gin.cc:158 (docs/platforms.md)."""

from __future__ import annotations

import re

GIN_TESTS = ("elastic",)  # ElasticBuffer opens Gin over the NICs even on one node
TYPES = {2: "GIN_PROXY", 3: "GIN_GDAKI", 4: "GIN_GPI"}
DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}  # NCCL then prints its GIN/Plugin lines
RE_ASSIGNED = re.compile(r"NCCL INFO GIN/Plugin: Assigned plugin (\S+) type (\d+) to comm")
RE_NONE = re.compile(r"NCCL INFO GIN/Plugin: Failed to initialize any GIN plugin")


def _param(env: dict[str, str], name: str) -> int | None:
    try:
        value = int(env.get(name, "-1"))
    except ValueError:
        return None
    return None if value == -1 else value


def traffic_class(env: dict[str, str], requested: int | None = None) -> tuple[int, str]:
    """NCCL_GIN_IB_TC, else NCCL_IB_TC, else the caller's class (DeepEP's sl_idx), else 0; and which."""
    for name in ("NCCL_GIN_IB_TC", "NCCL_IB_TC"):
        if (tc := _param(env, name)) is not None:
            return tc, name
    if requested is not None:
        return requested, "ginTrafficClass (the caller's)"
    return 0, "NCCL's default"


def gin_env(env: dict[str, str]) -> tuple[dict[str, str], str]:
    """On the RDMA tests' environment: Gin's own class = gIB's NCCL_IB_TC (Google's 52), and NCCL's INFO lines."""
    out = dict(env)
    if "NCCL_IB_TC" in out:
        out.setdefault("NCCL_GIN_IB_TC", out["NCCL_IB_TC"])
    for key, value in DEBUG_ENV.items():
        out.setdefault(key, value)
    tc, source = traffic_class(out)
    return out, f"elastic: NCCL's Gin traffic class {tc} (from {source})"


def gin_of(lines: list[str]) -> dict[str, object]:
    """The Gin transport NCCL assigned (plugin, type, communicators), or plugin None and why."""
    seen: dict[tuple[str, int], int] = {}
    failed = 0
    for line in lines:
        if m := RE_ASSIGNED.search(line):
            seen[m[1], int(m[2])] = seen.get((m[1], int(m[2])), 0) + 1
        failed += bool(RE_NONE.search(line))
    if seen:
        (plugin, type_), count = max(seen.items(), key=lambda kv: kv[1])
        return {"plugin": plugin, "type": type_, "typeName": TYPES.get(type_, "?"), "comms": count, "failed": failed}
    return {"plugin": None, "failed": failed, "detail": "no 'GIN/Plugin: Assigned plugin' line"}

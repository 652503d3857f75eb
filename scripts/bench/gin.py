"""DeepEP V2's Gin traffic on RDMA: the elastic test's NCCL Gin settings, the traffic class NCCL will give its
queue pairs, and the Gin transport NCCL says it took (recorded in the results). Stdlib only: shipped next to
run_bench.py.

Sources (NVIDIA/nccl, master 5067397c2676d5aed50042fc39e5c8ee96eb0027 of 2026-06-11; NCCL_GIN_IB_TC came with
2ce3496f "Add an environment variable override for GIN IB traffic class.", first in v2.30.7-1):

- src/transport/net_ib/gin.cc:47 `NCCL_PARAM(GinIbTc, "GIN_IB_TC", -1)`; ncclGinIbGdakiCreateContext (lines
  283-284): `if (ncclParamGinIbTc() != -1) config->trafficClass = ncclParamGinIbTc(); else if (ncclParamIbTc()
  != -1) config->trafficClass = ncclParamIbTc();` so NCCL_GIN_IB_TC, else NCCL_IB_TC, replace the class the
  caller asked for;
- src/gin/gin_host.cc:270: the asked-for class is the device communicator's `ginTrafficClass` when set (DeepEP
  V2 passes its `sl_idx` there), else the communicator config's `trafficClass`;
- src/transport/net_ib/gdaki/gin_host_gdaki.cc:511: `ib_tc = trafficClass != NCCL_NET_TRAFFIC_CLASS_UNDEF ?
  trafficClass : NCCL_IB_TC_DEFAULT` (0); and line 508: the service level is NCCL_IB_SL, else that same class;
- the Gin connections' own QPs (gin.cc:191, :407): `ncclParamGinIbTc() != -1 ? ncclParamGinIbTc() :
  ncclParamIbTc()`;
- src/plugin/gin.cc:158: `INFO(NCCL_INIT | NCCL_NET, "GIN/Plugin: Assigned plugin %s type %d to comm", ...)`,
  :302 "GIN/Plugin: Failed to initialize any GIN plugin"; the type is ncclNetDeviceType
  (src/include/nccl_device/net_device.h: HOST 0, UNPACK 1, GIN_PROXY 2, GIN_GDAKI 3, GIN_GPI 4).
"""

from __future__ import annotations

import re
from typing import Any

# The tests whose traffic goes through NCCL's Gin (DeepEP V2's ElasticBuffer opens Gin over the NICs even on
# one node: components/gke/pod_security.py bench_needs_rdma).
GIN_TESTS = ("elastic",)
UNDEF = None  # NCCL_NET_TRAFFIC_CLASS_UNDEF / NCCL_CONFIG_UNDEF_INT
TC_DEFAULT = 0  # gin_host_gdaki.cc NCCL_IB_TC_DEFAULT
DEVICE_TYPES = {0: "HOST", 1: "UNPACK", 2: "GIN_PROXY", 3: "GIN_GDAKI", 4: "GIN_GPI"}
# What makes NCCL print the line above: INFO level and the INIT (or NET) subsystem (NCCL's debug.cc).
DEBUG_ENV = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"}
RE_ASSIGNED = re.compile(r"NCCL INFO GIN/Plugin: Assigned plugin (?P<plugin>\S+) type (?P<type>\d+) to comm")
RE_NONE = re.compile(r"NCCL INFO GIN/Plugin: Failed to initialize any GIN plugin")


def _param(env: dict[str, str], name: str) -> int | None:
    """An NCCL integer parameter from the environment; -1 (its default) and unset are both 'not set'."""
    try:
        value = int(env.get(name, "-1").strip())
    except ValueError:
        return None
    return None if value == -1 else value


def traffic_class(env: dict[str, str], requested: int | None = UNDEF) -> tuple[int, str]:
    """The traffic class NCCL's GDAKI Gin gives its queue pairs, and where it came from, in NCCL's order:
    NCCL_GIN_IB_TC, else NCCL_IB_TC, else the class the caller asked for (DeepEP's sl_idx as ginTrafficClass),
    else 0."""
    if (tc := _param(env, "NCCL_GIN_IB_TC")) is not None:
        return tc, "NCCL_GIN_IB_TC"
    if (tc := _param(env, "NCCL_IB_TC")) is not None:
        return tc, "NCCL_IB_TC"
    if requested is not None:
        return requested, "ginTrafficClass (the caller's)"
    return TC_DEFAULT, "NCCL's default"


def gin_env(env: dict[str, str]) -> tuple[dict[str, str], str]:
    """The elastic test's environment on top of the RDMA tests' one: Gin's traffic class is the class gIB's
    settings give NCCL's other traffic (NCCL_IB_TC, Google's 52), named for Gin itself so neither a caller's
    class nor a later NCCL default moves it; and NCCL's INFO lines for INIT/NET, which name the Gin transport
    taken (recorded in the results)."""
    out = dict(env)
    if "NCCL_IB_TC" in out:
        out.setdefault("NCCL_GIN_IB_TC", out["NCCL_IB_TC"])
    for key, value in DEBUG_ENV.items():
        out.setdefault(key, value)
    tc, source = traffic_class(out)
    return out, f"elastic: NCCL's Gin traffic class {tc} (from {source}; NVIDIA/nccl src/transport/net_ib/gin.cc)"


def gin_of(lines: list[str]) -> dict[str, Any]:
    """The Gin transport NCCL assigned, from a test's output: plugin, type and its name, and how many
    communicators printed it; {"plugin": None, ...} with why when no line says so."""
    assigned: dict[tuple[str, int], int] = {}
    failed = 0
    for line in lines:
        if m := RE_ASSIGNED.search(line):
            key = (m["plugin"], int(m["type"]))
            assigned[key] = assigned.get(key, 0) + 1
        elif RE_NONE.search(line):
            failed += 1
    if assigned:
        (plugin, type_), count = max(assigned.items(), key=lambda kv: kv[1])
        name = DEVICE_TYPES.get(type_, "?")
        out: dict[str, Any] = {"plugin": plugin, "type": type_, "typeName": name, "comms": count}
        if len(assigned) > 1:
            out["others"] = [{"plugin": p, "type": t, "comms": c} for (p, t), c in assigned.items() if p != plugin]
        if failed:
            out["failed"] = failed
        return out
    if failed:
        return {"plugin": None, "detail": "NCCL: Failed to initialize any GIN plugin", "failed": failed}
    return {"plugin": None, "detail": "no 'GIN/Plugin: Assigned plugin' line (NCCL_DEBUG not INFO, or no Gin)"}

"""The tests' environment (the installer's env file, the gIB NCCL settings), the runner's log line, and
the RDMA traffic per NIC (docs/troubleshooting.md T10). Stdlib only: shipped next to run_bench.py."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any, TextIO

DEEPEP_SCRIPTS = {
    "intranode": "test_intranode.py",
    "low-latency": "test_low_latency.py",
    "internode": "test_internode.py",
}
DEFAULT_PORT = 8361  # DeepEP's tests/utils.py default
# gIB NCCL settings of the GKE troubleshooting report R3, used only where the gIB plugin is installed.
GIB_NCCL_ENV = {
    "NCCL_NET": "gIB",
    "NCCL_IB_TC": "52",
    "NCCL_IB_ADAPTIVE_ROUTING": "1",
    "NCCL_IB_QPS_PER_CONNECTION": "4",
    "NCCL_CROSS_NIC": "0",
    "NCCL_NET_GDR_LEVEL": "PIX",
    "NCCL_P2P_NET_CHUNKSIZE": "131072",
    "NCCL_NVLS_CHUNKSIZE": "524288",
    "NCCL_IB_FIFO_TC": "84",
}
GIB_TUNER_CONFIG = "configs/tuner_config_a4.txtpb"
# Never set by the runner, always removed: the gIB shim fails with "mismatch ... (expected unset)".
UNSET_VARS = ("TORCH_NCCL_USE_COMM_NONBLOCKING",)


def log(stream: TextIO, what: str, body: Any = "") -> None:
    text = body if isinstance(body, str) else json.dumps(body, sort_keys=True)
    stream.write(f"[runner] {what} {text}".rstrip() + "\n")
    stream.flush()


# -- environment ---------------------------------------------------------------------------------


def load_env_file(path: str) -> dict[str, str]:
    """The variables a shell has after sourcing `path` with `set -a` (the installer's env file)."""
    out = subprocess.run(
        ["bash", "-c", 'set -a; . "$1" >/dev/null; env -0', "env-file", path],
        check=True,
        capture_output=True,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": os.environ.get("HOME", "/root")},
    ).stdout.decode()
    env = {}
    for item in out.split("\0"):
        key, sep, value = item.partition("=")
        if sep and key and key not in ("_", "SHLVL", "PWD", "OLDPWD"):
            env[key] = value
    return env


def gib_plugin_present(gib_dir: str) -> bool:
    lib = Path(gib_dir) / "lib64"
    return lib.is_dir() and any(lib.glob("libnccl-net*.so*"))


def build_env(base: dict[str, str], env_file: str | None, gib_dir: str) -> tuple[dict[str, str], list[str]]:
    """The tests' environment and a note for each decision taken."""
    env = dict(base)
    notes: list[str] = []
    if env_file:
        loaded = load_env_file(env_file)
        for key, value in loaded.items():
            if key == "PATH" or env.get(key) != value:
                env[key] = value
        notes.append(f"loaded {len(loaded)} variables from {env_file}")
    for key in UNSET_VARS:
        if env.pop(key, None) is not None:
            notes.append(f"unset {key}")
    if gib_plugin_present(gib_dir):
        for key, value in GIB_NCCL_ENV.items():
            env.setdefault(key, value)
        tuner = Path(gib_dir) / GIB_TUNER_CONFIG
        if tuner.is_file():
            env.setdefault("NCCL_TUNER_CONFIG_PATH", str(tuner))
        lib = str(Path(gib_dir) / "lib64")
        paths = [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
        if lib not in paths:
            env["LD_LIBRARY_PATH"] = ":".join([*paths, lib])
        notes.append(f"gIB NCCL plugin found in {gib_dir}: NCCL_NET=gIB and R3's NCCL settings")
    else:
        notes.append(f"no gIB NCCL plugin in {gib_dir}: NCCL picks its own transport")
    env["PYTHONUNBUFFERED"] = "1"
    return env, notes


# -- RDMA traffic per NIC (troubleshooting T10) ----------------------------------------------------

IB_SYSFS = "/sys/class/infiniband"
# A NIC "carries" the test when it sent at least this share of the bytes all NICs sent.
NIC_BUSY_SHARE = 0.05


def nic_tx_bytes(ib_dir: Path) -> dict[str, int]:
    """port_xmit_data of every HCA port, in bytes (the counter counts 4-byte words)."""
    sent: dict[str, int] = {}
    for counter in sorted(ib_dir.glob("*/ports/*/counters/port_xmit_data")):
        try:
            sent[f"{counter.parents[3].name}/{counter.parents[1].name}"] = int(counter.read_text().strip()) * 4
        except (OSError, ValueError):
            continue
    return sent


def nic_spread(before: dict[str, int], after: dict[str, int]) -> tuple[dict[str, int], str | None]:
    """Bytes each NIC sent in between, and the problem when one NIC carried it all.

    Seed 001 problem 3: without PR #466's DEEP_EP_DEVICE_TO_HCA_MAPPING every GPU uses mlx5_0 and
    internode RDMA falls to ~6.5 GB/s; its check was exactly these counters ("all 8 NICs should show
    traffic"). No counters, or none moved, means nothing to judge (a pod may not see them)."""
    delta = {k: max(after[k] - before.get(k, 0), 0) for k in after}
    total = sum(delta.values())
    if len(delta) < 2 or total == 0:
        return delta, None
    busy = [k for k, v in delta.items() if v >= NIC_BUSY_SHARE * total]
    if len(busy) > 1:
        return delta, None
    return delta, (
        f"RDMA traffic on one NIC only ({busy[0]}: {delta[busy[0]] / total:.0%} of {total / 1e9:.2f} GB): "
        f"every GPU used the same NIC, so DEEP_EP_DEVICE_TO_HCA_MAPPING (DeepEP PR #466) is not in effect "
        f"(troubleshooting T10, ~6.5 GB/s): set deepepPr466=true"
    )

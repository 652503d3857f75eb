"""The tests' environment (the installer's env file, the gIB NCCL settings), the runner's log line, one
test's process, and the RDMA traffic per NIC recorded around a test (docs/troubleshooting.md T10); what ran
(versions, commits) is what_ran.py. Stdlib only: shipped next to run_bench.py."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, TextIO

DEEPEP_SCRIPTS = {
    "intranode": "test_intranode.py",
    "low-latency": "test_low_latency.py",
    "internode": "test_internode.py",
    # DeepEP V2 (EPv2, deepepApi=v2): ElasticBuffer's test; V2 moved the three above to tests/legacy/.
    "elastic": "elastic/test_ep.py",
}
DEFAULT_PORT = 8361  # DeepEP's tests/utils.py default
# Google's NCCL settings for gIB on A4 (what its set_nccl_env.sh sets), as GoogleCloudPlatform/cluster-toolkit
# spells them out in examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml (1047080375afb), NCCL_NET=gIB
# with them; used only for the RDMA tests, where the gIB plugin is installed, the process sees RDMA devices and
# deepep-a4:ncclGib is on (gib_env). GID index 3 is RoCE v2.
GIB_NCCL_ENV = {
    "NCCL_NET": "gIB",
    "NCCL_CROSS_NIC": "0",
    "NCCL_NET_GDR_LEVEL": "PIX",
    "NCCL_P2P_NET_CHUNKSIZE": "131072",
    "NCCL_NVLS_CHUNKSIZE": "524288",
    "NCCL_IB_GID_INDEX": "3",
    "NCCL_IB_ADAPTIVE_ROUTING": "1",
    "NCCL_IB_QPS_PER_CONNECTION": "4",
    "NCCL_IB_TC": "52",
    "NCCL_IB_FIFO_TC": "84",
}
GIB_TUNER_CONFIG = "configs/tuner_config_a4.txtpb"
# The interfaces NCCL's bootstrap and socket transport use, per platform and (GKE) pod networking:
# - GKE host network: the node's two gVNICs, as AI-Hypercomputer/gpu-recipes' A4 JobSet sets them
#   (training/a4/.../recipe/templates/workload-job.yaml, 2e1fd5efbf1a);
# - GKE multi-network: the pod network (eth0), the only interface every pod is reachable on by its DNS name;
# - GCE: an A4 VM's two gVNICs, as cluster-toolkit's A4 NCCL test sets them
#   (examples/machine-learning/a4-highgpu-8g/system_benchmarks/run-nccl-tests-via-ramble.sh, 1047080375afb).
SOCKET_IFNAMES = {
    ("gke", "hostNetwork"): "eth0,eth1",
    ("gke", "multiNetwork"): "eth0",
    ("gce", ""): "enp0s19,enp192s20",
}
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


def socket_ifname(platform: str, pod_networking: str) -> str:
    """NCCL_SOCKET_IFNAME for where the runner runs; "" where the settings do not say (NCCL picks)."""
    return SOCKET_IFNAMES.get((platform, pod_networking if platform == "gke" else ""), "")


def rdma_devices(ib_dir: Path) -> list[str]:
    """The RDMA devices this process sees (the kernel's /sys/class/infiniband)."""
    try:
        return sorted(p.name for p in ib_dir.iterdir())
    except OSError:
        return []


def build_env(
    base: dict[str, str],
    env_file: str | None,
    *,
    platform: str = "",
    pod_networking: str = "",
) -> tuple[dict[str, str], list[str]]:
    """The tests' environment (no gIB settings: gib_env adds them for the RDMA tests) and a note for each decision."""
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
    ifname = socket_ifname(platform, pod_networking)
    if ifname:
        env.setdefault("NCCL_SOCKET_IFNAME", ifname)
        notes.append(f"NCCL_SOCKET_IFNAME={env['NCCL_SOCKET_IFNAME']} ({platform} {pod_networking}".rstrip() + ")")
    env["PYTHONUNBUFFERED"] = "1"
    return env, notes


def gib_env(
    env: dict[str, str], gib_dir: str, devices: list[str], *, nccl_gib: bool = True
) -> tuple[dict[str, str] | None, str]:
    """The environment of a test whose traffic crosses the RDMA NICs, with Google's gIB NCCL settings, or None
    and why not. NCCL_NET=<name> makes NCCL take only the net plugin of that name, and a plugin whose devices()
    reports 0 devices is disabled: with no RDMA device gIB finds none and the communicator's init fails ("Failed to
    initialize any NET plugin"; NVIDIA/nccl v2.27.5-1 src/init.cc envConfigOverride, src/plugin/net.cc
    ncclNetPluginInit / ncclNetPluginAssignToComm / ncclNetInit). So gIB only where this process sees RDMA devices
    and the plugin; intranode (NVLink) never gets it."""
    if not nccl_gib:
        return None, "ncclGib is off: no gIB NCCL settings; NCCL picks its own transport"
    if not gib_plugin_present(gib_dir):
        return None, f"no gIB NCCL plugin in {gib_dir}: NCCL picks its own transport"
    if not devices:
        return None, (
            f"gIB NCCL plugin in {gib_dir} but no RDMA device here: no NCCL_NET=gIB (with no device gIB reports "
            "0 and NCCL's init fails); NCCL picks its own transport"
        )
    out = dict(env)
    for key, value in GIB_NCCL_ENV.items():
        out.setdefault(key, value)
    tuner = Path(gib_dir) / GIB_TUNER_CONFIG
    if tuner.is_file():
        out.setdefault("NCCL_TUNER_CONFIG_PATH", str(tuner))
    lib = str(Path(gib_dir) / "lib64")
    paths = [p for p in out.get("LD_LIBRARY_PATH", "").split(":") if p]
    if lib not in paths:
        out["LD_LIBRARY_PATH"] = ":".join([*paths, lib])
    return out, (
        f"gIB NCCL plugin found in {gib_dir} and {len(devices)} RDMA device(s): NCCL_NET=gIB and Google's A4 "
        "NCCL settings for the RDMA tests"
    )


# -- DeepEP V2's Gin (NVIDIA/nccl 5067397c net_ib/gin.cc:283, gin_host_gdaki.cc:511, plugin/gin.cc:158) --------

GIN_TESTS = ("elastic",)  # ElasticBuffer opens Gin over the NICs even on one node
TYPES = {2: "GIN_PROXY", 3: "GIN_GDAKI", 4: "GIN_GPI"}
RE_GIN = re.compile(r"NCCL INFO GIN/Plugin: Assigned plugin (\S+) type (\d+) to comm")


def traffic_class(env: dict[str, str], requested: int | None = None) -> tuple[int, str]:
    """NCCL_GIN_IB_TC, else NCCL_IB_TC (-1: unset), else the caller's class (DeepEP's sl_idx), else 0; and which."""
    for name in ("NCCL_GIN_IB_TC", "NCCL_IB_TC"):
        if env.get(name, "-1").strip() != "-1":
            return int(env[name]), name
    return (0, "NCCL's default") if requested is None else (requested, "ginTrafficClass (the caller's)")


def gin_env(env: dict[str, str]) -> tuple[dict[str, str], str]:
    """On the RDMA tests' env: Gin's own class = gIB's NCCL_IB_TC (Google's 52); NCCL's INFO lines name the Gin."""
    out = {"NCCL_DEBUG": "INFO", "NCCL_DEBUG_SUBSYS": "INIT,NET"} | env
    if "NCCL_IB_TC" in out:
        out.setdefault("NCCL_GIN_IB_TC", out["NCCL_IB_TC"])
    tc, source = traffic_class(out)
    return out, f"elastic: NCCL's Gin traffic class {tc} (from {source})"


def gin_of(lines: list[str]) -> dict[str, object]:
    """The Gin transport NCCL assigned most (plugin, type, communicators), or plugin None."""
    seen = [(m[1], int(m[2])) for line in lines if (m := RE_GIN.search(line))]
    if not seen:
        return {"plugin": None, "detail": "no 'GIN/Plugin: Assigned plugin' line"}
    plugin, type_ = max(set(seen), key=seen.count)
    return {"plugin": plugin, "type": type_, "typeName": TYPES.get(type_, "?"), "comms": seen.count((plugin, type_))}


# -- one test's process ---------------------------------------------------------------------------


def stream_process(
    argv: list[str], env: dict[str, str], cwd: str, timeout_s: float, sinks: list[TextIO]
) -> tuple[int, bool]:
    """Runs argv in its own process group, copies its output line by line to every sink as it comes.

    Returns (exit code, timed out). On timeout the whole group (the test's spawned ranks too) is
    sent SIGTERM, then SIGKILL.
    """
    proc = subprocess.Popen(
        argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True
    )
    timed_out = threading.Event()

    def kill() -> None:
        timed_out.set()
        for sig, wait in ((signal.SIGTERM, 15), (signal.SIGKILL, 0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                return
            deadline = time.monotonic() + wait
            while proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.2)
            if proc.poll() is not None:
                return

    timer = threading.Timer(timeout_s, kill)
    timer.daemon = True
    timer.start()
    try:
        assert proc.stdout is not None
        for raw in iter(proc.stdout.readline, b""):
            text = raw.decode("utf-8", errors="replace")
            for sink in sinks:
                sink.write(text)
                sink.flush()
        rc = proc.wait()
    finally:
        timer.cancel()
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    # Stray ranks that outlived the parent would hold the GPUs for the next test.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    return rc, timed_out.is_set()


# -- RDMA traffic per NIC (troubleshooting T10) ----------------------------------------------------

IB_SYSFS = "/sys/class/infiniband"


def nic_tx_bytes(ib_dir: Path) -> dict[str, int]:
    """port_xmit_data of every HCA port, in bytes (the counter counts 4-byte words)."""
    sent: dict[str, int] = {}
    for counter in sorted(ib_dir.glob("*/ports/*/counters/port_xmit_data")):
        try:
            sent[f"{counter.parents[3].name}/{counter.parents[1].name}"] = int(counter.read_text().strip()) * 4
        except (OSError, ValueError):
            continue
    return sent


def nic_record(ib_dir: Path, before: dict[str, int], after: dict[str, int], expected: int) -> dict[str, Any]:
    """What the runner's end marker says of the NICs: the bytes each sent during the test, or why none were
    read. parse_records.nic_verdict judges it (field report R1's check: "all 8 NICs should show traffic");
    no counters is "not run" there, never a pass."""
    if not after:
        return {"error": f"no readable port_xmit_data under {ib_dir}/*/ports/*/counters", "expected": expected}
    return {"sent": {k: max(v - before.get(k, 0), 0) for k, v in after.items()}, "expected": expected}

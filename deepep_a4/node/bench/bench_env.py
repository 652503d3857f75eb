"""The tests' environment (the installer's env file, the gIB NCCL settings), the runner's log line, one
test's process, and the evidence recorded around a test: the RDMA traffic per NIC (docs/troubleshooting.md
T10), the transport settings and what ran (versions, commits). Stdlib only: shipped next to run_bench.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import signal
import socket
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, TextIO

DEEPEP_SCRIPTS = {
    "intranode": "test_intranode.py",
    "low-latency": "test_low_latency.py",
    "internode": "test_internode.py",
}
DEFAULT_PORT = 8361  # DeepEP's tests/utils.py default
# Google's NCCL settings for gIB on A4 (what its set_nccl_env.sh sets), as GoogleCloudPlatform/cluster-toolkit
# spells them out in examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml (1047080375afb), NCCL_NET=gIB
# with them; used only where the gIB plugin is installed and deepep-a4:ncclGib is on. GID index 3 is RoCE v2.
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
# The gIB plugin's version: the GKE DaemonSet writes its image here (program/gke_gib.py); on GCE dpkg knows.
GIB_VERSION_FILE = "deepep-a4-gib-version"
GIB_PACKAGE = "nccl-gib"
# The NCCL Google pairs with gIB 1.1: libnccl2 2.27.5 beside nccl-gib 1.1.0 in cluster-toolkit's A4 Slurm
# blueprint (examples/machine-learning/a4-highgpu-8g/a4high-slurm-blueprint.yaml, 1047080375afb).
GIB_PAIRED_NCCL = "2.27"
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


def build_env(
    base: dict[str, str],
    env_file: str | None,
    gib_dir: str,
    *,
    nccl_gib: bool = True,
    platform: str = "",
    pod_networking: str = "",
) -> tuple[dict[str, str], list[str]]:
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
    ifname = socket_ifname(platform, pod_networking)
    if ifname:
        env.setdefault("NCCL_SOCKET_IFNAME", ifname)
        notes.append(f"NCCL_SOCKET_IFNAME={env['NCCL_SOCKET_IFNAME']} ({platform} {pod_networking}".rstrip() + ")")
    if not nccl_gib:
        notes.append("ncclGib is off: no gIB NCCL settings; NCCL picks its own transport")
    elif gib_plugin_present(gib_dir):
        for key, value in GIB_NCCL_ENV.items():
            env.setdefault(key, value)
        tuner = Path(gib_dir) / GIB_TUNER_CONFIG
        if tuner.is_file():
            env.setdefault("NCCL_TUNER_CONFIG_PATH", str(tuner))
        lib = str(Path(gib_dir) / "lib64")
        paths = [p for p in env.get("LD_LIBRARY_PATH", "").split(":") if p]
        if lib not in paths:
            env["LD_LIBRARY_PATH"] = ":".join([*paths, lib])
        notes.append(f"gIB NCCL plugin found in {gib_dir}: NCCL_NET=gIB and Google's A4 NCCL settings")
    else:
        notes.append(f"no gIB NCCL plugin in {gib_dir}: NCCL picks its own transport")
    env["PYTHONUNBUFFERED"] = "1"
    return env, notes


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


# -- what ran: the transport settings and the versions of one node --------------------------------------

# The NVSHMEM/DeepEP settings a test ran with, recorded in its begin marker: the transport the log names.
TRANSPORT_VARS = (
    "NVSHMEM_REMOTE_TRANSPORT",
    "NVSHMEM_IB_ENABLE_IBGDA",
    "NVSHMEM_IBGDA_NIC_HANDLER",
    "NVSHMEM_HCA_PREFIX",
    "NVSHMEM_IB_GID_INDEX",
    "NVSHMEM_IB_TRAFFIC_CLASS",
    "NVSHMEM_DISABLE_P2P",
    "DEEP_EP_DEVICE_TO_HCA_MAPPING",
    "NCCL_NET",
)
# What the installer was asked for (its rendered config.sh, deepep_a4/program/installer.py) -> record key.
CONFIG_VERSIONS = {
    "DEEPEP_STACK": "stack",
    "DEEPEP_REF": "deepep_ref",
    "DEEPEP_COMMIT": "deepep_commit",
    "DEEPEP_PR466": "deepep_pr466",
    "NVSHMEM_VERSION": "nvshmem",
    "NVSHMEM_SOURCE": "nvshmem_source",
    "TORCH_VERSION": "torch",
    "CUDA_VERSION": "cuda",
    "NVIDIA_DRIVER_VERSION": "driver",
    "DOCA_OFED_VERSION": "doca_ofed",
    "GDRCOPY_VERSION": "gdrcopy",
    "INSTALLER_HASH": "installer_hash",
}
UNKNOWN = "unknown"
IMAGE_VAR = "DEEPEP_IMAGE"  # = node/names.py IMAGE_VAR: the boot image where the machine knows it (GCE)
# Every key a "ran" record has, "unknown" where nothing on the node said (the report shows them all).
RAN_KEYS = (
    "host",
    "kernel",
    *CONFIG_VERSIONS.values(),
    "deepep_checkout",
    "nccl",
    "install_updated",
    "verify_rdma",
    "image",
    "gib",
    "nccl_pairing",
)
_PACKAGES = (  # asked of the tests' Python: the installed PyTorch and NCCL, and the NCCL PyTorch loads
    "import importlib.metadata as m, json\n"
    "out = {}\n"
    "for d in ('torch', 'nvidia-nccl-cu13', 'nvidia-nccl-cu12'):\n"
    "    try: out[d] = m.version(d)\n"
    "    except m.PackageNotFoundError: pass\n"
    "try:\n"
    "    import torch\n"
    "    v = torch.cuda.nccl.version()\n"
    "    v = v if isinstance(v, tuple) else (v // 10000, v // 100 % 100, v % 100)\n"
    "    out['loaded'] = '.'.join(map(str, v))\n"
    "except Exception:\n"
    "    pass\n"
    "print(json.dumps(out))\n"
)


def gib_version(gib_dir: Path) -> str:
    """The gIB plugin in `gib_dir`: the image the GKE DaemonSet wrote there, else dpkg's nccl-gib (GCE)."""
    try:
        return (gib_dir / GIB_VERSION_FILE).read_text().strip()
    except OSError:
        pass
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f=${Status}|${Version}", GIB_PACKAGE],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""
    status, _, version = out.partition("|")
    return f"{GIB_PACKAGE} {version}" if status == "install ok installed" and version else ""


def nccl_pairing(nccl: str, gib: str) -> str:
    """Whether the NCCL that ran is the one Google pairs with gIB (docs/conformance.md, "NCCL itself")."""
    if not gib:
        return "no gIB plugin: nothing to pair"
    if not nccl:
        return f"gIB {gib} with an NCCL nobody reported"
    if nccl == GIB_PAIRED_NCCL or nccl.startswith(GIB_PAIRED_NCCL + "."):
        return f"NCCL {nccl} with gIB {gib}: the NCCL {GIB_PAIRED_NCCL} Google pairs with gIB 1.1"
    return f"mismatch: NCCL {nccl} with gIB {gib}; Google pairs gIB 1.1 with NCCL {GIB_PAIRED_NCCL}"


def transport_of(env: dict[str, str]) -> dict[str, str]:
    return {k: env[k] for k in TRANSPORT_VARS if env.get(k)}


def read_config_sh(path: Path) -> dict[str, str]:
    """NAME=value lines of the installer's config.sh (values as shlex-quoted there); {} when unreadable."""
    out: dict[str, str] = {}
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return out
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and name in CONFIG_VERSIONS:
            try:
                words = shlex.split(value)
            except ValueError:
                continue
            out[CONFIG_VERSIONS[name]] = words[0] if words else ""
    if "deepep_pr466" in out:  # a bash flag there
        out["deepep_pr466"] = {"1": "on", "0": "off"}.get(out["deepep_pr466"], out["deepep_pr466"])
    return out


def git_head(checkout: Path) -> str:
    """The commit a git checkout is at, read from .git without git (the benchmark image has none)."""
    git = checkout / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        if (git / ref).is_file():
            return (git / ref).read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except OSError:
        pass
    return UNKNOWN


def what_ran(
    env: dict[str, str],
    python: str,
    deepep_dir: Path | None,
    proc_root: Path = Path("/proc"),
    gib_dir: Path | None = None,
) -> dict[str, str]:
    """Versions, commits and install state of this node, for the result: the installer's config.sh and
    status.json under DEEPEP_ROOT (the env file exports it), the driver the kernel loaded, the DeepEP
    checkout's commit, the tests' Python packages and the NCCL PyTorch loads, and the gIB plugin NCCL was
    given (env NCCL_NET=gIB) with how that pair compares to Google's. Every RAN_KEYS key, "unknown" where
    nothing said."""
    ran: dict[str, str] = {"host": socket.gethostname(), "kernel": os.uname().release}
    root = Path(env["DEEPEP_ROOT"]) if env.get("DEEPEP_ROOT") else None
    if root is not None:
        ran.update(read_config_sh(root / "installer" / "config.sh"))
        try:
            status = json.loads((root / "state" / "status.json").read_text())
            ran["installer_hash"] = str(status.get("installerHash") or ran.get("installer_hash", ""))
            ran["install_updated"] = str(status.get("updated") or "")
            ran["verify_rdma"] = str(((status.get("phases") or {}).get("verify") or {}).get("note") or "")
        except (OSError, ValueError, AttributeError):
            pass
    try:  # "NVRM version: NVIDIA UNIX [Open ]Kernel Module [for x86_64]  580.126.09  Release Build ..."
        text = (proc_root / "driver" / "nvidia" / "version").read_text()
        if m := re.search(r"Kernel Module\b.*?\s(\d+\.\d+(?:\.\d+)?)\s", text):
            ran["driver"] = m[1]
    except OSError:
        pass
    if deepep_dir is not None:
        ran["deepep_checkout"] = git_head(deepep_dir)
    try:
        out = subprocess.run(
            [python, "-c", _PACKAGES], env=env, capture_output=True, text=True, timeout=60, check=False
        )
        pkgs = json.loads(out.stdout or "{}")
        ran["torch"] = pkgs.get("torch") or ran.get("torch", "")
        # The NCCL PyTorch loads; the wheel's version where torch could not say.
        ran["nccl"] = pkgs.get("loaded") or pkgs.get("nvidia-nccl-cu13") or pkgs.get("nvidia-nccl-cu12") or ""
    except (OSError, ValueError, subprocess.TimeoutExpired):
        pass
    # A GCE VM is told its boot image (the stage sets IMAGE_VAR). A container cannot see its image digest: on
    # GKE "image" stays unknown here and the report takes it from the pod's status (imageID).
    ran["image"] = env.get(IMAGE_VAR, "")
    gib = ""
    if env.get("NCCL_NET") == GIB_NCCL_ENV["NCCL_NET"]:
        gib = (gib_version(gib_dir) if gib_dir is not None else "") or "of unknown version"
        ran["gib"] = gib
    else:
        ran["gib"] = "off (NCCL's own transport)"
    ran["nccl_pairing"] = nccl_pairing(ran.get("nccl", ""), gib)
    return {k: (ran.get(k) or UNKNOWN) for k in RAN_KEYS}

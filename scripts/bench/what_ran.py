"""What ran on one node, for every result: the transport settings the tests got, the versions and commits
the installer recorded, the driver the kernel loaded, the NCCL PyTorch loads and the gIB plugin beside it.
Stdlib only: shipped next to run_bench.py."""

from __future__ import annotations

import json
import os
import re
import shlex
import socket
import subprocess
from pathlib import Path

try:  # in the package (tests) or flat in the folder the files were shipped to (pods, VMs)
    from scripts.bench.bench_env import GIB_NCCL_ENV
except ImportError:  # pragma: no cover - on a node the script's own folder is sys.path[0]
    from bench_env import GIB_NCCL_ENV  # type: ignore[no-redef]

# The gIB plugin's version: the GKE DaemonSet writes its image here (components/gke/gib.py); on GCE dpkg knows.
GIB_VERSION_FILE = "deepep-a4-gib-version"
GIB_PACKAGE = "nccl-gib"
# The NCCL Google pairs with gIB 1.1: libnccl2 2.27.5 beside nccl-gib 1.1.0 in cluster-toolkit's A4 Slurm
# blueprint (examples/machine-learning/a4-highgpu-8g/a4high-slurm-blueprint.yaml, 1047080375afb).
GIB_PAIRED_NCCL = "2.27"

# The NVSHMEM/DeepEP settings a test ran with, recorded in its begin marker: the transport the log names.
TRANSPORT_VARS = (
    "NVSHMEM_REMOTE_TRANSPORT",
    "NVSHMEM_IB_ENABLE_IBGDA",
    "NVSHMEM_IBGDA_NIC_HANDLER",
    "NVSHMEM_IBGDA_FORCE_NIC_BUF_MEMTYPE",
    "NVSHMEM_HCA_PREFIX",
    "NVSHMEM_IB_GID_INDEX",
    "NVSHMEM_IB_TRAFFIC_CLASS",
    "NVSHMEM_DISABLE_P2P",
    "NVSHMEM_DEBUG",
    "NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME",
    "DEEP_EP_DEVICE_TO_HCA_MAPPING",
    "NCCL_NET",
)
# What the installer was asked for (its rendered config.sh, components/node/installer.py) -> record key.
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
IMAGE_VAR = "DEEPEP_IMAGE"  # = scripts/names.py IMAGE_VAR: the boot image where the machine knows it (GCE)
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

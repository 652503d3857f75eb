"""What each GKE container may do, and the security scanner's exceptions, each with its reason.

One place decides the privileges of every container the program runs on a node (docs/security.md tells
the same for readers):

- the installer's init container is privileged (it loads kernel modules on the host);
- with `gkeGpuDriver: cos-installer`, Google's COS driver installer's init container is privileged with the
  host's PID and network namespaces, as Google's manifest has it (it builds and loads the NVIDIA module;
  cos_driver.py, COS_DRIVER_SKIPS);
- the gIB NCCL plugin's init container (gke_gib.py) is root with file capabilities only (CHOWN,
  DAC_OVERRIDE, FOWNER: it copies Google's plugin into one hostPath folder), not privileged;
- a benchmark that needs no RDMA runs as an unprivileged user with every capability dropped;
- a benchmark over RDMA (NVSHMEM registers gigabytes with the NICs) keeps `IPC_LOCK`, as root, because
  Kubernetes grants no ambient capabilities: a non-root process would not hold it;
- with `podNetworking: hostNetwork` (the default: what Google's A4 recipes run, gpu-recipes'
  `hostNetwork: true` + `privileged: true`, and field report R2) the RDMA benchmark is **privileged**:
  on the host network no device plugin allocates `/dev/infiniband/uverbs*` and `rdma_cm` to a container,
  and a container's device cgroup admits them only when it is privileged. So that pod can also reach
  every host device and the node's network stack; it is the price of the one path proven on A4 with
  Ubuntu and DOCA-OFED. The non-RDMA test (intranode) stays unprivileged and on the pod network even there;
- with `podNetworking: multiNetwork` GKE's RDMA networks move the NICs into the pod and hand it their
  devices, so the RDMA benchmark stays unprivileged (root with `IPC_LOCK` only); unproven on Ubuntu with
  DOCA-OFED: every Google multi-network A4 example runs on COS;
- with `nodeProfile: supported` (COS, GKE's driver) the RDMA benchmark is privileged root whatever the pod
  networking, as the peers that run DeepEP on GKE B200 run it (llm-d): with GKE's driver there is no
  PeerMappingOverride, and a root process may map the NIC for GPU-initiated IBGDA without it, else NVSHMEM
  3.4.5+ falls back to CPU-assisted IBGDA (troubleshooting T09); the staging init container is not privileged
  (components/gke/stage.py).

Whatever the scanner (checkov, ci/gates/security.py) still flags is suppressed on the object
itself, as `checkov.io/skipN: CHECK_ID=reason` annotations built here, so a reason travels with the
manifest and the scan shows it.
"""

from __future__ import annotations

from typing import Any

from components.config import StackConfig

# A high UID/GID of no account on the node image: files it writes are nobody's.
BENCH_UID = 10001
POD_SECURITY_CONTEXT = {"seccomp_profile": {"type": "RuntimeDefault"}}

UNPRIVILEGED = {
    "privileged": False,
    "allow_privilege_escalation": False,
    "read_only_root_filesystem": True,
    "capabilities": {"drop": ["ALL"]},
}

_PRIVILEGED_INSTALLER = (
    "the installer loads kernel modules (DOCA-OFED, the NVIDIA driver, gdrdrv), sets driver options and may "
    "reboot the node: it nsenters PID 1 as root"
)
_IPC_LOCK = "NVSHMEM and DeepEP register GBs with the RDMA NICs (ibv_reg_mr): IPC_LOCK lifts RLIMIT_MEMLOCK"
_ROOT_FOR_IPC_LOCK = "IPC_LOCK takes effect only for uid 0: Kubernetes grants a non-root process no capabilities"
_HOST_NETWORK = (
    "an RDMA test with podNetworking hostNetwork: the RDMA NICs are the host's, reached on its network only, "
    "and no device plugin hands /dev/infiniband to a host-network pod"
)
_STAGED_ROOT = (
    "nodeProfile supported: root and privileged, so the GPU may map the NIC for IBGDA with GKE's driver (no "
    "PeerMappingOverride there; troubleshooting T09)"
)
_CPU_LIMIT = "a CPU limit throttles the GPU proxy threads and skews the benchmark; the pod owns the node's 8 GPUs"

INSTALLER_SKIPS = {
    "CKV_K8S_16": _PRIVILEGED_INSTALLER,
    "CKV_K8S_17": "the installer nsenters PID 1 to install on the host, which needs the host PID namespace",
    "CKV_K8S_20": _PRIVILEGED_INSTALLER,
    "CKV_K8S_22": "the init container writes the host through /host; the main container is read-only",
    "CKV_K8S_23": _PRIVILEGED_INSTALLER,
    "CKV_K8S_28": _PRIVILEGED_INSTALLER,
    "CKV_K8S_37": _PRIVILEGED_INSTALLER,
    "CKV_K8S_40": _PRIVILEGED_INSTALLER,
    "CKV_K8S_11": "the host build (nvcc, make -j) runs in this container's cgroup: a CPU limit stretches it",
    "CKV_K8S_13": "the host build (NVSHMEM, DeepEP) runs in this container's cgroup: a memory limit OOM-kills it",
    "CKV_K8S_8": "the main container only sleeps; readiness carries the install state, a restart changes nothing",
}


# The gIB plugin's init container: root, because the host folder it fills is root's; the file capabilities
# let `cp` and `rm` act on files of any owner or mode the image ships; nothing else.
GIB_INIT_SECURITY = {
    "privileged": False,
    "allow_privilege_escalation": False,
    "run_as_user": 0,
    "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE", "FOWNER"]},
}
_GIB_ROOT = "the gIB init container writes the root-owned host folder /home/kubernetes/bin/gib: root, file caps only"
_GIB_PULL = "IfNotPresent with the image pinned by digest: a node that restarts needs no registry for its plugin"
GIB_SKIPS = {
    "CKV_K8S_23": _GIB_ROOT,
    "CKV_K8S_40": _GIB_ROOT,
    "CKV_K8S_37": _GIB_ROOT,
    "CKV_K8S_25": "CHOWN, DAC_OVERRIDE, FOWNER only: Google's container_entry.sh and cp act on files of any owner "
    "or mode the image ships",
    "CKV_K8S_22": "Google's container_entry.sh prepares the plugin inside the image: its root file system is written",
    "CKV_K8S_15": _GIB_PULL,
    "CKV_K8S_8": "the main container is GKE's pause: the copy is done before it starts, nothing can go live or dead",
    "CKV_K8S_9": "the main container is GKE's pause: Ready means the init container's copy finished",
}


def image(cfg: StackConfig) -> str:
    return cfg.gke.container_image


def tag_skips(key: str, ref: str, what: str = "a tag") -> dict[str, str]:
    """A tag (not a digest) is the stack's choice: the scan says which key pins it."""
    if "@sha256:" in ref:
        return {}
    reason = f"{key} {ref} is {what}: pin it in the stack as name@sha256:<digest>"
    return {"CKV_K8S_43": reason, "CKV_K8S_15": reason}


def image_skips(cfg: StackConfig) -> dict[str, str]:
    return tag_skips("containerImage", image(cfg))


def bench_needs_rdma(test: str) -> bool:
    """Internode crosses nodes over RDMA; low-latency runs NVSHMEM's IBGDA transport, which opens the NICs
    and registers its heap with them even within one node. Intranode is NVLink and CUDA IPC only. DeepEP V2's
    elastic test opens NCCL's Gin over the NICs at ElasticBuffer creation even on one node (csrc/kernels/backend/
    nccl.cu asserts a Gin type unless EP_DISABLE_GIN), so its pod sees the NICs as well."""
    return test in ("internode", "low-latency", "elastic")


def bench_container_security(cfg: StackConfig, test: str) -> dict[str, Any]:
    if not bench_needs_rdma(test):
        return {**UNPRIVILEGED, "run_as_non_root": True, "run_as_user": BENCH_UID, "run_as_group": BENCH_UID}
    if cfg.staged:
        return {
            "privileged": True,
            "run_as_user": 0,
            "read_only_root_filesystem": True,
            "capabilities": {"add": ["IPC_LOCK"]},
        }
    if cfg.gke.pod_networking == "hostNetwork":
        # Privileged (the RDMA devices), yet its root file system stays read-only: it writes only emptyDirs.
        return {"privileged": True, "read_only_root_filesystem": True, "capabilities": {"add": ["IPC_LOCK"]}}
    return {**UNPRIVILEGED, "run_as_user": 0, "capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}}


def bench_pod_security(test: str) -> dict[str, Any]:
    ctx: dict[str, Any] = dict(POD_SECURITY_CONTEXT)
    if not bench_needs_rdma(test):
        ctx["fs_group"] = BENCH_UID  # the results emptyDir is writable by the benchmark user
    return ctx


def bench_skips(cfg: StackConfig, test: str) -> dict[str, str]:
    skips = {"CKV_K8S_11": _CPU_LIMIT, **image_skips(cfg)}
    # Only the RDMA tests share the host's network (intranode runs on the pod network: gke_bench.py).
    host_network = cfg.gke.pod_networking == "hostNetwork" and bench_needs_rdma(test)
    if host_network:
        skips["CKV_K8S_19"] = _HOST_NETWORK
    if bench_needs_rdma(test):
        reason = _HOST_NETWORK + ", so only a privileged container opens it" if host_network else _ROOT_FOR_IPC_LOCK
        if cfg.staged:
            reason = _STAGED_ROOT
        skips |= {"CKV_K8S_23": reason, "CKV_K8S_40": reason, "CKV_K8S_37": _IPC_LOCK, "CKV_K8S_25": _IPC_LOCK}
        if host_network or cfg.staged:
            skips |= {"CKV_K8S_16": reason, "CKV_K8S_20": reason, "CKV_K8S_28": reason}
    return skips


# `gkeGpuDriver: cos-installer` (cos_driver.py): Google's COS driver installer as Google ships it, privileged with
# the host's PID and network namespaces and `/`: it builds and loads the NVIDIA kernel module.
_COS_DRIVER = "Google's COS driver installer (daemonset-preloaded.yaml) compiles and loads the NVIDIA kernel module"
_COS_PRELOADED = "GKE preloads cos-nvidia-installer:fixed on each node for its COS image: never pulled, no digest"
COS_DRIVER_SKIPS = {
    "CKV_K8S_16": _COS_DRIVER,
    "CKV_K8S_17": _COS_DRIVER + " (Google's manifest: hostPID)",
    "CKV_K8S_19": _COS_DRIVER + " (Google's manifest: hostNetwork)",
    "CKV_K8S_20": _COS_DRIVER,
    "CKV_K8S_22": _COS_DRIVER,
    "CKV_K8S_23": _COS_DRIVER,
    "CKV_K8S_28": _COS_DRIVER,
    "CKV_K8S_37": _COS_DRIVER,
    "CKV_K8S_40": _COS_DRIVER,
    "CKV_K8S_11": "a driver build compiles in this container's cgroup: a CPU limit stretches it (Google sets none)",
    "CKV_K8S_13": "a driver build compiles in this container's cgroup: a memory limit OOM-kills it (Google sets none)",
    "CKV_K8S_12": "Google's manifest requests CPU only; the compile's memory varies with the kernel",
    "CKV_K8S_10": "Google's manifest requests 150m CPU for the installer, as here",
    "CKV_K8S_43": _COS_PRELOADED,
    "CKV_K8S_14": _COS_PRELOADED,
    "CKV_K8S_15": _COS_PRELOADED,
    "CKV_K8S_8": "the main container is GKE's pause: the install is done before it starts",
    "CKV_K8S_9": "the main container is GKE's pause: Ready means the init container's install finished",
}


def skip_annotations(skips: dict[str, str]) -> dict[str, str]:
    """checkov's in-manifest suppressions: `checkov.io/skipN: CHECK_ID=reason` on the object's metadata.
    checkov splits the value at every "=" and fails on a reason that holds one: refused here, at plan time."""
    bad = [check for check, reason in skips.items() if "=" in reason]
    if bad:
        raise ValueError(f"checkov skip reasons must not contain '=' (checkov splits on it): {', '.join(bad)}")
    return {f"checkov.io/skip{i}": f"{check}={reason}" for i, (check, reason) in enumerate(sorted(skips.items()), 1)}

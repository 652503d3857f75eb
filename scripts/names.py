"""Names both sides agree on: paths on the node, ports, exit codes, labels, status states.

Stdlib only and shipped to the node next to the runner, so the Pulumi program, the workstation tools and
the node's Python import the same values; the bash installer gets them through the rendered config.sh.
Change a value here and every side moves with it.
"""

from __future__ import annotations

PROJECT = "deepep-a4"

# -- install roots on the node, per platform ---------------------------------------------------------
# GKE: under /home/kubernetes/bin/nvidia, which GKE's device plugin mounts into GPU containers as
# /usr/local/nvidia; GCE: a plain folder on the boot disk.
GKE_HOST_NVIDIA = "/home/kubernetes/bin/nvidia"
GKE_PLUGIN_NVIDIA = "/usr/local/nvidia"
INSTALL_ROOTS = {"gke": f"{GKE_HOST_NVIDIA}/deepep", "gce": "/opt/deepep"}
# The supported profile stages the user space here. On COS /home and /var are noexec
# (cloud.google.com/container-optimized-os/docs/concepts/disks-and-filesystem); /home/kubernetes/bin is exec
# because the node bootstrap bind-mounts it onto itself and remounts it exec (kubernetes cluster/gce/gci/node.yaml,
# kube-node-installation.service), and GKE's own installers put binaries there (the driver under .../nvidia, gIB
# under .../gib). Pods mount it at the same path, so RPATHs and libibverbs' absolute provider paths hold in both.
STAGED_ROOTS = {"gke": "/home/kubernetes/bin/deepep", "gce": "/opt/deepep"}


def install_paths(platform: str, staged: bool = False) -> dict[str, str]:
    """Where the installer puts its state, env file, DeepEP checkout and Python on `platform`'s host."""
    root = (STAGED_ROOTS if staged else INSTALL_ROOTS)[platform]
    return {
        "root": root,
        "state": f"{root}/state",
        "status": f"{root}/state/status.json",
        "env": f"{root}/unified-env.sh",
        "deepep": f"{root}/DeepEP",
        "python": f"{root}/venv/bin/python",
        "installer": f"{root}/installer",
    }


# -- exit codes ------------------------------------------------------------------------------------
EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
# The benchmark ran and nothing failed, but a check had no evidence (NOT PROVEN): a retry would not add it.
EXIT_UNPROVEN = 3
# The installer scheduled a reboot: run it again after the boot (sysexits EX_TEMPFAIL).
EXIT_REBOOT = 75

# -- benchmark processes ---------------------------------------------------------------------------
# The boot image, handed to the runner where the machine knows it (GCE: the VM's metadata); bench_env.py
# keeps its own copy (the runner ships without this file).
IMAGE_VAR = "DEEPEP_IMAGE"
MASTER_PORT = 29500  # torch.distributed rendezvous of the internode test (rank 0's host)

# -- GCE VM: startup stage files and the states it reports in guest attributes ----------------------
GCE_DIR = f"{INSTALL_ROOTS['gce']}/gce"
GCE_RESULTS_DIR = "/var/lib/deepep-gce/results"
GCE_STARTUP_LOG = "/var/log/deepep-gce/startup.log"
GCE_STATE_INSTALLING = "installing"
GCE_STATE_INSTALL_FAILED = "install-failed"
GCE_STATE_BENCHMARKING = "benchmarking"
GCE_STATE_WAITING = "waiting-for-peers"
GCE_STATE_INTERNODE = "internode"
GCE_STATE_DONE = "done"
GCE_STATE_FAILED = "failed"
GCE_INSTALLED_STATES = (
    GCE_STATE_BENCHMARKING,
    GCE_STATE_WAITING,
    GCE_STATE_INTERNODE,
    GCE_STATE_DONE,
    GCE_STATE_FAILED,
)
GCE_FINISHED_STATES = (GCE_STATE_DONE, GCE_STATE_FAILED, GCE_STATE_INSTALL_FAILED)

# -- result status of one test run ----------------------------------------------------------------
RESULT_PASSED = "passed"
RESULT_FAILED = "failed"
RESULT_NOT_RUN = "not run"

# -- Kubernetes names and labels (GKE) --------------------------------------------------------------
NAMESPACE = PROJECT
PART_OF_LABEL = "app.kubernetes.io/part-of"
COMPONENT_LABEL = "app.kubernetes.io/component"
INSTALLER_NAME = "deepep-installer"
BENCH_COMPONENT = "benchmark"
BENCH_SELECTOR = f"{PART_OF_LABEL}={PROJECT},{COMPONENT_LABEL}={BENCH_COMPONENT}"
BENCH_CONTAINER = "bench"
TEST_LABEL = f"{PROJECT}/test"
INSTALLED_LABEL = f"{PROJECT}/installed"
VERSIONS_ANNOTATION = f"{PROJECT}/versions-hash"
NODE_POOL_LABEL_KEY = f"{PROJECT}/node-pool"
NODE_POOL_LABEL_VALUE = "a4"
# GKE taints GPU nodes with this (NoSchedule); the A4 pool declares it, the installer and bench pods tolerate it.
GPU_TAINT_KEY = "nvidia.com/gpu"
GPU_TAINT_VALUE = "present"
SYSTEM_POOL_NAME = "system"
SYSTEM_MACHINE_TYPE = "e2-standard-4"
SYSTEM_NODE_COUNT = 1

"""Names, labels, host paths and sizes of the Kubernetes objects of the GKE workloads, and a few helpers.

Names both sides agree on (labels the tools select by, install paths, exit codes) come from
scripts/names.py; what only the Kubernetes objects use is here.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.options import depends_of
from scripts import names

__all__ = ["depends_of"]  # re-exported for the workloads modules

NAMESPACE = names.NAMESPACE
PART_OF = {names.PART_OF_LABEL: names.PROJECT, "app.kubernetes.io/managed-by": "pulumi"}
INSTALLER_NAME = names.INSTALLER_NAME
INSTALLER_LABELS = {**PART_OF, "app.kubernetes.io/name": INSTALLER_NAME}


def installer_ksa(stack: str) -> str:
    """The installer's Kubernetes service account, named for the stack. Its Workload Identity principal
    (`.../subject/ns/NAMESPACE/sa/KSA`, components/gke/staging_access.py) is then one stack's: a principal names
    the project's pool, namespace and KSA only, not the cluster, so with one fixed name any cluster of the
    project with that namespace and KSA would get the store grant. The stack name lowered to a DNS label
    (Kubernetes object names: RFC 1123 subdomains), cut to fit 63 characters, plus 6 hex of its sha256 so
    `a_b` and `a-b` (or two long names) stay apart."""
    slug = re.sub(r"[^a-z0-9-]+", "-", stack.lower()).strip("-")[:39].rstrip("-") or "stack"
    return f"{INSTALLER_NAME}-{slug}-{hashlib.sha256(stack.encode()).hexdigest()[:6]}"


BENCH_COMPONENT = names.BENCH_COMPONENT
BENCH_LABELS = {**PART_OF, names.COMPONENT_LABEL: BENCH_COMPONENT}
BENCH_SELECTOR = names.BENCH_SELECTOR
BENCH_CONTAINER = names.BENCH_CONTAINER
TEST_LABEL = names.TEST_LABEL
INSTALLED_LABEL = names.INSTALLED_LABEL
VERSIONS_ANNOTATION = names.VERSIONS_ANNOTATION
INTERNODE_SERVICE = "deepep-internode"
MASTER_PORT = names.MASTER_PORT
VERBS_PROVIDER_DIR = "/usr/lib/x86_64-linux-gnu/libibverbs"
VERBS_CONFIG_DIR = "/etc/libibverbs.d"
# The env phase writes it (scripts/install/phases/10-env.sh, ship_rdma_core).
VERBS_CONFIG_HOST_DIR = f"{names.INSTALL_ROOTS['gke']}/rdma-core/etc/libibverbs.d"

NODE_SELECTOR = {names.NODE_POOL_LABEL_KEY: names.NODE_POOL_LABEL_VALUE}
GPU_TOLERATION = {
    "key": names.GPU_TAINT_KEY,
    "operator": "Equal",
    "value": names.GPU_TAINT_VALUE,
    "effect": "NoSchedule",
}

# Where the GKE installer puts everything on the host: under /home/kubernetes/bin/nvidia, which GKE's
# device plugin also mounts into GPU containers as /usr/local/nvidia.
HOST_NVIDIA = names.GKE_HOST_NVIDIA
_PATHS = names.install_paths("gke")
INSTALL_ROOT = _PATHS["root"]
STATE_DIR = _PATHS["state"]
STATUS_FILE = _PATHS["status"]
ENV_FILE = _PATHS["env"]
DEEPEP_DIR = _PATHS["deepep"]
DEEPEP_PYTHON = _PATHS["python"]
GPU_PLUGIN_DIR = names.GKE_PLUGIN_NVIDIA
# Google's gIB NCCL plugin on the host, and where a benchmark pod sees it (gke_gib.py): its own folder, never
# the driver's lib64 next to it (troubleshooting T16/T17).
GIB_HOST_DIR = "/home/kubernetes/bin/gib"
GIB_DIR = "/usr/local/gib"
GIB_NAME = "nccl-gib-installer"
GIB_LABELS = {**PART_OF, "app.kubernetes.io/name": GIB_NAME}
# Pulling the plugin image and copying a few files takes a minute; the rest covers the installer's one
# reboot of the node (the gIB pod starts again after it).
GIB_TIMEOUT_SECONDS = 1800
RUNNER_DIR = "/opt/deepep-bench"


def ready_check(state_dir: str) -> str:
    """sh: true once the installer finished on this node with the version set in $VERSIONS_HASH."""
    return (
        f"grep -Eq '\"ready\"[[:space:]]*:[[:space:]]*true' {state_dir}/status.json && "
        f'grep -qx "$VERSIONS_HASH" {state_dir}/installed-hash'
    )


RESULTS_DIR = "/results"

# Container resources. The bench pod owns the node (8 GPUs, 224 vCPUs, ~3.9 TiB): a request that reserves
# room for 8 ranks and their proxy threads, a memory limit far above what a test uses (~10 GiB a rank).
BENCH_RESOURCES = {"requests": {"cpu": "16", "memory": "64Gi"}, "limits": {"memory": "512Gi"}}
DSHM_SIZE = "250Gi"
INSTALLER_RESOURCES = {"requests": {"cpu": "1", "memory": "2Gi"}}

# A cold install (DOCA-OFED, driver, CUDA, NVSHMEM from source, DeepEP) took 20-25 min on a GKE node
# without the reboot; two hours covers the reboot, slow mirrors and a source NVSHMEM build.
INSTALL_TIMEOUT_SECONDS = 2 * 3600
INSTALLER_ENTRY = "run.sh"
REBOOT_EXIT = names.EXIT_REBOOT
REBOOT_WAIT_SECONDS = 900  # a scheduled reboot that has not come by then is retried
JOB_TTL_SECONDS = 3 * 24 * 3600
JOB_BACKOFF_LIMIT = 2
RUNNER_USAGE_EXIT = names.EXIT_USAGE
RUNNER_UNPROVEN_EXIT = names.EXIT_UNPROVEN


def k8s_spec(spec: dict[str, Any]) -> Any:
    """A nested spec as a plain dict (the SDK's snake_case input dicts); pyright cannot match such literals
    to the SDK's TypedDicts, so they pass as Any."""
    return spec


def child_opts(parent: pulumi.Resource, **kw: Any) -> pulumi.ResourceOptions:
    """A child of a workloads component: it takes the component's Kubernetes provider from its parent."""
    return pulumi.ResourceOptions(parent=parent, **kw)


def no_ingress_policy(
    parent: pulumi.Resource, name: str, app: str, namespace: Any, labels: dict[str, str]
) -> k8s.networking.v1.NetworkPolicy:
    """A NetworkPolicy that admits no connection to or from the pods of `app` on the pod network: for pods that
    serve nothing and fetch nothing (what the installer does on the host, it does in the host's namespaces).
    Policies add up: the supported profile's staging pod gets its egress from a second one (gke_stage_access)."""
    return k8s.networking.v1.NetworkPolicy(
        f"{name}-no-ingress",
        metadata={"name": f"{app}-no-ingress", "namespace": namespace, "labels": labels},
        spec={
            "pod_selector": {"match_labels": {"app.kubernetes.io/name": app}},
            "policy_types": ["Ingress", "Egress"],
        },
        opts=child_opts(parent),
    )


def daemon_set_metadata(
    app: str, namespace: Any, labels: dict[str, str], timeout_seconds: int, annotations: dict[str, str]
) -> k8s.meta.v1.ObjectMetaArgsDict:
    """A DaemonSet's metadata; Pulumi awaits a DaemonSet until every pod is Ready, for up to timeout_seconds."""
    return {
        "name": app,
        "namespace": namespace,
        "labels": labels,
        "annotations": {"pulumi.com/timeoutSeconds": str(timeout_seconds), **annotations},
    }


def every_node_at_once(app: str) -> dict[str, Any]:
    """The selector and update strategy of a per-node DaemonSet: a new version replaces every pod at once (a
    node's pod only prepares that node, so there is no service to keep up during the rollout)."""
    return {
        "selector": {"match_labels": {"app.kubernetes.io/name": app}},
        "update_strategy": {"type": "RollingUpdate", "rolling_update": {"max_unavailable": "100%"}},
    }


def a4_node_pod(security_context: dict[str, Any], **spec: Any) -> dict[str, Any]:
    """A node-critical pod spec of the installer's kind: on every A4 node (their label and GPU taint), a short
    grace period (it only sleeps once its init container finished)."""
    return {
        "priority_class_name": "system-node-critical",
        "node_selector": NODE_SELECTOR,
        "tolerations": [GPU_TOLERATION],
        "security_context": security_context,
        "termination_grace_period_seconds": 5,
        **spec,
    }

"""GKE workloads: the installer DaemonSet and the DeepEP benchmark Jobs, through the explicit provider.

`build_gke_workloads(cfg, k8s_provider, node_pool=..., network_names=...)` creates, in the namespace
`deepep-a4`:

InstallerDaemonSet
    On every A4 node (node selector on the pool label, toleration of the GPU taint,
    `system-node-critical` priority, which GKE admits outside kube-system only under a ResourceQuota
    scoped to that class, created here), a **privileged init container** with the host's PID namespace
    and root file system copies the rendered installer (ConfigMap, from
    `components.installer.render_installer(cfg, "gke")`) to the host and runs its `run.sh` there
    through `nsenter` into PID 1's namespaces. Exit 75 means the installer scheduled a reboot: the
    container waits for the node to go down (the pod starts again after boot and the installer
    resumes); any other non-zero exit fails the container, which the kubelet retries with back-off.
    When the status file says ready, the init container writes the version hash next to it and labels
    the node `deepep-a4/installed=<hash>` (ServiceAccount + ClusterRole with only get/patch on nodes).
    The **main container** (busybox, unprivileged, read-only state mount) just stays Running; its
    readiness probe passes only while the status file says ready *for this version hash*, so Pulumi's
    DaemonSet await means "installed on every A4 node", with a `pulumi.com/timeoutSeconds` that covers
    a cold install and the reboot. The hash is also a pod-template annotation: a changed version set
    rolls the DaemonSet.

BenchmarkJobs
    The runner (`scripts/bench/run_bench.py` + `parse.py`) in a ConfigMap; an intranode and a
    low-latency Job (one pod, one node, 8 GPUs) and the internode test as an **Indexed Job**
    (completions = parallelism = node count, headless Service + `subdomain`, RANK = completion index,
    WORLD_SIZE = node count, MASTER_ADDR = pod 0's DNS name). Only the tests in `benchmarks` are
    created. Pod networking per `podNetworking`: `hostNetwork`, or the multi-network annotations
    (eth1 the second gVNIC, eth2..eth9 the eight RDMA Networks in NIC order). Every Job depends on the
    DaemonSet (created after every node is installed), carries `pulumi.com/skipAwait` (Pulumi does
    not wait for the benchmark), ignores spot preemption in its podFailurePolicy (DisruptionTarget),
    fails at once on the runner's usage error (exit 2), and stays `ttlSecondsAfterFinished` (3 days)
    so `scripts/results.py` can read the logs.

Benchmark pod privileges: decided in components/gke_pod_security.py (only the installer's init container
is privileged with the default `podNetworking: multiNetwork`). GPUs come from GKE's device plugin
(`nvidia.com/gpu: 8`); only the RDMA tests (internode, low-latency) get the multi-network interfaces.
Read-only host mounts: the install root (same path, so the env file's paths hold) and GKE's gIB NCCL
plugin folder; writable: emptyDirs for results, /tmp (HOME), a memory /dev/shm (NCCL) and libibverbs'
provider folder (the env file copies the host's mlx5 provider there, seed 003).
A NetworkPolicy admits to a benchmark pod only the other benchmark pods (the internode rendezvous) and
nothing to the installer's pods; egress stays open (DNS, the rendezvous, package mirrors).
No apt or pip at run time: the pod's environment is the installer's env file on top of the device
plugin's driver paths, minus TORCH_NCCL_USE_COMM_NONBLOCKING; the runner adds seed 003's NCCL gIB
settings only where the gIB plugin is present.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import asdict
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from deepep_a4.config import StackConfig
from deepep_a4.node import payload
from deepep_a4.program import artifacts, installer
from deepep_a4.program import gke_pod_security as security
from deepep_a4.program.bench_settings import runner_settings
from deepep_a4.program.gke_nodepool import GPU_TAINT_KEY, GPU_TAINT_VALUE, NODE_POOL_LABEL_KEY, NODE_POOL_LABEL_VALUE

NAMESPACE = "deepep-a4"
PART_OF = {"app.kubernetes.io/part-of": "deepep-a4", "app.kubernetes.io/managed-by": "pulumi"}
INSTALLER_NAME = "deepep-installer"
INSTALLER_LABELS = {**PART_OF, "app.kubernetes.io/name": INSTALLER_NAME}
BENCH_COMPONENT = "benchmark"
BENCH_LABELS = {**PART_OF, "app.kubernetes.io/component": BENCH_COMPONENT}
BENCH_SELECTOR = "app.kubernetes.io/part-of=deepep-a4,app.kubernetes.io/component=benchmark"
BENCH_CONTAINER = "bench"
TEST_LABEL = "deepep-a4/test"
INSTALLED_LABEL = "deepep-a4/installed"
VERSIONS_ANNOTATION = "deepep-a4/versions-hash"
INTERNODE_SERVICE = "deepep-internode"
MASTER_PORT = 29500
VERBS_PROVIDER_DIR = "/usr/lib/x86_64-linux-gnu/libibverbs"

NODE_SELECTOR = {NODE_POOL_LABEL_KEY: NODE_POOL_LABEL_VALUE}
GPU_TOLERATION = {"key": GPU_TAINT_KEY, "operator": "Equal", "value": GPU_TAINT_VALUE, "effect": "NoSchedule"}

# Where the GKE installer puts everything on the host (issue 4: under /home/kubernetes/bin/nvidia,
# which GKE's device plugin also mounts into GPU containers as /usr/local/nvidia).
HOST_NVIDIA = "/home/kubernetes/bin/nvidia"
INSTALL_ROOT = f"{HOST_NVIDIA}/deepep"
STATE_DIR = f"{INSTALL_ROOT}/state"
STATUS_FILE = f"{STATE_DIR}/status.json"
ENV_FILE = f"{INSTALL_ROOT}/unified-env.sh"
DEEPEP_DIR = f"{INSTALL_ROOT}/DeepEP"
DEEPEP_PYTHON = f"{INSTALL_ROOT}/venv/bin/python"
GPU_PLUGIN_DIR = "/usr/local/nvidia"  # HOST_NVIDIA as GKE's device plugin mounts it into GPU containers
GIB_HOST_DIR = "/home/kubernetes/bin/gib"
GIB_DIR = "/usr/local/gib"
RUNNER_DIR = "/opt/deepep-bench"
RESULTS_DIR = "/results"

# Container resources. The bench pod owns the node (8 GPUs, 224 vCPUs, ~3.9 TiB): a request that reserves
# room for 8 ranks and their proxy threads, a memory limit far above what a test uses (~10 GiB a rank).
BENCH_RESOURCES = {"requests": {"cpu": "16", "memory": "64Gi"}, "limits": {"memory": "512Gi"}}
DSHM_SIZE = "250Gi"
INSTALLER_RESOURCES = {"requests": {"cpu": "1", "memory": "2Gi"}}

# A cold install (DOCA-OFED, driver, CUDA, NVSHMEM from source, DeepEP) took 20-25 min in the GKE
# seed without the reboot; two hours covers the reboot, slow mirrors and a source NVSHMEM build.
INSTALL_TIMEOUT_SECONDS = 2 * 3600
INSTALLER_ENTRY = "run.sh"
REBOOT_EXIT = 75  # the installer's "reboot scheduled, rerun after boot"
REBOOT_WAIT_SECONDS = 900  # a scheduled reboot that has not come by then is retried
JOB_TTL_SECONDS = 3 * 24 * 3600
JOB_BACKOFF_LIMIT = 2
RUNNER_USAGE_EXIT = 2


def _k8s(spec: dict[str, Any]) -> Any:
    """A nested spec as a plain dict (the SDK's snake_case input dicts); pyright cannot match such literals
    to the SDK's TypedDicts, so they pass as Any."""
    return spec


def _opts(provider: k8s.Provider, parent: pulumi.Resource, **kw: Any) -> pulumi.ResourceOptions:
    return pulumi.ResourceOptions(provider=provider, parent=parent, **kw)


# -- the installer -------------------------------------------------------------------------------


def installer_files(cfg: StackConfig) -> dict[str, str]:
    """The rendered GKE installer, {relative path: text} with the entry point `run.sh`.

    The renderer publishes these files as the plan's `files/install/gke/`; the ConfigMap carries them.
    """
    files = installer.render_installer(cfg, "gke")
    if INSTALLER_ENTRY not in files:
        raise ValueError(f"render_installer(cfg, 'gke') returned no {INSTALLER_ENTRY}: {sorted(files)}")
    return files


def versions_hash(cfg: StackConfig, files: dict[str, str]) -> str:
    """Names the installed version set: the stack's versions and options and the installer's text."""
    doc = {
        "versions": asdict(cfg.versions),
        "installer": asdict(cfg.installer),
        "nvshmem": asdict(cfg.nvshmem),
        "gpuDriver": cfg.gke.gpu_driver,
        "files": {k: hashlib.sha256(v.encode()).hexdigest() for k, v in sorted(files.items())},
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _configmap_key(path: str) -> str:
    """ConfigMap keys allow [-._a-zA-Z0-9] only: nested paths are flattened and mapped back by `items`."""
    return path.replace("/", "__")


READY_CHECK = (
    "grep -Eq '\"ready\"[[:space:]]*:[[:space:]]*true' /deepep-state/status.json && "
    'grep -qx "$VERSIONS_HASH" /deepep-state/installed-hash'
)


def init_script() -> str:
    """The privileged init container's script: install on the host, check, record the hash, label the node."""
    r = INSTALL_ROOT
    return f"""#!/bin/bash
# deepep-a4 installer DaemonSet, init container: runs the rendered installer on the host.
set -Eeuo pipefail
host=/host
echo "deepep-a4: installer for version set $VERSIONS_HASH on node $NODE_NAME"
mkdir -p "$host{r}" "$host{STATE_DIR}"
# The ConfigMap's files live under ..data (the other entries are symlinks into it).
rm -rf "$host{r}/installer.new" && mkdir -p "$host{r}/installer.new"
cp -rL /installer/..data/. "$host{r}/installer.new/"
rm -rf "$host{r}/installer" && mv "$host{r}/installer.new" "$host{r}/installer"
# Into the host's namespaces (hostPID: PID 1 is the host's init): systemd, apt, modprobe, reboot all work.
rc=0
nsenter --target 1 --mount --uts --ipc --net --pid -- bash {r}/installer/{INSTALLER_ENTRY} || rc=$?
if [ "$rc" -eq {REBOOT_EXIT} ]; then
  # Not a failure: the node goes down, this pod starts again after boot and the installer resumes.
  echo "deepep-a4: the installer scheduled a reboot of $NODE_NAME; waiting for the node to go down"
  trap 'exit 0' TERM
  sleep {REBOOT_WAIT_SECONDS} & wait $!
  echo "deepep-a4: $NODE_NAME did not reboot within {REBOOT_WAIT_SECONDS} s; exiting to run the installer again" >&2
  exit 1
elif [ "$rc" -ne 0 ]; then
  echo "deepep-a4: the installer failed with exit code $rc on $NODE_NAME (the phase, its log tail and how to" >&2
  echo "  retry are above; logs in {r}/logs on the node). The pod retries it with back-off and it resumes." >&2
  exit "$rc"
fi
if ! grep -Eq '"ready"[[:space:]]*:[[:space:]]*true' "$host{STATUS_FILE}"; then
  echo "deepep-a4: the installer finished but {STATUS_FILE} does not say ready" >&2
  cat "$host{STATUS_FILE}" >&2 || true
  exit 1
fi
echo "$VERSIONS_HASH" > "$host{STATE_DIR}/installed-hash"
# Label the node with the installed version set (RBAC: get/patch nodes only), with the host's curl.
sa=/var/run/secrets/kubernetes.io/serviceaccount
cp "$sa/ca.crt" "$host{STATE_DIR}/k8s-ca.crt"
printf 'Authorization: Bearer %s\\n' "$(cat "$sa/token")" | nsenter --target 1 --mount --net -- \\
  curl -sS --fail --retry 5 --cacert {STATE_DIR}/k8s-ca.crt -H @- \\
  -H 'Content-Type: application/merge-patch+json' -X PATCH \\
  "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/api/v1/nodes/$NODE_NAME" \\
  -d "{{\\"metadata\\":{{\\"labels\\":{{\\"{INSTALLED_LABEL}\\":\\"$VERSIONS_HASH\\"}}}}}}" > /dev/null
echo "deepep-a4: node $NODE_NAME installed and labelled {INSTALLED_LABEL}=$VERSIONS_HASH"
"""


class InstallerDaemonSet(pulumi.ComponentResource):
    """The installer on every A4 node; Ready on a node only once it is installed (see module doc)."""

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        namespace: pulumi.Input[str],
        provider: k8s.Provider,
        after: Sequence[pulumi.Resource] = (),
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("deepep-a4:gke:InstallerDaemonSet", name, None, opts)
        files = installer_files(cfg)
        self.versions_hash = versions_hash(cfg, files)
        script = artifacts.publish("gke/installer-daemonset/init.sh", init_script())

        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-files",
            metadata={"namespace": namespace, "labels": INSTALLER_LABELS},
            data={_configmap_key(p): t for p, t in files.items()} | {"daemonset-init.sh": script},
            opts=_opts(provider, self),
        )
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata={"name": INSTALLER_NAME, "namespace": namespace, "labels": INSTALLER_LABELS},
            opts=_opts(provider, self),
        )
        self.cluster_role = k8s.rbac.v1.ClusterRole(
            f"{name}-label-nodes",
            metadata={"labels": INSTALLER_LABELS},
            rules=[{"api_groups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}],
            opts=_opts(provider, self),
        )
        self.binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-label-nodes",
            metadata={"labels": INSTALLER_LABELS},
            role_ref={
                "api_group": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": self.cluster_role.metadata.name,
            },
            subjects=[{"kind": "ServiceAccount", "name": INSTALLER_NAME, "namespace": namespace}],
            opts=_opts(provider, self),
        )

        # The installer serves nothing: no ingress at all.
        self.network_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-no-ingress",
            metadata={"name": f"{INSTALLER_NAME}-no-ingress", "namespace": namespace, "labels": INSTALLER_LABELS},
            spec={
                "pod_selector": {"match_labels": {"app.kubernetes.io/name": INSTALLER_NAME}},
                "policy_types": ["Ingress"],
            },
            opts=_opts(provider, self),
        )
        items = [{"key": _configmap_key(p), "path": p, "mode": 0o755} for p in sorted(files)]
        env = [
            {"name": "VERSIONS_HASH", "value": self.versions_hash},
            {"name": "NODE_NAME", "value_from": {"field_ref": {"field_path": "spec.nodeName"}}},
        ]
        pod_labels = {**INSTALLER_LABELS}
        self.daemon_set = k8s.apps.v1.DaemonSet(
            name,
            metadata={
                "name": INSTALLER_NAME,
                "namespace": namespace,
                "labels": INSTALLER_LABELS,
                # Pulumi awaits a DaemonSet until every pod is Ready: a cold install and its reboot.
                "annotations": {
                    "pulumi.com/timeoutSeconds": str(INSTALL_TIMEOUT_SECONDS),
                    **security.skip_annotations(security.INSTALLER_SKIPS | security.image_skips(cfg)),
                },
            },
            spec=_k8s(
                {
                    "selector": {"match_labels": {"app.kubernetes.io/name": INSTALLER_NAME}},
                    "update_strategy": {"type": "RollingUpdate", "rolling_update": {"max_unavailable": "100%"}},
                    "template": {
                        "metadata": {
                            "labels": pod_labels,
                            "annotations": {VERSIONS_ANNOTATION: self.versions_hash},
                        },
                        "spec": {
                            "service_account_name": INSTALLER_NAME,
                            "priority_class_name": "system-node-critical",
                            "node_selector": NODE_SELECTOR,
                            "tolerations": [GPU_TOLERATION],
                            "host_pid": True,
                            "security_context": security.POD_SECURITY_CONTEXT,
                            "termination_grace_period_seconds": 5,
                            "init_containers": [
                                {
                                    "name": "install",
                                    "image": security.image(cfg),
                                    "command": ["bash", "/installer/daemonset-init.sh"],
                                    "env": env,
                                    "security_context": {"privileged": True},
                                    "resources": INSTALLER_RESOURCES,
                                    "volume_mounts": [
                                        {"name": "host-root", "mount_path": "/host"},
                                        {"name": "installer", "mount_path": "/installer", "read_only": True},
                                    ],
                                }
                            ],
                            "containers": [
                                {
                                    "name": "ready",
                                    "image": security.image(cfg),
                                    "command": [
                                        "sh",
                                        "-c",
                                        "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done",
                                    ],
                                    "env": [{"name": "VERSIONS_HASH", "value": self.versions_hash}],
                                    "readiness_probe": {
                                        "exec": {"command": ["sh", "-c", READY_CHECK]},
                                        "period_seconds": 30,
                                        "failure_threshold": 1,
                                    },
                                    "security_context": {
                                        **security.UNPRIVILEGED,
                                        "run_as_non_root": True,
                                        "run_as_user": security.BENCH_UID,
                                    },
                                    "resources": {
                                        "requests": {"cpu": "10m", "memory": "16Mi"},
                                        "limits": {"memory": "32Mi"},
                                    },
                                    "volume_mounts": [
                                        {"name": "state", "mount_path": "/deepep-state", "read_only": True}
                                    ],
                                }
                            ],
                            "volumes": [
                                {"name": "host-root", "host_path": {"path": "/", "type": "Directory"}},
                                {"name": "state", "host_path": {"path": STATE_DIR, "type": "DirectoryOrCreate"}},
                                {
                                    "name": "installer",
                                    "config_map": {
                                        "name": self.config_map.metadata.name,
                                        "items": [
                                            *items,
                                            {"key": "daemonset-init.sh", "path": "daemonset-init.sh", "mode": 0o755},
                                        ],
                                    },
                                },
                            ],
                        },
                    },
                }
            ),
            # A component's depends_on does not reach its children: the DaemonSet names its own.
            opts=_opts(provider, self, depends_on=[self.binding, *after]),
        )
        self.register_outputs({"name": self.daemon_set.metadata.name, "versionsHash": self.versions_hash})


# -- the benchmark Jobs ----------------------------------------------------------------------------


def runner_files() -> dict[str, str]:
    return payload.runner_files()


def default_network_names(cfg: StackConfig) -> list[str]:
    """The eight RDMA Network objects in NIC order, as components/gke_multinetwork.py names them."""
    return [cfg.name(f"rdma-{i}") for i in range(cfg.shape.rdma_nics)]


def interfaces_annotation(cfg: StackConfig, rdma_network_names: Sequence[str]) -> str:
    """GKE's A4 layout: eth0 the pod network, eth1 the second gVNIC, eth2..eth9 the RDMA NICs in order."""
    ifaces = [
        {"interfaceName": "eth0", "network": "default"},
        {"interfaceName": "eth1", "network": cfg.name("gvnic-1")},
    ]
    ifaces += [{"interfaceName": f"eth{i + 2}", "network": n} for i, n in enumerate(rdma_network_names)]
    return json.dumps(ifaces)


def bench_command() -> list[str]:
    """The container's command: the installer's env file (sourced once, here), its python, the runner.

    No apt, no pip. The runner inherits this environment (no --env-file: a second load would start from
    an empty one and drop the GPU device plugin's library path set in the pod spec).
    """
    script = f"""set -euo pipefail
if [ ! -f {ENV_FILE} ]; then
  echo "[runner] error the installer's env file {ENV_FILE} is missing: is the node installed?"; exit {RUNNER_USAGE_EXIT}
fi
set -a; . {ENV_FILE}; set +a
unset TORCH_NCCL_USE_COMM_NONBLOCKING
echo "[runner] env sourced {ENV_FILE}"
python={DEEPEP_PYTHON}
if ! "$python" -c 'import torch, deep_ep' > /dev/null; then
  echo "[runner] error $python cannot import torch and deep_ep in this container (see above)"; exit {RUNNER_USAGE_EXIT}
fi
exec "$python" {RUNNER_DIR}/run_bench.py --deepep-dir {DEEPEP_DIR} --gib-dir {GIB_DIR} --results-dir {RESULTS_DIR}
"""
    return ["bash", "-c", script]


def bench_env(cfg: StackConfig, test: str) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        # Where GKE's device plugin mounts the driver's userspace (what CUDA images put in their ENV, and
        # seed 003's Job: lib64, then lib).
        {"name": "LD_LIBRARY_PATH", "value": f"{GPU_PLUGIN_DIR}/lib64:{GPU_PLUGIN_DIR}/lib"},
        {"name": "PATH", "value": f"{GPU_PLUGIN_DIR}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
        {"name": "HOME", "value": "/tmp"},  # noqa: S108 - an emptyDir; the root file system is read-only
        {"name": "BENCH_TESTS", "value": test},
        *({"name": k, "value": v} for k, v in runner_settings(cfg).to_env().items()),
    ]
    if test == "internode":
        env += [
            {"name": "WORLD_SIZE", "value": str(cfg.node_count)},
            {
                "name": "RANK",
                "value_from": {
                    "field_ref": {"field_path": "metadata.annotations['batch.kubernetes.io/job-completion-index']"}
                },
            },
            {
                "name": "MASTER_ADDR",
                "value": f"{job_name('internode')}-0.{INTERNODE_SERVICE}.{NAMESPACE}.svc.cluster.local",
            },
            {"name": "MASTER_PORT", "value": str(MASTER_PORT)},
        ]
    return env


def job_name(test: str) -> str:
    return f"deepep-{test}"


def bench_pod_spec(cfg: StackConfig, test: str, runner_cm: pulumi.Input[str], installed_hash: str) -> dict[str, Any]:
    host_network = cfg.gke.pod_networking == "hostNetwork"
    spec: dict[str, Any] = {
        "restart_policy": "Never",
        "automount_service_account_token": False,
        "security_context": security.bench_pod_security(test),
        # Only nodes the installer finished with this version set: a node that joins later (flex-start
        # scaling up from zero, a recreated spot node) takes no benchmark pod before its install is done.
        "node_selector": {**NODE_SELECTOR, INSTALLED_LABEL: installed_hash},
        "tolerations": [GPU_TOLERATION],
        "termination_grace_period_seconds": 30,
        "containers": [
            {
                "name": BENCH_CONTAINER,
                "image": security.image(cfg),
                "command": bench_command(),
                "env": bench_env(cfg, test),
                "security_context": security.bench_container_security(cfg, test),
                "resources": {
                    "limits": {**BENCH_RESOURCES["limits"], "nvidia.com/gpu": cfg.shape.gpus},
                    "requests": {**BENCH_RESOURCES["requests"], "nvidia.com/gpu": cfg.shape.gpus},
                },
                "volume_mounts": [
                    {"name": "runner", "mount_path": RUNNER_DIR, "read_only": True},
                    {"name": "install-root", "mount_path": HOST_NVIDIA, "read_only": True},
                    {"name": "gib", "mount_path": GIB_DIR, "read_only": True},
                    {"name": "results", "mount_path": RESULTS_DIR},
                    {"name": "dshm", "mount_path": "/dev/shm"},  # noqa: S108 - a memory emptyDir for NCCL
                    {"name": "tmp", "mount_path": "/tmp"},  # noqa: S108 - HOME and caches: the root is read-only
                    # libibverbs' default provider folder, writable: the env file copies the host's mlx5
                    # provider there (seed 003: spawned ranks do not see RDMAV_DRIVERS reliably).
                    {"name": "verbs-providers", "mount_path": VERBS_PROVIDER_DIR},
                ],
            }
        ],
        "volumes": [
            {"name": "runner", "config_map": {"name": runner_cm, "default_mode": 0o644}},
            {"name": "install-root", "host_path": {"path": HOST_NVIDIA, "type": "Directory"}},
            {"name": "gib", "host_path": {"path": GIB_HOST_DIR, "type": "DirectoryOrCreate"}},
            {"name": "results", "empty_dir": {}},
            # Google's A4 NCCL tests give /dev/shm 250Gi; it counts against the memory limit.
            {"name": "dshm", "empty_dir": {"medium": "Memory", "size_limit": DSHM_SIZE}},
            {"name": "tmp", "empty_dir": {}},
            {"name": "verbs-providers", "empty_dir": {"size_limit": "64Mi"}},
        ],
    }
    if host_network:
        spec["host_network"] = True
        spec["dns_policy"] = "ClusterFirstWithHostNet"
    if test == "internode":
        spec["subdomain"] = INTERNODE_SERVICE
        spec["affinity"] = {
            "pod_anti_affinity": {
                "required_during_scheduling_ignored_during_execution": [
                    {
                        "label_selector": {"match_labels": {TEST_LABEL: "internode"}},
                        "topology_key": "kubernetes.io/hostname",
                    }
                ]
            }
        }
    return spec


def bench_pod_annotations(cfg: StackConfig, test: str, rdma_network_names: Sequence[str]) -> dict[str, str]:
    """GKE's multi-network interfaces, for the tests that use the RDMA NICs (intranode needs none)."""
    if cfg.gke.pod_networking != "multiNetwork" or not security.bench_needs_rdma(test):
        return {}
    return {
        "networking.gke.io/default-interface": "eth0",
        "networking.gke.io/interfaces": interfaces_annotation(cfg, rdma_network_names),
    }


class BenchmarkJobs(pulumi.ComponentResource):
    """The DeepEP benchmark Jobs of `cfg.benchmarks.tests`, created after the installer is Ready."""

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        namespace: pulumi.Input[str],
        provider: k8s.Provider,
        installer: InstallerDaemonSet,
        network_names: Sequence[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("deepep-a4:gke:BenchmarkJobs", name, None, opts)
        nets = list(network_names) if network_names is not None else default_network_names(cfg)
        if len(nets) != cfg.shape.rdma_nics:
            raise ValueError(
                f"network_names: expected the {cfg.shape.rdma_nics} RDMA Network names in NIC order, got {nets}"
            )
        files = {f: artifacts.publish(f"gke/bench/{f}", t) for f, t in runner_files().items()}
        self.runner = k8s.core.v1.ConfigMap(
            f"{name}-runner",
            metadata={"namespace": namespace, "labels": BENCH_LABELS},
            data=files,
            opts=_opts(provider, self),
        )
        # Benchmark pods take connections only from each other (the internode rendezvous on MASTER_PORT).
        bench_pods = {"match_labels": {"app.kubernetes.io/component": BENCH_COMPONENT, **PART_OF}}
        self.network_policy = k8s.networking.v1.NetworkPolicy(
            f"{name}-bench-only",
            metadata={"name": "deepep-bench-only", "namespace": namespace, "labels": BENCH_LABELS},
            spec=_k8s(
                {
                    "pod_selector": bench_pods,
                    "policy_types": ["Ingress"],
                    "ingress": [{"from_": [{"pod_selector": bench_pods}]}],
                }
            ),
            opts=_opts(provider, self),
        )
        after_install = [installer.daemon_set]
        self.service: k8s.core.v1.Service | None = None
        self.jobs: dict[str, k8s.batch.v1.Job] = {}
        b = cfg.benchmarks
        per_test_s = b.timeout_minutes * 60
        for test in b.tests:
            labels = {**BENCH_LABELS, TEST_LABEL: test}
            depends: list[pulumi.Resource] = list(after_install)
            if test == "internode":
                self.service = k8s.core.v1.Service(
                    f"{name}-internode",
                    metadata={"name": INTERNODE_SERVICE, "namespace": namespace, "labels": BENCH_LABELS},
                    spec={
                        "cluster_ip": "None",
                        "selector": {TEST_LABEL: "internode", **PART_OF},
                        "publish_not_ready_addresses": True,
                        "ports": [{"name": "rendezvous", "port": MASTER_PORT}],
                    },
                    opts=_opts(provider, self),
                )
                depends.append(self.service)
                count = cfg.node_count
                shape: dict[str, Any] = {"completion_mode": "Indexed", "completions": count, "parallelism": count}
            else:
                shape = {"completions": 1, "parallelism": 1}
            annotations = bench_pod_annotations(cfg, test, nets)
            self.jobs[test] = k8s.batch.v1.Job(
                f"{name}-{test}",
                metadata={
                    "name": job_name(test),
                    "namespace": namespace,
                    "labels": labels,
                    "annotations": {
                        "pulumi.com/skipAwait": "true",
                        **security.skip_annotations(security.bench_skips(cfg, test)),
                    },
                },
                spec=_k8s(
                    {
                        **shape,
                        "backoff_limit": JOB_BACKOFF_LIMIT * (shape["completions"] if test == "internode" else 1),
                        # The NCCL check and the test, each under its timeout, plus waiting for pod 0's DNS.
                        "active_deadline_seconds": 3 * per_test_s + 1800,
                        "ttl_seconds_after_finished": JOB_TTL_SECONDS,
                        "pod_failure_policy": {
                            "rules": [
                                # Spot preemption or a node drain is not the benchmark's failure: retry freely.
                                {
                                    "action": "Ignore",
                                    "on_pod_conditions": [{"type": "DisruptionTarget", "status": "True"}],
                                },
                                # The runner's usage error (bad arguments, node not installed) does not heal.
                                {
                                    "action": "FailJob",
                                    "on_exit_codes": {
                                        "container_name": BENCH_CONTAINER,
                                        "operator": "In",
                                        "values": [RUNNER_USAGE_EXIT],
                                    },
                                },
                            ]
                        },
                        "template": {
                            "metadata": {"labels": labels, "annotations": annotations},
                            "spec": bench_pod_spec(cfg, test, self.runner.metadata.name, installer.versions_hash),
                        },
                    }
                ),
                # A changed Job template can only be replaced; its fixed name must go first.
                opts=_opts(provider, self, depends_on=depends, delete_before_replace=True),
            )
        self.register_outputs({"jobs": {t: j.metadata.name for t, j in self.jobs.items()}})


class GkeWorkloads(pulumi.ComponentResource):
    """Namespace, installer DaemonSet and benchmark Jobs (see the module doc)."""

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        provider: k8s.Provider,
        node_pool: pulumi.Resource | None = None,
        network_names: Sequence[str] | None = None,
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("deepep-a4:gke:Workloads", name, None, opts)
        after_pool = [node_pool] if node_pool is not None else []
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            # The installer is privileged: say so, rather than depend on the cluster's default level.
            metadata={"name": NAMESPACE, "labels": {**PART_OF, "pod-security.kubernetes.io/enforce": "privileged"}},
            opts=_opts(provider, self, depends_on=after_pool),
        )
        ns = self.namespace.metadata.name
        # GKE admits system-node-critical pods outside kube-system only under a quota scoped to the class.
        self.critical_quota = k8s.core.v1.ResourceQuota(
            f"{name}-critical-pods",
            metadata={"namespace": ns, "labels": PART_OF},
            spec={
                "hard": {"pods": "1000"},
                "scope_selector": {
                    "match_expressions": [
                        {"scope_name": "PriorityClass", "operator": "In", "values": ["system-node-critical"]}
                    ]
                },
            },
            opts=_opts(provider, self),
        )
        self.installer = InstallerDaemonSet(
            f"{name}-installer",
            cfg,
            ns,
            provider,
            after=[self.critical_quota, *after_pool],
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.benchmarks = BenchmarkJobs(
            f"{name}-bench", cfg, ns, provider, self.installer, network_names, pulumi.ResourceOptions(parent=self)
        )
        self.register_outputs({"namespace": ns})


def build_gke_workloads(
    cfg: StackConfig,
    k8s_provider: k8s.Provider,
    node_pool: pulumi.Resource | None = None,
    network_names: Sequence[str] | None = None,
) -> dict[str, Any]:
    """Creates the workloads and returns the stack outputs they add."""
    w = GkeWorkloads("deepep", cfg, k8s_provider, node_pool, network_names)
    return {
        "benchNamespace": w.namespace.metadata.name,
        "benchJobs": {t: j.metadata.name for t, j in w.benchmarks.jobs.items()},
        "installedVersionsHash": w.installer.versions_hash,
        "resultsCommand": ".venv/bin/deepep-a4 report --stack " + pulumi.get_stack(),
    }

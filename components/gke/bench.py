"""The DeepEP benchmark Jobs: the runner in a ConfigMap, one Job per test, pods that own their node.

An intranode and a low-latency Job (one pod, one node, 8 GPUs) and the internode test as an Indexed Job
(completions = parallelism = node count, a headless Service + `subdomain`, RANK = completion index,
WORLD_SIZE = node count, MASTER_ADDR = pod 0's DNS name). Each Job carries `pulumi.com/skipAwait` (Pulumi
does not wait for a benchmark), ignores spot preemption in its podFailurePolicy, fails at once on the
runner's usage error, and stays 3 days so `deepep-a4 report` can read its logs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import artifacts
from components.bench_settings import runner_settings
from components.config import StackConfig
from components.gke import pod_security as security
from components.gke import queued
from components.gke import rehearsal as gke_rehearsal
from components.gke.network_resources import with_network_zeros
from components.gke.objects import (
    BENCH_CONTAINER,
    BENCH_LABELS,
    BENCH_RESOURCES,
    DEEPEP_DIR,
    DEEPEP_PYTHON,
    DSHM_SIZE,
    ENV_FILE,
    GIB_DIR,
    GIB_HOST_DIR,
    GPU_PLUGIN_DIR,
    GPU_TOLERATION,
    HOST_NVIDIA,
    INSTALLED_LABEL,
    INTERNODE_SERVICE,
    JOB_BACKOFF_LIMIT,
    JOB_TTL_SECONDS,
    MASTER_PORT,
    NAMESPACE,
    NODE_SELECTOR,
    PART_OF,
    RESULTS_DIR,
    RUNNER_DIR,
    RUNNER_UNPROVEN_EXIT,
    RUNNER_USAGE_EXIT,
    STATE_DIR,
    TEST_LABEL,
    VERBS_CONFIG_DIR,
    VERBS_CONFIG_HOST_DIR,
    VERBS_PROVIDER_DIR,
    child_opts,
    depends_of,
    k8s_spec,
    ready_check,
)
from components.gke.rendezvous import bench_network_policies
from scripts import names, payload

_STAGED = names.install_paths("gke", staged=True)


def runner_files() -> dict[str, str]:
    return payload.runner_files()


def default_network_names(cfg: StackConfig) -> list[str]:
    """The eight RDMA Network objects in NIC order, as gke_multinetwork.py names them."""
    return [cfg.name(f"rdma-{i}") for i in range(cfg.shape.rdma_nics)]


def interfaces_annotation(cfg: StackConfig, rdma_network_names: Sequence[str]) -> str:
    """Google's A4 pods: eth0 the pod network, eth2..eth9 the RDMA NICs in order, and not the second gVNIC
    (container-engine-accelerators gpudirect-rdma/nccl-test-a4.yaml attaches eth0 and rdma-0..7 only): the
    runner's sockets use eth0 (NCCL_SOCKET_IFNAME), so an eth1 would only hold a gVNIC the pod never uses."""
    ifaces = [{"interfaceName": "eth0", "network": "default"}]
    ifaces += [{"interfaceName": f"eth{i + 2}", "network": n} for i, n in enumerate(rdma_network_names)]
    return json.dumps(ifaces)


def node_paths(cfg: StackConfig) -> dict[str, str]:
    """Where the node's user space lies: the host install under the driver's folder, or the staged root."""
    return _STAGED if cfg.staged else node_paths_default()


def bench_command(cfg: StackConfig | None = None) -> list[str]:
    """The container's command: the installer's env file (sourced once, here), its python, the runner.

    No apt, no pip. The runner inherits this environment (no --env-file: a second load would start from
    an empty one and drop the GPU device plugin's library path set in the pod spec).
    """
    paths = node_paths(cfg) if cfg else node_paths_default()
    env_file, python = paths["env"], paths["python"]
    check = gib_verbs_check(cfg)
    script = f"""set -euo pipefail
if [ ! -f {env_file} ]; then
  echo "[runner] error the installer's env file {env_file} is missing: is the node installed?"; exit {RUNNER_USAGE_EXIT}
fi
set -a; . {env_file}; set +a
unset TORCH_NCCL_USE_COMM_NONBLOCKING
echo "[runner] env sourced {env_file}"
python={python}
if ! "$python" -c 'import torch, deep_ep' > /dev/null; then
  echo "[runner] error $python cannot import torch and deep_ep in this container (see above)"; exit {RUNNER_USAGE_EXIT}
fi
"""
    run = f"{RUNNER_DIR}/run_bench.py --deepep-dir {paths['deepep']} --gib-dir {GIB_DIR} --results-dir {RESULTS_DIR}"
    script += f'{check}exec "$python" {run}\n'
    return ["bash", "-c", script]


def gib_verbs_check(cfg: StackConfig | None) -> str:
    """Before an RDMA test, the gIB plugin against the rdma-core this pod loads (the staged one on `supported`,
    where gIB's own is set aside: scripts/gib-libs.sh): its verbs needs go to the log, a missing one stops the pod
    with the reason (docs/platforms.md). As the runner's gib_env, gIB's lib64 comes last on the library path."""
    if cfg is None or not cfg.installer.nccl_gib:
        return ""
    lib = f"{GIB_DIR}/lib64"
    return payload.with_gib_libs(
        f"""# @gib-libs.sh
if [ -d {lib} ] && [ "${{BENCH_TESTS:-}}" != intranode ]; then
  for f in {lib}/libnccl-net*.so; do
    [ -e "$f" ] || continue
    if ! LD_LIBRARY_PATH="${{LD_LIBRARY_PATH:-}}:{lib}" gib_verbs "$f"; then
      echo "[runner] error the gIB plugin cannot use this pod's rdma-core (above): ncclGib=false runs NCCL without it"
      exit {RUNNER_USAGE_EXIT}
    fi
  done
fi
"""
    )


def node_paths_default() -> dict[str, str]:
    return {"root": HOST_NVIDIA, "env": ENV_FILE, "python": DEEPEP_PYTHON, "deepep": DEEPEP_DIR, "state": STATE_DIR}


# nodeProfile=supported, RDMA tests: no gdrdrv module can load on COS or the accelerator image, and NVSHMEM's INFO
# lines name the IBGDA path it took (GPU handler or CPU-assisted); a CPU or host-memory fallback fails the test
# (scripts/bench/parse_records.py degraded_ibgda; troubleshooting T09).
STAGED_RDMA_ENV = {"NVSHMEM_DISABLE_GDRCOPY": "1", "NVSHMEM_DEBUG": "INFO"}


def bench_env(cfg: StackConfig, test: str) -> list[dict[str, Any]]:
    env: list[dict[str, Any]] = [
        # Where GKE's device plugin mounts the driver's userspace (what CUDA images put in their ENV, and
        # R3's Job: lib64, then lib).
        {"name": "LD_LIBRARY_PATH", "value": f"{GPU_PLUGIN_DIR}/lib64:{GPU_PLUGIN_DIR}/lib"},
        {"name": "PATH", "value": f"{GPU_PLUGIN_DIR}/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"},
        {"name": "HOME", "value": "/tmp"},  # noqa: S108 - an emptyDir; the root file system is read-only
        {"name": "BENCH_TESTS", "value": test},
        *({"name": k, "value": v} for k, v in runner_settings(cfg).to_env().items()),
    ]
    if not security.bench_needs_rdma(test):
        # On the pod network the pod has eth0 only (the runner keeps a value set here).
        env.append({"name": "NCCL_SOCKET_IFNAME", "value": "eth0"})
    if cfg.staged and security.bench_needs_rdma(test):
        env += [{"name": k, "value": v} for k, v in STAGED_RDMA_ENV.items()]
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


WAIT_INSTALLED_SECONDS = 20  # between checks of the installer's state on the node


def wait_installed_container(cfg: StackConfig, installed_hash: str) -> dict[str, Any]:
    """Waits until the installer finished on this node with this version set (the Job's deadline bounds it)."""
    check = ready_check(node_paths(cfg)["state"])
    return {
        "name": "wait-installed",
        "image": security.image(cfg),
        "command": ["sh", "-c", f"until {check}; do sleep {WAIT_INSTALLED_SECONDS}; done"],
        "env": [{"name": "VERSIONS_HASH", "value": installed_hash}],
        "security_context": {**security.UNPRIVILEGED, "run_as_non_root": True, "run_as_user": security.BENCH_UID},
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"cpu": "100m", "memory": "64Mi"}},
        "volume_mounts": [{"name": "install-root", "mount_path": node_paths(cfg)["root"], "read_only": True}],
    }


def on_host_network(cfg: StackConfig, test: str) -> bool:
    """Only the RDMA tests with `podNetworking: hostNetwork` share the node's network: intranode (NVLink and
    CUDA IPC) runs on the pod network, where the node's metadata server and the host's ports are not its own."""
    return cfg.gke.pod_networking == "hostNetwork" and security.bench_needs_rdma(test)


def bench_pod_spec(cfg: StackConfig, test: str, runner_cm: pulumi.Input[str], installed_hash: str) -> dict[str, Any]:
    host_network = on_host_network(cfg, test)
    flex_start = cfg.provisioning == "flex-start"
    root = node_paths(cfg)["root"]
    spec: dict[str, Any] = {
        "restart_policy": "Never",
        "automount_service_account_token": False,
        "security_context": security.bench_pod_security(test),
        # Only nodes the installer finished with this version set: a node that joins later (a recreated spot
        # node) takes no benchmark pod before its install is done. Flex-start starts with no node, and the
        # cluster autoscaler adds one only for a pod that a new node of the pool could take: a new node lacks
        # the installed label, so there the pod selects the pool and waits for the install in an init
        # container instead.
        "node_selector": dict(NODE_SELECTOR) if flex_start else {**NODE_SELECTOR, INSTALLED_LABEL: installed_hash},
        "tolerations": [GPU_TOLERATION],
        "termination_grace_period_seconds": 30,
        "containers": [
            {
                "name": BENCH_CONTAINER,
                "image": security.image(cfg),
                "command": bench_command(cfg),
                "env": bench_env(cfg, test),
                "security_context": security.bench_container_security(cfg, test),
                "resources": {
                    "limits": {**BENCH_RESOURCES["limits"], "nvidia.com/gpu": cfg.shape.gpus},
                    "requests": {**BENCH_RESOURCES["requests"], "nvidia.com/gpu": cfg.shape.gpus},
                },
                "volume_mounts": [
                    {"name": "runner", "mount_path": RUNNER_DIR, "read_only": True},
                    {"name": "install-root", "mount_path": root, "read_only": True},
                    {"name": "gib", "mount_path": GIB_DIR, "read_only": True},
                    {"name": "results", "mount_path": RESULTS_DIR},
                    {"name": "dshm", "mount_path": "/dev/shm"},  # noqa: S108 - a memory emptyDir for NCCL
                    {"name": "tmp", "mount_path": "/tmp"},  # noqa: S108 - HOME and caches: the root is read-only
                    # libibverbs' default provider folder, writable: the env file copies the host's mlx5
                    # provider there (troubleshooting T16: spawned ranks do not see RDMAV_DRIVERS reliably).
                    {"name": "verbs-providers", "mount_path": VERBS_PROVIDER_DIR},
                    # Which providers libibverbs loads (mlx5.driver), as the installer shipped it (T21).
                    {"name": "verbs-config", "mount_path": VERBS_CONFIG_DIR, "read_only": True},
                ],
            }
        ],
        "volumes": [
            {"name": "runner", "config_map": {"name": runner_cm, "default_mode": 0o644}},
            {"name": "install-root", "host_path": {"path": root, "type": "Directory"}},
            {"name": "gib", "host_path": {"path": GIB_HOST_DIR, "type": "DirectoryOrCreate"}},
            {"name": "results", "empty_dir": {}},
            # Google's A4 NCCL tests give /dev/shm 250Gi; it counts against the memory limit.
            {"name": "dshm", "empty_dir": {"medium": "Memory", "size_limit": DSHM_SIZE}},
            {"name": "tmp", "empty_dir": {}},
            {"name": "verbs-providers", "empty_dir": {"size_limit": "64Mi"}},
            {"name": "verbs-config", "host_path": {"path": VERBS_CONFIG_HOST_DIR, "type": "Directory"}},
        ],
    }
    container = spec["containers"][0]
    if not security.bench_needs_rdma(test):
        # No RDMA device in this pod: gIB would report 0 devices, and NCCL_NET=gIB with none fails NCCL's init
        # (bench_env.gib_env). Without the plugin folder the runner sets no gIB settings either.
        container["volume_mounts"] = [m for m in container["volume_mounts"] if m["name"] != "gib"]
        spec["volumes"] = [v for v in spec["volumes"] if v["name"] != "gib"]
    if cfg.staged:
        # The staged libibverbs names its provider by absolute path: no provider folder of the image is used.
        container["volume_mounts"] = [m for m in container["volume_mounts"] if not m["name"].startswith("verbs-")]
        spec["volumes"] = [v for v in spec["volumes"] if not v["name"].startswith("verbs-")]
    if cfg.versions.deepep_api == "v2":
        # DeepEP V2's JIT cache (EP_JIT_CACHE_DIR, the env phase's R/deepep-jit): writable over the read-only
        # root, so a node's pods compile each kernel once (Kubernetes mounts the nested path over the parent's).
        jit = f"{root}/deepep-jit"
        spec["containers"][0]["volume_mounts"].append({"name": "deepep-jit", "mount_path": jit})
        spec["volumes"].append({"name": "deepep-jit", "host_path": {"path": jit, "type": "DirectoryOrCreate"}})
    if flex_start:
        spec["init_containers"] = [wait_installed_container(cfg, installed_hash)]
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


@dataclass(frozen=True)
class BenchmarkJobsArgs:
    # The Jobs read most of the stack (tests, sizes, pod networking, image, node count): the config itself.
    cfg: StackConfig
    namespace: pulumi.Input[str]
    installed_hash: str  # the version set the installer labels a finished node with
    network_names: Sequence[str] | None = None  # the eight RDMA Network objects in NIC order


class BenchmarkJobs(pulumi.ComponentResource):
    """The DeepEP benchmark Jobs of the stack's `benchmarks`; each waits for what `opts.depends_on` names
    (the installer DaemonSet: Ready on every node)."""

    def __init__(self, name: str, args: BenchmarkJobsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:BenchmarkJobs", name, None, opts)
        cfg, namespace = args.cfg, args.namespace
        nets = list(args.network_names) if args.network_names is not None else default_network_names(cfg)
        if len(nets) != cfg.shape.rdma_nics:
            raise ValueError(
                f"network_names: expected the {cfg.shape.rdma_nics} RDMA Network names in NIC order, got {nets}"
            )
        files = {f: artifacts.publish(f"gke/bench/{f}", t) for f, t in runner_files().items()}
        self.runner = k8s.core.v1.ConfigMap(
            f"{name}-runner",
            metadata={"namespace": namespace, "labels": BENCH_LABELS},
            data=files,
            opts=child_opts(self),
        )
        # Ingress and egress of the pods on the pod network (the rendezvous of host-network pods: gke_rendezvous).
        self.network_policies = bench_network_policies(self, name, namespace)
        after_install = depends_of(opts)
        self.service: k8s.core.v1.Service | None = None
        self.jobs: dict[str, k8s.batch.v1.Job] = {}
        b = cfg.benchmarks
        pod_spec_of: dict[str, dict[str, Any]] = {}
        per_test_s = b.timeout_minutes * 60
        for test in (t for t in b.tests if gke_rehearsal.keeps_test(cfg, t)):  # rehearsal: the internode probe
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
                    opts=child_opts(self),
                )
                depends.append(self.service)
                count = cfg.node_count
                shape: dict[str, Any] = {"completion_mode": "Indexed", "completions": count, "parallelism": count}
            else:
                shape = {"completions": 1, "parallelism": 1}
            # With queued provisioning every benchmark pod runs on the request's nodes (components/gke/queued.py).
            annotations = {**bench_pod_annotations(cfg, test, nets), **queued.consume_annotations(cfg)}
            annotations = gke_rehearsal.pod_annotations(cfg, annotations)
            pod_spec = bench_pod_spec(cfg, test, self.runner.metadata.name, args.installed_hash)
            pod_spec = pod_spec_of[test] = gke_rehearsal.bench_pod(cfg, test, pod_spec)
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
                spec=k8s_spec(
                    {
                        **shape,
                        "backoff_limit": JOB_BACKOFF_LIMIT * (shape["completions"] if test == "internode" else 1),
                        # The NCCL check under its timeout, every start of the test under its own (twice over),
                        # plus waiting for pod 0's DNS.
                        "active_deadline_seconds": per_test_s + 2 * b.test_budget_seconds + 1800,
                        "ttl_seconds_after_finished": JOB_TTL_SECONDS,
                        "pod_failure_policy": {
                            "rules": [
                                # Spot preemption or a node drain is not the benchmark's failure: retry freely.
                                {
                                    "action": "Ignore",
                                    "on_pod_conditions": [{"type": "DisruptionTarget", "status": "True"}],
                                },
                                # The runner's usage error (bad arguments, node not installed) does not heal, and
                                # a run without evidence (NOT PROVEN) would lack it again.
                                {
                                    "action": "FailJob",
                                    "on_exit_codes": {
                                        "container_name": BENCH_CONTAINER,
                                        "operator": "In",
                                        "values": [RUNNER_USAGE_EXIT, RUNNER_UNPROVEN_EXIT],
                                    },
                                },
                            ]
                        },
                        "template": {
                            "metadata": {"labels": labels, "annotations": annotations},
                            # GKE's webhook requests each named network twice; the plain entry's "0" lets a node that
                            # advertises only `.IP` take the pod (network_resources.py, troubleshooting T27).
                            "spec": with_network_zeros(pod_spec, annotations),
                        },
                    }
                ),
                # A changed Job template can only be replaced; its fixed name must go first.
                opts=child_opts(self, depends_on=depends, delete_before_replace=True),
            )
        if cfg.rehearsal and "internode" in self.jobs:  # the pod outside the internode selector
            self.outsider = gke_rehearsal.outsider_job(self, name, cfg, namespace, pod_spec_of["internode"])
        self.register_outputs({"jobs": {t: j.metadata.name for t, j in self.jobs.items()}})

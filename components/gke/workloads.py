"""GKE workloads: the installer DaemonSet and the DeepEP benchmark Jobs, through the explicit provider.

`build_gke_workloads(cfg, k8s_provider, node_pool=..., network_names=...)` creates, in the namespace
`deepep-a4`:

InstallerDaemonSet
    On every A4 node (node selector on the pool label, toleration of the GPU taint,
    `system-node-critical` priority, which GKE admits outside kube-system only under a ResourceQuota
    scoped to that class, created here), a **privileged init container** with the host's PID namespace
    and root file system copies the rendered installer (ConfigMap, from
    `components/node/installer.py`) to the host and runs its `run.sh` there
    through `nsenter` into PID 1's namespaces. Exit 75 means the installer scheduled a reboot: the
    container waits for the node to go down (the pod starts again after boot and the installer
    resumes); any other non-zero exit fails the container, which the kubelet retries with back-off.
    When the status file says ready, the init container writes the version hash next to it and labels
    the node `deepep-a4/installed=<hash>` (ServiceAccount + ClusterRole with only get/patch on nodes).
    The **main container** (`containerImage`, unprivileged, read-only state mount) just stays Running; its
    readiness probe passes only while the status file says ready *for this version hash*, so Pulumi's
    DaemonSet await means "installed on every A4 node", with a `pulumi.com/timeoutSeconds` that covers
    a cold install and the reboot. The hash is also a pod-template annotation: a changed version set
    rolls the DaemonSet.

CosDriverInstaller (with `gkeGpuDriver: cos-installer` only)
    Google's COS driver installer DaemonSet (cos_driver.py), pinned to `gkeCosDriverVersion`: the driver on
    every A4 node whose GKE driver installation is disabled; the staging DaemonSet waits for it.

GibInstaller (with `ncclGib`, the default)
    Google's NCCL RDMA installer DaemonSet (gke_gib.py): the gIB NCCL plugin into the host's
    `/home/kubernetes/bin/gib` on every A4 node, never beside the driver's libraries; Ready once copied.

BenchmarkJobs
    The runner (scripts/bench/, as scripts/payload.py lists it) in a ConfigMap; an intranode and a low-latency
    Job (one pod, one node, 8 GPUs) and the internode test as an **Indexed Job** (completions = parallelism =
    node count, headless Service + `subdomain`, RANK = completion index, WORLD_SIZE = node count, MASTER_ADDR
    = pod 0's DNS name). Only the tests in `benchmarks` are created. Pod networking per `podNetworking`:
    `hostNetwork`, or the multi-network annotations (eth0 the pod network, eth2..eth9 the eight RDMA Networks
    in NIC order, as Google's A4 pods). Every Job depends on the DaemonSet (created after every node is
    installed), on the gIB DaemonSet (every node has the plugin) and on the multi-network objects (destroyed
    after the Jobs), carries `pulumi.com/skipAwait` (Pulumi does not wait for the benchmark), ignores spot
    preemption in its podFailurePolicy (DisruptionTarget), fails at once on the runner's usage error (exit 2),
    and stays `ttlSecondsAfterFinished` (3 days) so `deepep-a4 report` can read the logs.

Benchmark pod privileges: decided in gke_pod_security.py (with the default `podNetworking: hostNetwork` the
RDMA benchmark pods are privileged, as Google's A4 recipes run them; `multiNetwork` keeps them unprivileged on
`host-install`, unproven on Ubuntu with DOCA-OFED; on `supported` they are privileged root in both, for IBGDA
with GKE's driver). GPUs come from GKE's device plugin
(`nvidia.com/gpu: 8`); only the RDMA tests (internode, low-latency) get the multi-network interfaces.
Read-only host mounts: the install root (same path, so the env file's paths hold) and GKE's gIB NCCL
plugin folder; writable: emptyDirs for results, /tmp (HOME), a memory /dev/shm (NCCL) and libibverbs'
provider folder (the env file copies the host's mlx5 provider there, docs/troubleshooting.md T16).
NetworkPolicies (gke_rendezvous.py): internode pods admit only each other, other pods nothing; benchmark
pods send only DNS and traffic to the internode pods; with hostNetwork a host-VPC firewall guards the
rendezvous port.
No apt or pip at run time: the pod's environment is the installer's env file on top of the device
plugin's driver paths, minus TORCH_NCCL_USE_COMM_NONBLOCKING; the runner adds Google's NCCL gIB
settings where the plugin is installed and `ncclGib` is on, and the socket interfaces of the pod networking.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import StackConfig
from components.config.rules.driver import COS_INSTALLER
from components.gke import queued
from components.gke import rehearsal as gke_rehearsal
from components.gke.bench import BenchmarkJobs, BenchmarkJobsArgs, bench_pod_spec
from components.gke.cos_driver import CosDriverArgs, CosDriverInstaller
from components.gke.gib import GibArgs, GibInstaller
from components.gke.installer import InstallerArgs, InstallerDaemonSet
from components.gke.objects import NAMESPACE, PART_OF, child_opts, depends_of

# What the plan and the stack outputs say of each pod networking (docs/conformance.md, GKE workloads).
POD_NETWORKING_LABELS = {
    "hostNetwork": "hostNetwork (privileged RDMA pods, as Google's A4 recipes and field report R2 ran)",
    "multiNetwork": "multiNetwork (unproven on Ubuntu with DOCA-OFED: every Google multi-network A4 example runs "
    "on COS)",
}
# nodeProfile=supported runs COS, where Google's A4 pod recipes take the RDMA NICs through multi-networking.
STAGED_POD_NETWORKING_LABELS = {
    "hostNetwork": "hostNetwork (privileged root RDMA pods on COS; Google's A4 COS examples use multiNetwork)",
    "multiNetwork": "multiNetwork (privileged root RDMA pods on COS, as Google's A4 GPUDirect-RDMA guide runs them)",
}


@dataclass(frozen=True)
class GkeWorkloadsArgs:
    cfg: StackConfig
    network_names: Sequence[str] | None = None  # the eight RDMA Network objects in NIC order
    # The multi-network objects (GKENetworkParamSet, Network): the Jobs depend on them, so destroy deletes
    # every benchmark pod before the networks it attaches to.
    networks: Sequence[pulumi.Resource] = ()


class GkeWorkloads(pulumi.ComponentResource):
    """Namespace, installer DaemonSet and benchmark Jobs (see the module doc). `opts` carries the cluster's
    Kubernetes provider and, in depends_on, the A4 node pool the namespace waits for."""

    def __init__(self, name: str, args: GkeWorkloadsArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:Workloads", name, None, opts)
        cfg = args.cfg
        after_pool = depends_of(opts)
        self.namespace = k8s.core.v1.Namespace(
            f"{name}-ns",
            # The installer is privileged: say so, rather than depend on the cluster's default level.
            metadata={"name": NAMESPACE, "labels": {**PART_OF, "pod-security.kubernetes.io/enforce": "privileged"}},
            opts=child_opts(self, depends_on=after_pool),
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
            opts=child_opts(self),
        )
        # The rehearsal's probes, mounted by the probe pods (components/gke/rehearsal.py).
        probes = [gke_rehearsal.probes_config_map(self, name, ns)] if cfg.rehearsal else []
        # gkeGpuDriver cos-installer: the pinned driver on every node before staging (cos_driver.py).
        self.cos_driver: CosDriverInstaller | None = None
        if cfg.gke.gpu_driver == COS_INSTALLER:
            self.cos_driver = CosDriverInstaller(
                f"{name}-cos-driver",
                CosDriverArgs(cfg, ns),
                pulumi.ResourceOptions(parent=self, depends_on=[self.critical_quota, *after_pool]),
            )
        driver = [self.cos_driver.daemon_set] if self.cos_driver is not None else []
        self.installer = InstallerDaemonSet(
            f"{name}-installer",
            InstallerArgs(cfg, ns),
            pulumi.ResourceOptions(parent=self, depends_on=[self.critical_quota, *after_pool, *driver, *probes]),
        )
        self.gib: GibInstaller | None = None
        if cfg.installer.nccl_gib and not cfg.rehearsal:  # a GPU phase: no rehearsal
            self.gib = GibInstaller(
                f"{name}-gib",
                GibArgs(ns),
                pulumi.ResourceOptions(parent=self, depends_on=[self.critical_quota, *after_pool]),
            )
        # Pulumi waits for each DaemonSet to be Ready: every node installed, every node with the gIB plugin.
        ready: list[pulumi.Resource] = [self.installer.daemon_set]
        if self.gib is not None:
            ready.append(self.gib.daemon_set)
        self.benchmarks = BenchmarkJobs(
            f"{name}-bench",
            BenchmarkJobsArgs(cfg, ns, self.installer.versions_hash, args.network_names),
            pulumi.ResourceOptions(parent=self, depends_on=[*ready, *args.networks]),
        )
        # flex-start: the ProvisioningRequest that brings every node up at once (components/gke/queued.py).
        self.queued: queued.QueuedNodes | None = None
        if queued.queued(cfg):
            test = "internode" if "internode" in cfg.benchmarks.tests else cfg.benchmarks.tests[0]
            pod = bench_pod_spec(cfg, test, self.benchmarks.runner.metadata.name, self.installer.versions_hash)
            self.queued = queued.QueuedNodes(f"{name}-queued", cfg, ns, pod, pulumi.ResourceOptions(parent=self))
        self.register_outputs({"namespace": ns})


def build_gke_workloads(
    cfg: StackConfig,
    k8s_provider: k8s.Provider,
    node_pool: pulumi.Resource | None = None,
    network_names: Sequence[str] | None = None,
    networks: Sequence[pulumi.Resource] = (),
    gcp_provider: pulumi.ProviderResource | None = None,
) -> dict[str, Any]:
    """Creates the workloads and returns the stack outputs they add. `gcp_provider` answers the gIB image's
    digest lookup (Artifact Registry)."""
    after = [node_pool] if node_pool is not None else []
    providers: list[pulumi.ProviderResource] = [k8s_provider, *([gcp_provider] if gcp_provider else [])]
    w = GkeWorkloads(
        "deepep",
        GkeWorkloadsArgs(cfg, network_names, networks),
        pulumi.ResourceOptions(
            providers=providers,
            depends_on=after,
            # Queued provisioning: the nodes come when the request is provisioned, not during `up`.
            transformations=[queued.skip_daemon_set_await] if queued.queued(cfg) else None,
        ),
    )
    return {
        "benchNamespace": w.namespace.metadata.name,
        "benchJobs": {t: j.metadata.name for t, j in w.benchmarks.jobs.items()},
        "installedVersionsHash": w.installer.versions_hash,
        "podNetworking": (STAGED_POD_NETWORKING_LABELS if cfg.staged else POD_NETWORKING_LABELS)[
            cfg.gke.pod_networking
        ],
        "ncclGib": w.gib.image if w.gib is not None else "off (ncclGib=false): NCCL's built-in IB transport",
        "resultsCommand": ".venv/bin/deepep-a4 report --stack " + pulumi.get_stack(),
    }

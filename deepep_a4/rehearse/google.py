"""What the rehearsal asks Google and the cluster itself, through their client libraries (each imported on first use:
they take seconds to load). Every class takes its client in the constructor, so tests hand in fakes.

- the seams Google must answer: A4 quota in the region and the machine type in the zone, read by
  deepep_a4/cloud/capacity_reads.py (the capacity command's module: one module, two callers);
- the deadline: the Cloud Scheduler job's force-run (jobs.run,
  https://cloud.google.com/scheduler/docs/reference/rpc/google.cloud.scheduler.v1#google.cloud.scheduler.v1.CloudScheduler.RunJob),
  the pool's status (nodePools.get) and who deleted it (Cloud Audit Logs, entries.list: the Admin Activity log
  records DeleteNodePool with its principal, https://cloud.google.com/kubernetes-engine/docs/how-to/audit-logging);
- the probes' lines: pod logs (GKE, the kubernetes client on the stack's kubeconfig) and the serial console (GCE,
  instances.getSerialPortOutput, where the guest agent writes the startup script's output).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from components.config import StackConfig
from deepep_a4.rehearse.checklist import Seam, seam


def google_reads(cfg: StackConfig, reads: Any = None) -> list[Seam]:
    """A4 quota in the region (enough GPUs for the real stack's nodes) and machineTypes.get in the zone."""
    if reads is None:
        # The capacity command's module (one module, two callers), and its google-cloud-compute, come with it.
        from deepep_a4.cloud import capacity_reads as reads  # pyright: ignore[reportMissingImports]
    out: list[Seam] = []
    started = time.monotonic()
    try:
        offered = reads.machine_type_offered(cfg.project, cfg.zone, cfg.machine_type)
        evidence = f"machineTypes.get {cfg.project}/{cfg.zone}/{cfg.machine_type} -> " + (
            "found" if offered else "404: not offered in this zone"
        )
    except Exception as err:  # no permission, no API enabled: the seam's FAIL, with Google's words
        offered, evidence = False, f"machineTypes.get {cfg.zone}/{cfg.machine_type} -> {type(err).__name__}: {err}"
    out.append(seam("google-machine-type", offered, evidence, time.monotonic() - started, "workstation"))
    started = time.monotonic()
    need = cfg.shape.gpus * cfg.node_count
    try:
        metric = reads.gpu_quota_metric(cfg.provisioning)
        limit, usage = reads.region_quotas(cfg.project, cfg.region).get(metric, (0.0, 0.0))
        ok = limit - usage >= need
        evidence = f"regions.get {cfg.region} quota {metric}: limit {limit:g}, usage {usage:g}; the stack needs {need}"
    except Exception as err:
        ok, evidence = False, f"regions.get {cfg.region} -> {type(err).__name__}: {err}"
    out.append(seam("google-quota", ok, evidence, time.monotonic() - started, "workstation"))
    return out


def deadline_job(cfg: StackConfig) -> str:
    """The GKE deadline's Cloud Scheduler job (components/gke/deadline.py names it)."""
    return f"projects/{cfg.project}/locations/{cfg.region}/jobs/{cfg.name_prefix}-a4-deadline"


def fire_deadline(cfg: StackConfig, client: Any = None) -> str:
    """Force-runs the deadline job now (jobs.run); returns what the API said."""
    if client is None:
        from google.cloud import scheduler_v1

        client = scheduler_v1.CloudSchedulerClient()
    job = client.run_job(name=deadline_job(cfg))
    return f"jobs.run {deadline_job(cfg)} -> state {getattr(job.state, 'name', job.state)}"


class PoolWatch:
    """probe_deadline.PoolClient: the rehearsal pool's status and the principal that deleted it."""

    def __init__(self, cfg: StackConfig, cluster: str, pool: str, client: Any = None, post: Any = None):
        self.name = f"projects/{cfg.project}/locations/{cfg.region}/clusters/{cluster}/nodePools/{pool}"
        self.project = cfg.project
        self._client, self._post = client, post

    def pool_status(self) -> str | None:
        from google.api_core import exceptions

        if self._client is None:
            from google.cloud import container_v1

            self._client = container_v1.ClusterManagerClient()
        try:
            pool = self._client.get_node_pool(name=self.name)
        except exceptions.NotFound:
            return None
        return getattr(pool.status, "name", str(pool.status))

    def deleted_by(self) -> str | None:
        if self._post is None:
            from deepep_a4.store.remote import google_post

            self._post = google_post()
        # The audit entry names the pool as projects/P/locations/L/... or projects/P/zones/Z/...: match its tail
        # (`:` is the filter language's "has" operator, https://cloud.google.com/logging/docs/view/logging-query-language).
        tail = self.name[self.name.index("/clusters/") + 1 :]
        flt = (
            'protoPayload.methodName="google.container.v1.ClusterManager.DeleteNodePool" '
            f'AND protoPayload.resourceName:"{tail}"'
        )
        body = {"resourceNames": [f"projects/{self.project}"], "filter": flt, "orderBy": "timestamp desc"}
        entries = self._post("https://logging.googleapis.com/v2/entries:list", body | {"pageSize": 5}).get("entries")
        for entry in entries or []:
            who = ((entry.get("protoPayload") or {}).get("authenticationInfo") or {}).get("principalEmail")
            if who:
                return str(who)
        return None


class VmWatch:
    """probe_deadline.VmClient and the serial console of one VM (google-cloud-compute, the capacity module's
    dependency)."""

    def __init__(self, cfg: StackConfig, instance: str, client: Any = None):
        self.project, self.zone, self.instance = cfg.project, cfg.zone, instance
        self._client = client

    def _instances(self) -> Any:
        if self._client is None:
            from google.cloud import compute_v1  # pyright: ignore[reportAttributeAccessIssue]

            self._client = compute_v1.InstancesClient()
        return self._client

    def instance_status(self) -> str | None:
        from google.api_core import exceptions

        try:
            vm = self._instances().get(project=self.project, zone=self.zone, instance=self.instance)
        except exceptions.NotFound:
            return None
        return str(vm.status)

    def resource(self) -> Any:
        return self._instances().get(project=self.project, zone=self.zone, instance=self.instance)

    def serial(self) -> str:
        out = self._instances().get_serial_port_output(
            project=self.project, zone=self.zone, instance=self.instance, port=1
        )
        return str(out.contents)


class Pods:
    """The probe pods' logs and the outsider's start, with the kubernetes client on the stack's kubeconfig."""

    def __init__(self, kubeconfig: str, namespace: str, core: Any = None, batch: Any = None):
        self.namespace = namespace
        if core is None or batch is None:
            import tempfile
            from pathlib import Path

            from kubernetes import client
            from kubernetes import config as kube_config

            path = Path(tempfile.mkdtemp(prefix="deepep-rehearsal-")) / "kubeconfig"
            path.write_text(kubeconfig)
            api = kube_config.new_client_from_config(config_file=str(path))
            core, batch = client.CoreV1Api(api), client.BatchV1Api(api)
        self.core, self.batch = core, batch

    def logs(self, selector: str, container: str) -> dict[str, str]:
        """{pod name: its container's log} of every pod the label selector matches ("" while it has not started)."""
        out: dict[str, str] = {}
        for pod in self.core.list_namespaced_pod(self.namespace, label_selector=selector).items:
            try:
                out[pod.metadata.name] = self.core.read_namespaced_pod_log(
                    pod.metadata.name, self.namespace, container=container
                )
            except Exception:  # ContainerCreating, PodInitializing: nothing to read yet
                out[pod.metadata.name] = ""
        return out

    def resume(self, job: str) -> None:
        """A suspended Job starts (spec.suspend false)."""
        self.batch.patch_namespaced_job(job, self.namespace, {"spec": {"suspend": False}})


def wait_for(ask: Callable[[], bool], timeout_s: float, poll_s: float, clock=time.monotonic, sleep=time.sleep) -> bool:
    until = clock() + timeout_s
    while True:
        if ask():
            return True
        if clock() >= until:
            return False
        sleep(poll_s)

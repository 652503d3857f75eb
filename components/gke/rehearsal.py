"""The GKE side of the rehearsal (components/rehearsal.py): probe pods in the real objects' places.

- The staging DaemonSet keeps its KSA, RBAC, node policy, NetworkPolicies and node selection; its init container
  runs scripts/rehearse/probe_stage.py (PROBE_IMAGE) in the staging container's place, with the same security
  context and projected token, and always exits 0 (the probe's REHEARSAL lines are the verdict, read from the
  pod's log by `deepep-a4 rehearse`). The main container only sleeps: nothing is installed, so the real readiness
  check (the installed state) would never pass; Pulumi's DaemonSet await then means "the probe ran on every node".
- The internode benchmark Job keeps its name, labels, Indexed shape, Service, subdomain, anti-affinity and
  policies; its container runs probe_internode.py with no GPU and no RDMA interface. One more Job, labelled as a
  benchmark pod of another test (the pod outside the internode selector), must be refused on the rendezvous port.
- gIB's DaemonSet and the single-node GPU tests are left out (GPU phases).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import rehearsal
from components.config import StackConfig
from components.gke.objects import (
    BENCH_CONTAINER,
    BENCH_LABELS,
    INSTALLED_LABEL,
    INTERNODE_SERVICE,
    MASTER_PORT,
    NAMESPACE,
    PART_OF,
    TEST_LABEL,
    child_opts,
    k8s_spec,
)

PROBES_CONFIG_MAP = "deepep-rehearsal-probes"
PROBES_VOLUME = "rehearsal-probes"
# Pulumi's await of the probe DaemonSet: the probes take seconds once the node is up.
DAEMON_SET_TIMEOUT_SECONDS = 15 * 60
OUTSIDER_JOB = "deepep-rehearsal-outsider"
PROBE_DEADLINE_SECONDS = 15 * 60
KUBELET_PORT = 10250
# Rank 0 keeps listening this long after its peers, so the outsider (started by `deepep-a4 rehearse` once rank 0
# said PASS: the Job is created suspended) has a listener to be refused by (probe_internode.py).
RANK0_LINGER_S = 300


def probes_config_map(parent: pulumi.Resource, name: str, namespace: Any) -> k8s.core.v1.ConfigMap:
    return k8s.core.v1.ConfigMap(
        f"{name}-rehearsal-probes",
        metadata={"name": PROBES_CONFIG_MAP, "namespace": namespace, "labels": PART_OF},
        data=rehearsal.probe_files(),
        opts=child_opts(parent),
    )


def _probe_command(probe: str) -> list[str]:
    # `|| true`: a FAIL is a line in the log, not a crash loop that keeps Pulumi waiting for the DaemonSet.
    return ["sh", "-c", f"python3 {rehearsal.PROBE_MOUNT}/{probe} || echo 'probe {probe} exited '$?"]


def _with_probes(spec: dict[str, Any]) -> dict[str, Any]:
    volume = {"name": PROBES_VOLUME, "config_map": {"name": PROBES_CONFIG_MAP, "default_mode": 0o444}}
    return {**spec, "volumes": [*spec["volumes"], volume]}


def _probe_mount() -> dict[str, Any]:
    return {"name": PROBES_VOLUME, "mount_path": rehearsal.PROBE_MOUNT, "read_only": True}


def stage_env(cfg: StackConfig, versions_hash: str) -> list[dict[str, Any]]:
    """What probe_stage.py reads (its docstring) besides the installer's own environment (NODE_NAME)."""
    values = {
        "REHEARSAL_STORE_URL": cfg.installer.store_url,
        "REHEARSAL_STORE_MANIFEST": cfg.installer.store_manifest,
        # The label the installer sets when it is done: the one the node policy lets the pod patch.
        "REHEARSAL_NODE_LABEL": f"{INSTALLED_LABEL}={versions_hash}",
        # The node's kubelet listens there, so a failed connect is the egress policy's doing (probe_stage.py).
        "REHEARSAL_DENIED": f"$(REHEARSAL_NODE_IP):{KUBELET_PORT}",
    }
    if cfg.staged:  # Workload Identity Federation, no Google service account: the pool's name is the email
        values["REHEARSAL_EXPECT_EMAIL"] = f"{cfg.project}.svc.id.goog"
    node_ip = {"name": "REHEARSAL_NODE_IP", "value_from": {"field_ref": {"field_path": "status.hostIP"}}}
    return [node_ip, *({"name": k, "value": v} for k, v in values.items())]


def stage_pod(cfg: StackConfig, spec: dict[str, Any], versions_hash: str) -> dict[str, Any]:
    """The staging (or installer) pod with the stage probe in its init container's place."""
    init, *rest = spec["init_containers"]
    probe = {
        **init,
        "image": rehearsal.PROBE_IMAGE,
        "command": _probe_command(rehearsal.PROBE_STAGE),
        "env": [*init["env"], *stage_env(cfg, versions_hash)],
        "volume_mounts": [*init["volume_mounts"], _probe_mount()],
    }
    sleeper = {
        **{k: v for k, v in spec["containers"][0].items() if k != "readiness_probe"},
        "image": rehearsal.PROBE_IMAGE,
        "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"],
    }
    out = _with_probes({**spec, "init_containers": [probe, *rest], "containers": [sleeper]})
    if not cfg.staged:
        # host-install: the installer runs in the host's namespaces (nsenter), so it reads the store as the node's
        # account; the probe proves that principal from the host's network (no host PID, no privilege needed).
        out = {**out, "host_network": True, "dns_policy": "ClusterFirstWithHostNet", "host_pid": False}
    return out


def keeps_test(cfg: StackConfig, test: str) -> bool:
    return not cfg.rehearsal or test in rehearsal.KEPT_TESTS


def bench_pod(cfg: StackConfig, test: str, spec: dict[str, Any]) -> dict[str, Any]:
    """A benchmark pod as the internode probe: the same pod placement, network and identity; no GPU, no host
    folders of the install (nothing was installed), the probe instead of the runner."""
    if not cfg.rehearsal:
        return spec
    container = spec["containers"][0]
    probe = {
        "name": BENCH_CONTAINER,
        "image": rehearsal.PROBE_IMAGE,
        "command": _probe_command(rehearsal.PROBE_INTERNODE),
        "env": [
            e for e in container["env"] if e["name"] in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "HOME")
        ]
        + [
            {"name": "REHEARSAL_ROLE", "value": "peer"},
            {"name": "REHEARSAL_LINGER_S", "value": str(RANK0_LINGER_S)},
        ],
        "security_context": container["security_context"],
        "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"cpu": "500m", "memory": "128Mi"}},
        "volume_mounts": [m for m in container["volume_mounts"] if m["name"] == "tmp"] + [_probe_mount()],
    }
    # The real selector waits for the installed label, which nothing sets here: the pool's label selects.
    selector = {k: v for k, v in spec["node_selector"].items() if k != INSTALLED_LABEL}
    out = {
        **{k: v for k, v in spec.items() if k not in ("init_containers",)},
        "node_selector": selector,
        "containers": [probe],
        "volumes": [v for v in spec["volumes"] if v["name"] == "tmp"],
    }
    return _with_probes(out)


def pod_annotations(cfg: StackConfig, annotations: dict[str, str]) -> dict[str, str]:
    """No multi-network interfaces: the RDMA Networks cannot attach to an e2 node (the objects stay)."""
    return {} if cfg.rehearsal else annotations


def outsider_job(parent: pulumi.Resource, name: str, cfg: StackConfig, namespace: Any, spec: dict[str, Any]) -> Any:
    """A benchmark pod of another test (inside `deepep-bench-isolated`, outside `internode-peers`): the peers'
    ingress must refuse it on the rendezvous port. `spec`: the internode probe pod's spec."""
    labels = {**BENCH_LABELS, TEST_LABEL: rehearsal.OUTSIDER_TEST}
    pod = {k: v for k, v in spec.items() if k not in ("subdomain", "affinity", "host_network", "dns_policy")}
    container = pod["containers"][0]
    env = [e for e in container["env"] if e["name"] in ("MASTER_ADDR", "MASTER_PORT", "HOME")]
    env = [*env, {"name": "REHEARSAL_ROLE", "value": "outsider"}]
    pod = {**pod, "containers": [{**container, "env": env}]}
    return k8s.batch.v1.Job(
        f"{name}-rehearsal-outsider",
        # Created suspended: `deepep-a4 rehearse` resumes it once rank 0 listens (a refusal before would only mean
        # that nothing listened yet); Pulumi does not wait for it.
        metadata={
            "name": OUTSIDER_JOB,
            "namespace": namespace,
            "labels": labels,
            "annotations": {"pulumi.com/skipAwait": "true"},
        },
        spec=k8s_spec(
            {
                "suspend": True,
                "completions": 1,
                "parallelism": 1,
                "backoff_limit": 0,
                "active_deadline_seconds": PROBE_DEADLINE_SECONDS,
                "template": {"metadata": {"labels": labels}, "spec": pod},
            }
        ),
        opts=child_opts(parent),
    )


# The internode peers' DNS name and port, as bench_env() gives them (for the docs and the rehearse command).
MASTER = f"deepep-internode-0.{INTERNODE_SERVICE}.{NAMESPACE}.svc.cluster.local:{MASTER_PORT}"

"""The installer DaemonSet: the rendered installer on every A4 node, Ready only where it finished.

nodeProfile=host-install: a privileged init container copies the installer (a ConfigMap) to the host and runs
it in the host's namespaces (scripts/gke/installer-init.sh). nodeProfile=supported: the init container stages
the user space in its own image, entering no host namespace (scripts/gke/stage-init.sh, components/gke/stage.py).
Either way a small unprivileged main container stays Running and
is Ready only while the node's status file says ready for this version set, so Pulumi's DaemonSet await
means "installed on every A4 node".
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import artifacts
from components.config import StackConfig
from components.gke import pod_security as security
from components.gke import rehearsal as gke_rehearsal
from components.gke import stage as gke_stage
from components.gke import staging_access as gke_stage_access
from components.gke.node_policy import InstallerNodePolicy
from components.gke.objects import (
    INSTALL_ROOT,
    INSTALL_TIMEOUT_SECONDS,
    INSTALLED_LABEL,
    INSTALLER_ENTRY,
    INSTALLER_LABELS,
    INSTALLER_NAME,
    INSTALLER_RESOURCES,
    REBOOT_EXIT,
    REBOOT_WAIT_SECONDS,
    STATE_DIR,
    STATUS_FILE,
    VERSIONS_ANNOTATION,
    a4_node_pod,
    child_opts,
    daemon_set_metadata,
    depends_of,
    every_node_at_once,
    installer_ksa,
    k8s_spec,
    no_ingress_policy,
    ready_check,
)
from components.node import installer, pins
from scripts import payload


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
        "profile": cfg.node_profile,
        "installer": asdict(cfg.installer),
        "nvshmem": asdict(cfg.nvshmem),
        # A pinned COS driver build is part of the set (unchanged text for GKE's own choices: same hashes).
        "gpuDriver": f"{cfg.gke.gpu_driver}={cfg.gke.cos_driver_version}"
        if cfg.gke.cos_driver_version
        else cfg.gke.gpu_driver,
        "files": {k: hashlib.sha256(v.encode()).hexdigest() for k, v in sorted(files.items())},
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def configmap_key(path: str) -> str:
    """ConfigMap keys allow [-._a-zA-Z0-9] only: nested paths are flattened and mapped back by `items`."""
    return path.replace("/", "__")


READY_CHECK = ready_check("/deepep-state")
# Where the init container finds its token and the cluster's CA (the path an automounted token would have).
SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
# The token the init container labels its node with: bound to the pod (and so to its node), an hour at most
# (the kubelet renews it while the pod runs), with the cluster's CA from the namespace's kube-root-ca.crt.
KUBE_API_VOLUME: dict[str, Any] = {
    "name": "kube-api",
    "projected": {
        "default_mode": 0o400,
        "sources": [
            {"service_account_token": {"path": "token", "expiration_seconds": 3600}},
            {"config_map": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
        ],
    },
}


@dataclass(frozen=True)
class InstallerArgs:
    """The stack config (what the installer renders from, the image it runs in) and the namespace."""

    cfg: StackConfig
    namespace: pulumi.Input[str]


def init_env(versions: str, staged: bool = False) -> list[dict[str, Any]]:
    """What the init-container script (scripts/gke/installer-init.sh or stage-init.sh) reads from its environment."""
    paths = gke_stage.PATHS if staged else {"root": INSTALL_ROOT, "state": STATE_DIR, "status": STATUS_FILE}
    values = {
        "VERSIONS_HASH": versions,
        "INSTALL_ROOT": paths["root"],
        "STATE_DIR": paths["state"],
        "STATUS_FILE": paths["status"],
        "INSTALLER_ENTRY": INSTALLER_ENTRY,
        "EXIT_REBOOT": str(REBOOT_EXIT),
        "REBOOT_WAIT_SECONDS": str(REBOOT_WAIT_SECONDS),
        "INSTALLED_LABEL": INSTALLED_LABEL,
    }
    env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in values.items()]
    return [*env, {"name": "NODE_NAME", "value_from": {"field_ref": {"field_path": "spec.nodeName"}}}]


class InstallerDaemonSet(pulumi.ComponentResource):
    """The installer on every A4 node; Ready on a node only once it is installed (see gke_workloads)."""

    def __init__(self, name: str, args: InstallerArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:InstallerDaemonSet", name, None, opts)
        cfg, namespace = args.cfg, args.namespace
        staged = cfg.staged  # nodeProfile=supported: stage the user space in the container (gke_stage.py)
        files = installer_files(cfg)  # the rendered installer, {relative path: text}
        self.versions_hash = versions_hash(cfg, files)
        image = gke_stage.image(cfg) if staged else security.image(cfg)
        # Scanner findings this DaemonSet accepts, with the reason for each.
        skips = (
            gke_stage.STAGE_SKIPS | gke_stage.image_skips(cfg)
            if staged
            else security.INSTALLER_SKIPS | security.image_skips(cfg)
        )
        init = payload.gke_stage_init() if staged else payload.gke_installer_init()
        script = artifacts.publish("gke/installer-daemonset/init.sh", init)

        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-files",
            metadata={"namespace": namespace, "labels": INSTALLER_LABELS},
            # config.sh with the digests kept at the first `up` (pins.py); the hash above names the stand-ins.
            data={configmap_key(p): t for p, t in pins.node_installer(cfg, "gke", files, self).items()}
            | {"daemonset-init.sh": script},
            opts=child_opts(self),
        )
        # Named for the stack: its Workload Identity principal (the store grant, supported) is one stack's.
        ksa = installer_ksa(cfg.stack)
        self.service_account = k8s.core.v1.ServiceAccount(
            f"{name}-sa",
            metadata={"name": ksa, "namespace": namespace, "labels": INSTALLER_LABELS},
            opts=child_opts(self),
        )
        self.cluster_role = k8s.rbac.v1.ClusterRole(
            f"{name}-label-nodes",
            metadata={"labels": INSTALLER_LABELS},
            rules=[{"api_groups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]}],
            opts=child_opts(self),
        )
        self.binding = k8s.rbac.v1.ClusterRoleBinding(
            f"{name}-label-nodes",
            metadata={"labels": INSTALLER_LABELS},
            role_ref={
                "api_group": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": self.cluster_role.metadata.name,
            },
            subjects=[{"kind": "ServiceAccount", "name": ksa, "namespace": namespace}],
            opts=child_opts(self),
        )

        # What RBAC cannot say: its own node only, the installed label only (gke_node_policy.py).
        self.node_policy = InstallerNodePolicy(f"{name}-own-node", ksa, pulumi.ResourceOptions(parent=self))
        # The installer serves nothing: no ingress at all.
        self.network_policy = no_ingress_policy(self, name, INSTALLER_NAME, namespace, INSTALLER_LABELS)
        if staged:
            # The staging pod fetches on the pod network: DNS, the metadata server, Cloud Storage, the API server.
            self.egress_policy = gke_stage_access.egress_policy(self, name, cfg, namespace)
        items = [{"key": configmap_key(p), "path": p, "mode": 0o755} for p in sorted(files)]
        env = init_env(self.versions_hash, staged)
        pod_labels = {**INSTALLER_LABELS}
        volume_items = [*items, {"key": "daemonset-init.sh", "path": "daemonset-init.sh", "mode": 0o755}]
        ready = ready_container(image, self.versions_hash)
        if staged:
            pod_spec = gke_stage.pod_spec(image, env, ready, self.config_map.metadata.name, volume_items)
        else:
            pod_spec = host_pod_spec(image, env, ready, self.config_map.metadata.name, volume_items)
        if cfg.rehearsal:  # the stage probe in the installer's place (components/gke/rehearsal.py)
            pod_spec = gke_rehearsal.stage_pod(cfg, pod_spec, self.versions_hash)
        self.daemon_set = k8s.apps.v1.DaemonSet(
            name,
            # Pulumi awaits the DaemonSet until every pod is Ready: a cold install and its reboot.
            metadata=daemon_set_metadata(
                INSTALLER_NAME,
                namespace,
                INSTALLER_LABELS,
                gke_rehearsal.DAEMON_SET_TIMEOUT_SECONDS if cfg.rehearsal else INSTALL_TIMEOUT_SECONDS,
                security.skip_annotations(skips),
            ),
            spec=k8s_spec(
                {
                    **every_node_at_once(INSTALLER_NAME),
                    "template": {
                        "metadata": {
                            "labels": pod_labels,
                            "annotations": {VERSIONS_ANNOTATION: self.versions_hash},
                        },
                        "spec": {"service_account_name": ksa, **with_node_token(pod_spec)},
                    },
                }
            ),
            # A component's depends_on does not reach its children: the DaemonSet names its own.
            opts=child_opts(
                self,
                depends_on=[self.binding, self.node_policy.policy, self.node_policy.binding, *depends_of(opts)],
            ),
        )
        self.register_outputs({"name": self.daemon_set.metadata.name, "versionsHash": self.versions_hash})


def with_node_token(spec: dict[str, Any]) -> dict[str, Any]:
    """No token in every container: only the init container, which labels the node, mounts one (a projected,
    pod-bound, expiring token: KUBE_API_VOLUME)."""
    init, *rest = spec["init_containers"]
    init = {
        **init,
        "volume_mounts": [*init["volume_mounts"], {"name": "kube-api", "mount_path": SA_DIR, "read_only": True}],
    }
    return {
        **spec,
        "automount_service_account_token": False,
        "init_containers": [init, *rest],
        "volumes": [*spec["volumes"], KUBE_API_VOLUME],
    }


def ready_container(image: str, versions: str) -> dict[str, Any]:
    """The main container: sleeps, and is Ready only while the node's status says ready for this version set."""
    return {
        "name": "ready",
        "image": image,
        "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 3600 & wait; done"],
        "env": [{"name": "VERSIONS_HASH", "value": versions}],
        "readiness_probe": {
            "exec": {"command": ["sh", "-c", READY_CHECK]},
            "period_seconds": 30,
            "failure_threshold": 1,
        },
        "security_context": {**security.UNPRIVILEGED, "run_as_non_root": True, "run_as_user": security.BENCH_UID},
        "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "32Mi"}},
        "volume_mounts": [{"name": "state", "mount_path": "/deepep-state", "read_only": True}],
    }


def host_pod_spec(
    image: str, env: list[dict[str, Any]], ready: dict[str, Any], config_map: Any, items: list[dict[str, Any]]
) -> dict[str, Any]:
    """nodeProfile=host-install: a privileged init container that runs the installer in the host's namespaces."""
    return a4_node_pod(
        security.POD_SECURITY_CONTEXT,
        host_pid=True,
        init_containers=[
            {
                "name": "install",
                "image": image,
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
        containers=[ready],
        volumes=[
            {"name": "host-root", "host_path": {"path": "/", "type": "Directory"}},
            {"name": "state", "host_path": {"path": STATE_DIR, "type": "DirectoryOrCreate"}},
            {"name": "installer", "config_map": {"name": config_map, "items": items}},
        ],
    )

"""CosDriverInstaller: `gkeGpuDriver: cos-installer`, one pinned NVIDIA driver build on every A4 node.

GKE's driver installation is disabled on the A4 pool (nodepool.py GPU_DRIVER_VERSIONS: INSTALLATION_DISABLED)
and Google's COS driver installer DaemonSet installs the build the stack names, as GKE's "Manually install
NVIDIA GPU drivers" says for COS (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#installing_drivers,
read 2026-12-02). This is Google's manifest (GoogleCloudPlatform/container-engine-accelerators
nvidia-driver-installer/cos/daemonset-preloaded-latest.yaml at 068b15a980977bdaab46eb73e1ac8fba47e41f60, [CEA-COS]
below) with these changes, each for a reason:

- `--version=<gkeCosDriverVersion>` where [CEA-COS] says `--version=latest`: the installer installs "an actual
  version" as given (cos_gpu_installer install.go `getDriverVersion`; config/rules/driver.py);
- it runs on our A4 pool only (its node label and GPU taint, not `operator: Exists` on every taint) in our
  namespace, so `pulumi destroy` removes it; [CEA-COS]'s node affinity stays (a GPU node whose driver GKE
  installs carries `cloud.google.com/gke-gpu-driver-version` and is never touched);
- no `partition-gpus` container: it only applies a MIG layout from /etc/nvidia, and the A4 pool runs no MIG;
- the main container is our pinned pause image (gib.py PAUSE_IMAGE) instead of `pause:2.0` by tag.

The installer image is `cos-nvidia-installer:fixed` with `imagePullPolicy: Never`, as in [CEA-COS]: GKE preloads
on each COS node the installer that matches that node's image ("GKE can preload the correct image on the node",
[CEA-COS]'s header), so nothing is pulled and no registry digest exists to pin; what decides the bytes is the
driver build, which the installer downloads from COS's artifact buckets and loads only with COS's signature
for it (install.go: `signing.DownloadDriverSignatures`; module signing is enforced unless
`-allow-unsigned-driver`, which is not passed). The init container is privileged with the host's PID and network
namespaces and `/` mounted, as in [CEA-COS]: it builds and loads a kernel module (pod_security.py COS_DRIVER_SKIPS).
Pulumi waits for the DaemonSet to be Ready (every A4 node has the driver) before staging starts.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import StackConfig
from components.gke import objects
from components.gke import pod_security as security
from components.gke.gib import PAUSE_IMAGE
from components.gke.objects import GPU_TOLERATION, NODE_SELECTOR, PART_OF

NAME = "nvidia-driver-installer"  # [CEA-COS]'s name
LABELS = {**PART_OF, "app.kubernetes.io/name": NAME}
INSTALLER_IMAGE = "cos-nvidia-installer:fixed"  # [CEA-COS]: preloaded by GKE, never pulled
INSTALLER_BINARY = "/cos-gpu-installer"
# A build from COS's cache or a fresh compile and load: minutes; Pulumi gives up on the DaemonSet after this.
TIMEOUT_SECONDS = 1800
HOST_NVIDIA = "/home/kubernetes/bin/nvidia"  # [CEA-COS] NVIDIA_INSTALL_DIR_HOST: where GKE's device plugin looks
# [CEA-COS]'s environment, word for word.
INSTALLER_ENV = {
    "NVIDIA_INSTALL_DIR_HOST": HOST_NVIDIA,
    "NVIDIA_INSTALL_DIR_CONTAINER": "/usr/local/nvidia",
    "VULKAN_ICD_DIR_HOST": f"{HOST_NVIDIA}/vulkan/icd.d",
    "VULKAN_ICD_DIR_CONTAINER": "/etc/vulkan/icd.d",
    "ROOT_MOUNT_DIR": "/root",
    "COS_TOOLS_DIR_HOST": "/var/lib/cos-tools",
    "COS_TOOLS_DIR_CONTAINER": "/build/cos-tools",
}
# [CEA-COS]'s host folders and where the installer sees them (volume name -> host path, mount path).
HOST_MOUNTS = {
    "nvidia-install-dir-host": (HOST_NVIDIA, "/usr/local/nvidia"),
    "vulkan-icd-mount": (f"{HOST_NVIDIA}/vulkan/icd.d", "/etc/vulkan/icd.d"),
    "dev": ("/dev", "/dev"),
    "root-mount": ("/", "/root"),
    "cos-tools": ("/var/lib/cos-tools", "/build/cos-tools"),
}
# [CEA-COS]'s node affinity: GPU nodes whose driver GKE does not install.
NODE_AFFINITY = {
    "required_during_scheduling_ignored_during_execution": {
        "node_selector_terms": [
            {
                "match_expressions": [
                    {"key": "cloud.google.com/gke-accelerator", "operator": "Exists"},
                    {"key": "cloud.google.com/gke-gpu-driver-version", "operator": "DoesNotExist"},
                ]
            }
        ]
    }
}


def installer_command(version: str) -> list[str]:
    """[CEA-COS]'s command with the stack's build instead of `latest`."""
    return [INSTALLER_BINARY, "install", f"--version={version}"]


def pod_spec(cfg: StackConfig) -> dict[str, Any]:
    return {
        # As the gIB DaemonSet: GKE admits the class here under the namespace's quota (workloads.py).
        "priority_class_name": "system-node-critical",
        "node_selector": NODE_SELECTOR,
        "affinity": {"node_affinity": NODE_AFFINITY},
        "tolerations": [GPU_TOLERATION],
        "host_network": True,
        "host_pid": True,
        "automount_service_account_token": False,
        # RuntimeDefault for the pause container; a privileged container runs unconfined whatever this says.
        "security_context": security.POD_SECURITY_CONTEXT,
        "termination_grace_period_seconds": 5,
        "init_containers": [
            {
                "name": NAME,
                "image": INSTALLER_IMAGE,
                "image_pull_policy": "Never",
                "command": installer_command(cfg.gke.cos_driver_version),
                "env": [{"name": k, "value": v} for k, v in INSTALLER_ENV.items()],
                "security_context": {"privileged": True},
                "resources": {"requests": {"cpu": "150m"}},  # [CEA-COS]; no limit: it compiles a module
                "volume_mounts": [{"name": n, "mount_path": m} for n, (_, m) in HOST_MOUNTS.items()],
            }
        ],
        "containers": [
            {
                "name": "pause",
                "image": PAUSE_IMAGE,
                "security_context": {
                    **security.UNPRIVILEGED,
                    "run_as_non_root": True,
                    "run_as_user": security.BENCH_UID,
                },
                "resources": {"requests": {"cpu": "10m", "memory": "8Mi"}, "limits": {"cpu": "10m", "memory": "16Mi"}},
            }
        ],
        "volumes": [{"name": n, "host_path": {"path": h}} for n, (h, _) in HOST_MOUNTS.items()],
    }


@dataclass(frozen=True)
class CosDriverArgs:
    cfg: StackConfig
    namespace: pulumi.Input[str]


class CosDriverInstaller(pulumi.ComponentResource):
    """Google's COS driver installer, pinned to the stack's build, on every A4 node (module doc)."""

    def __init__(self, name: str, args: CosDriverArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:CosDriverInstaller", name, None, opts)
        self.version = args.cfg.gke.cos_driver_version
        # A host-network pod is the node's traffic, which policies do not cover (rendezvous.py): the no-ingress
        # policy only says, as for every pod of ours, that nothing may connect to it on the pod network.
        self.network_policy = objects.no_ingress_policy(self, name, NAME, args.namespace, LABELS)
        self.daemon_set = k8s.apps.v1.DaemonSet(
            name,
            metadata=objects.daemon_set_metadata(
                NAME, args.namespace, LABELS, TIMEOUT_SECONDS, security.skip_annotations(security.COS_DRIVER_SKIPS)
            ),
            spec=objects.k8s_spec(
                {
                    **objects.every_node_at_once(NAME),
                    "template": {"metadata": {"labels": LABELS}, "spec": pod_spec(args.cfg)},
                }
            ),
            opts=objects.child_opts(self, depends_on=objects.depends_of(opts)),
        )
        self.register_outputs({"name": self.daemon_set.metadata.name, "version": self.version})

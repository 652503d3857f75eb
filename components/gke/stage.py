"""The supported profile's staging pod on a COS node: no host namespace, no GPU, no privilege.

On COS there is nothing to install on the host: GKE's driver installer loads the driver (gpu-driver-version
DEFAULT or LATEST), the in-kernel mlx5 driver serves the RDMA NICs, and COS has no package manager, no Python
and no rdma-core for an installer to use (cloud.google.com/container-optimized-os/docs/concepts/
disks-and-filesystem: the root file system is read-only, /home and /var are noexec; /home/kubernetes/bin is
exec only because the node bootstrap remounts it so, kubernetes cluster/gce/gci/node.yaml
kube-node-installation.service: `mount --bind` onto itself, then `mount -o remount,exec`; GKE's own
installers put the driver and the gIB plugin there). So the installer's
init container runs `stage` and `verify-staged` in its own image, writing only the staged root
(scripts/names.py STAGED_ROOTS, mounted at the same path) and reading the driver's folder; it runs as root
with file capabilities only, like the gIB installer (gke_gib.py), and requests no GPU. It stays on the pod
network: its egress and its Google identity (a Workload Identity principal) are gke_stage_access.py's.
"""

from __future__ import annotations

from typing import Any

from components.config import StackConfig
from components.gke import pod_security as security
from components.gke.objects import HOST_NVIDIA, INSTALLER_RESOURCES, a4_node_pod
from components.gke.pod_security import POD_SECURITY_CONTEXT
from scripts import names

PATHS = names.install_paths("gke", staged=True)
ROOT = PATHS["root"]

# Root, because the staged root is a root-owned folder of the host; CHOWN/DAC_OVERRIDE/FOWNER let tar and rm
# act on files of any owner or mode a tarball holds; nothing else (no SYS_ADMIN, no host namespaces).
STAGE_SECURITY = {
    "privileged": False,
    "allow_privilege_escalation": False,
    "read_only_root_filesystem": True,
    "run_as_user": 0,
    "capabilities": {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE", "FOWNER"]},
}
_ROOT_OWNED = f"the staging container writes the root-owned host folder {ROOT}: root, file capabilities only"
STAGE_SKIPS = {
    "CKV_K8S_23": _ROOT_OWNED,
    "CKV_K8S_40": _ROOT_OWNED,
    "CKV_K8S_37": _ROOT_OWNED,
    "CKV_K8S_25": "CHOWN, DAC_OVERRIDE, FOWNER only: tar and rm act on files of any owner or mode the tarballs hold",
    "CKV_K8S_38": "the init container labels its own node deepep-a4/installed (get/patch nodes only)",
    "CKV_K8S_11": "unpacking several GB of user space in parallel: a CPU limit stretches the node's bring-up",
    "CKV_K8S_13": "tar and the staged Python's import check: a memory limit would OOM-kill a large unpack",
    "CKV_K8S_8": "the main container only sleeps; readiness carries the install state, a restart changes nothing",
}


def image(cfg: StackConfig) -> str:
    return cfg.gke.installer_image


def image_skips(cfg: StackConfig) -> dict[str, str]:
    """The default is pinned by digest (keys.STAGING_IMAGE); for a tag a stack sets, the scan says where to pin it."""
    return security.tag_skips("installerImage", image(cfg), "an unpinned tag")


def pod_spec(
    image_ref: str, env: list[dict[str, Any]], ready: dict[str, Any], config_map: Any, items: list[dict[str, Any]]
) -> dict[str, Any]:
    """The staging pod: the installer's files, the staged root read-write, the driver's folder read-only."""
    return a4_node_pod(
        POD_SECURITY_CONTEXT,
        init_containers=[
            {
                "name": "install",
                "image": image_ref,
                "command": ["bash", "/installer/daemonset-init.sh"],
                "env": env,
                "security_context": STAGE_SECURITY,
                "resources": INSTALLER_RESOURCES,
                "volume_mounts": [
                    {"name": "staged", "mount_path": ROOT},
                    {"name": "driver", "mount_path": HOST_NVIDIA, "read_only": True},
                    {"name": "installer", "mount_path": "/installer", "read_only": True},
                    {"name": "tmp", "mount_path": "/tmp"},  # noqa: S108 - an emptyDir; the root is read-only
                ],
            }
        ],
        containers=[ready],
        volumes=[
            {"name": "staged", "host_path": {"path": ROOT, "type": "DirectoryOrCreate"}},
            # GKE's driver installer fills it; verify-staged waits for the driver and links against its lib64.
            {"name": "driver", "host_path": {"path": HOST_NVIDIA, "type": "DirectoryOrCreate"}},
            {"name": "state", "host_path": {"path": PATHS["state"], "type": "DirectoryOrCreate"}},
            {"name": "installer", "config_map": {"name": config_map, "items": items}},
            {"name": "tmp", "empty_dir": {}},
        ],
    )

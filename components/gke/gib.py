"""GibInstaller: Google's gIB NCCL plugin on every A4 node, in its own host folder only.

Google's NCCL RDMA installer for A4 (B200) and H200 nodes is a DaemonSet of its plugin image
(GoogleCloudPlatform/container-engine-accelerators, gpudirect-rdma/nccl-rdma-installer.yaml at
992db81257553607f1477945f1b3219632991829, [CEA-INST] in docs/conformance.md). This is that DaemonSet with
three changes, each for a reason:

- it copies the plugin into `/home/kubernetes/bin/gib` only, never into the driver's
  `/home/kubernetes/bin/nvidia/lib64`, and of the image's lib64 only the gIB/NCCL libraries
  (scripts/gke/gib-init.sh says why: troubleshooting T16/T17);
- it runs on our A4 pool (its node label and GPU taint) in our namespace, so `pulumi destroy` removes it;
- its init container is root with file capabilities only, not privileged and without the host's PID and
  network namespaces: copying files into one hostPath folder needs nothing more.

Google pins the image by tag and publishes no digest for it (neither [CEA-INST], gpu-recipes nor
cluster-toolkit name one). The tag is GIB_VERSION below, the one place it is written; the digest it names
is looked up in Artifact Registry at the first `pulumi up` (gcp.artifactregistry.get_docker_image) and kept
in the stack's state (a pulumi.Stash named after the tag), so the DaemonSet runs `...@sha256:<digest>` and a
tag Google moves later changes nothing on our nodes. The offline plan shows a stand-in digest (all zeros).
Pulumi waits for the DaemonSet to be Ready (every A4 node has the plugin), and the benchmark Jobs wait for
that (gke_workloads.py). `deepep-a4:ncclGib` false leaves it out.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components import artifacts
from components.gke import objects
from components.gke import pod_security as security
from components.gke.objects import (
    GIB_HOST_DIR,
    GIB_LABELS,
    GIB_NAME,
    GIB_TIMEOUT_SECONDS,
    GPU_TOLERATION,
    NODE_SELECTOR,
)
from scripts import payload
from scripts.bench.what_ran import GIB_VERSION_FILE

# [CEA-INST]'s image and tag (v1.1.1; gpu-recipes' A4 recipes run the same tag).
GIB_REPOSITORY = "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib"
GIB_VERSION = "v1.1.1"
GIB_IMAGE = f"{GIB_REPOSITORY}:{GIB_VERSION}"
# The repository's coordinates in Artifact Registry (us-docker.pkg.dev/PROJECT/REPOSITORY/IMAGE).
GIB_REGISTRY = {"location": "us", "project": "gce-ai-infra", "repository_id": "gpudirect-gib"}
# [CEA-INST]'s main container: it only keeps the pod Running once the init container has copied the plugin.
PAUSE_IMAGE = "gke.gcr.io/pause:3.8@sha256:880e63f94b145e46f1b1082bb71b85e21f16b99b180b9996407d61240ceb9830"
HOST_MOUNT = "/host-gib"  # not the image's own /usr/local/... paths: nothing in the image writes the host
INIT_SCRIPT = "gib-init.sh"


def init_env(image: pulumi.Input[str] = GIB_IMAGE) -> list[dict[str, Any]]:
    """What gib-init.sh reads from its environment."""
    values: dict[str, pulumi.Input[str]] = {
        "GIB_DST": HOST_MOUNT,
        "GIB_IMAGE": image,
        "GIB_VERSION_FILE": GIB_VERSION_FILE,
    }
    return [{"name": k, "value": v} for k, v in values.items()]


def pinned_image(name: str, parent: pulumi.Resource) -> pulumi.Output[str]:
    """GIB_IMAGE by digest: Artifact Registry's answer at the first deploy, then kept in the stack's state.

    The lookup runs on every `pulumi up`, but the Stash keeps its first input (the same pattern as the GKE
    version and the GCE boot image), so the digest changes only with GIB_VERSION, which names the Stash.
    """
    found = gcp.artifactregistry.get_docker_image_output(
        image_name=f"{GIB_REPOSITORY.rsplit('/', 1)[1]}:{GIB_VERSION}",
        **GIB_REGISTRY,
        opts=pulumi.InvokeOutputOptions(parent=parent),
    )
    kept = pulumi.Stash(
        f"{name}-image-{GIB_VERSION.replace('.', '-')}",
        input=found.self_link,
        # The lookup's answer moves (and is unknown in a preview): only the first one counts, no `~ update`.
        opts=pulumi.ResourceOptions(parent=parent, ignore_changes=["input"]),
    )
    return kept.output.apply(_checked_digest)


def _checked_digest(ref: Any) -> str:
    """`repo/image@sha256:<digest>` (Artifact Registry's self link) as GIB_IMAGE@sha256:<digest>: the tag
    stays readable, the digest decides what is pulled."""
    digest = ref.rpartition("@")[2] if isinstance(ref, str) else ""
    if not re.fullmatch(r"sha256:[0-9a-f]{64}", digest):
        raise ValueError(f"Artifact Registry answered {ref!r} for {GIB_IMAGE}: no @sha256:<digest> to pin")
    return f"{GIB_IMAGE}@{digest}"


@dataclass(frozen=True)
class GibArgs:
    """Nothing of the stack config changes the DaemonSet (ncclGib decides whether it exists): the namespace only."""

    namespace: pulumi.Input[str]


class GibInstaller(pulumi.ComponentResource):
    """The gIB NCCL plugin on every A4 node (see the module doc); Ready once every node has it."""

    def __init__(self, name: str, args: GibArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:GibInstaller", name, None, opts)
        namespace = args.namespace
        self.image = pinned_image(name, self)
        script = artifacts.publish("gke/gib-daemonset/init.sh", payload.gke_gib_init())
        self.config_map = k8s.core.v1.ConfigMap(
            f"{name}-script",
            metadata={"namespace": namespace, "labels": GIB_LABELS},
            data={INIT_SCRIPT: script},
            opts=objects.child_opts(self),
        )
        # The plugin's pods serve nothing: no ingress at all.
        self.network_policy = objects.no_ingress_policy(self, name, GIB_NAME, namespace, GIB_LABELS)
        self.daemon_set = k8s.apps.v1.DaemonSet(
            name,
            metadata=objects.daemon_set_metadata(
                GIB_NAME, namespace, GIB_LABELS, GIB_TIMEOUT_SECONDS, security.skip_annotations(security.GIB_SKIPS)
            ),
            spec=objects.k8s_spec(
                {
                    **objects.every_node_at_once(GIB_NAME),
                    "template": {
                        "metadata": {"labels": GIB_LABELS},
                        "spec": {
                            # As [CEA-INST]; GKE admits the class here under the namespace's quota (gke_workloads).
                            "priority_class_name": "system-node-critical",
                            "node_selector": NODE_SELECTOR,
                            "tolerations": [GPU_TOLERATION],
                            "automount_service_account_token": False,
                            "security_context": security.POD_SECURITY_CONTEXT,
                            "termination_grace_period_seconds": 5,
                            "init_containers": [
                                {
                                    "name": "install",
                                    "image": self.image,
                                    "image_pull_policy": "IfNotPresent",
                                    "command": ["/bin/sh", f"/gib-init/{INIT_SCRIPT}"],
                                    "env": init_env(self.image),
                                    "security_context": security.GIB_INIT_SECURITY,
                                    "resources": {
                                        "requests": {"cpu": "150m", "memory": "64Mi"},
                                        "limits": {"cpu": "1", "memory": "512Mi"},
                                    },
                                    "volume_mounts": [
                                        {"name": "gib", "mount_path": HOST_MOUNT},
                                        {"name": "script", "mount_path": "/gib-init", "read_only": True},
                                    ],
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
                                    "resources": {
                                        "requests": {"cpu": "10m", "memory": "8Mi"},
                                        "limits": {"cpu": "10m", "memory": "16Mi"},
                                    },
                                }
                            ],
                            "volumes": [
                                {"name": "gib", "host_path": {"path": GIB_HOST_DIR, "type": "DirectoryOrCreate"}},
                                {
                                    "name": "script",
                                    "config_map": {
                                        "name": self.config_map.metadata.name,
                                        "items": [{"key": INIT_SCRIPT, "path": INIT_SCRIPT, "mode": 0o755}],
                                    },
                                },
                            ],
                        },
                    },
                }
            ),
            # A component's depends_on does not reach its children: the DaemonSet names its own.
            opts=objects.child_opts(self, depends_on=objects.depends_of(opts)),
        )
        self.register_outputs({"name": self.daemon_set.metadata.name, "image": self.image})

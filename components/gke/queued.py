"""All A4 nodes at once on GKE: flex-start with queued provisioning (Dynamic Workload Scheduler).

Plain flex-start lets the cluster autoscaler add nodes one by one as pods ask; an internode test needs every
node at the same time. With queued provisioning GKE brings up the ProvisioningRequest's whole count of nodes
together, or none (GKE, "Run a large-scale workload with flex-start with queued provisioning",
https://cloud.google.com/kubernetes-engine/docs/how-to/provisioningrequest, read 2026-12-02: "GKE allocates all
requested resources at the same time"; "you have to add the --flex-start and --enable-queued-provisioning flags
when you create the node pool"). What this stack does for it:

- the A4 pool (components/gke/nodepool.py capacity_settings): flex-start and queued provisioning on, no
  reservation affinity (flex-start's NO_RESERVATION), 0 nodes with autoscaling up to nodeCount
  (location policy ANY), auto-repair off (a flex-start VM is handed out once);
- a PodTemplate carrying the benchmark pod (the internode test's, or the first test's: every benchmark pod
  asks for one whole node) and a ProvisioningRequest of class `queued-provisioning.gke.io` for nodeCount of
  them, with `maxRunDurationSeconds` = the stack's ttl (flex-start runs at most 7 days: provisioning.py);
- every benchmark pod consumes the request: annotations `autoscaling.x-k8s.io/consume-provisioning-request`
  (the request's name) and `autoscaling.x-k8s.io/provisioning-class-name`;
- `pulumi up` does not wait for the per-node DaemonSets (staging or installer, gIB): their nodes come when
  the request is provisioned, maybe hours later. They carry `pulumi.com/skipAwait` (pulumi-kubernetes awaits a
  DaemonSet until Ready otherwise: provider/pkg/await), and `deepep-a4 run` waits instead: its install phase
  counts the installer DaemonSet's ready pods against nodeCount (deepep_a4/run/platforms.py GkeProbe.installed)
  under `--install-timeout`.

No Kueue: one request, made once per `up`, for a fixed set of Jobs needs no queue; GKE documents Kueue as
optional for this mode (same page: "(Optional) Kueue automates the lifecycle").
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import StackConfig
from components.gke.objects import PART_OF, child_opts, k8s_spec

QUEUED_CLASS = "queued-provisioning.gke.io"
CONSUME_ANNOTATION = "autoscaling.x-k8s.io/consume-provisioning-request"
CLASS_ANNOTATION = "autoscaling.x-k8s.io/provisioning-class-name"
REQUEST_NAME = "deepep-a4-nodes"
DAEMON_SET = "kubernetes:apps/v1:DaemonSet"


def queued(cfg: StackConfig) -> bool:
    """GKE flex-start is always queued here: the internode test needs its nodes together."""
    return cfg.platform == "gke" and cfg.provisioning == "flex-start"


def consume_annotations(cfg: StackConfig) -> dict[str, str]:
    """What a benchmark pod carries to run on the request's nodes ({} when the stack is not queued)."""
    return {CONSUME_ANNOTATION: REQUEST_NAME, CLASS_ANNOTATION: QUEUED_CLASS} if queued(cfg) else {}


def skip_daemon_set_await(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
    """A transformation for the workloads' component: every DaemonSet gets `pulumi.com/skipAwait`."""
    if args.type_ != DAEMON_SET:
        return None
    props: dict[str, Any] = dict(args.props)
    metadata: dict[str, Any] = dict(props.get("metadata") or {})
    metadata["annotations"] = {**(metadata.get("annotations") or {}), "pulumi.com/skipAwait": "true"}
    props["metadata"] = metadata
    return pulumi.ResourceTransformationResult(props, args.opts)


class QueuedNodes(pulumi.ComponentResource):
    """The PodTemplate and the ProvisioningRequest that bring up nodeCount A4 nodes at once."""

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        namespace: pulumi.Input[str],
        pod_spec: dict[str, Any],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("deepep-a4:gke:QueuedNodes", name, None, opts)
        self.template = k8s.core.v1.PodTemplate(
            f"{name}-template",
            metadata={"name": REQUEST_NAME, "namespace": namespace, "labels": PART_OF},
            template=k8s_spec({"metadata": {"labels": PART_OF}, "spec": pod_spec}),
            opts=child_opts(self),
        )
        parameters = {"maxRunDurationSeconds": str(cfg.ttl_seconds)} if cfg.ttl_seconds else {}
        self.request = k8s.apiextensions.CustomResource(
            f"{name}-request",
            api_version="autoscaling.x-k8s.io/v1",
            kind="ProvisioningRequest",
            metadata={"name": REQUEST_NAME, "namespace": namespace, "labels": PART_OF},
            spec={
                "provisioningClassName": QUEUED_CLASS,
                "parameters": parameters,
                "podSets": [{"count": cfg.node_count, "podTemplateRef": {"name": self.template.metadata.name}}],
            },
            # The spec is immutable (the CRD's x-kubernetes-validations: self == oldSelf): a change replaces it.
            opts=child_opts(self, delete_before_replace=True),
        )
        self.register_outputs({"request": REQUEST_NAME})

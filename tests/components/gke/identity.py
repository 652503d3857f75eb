"""Which Google identity a GKE pod gets, the way GKE decides it, and what Cloud Storage grants let it do.

GKE (Workload Identity Federation for GKE: https://cloud.google.com/kubernetes-engine/docs/concepts/workload-identity
and https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity):
- a node pool with `workloadMetadataConfig.mode: GKE_METADATA` runs the GKE metadata server, which answers a
  pod-network pod's metadata requests as its Kubernetes service account (KSA): the principal
  `principal://iam.googleapis.com/projects/PROJECT_NUMBER/locations/global/workloadIdentityPools/
  PROJECT_ID.svc.id.goog/subject/ns/NAMESPACE/sa/KSA_NAME`; with the KSA annotated
  `iam.gke.io/gcp-service-account: GSA`, the pod acts as GSA, but only if GSA grants
  roles/iam.workloadIdentityUser to `serviceAccount:PROJECT_ID.svc.id.goog[NAMESPACE/KSA_NAME]` (without it
  the token request fails: no identity at all);
- "Workload Identity Federation for GKE can't be used with Pods running on the host network": a hostNetwork
  pod's requests reach the Compute Engine metadata server, the node's service account;
- a `GCE_METADATA` pool exposes the Compute Engine metadata server to every pod: the node's service account.
A pod without serviceAccountName runs as the namespace's `default` KSA (Kubernetes PodSpec.serviceAccountName).

Cloud Storage (https://cloud.google.com/storage/docs/access-control/iam-roles): the permissions of the roles
the plan grants, as that page lists them. IAM conditions (https://cloud.google.com/iam/docs/conditions-
resource-attributes#resource-name, Cloud Storage): an object's resource name is
`projects/_/buckets/BUCKET/objects/OBJECT`; `storage.objects.list` is checked on the bucket
(`projects/_/buckets/BUCKET`), so a condition on an object prefix never admits a list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

WI_ANNOTATION = "iam.gke.io/gcp-service-account"
WI_USER_ROLE = "roles/iam.workloadIdentityUser"
ROLE_PERMISSIONS = {
    "roles/storage.objectViewer": {
        "storage.objects.get",
        "storage.objects.list",
        "storage.folders.get",
        "storage.folders.list",
        "storage.managedFolders.get",
        "storage.managedFolders.list",
        "resourcemanager.projects.get",
    },
    "roles/storage.objectCreator": {
        "storage.objects.create",
        "storage.folders.create",
        "storage.managedFolders.create",
        "storage.multipartUploads.create",
        "storage.multipartUploads.abort",
        "storage.multipartUploads.listParts",
    },
}


def wif_principal(project_number: str, project_id: str, namespace: str, ksa: str) -> str:
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/"
        f"{project_id}.svc.id.goog/subject/ns/{namespace}/sa/{ksa}"
    )


@dataclass(frozen=True)
class Cluster:
    """What of the plan decides a pod's identity."""

    project_id: str
    project_number: str
    workload_pool: str | None  # the cluster's workloadIdentityConfig.workloadPool
    pools: dict[str, dict[str, Any]]  # node pool name -> its nodeConfig (inputs)
    ksas: dict[tuple[str, str], dict[str, Any]]  # (namespace, name) -> ServiceAccount manifest
    wi_users: set[tuple[str, str]]  # (GSA email, member) pairs granted roles/iam.workloadIdentityUser


def metadata_mode(cluster: Cluster, node_config: dict[str, Any]) -> str:
    mode = (node_config.get("workloadMetadataConfig") or {}).get("mode")
    # Unset on a pool of a cluster with Workload Identity: GKE runs the GKE metadata server there.
    return mode or ("GKE_METADATA" if cluster.workload_pool else "GCE_METADATA")


def google_identity(cluster: Cluster, pool: str, namespace: str, pod_spec: dict[str, Any]) -> str | None:
    """The IAM member a pod's metadata-server token stands for, or None when it gets no token at all."""
    node_config = cluster.pools[pool]
    node_sa = f"serviceAccount:{node_config['serviceAccount']}"
    if pod_spec.get("hostNetwork"):
        return node_sa
    if metadata_mode(cluster, node_config) != "GKE_METADATA":
        return node_sa
    ksa = pod_spec.get("serviceAccountName") or "default"
    annotations = (cluster.ksas.get((namespace, ksa), {}).get("metadata") or {}).get("annotations") or {}
    gsa = annotations.get(WI_ANNOTATION)
    if gsa:
        member = f"serviceAccount:{cluster.project_id}.svc.id.goog[{namespace}/{ksa}]"
        return f"serviceAccount:{gsa}" if (gsa, member) in cluster.wi_users else None
    return wif_principal(cluster.project_number, cluster.project_id, namespace, ksa)


_STARTS_WITH = re.compile(r'^resource\.name\.startsWith\("([^"]*)"\)$')


def condition_admits(condition: dict[str, Any] | None, resource: str) -> bool:
    """The plan's conditions are one `resource.name.startsWith("...")` each; anything else is refused here."""
    if not condition:
        return True
    found = _STARTS_WITH.match(condition["expression"].strip())
    if not found:
        raise ValueError(f"an IAM condition this check does not read: {condition['expression']!r}")
    return resource.startswith(found.group(1))


def object_name(bucket: str, name: str) -> str:
    return f"projects/_/buckets/{bucket}/objects/{name}"


def may(grants: list[dict[str, Any]], member: str | None, permission: str, bucket: str, resource: str) -> bool:
    """Whether the bucket IAM members of the plan let `member` use `permission` on `resource`."""
    if member is None:
        return False
    return any(
        g["member"] == member
        and g["bucket"] == bucket
        and permission in ROLE_PERMISSIONS.get(g["role"], set())
        and condition_admits(g.get("condition"), resource)
        for g in grants
    )

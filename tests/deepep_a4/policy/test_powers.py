"""The pack's rules on what a resource grants or mounts (deepep_a4/policy/powers.py): for each, resources it
must refuse and ones it must allow, whatever their names; every pod-carrying kind pulumi-kubernetes defines
(its Patch and List kinds too) gets the pod rules; and the plans of every stack pass."""

from __future__ import annotations

import ipaddress
import json
import pathlib
import re
from typing import Any

import pytest

from deepep_a4.plan import engine as plan_engine
from deepep_a4.policy import powers, rules, trust
from tests.conftest import plan, stack_config
from tests.deepep_a4.policy import test_trust as test_policy_trust

IMG = "ubuntu:24.04@sha256:" + "ab" * 32
SA = "serviceAccount:x-nodes@p.iam.gserviceaccount.com"
DS = "kubernetes:apps/v1:DaemonSet"
CRB = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding"
RB = "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
SA_MEMBER = "gcp:serviceaccount/iAMMember:IAMMember"
A4_POOL = powers.NODE_POOL


def ds(namespace: str = "deepep-a4", name: str = "x", kind: str = DS, **spec: Any) -> tuple[str, dict[str, Any]]:
    spec = {"containers": [{"name": "c", "image": IMG}], **spec}
    return kind, {"metadata": {"name": name, "namespace": namespace}, "spec": {"template": {"spec": spec}}}


def host(path: str) -> list[dict[str, Any]]:
    return [{"name": "v", "hostPath": {"path": path}}]


def caps(*add: str) -> list[dict[str, Any]]:
    return [{"name": "c", "image": IMG, "securityContext": {"capabilities": {"add": list(add)}}}]


def binding(role: str, *subjects: tuple[str, str], kind: str = CRB) -> tuple[str, dict[str, Any]]:
    subs = [{"kind": k, "name": n, "apiGroup": "rbac.authorization.k8s.io"} for k, n in subjects]
    return kind, {"roleRef": {"kind": "ClusterRole", "name": role}, "subjects": subs}


def pool(**nc: Any) -> dict[str, Any]:
    base = {
        "machineType": "a4-highgpu-8g",
        "serviceAccount": "x-nodes@p.iam.gserviceaccount.com",
        "metadata": {"disable-legacy-endpoints": "true"},
        "workloadMetadataConfig": {"mode": "GKE_METADATA"},
        **nc,
    }
    return {"nodeConfig": {k: v for k, v in base.items() if v is not None}}


def vm(**extra: Any) -> dict[str, Any]:
    return {
        "machineType": "a4-highgpu-8g",
        "serviceAccount": {"email": "x-vms@p.iam.gserviceaccount.com", "scopes": []},
        "metadata": {"enable-oslogin": "TRUE"},
        **extra,
    }


def fw(*ranges: str) -> dict[str, Any]:
    return {"direction": "INGRESS", "allows": [{"protocol": "tcp"}], "sourceRanges": list(ranges)}


def authorized(*cidrs: str) -> dict[str, Any]:
    return {
        "privateClusterConfig": {"enablePrivateNodes": True},
        "masterAuthorizedNetworksConfig": {"cidrBlocks": [{"cidrBlock": c} for c in cidrs]},
    }


CASES: list[tuple[str, str, dict[str, Any], bool]] = [
    # rule, type, props, refused
    ("iam-roles-allowed", PROJECT_MEMBER, {"role": "roles/owner", "member": SA}, True),
    ("iam-roles-allowed", PROJECT_MEMBER, {"role": "roles/editor", "member": "user:a@example.com"}, True),
    ("iam-roles-allowed", PROJECT_MEMBER, {"role": "roles/viewer", "member": "domain:example.com"}, True),
    (
        "iam-roles-allowed",
        PROJECT_MEMBER,
        {"role": "roles/storage.objectViewer", "member": "group:g@example.com"},
        True,
    ),
    ("iam-roles-allowed", SA_MEMBER, {"role": "roles/iam.serviceAccountTokenCreator", "member": SA}, True),
    ("iam-roles-allowed", SA_MEMBER, {"role": "roles/iam.serviceAccountUser", "member": "user:a@example.com"}, True),
    ("iam-roles-allowed", SA_MEMBER, {"role": "roles/iam.workloadIdentityUser", "member": "principalSet://x/*"}, True),
    ("iam-roles-allowed", PROJECT_MEMBER, {"role": "roles/compute.admin", "member": SA}, True),
    # The nodes' image read and object roles, project-wide instead of on one repository or bucket.
    ("iam-roles-allowed", PROJECT_MEMBER, {"role": "roles/artifactregistry.reader", "member": SA}, True),
    ("iam-roles-allowed", PROJECT_MEMBER, {"role": "roles/storage.objectAdmin", "member": SA}, True),
    (
        "iam-roles-allowed",
        "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember",
        {"role": "roles/artifactregistry.reader", "member": SA, "repository": "bench"},
        False,
    ),
    (
        "iam-roles-allowed",
        "gcp:projects/iAMPolicy:IAMPolicy",
        {"policyData": json.dumps({"bindings": [{"role": "roles/owner", "members": [SA]}]})},
        True,
    ),
    (
        "iam-roles-allowed",
        "gcp:projects/iAMBinding:IAMBinding",
        {"role": "roles/container.defaultNodeServiceAccount", "members": [SA, "projectEditor:p"]},
        True,
    ),
    ("iam-roles-allowed", PROJECT_MEMBER, {"role": "roles/container.defaultNodeServiceAccount", "member": SA}, False),
    ("iam-roles-allowed", PROJECT_MEMBER, {"role": "projects/p/roles/p_deadline_1", "member": SA}, False),
    (
        "iam-roles-allowed",
        "gcp:storage/bucketIAMMember:BucketIAMMember",
        {"role": "roles/storage.objectViewer", "member": SA},
        False,
    ),
    (
        "custom-role-permissions",
        "gcp:projects/iAMCustomRole:IAMCustomRole",
        {"permissions": ["iam.serviceAccounts.actAs"]},
        True,
    ),
    (
        "custom-role-permissions",
        "gcp:projects/iAMCustomRole:IAMCustomRole",
        {"permissions": ["resourcemanager.projects.setIamPolicy"]},
        True,
    ),
    (
        "custom-role-permissions",
        "gcp:organizations/iAMCustomRole:IAMCustomRole",
        {"permissions": ["container.*"]},
        True,
    ),
    (
        "custom-role-permissions",
        "gcp:projects/iAMCustomRole:IAMCustomRole",
        {"permissions": ["container.clusters.update", "container.operations.get"]},
        False,
    ),
    ("rbac-subjects", *binding("cluster-admin", ("Group", "system:authenticated")), True),
    ("rbac-subjects", *binding("view", ("Group", "system:anonymous")), True),
    ("rbac-subjects", *binding("view", ("User", "system:anonymous"), kind=RB), True),
    ("rbac-subjects", *binding("edit", ("Group", "system:unauthenticated")), True),
    ("rbac-subjects", *binding("cluster-admin", ("Group", "devs@example.com")), True),
    ("rbac-subjects", *binding("cluster-admin", ("ServiceAccount", "x")), True),
    ("rbac-subjects", *binding("view", ("Group", "system:serviceaccounts:default")), True),
    ("rbac-subjects", *binding("admin", ("Group", "x"), kind=CRB + "Patch"), True),
    ("rbac-subjects", *binding("deepep-installer-label-nodes", ("ServiceAccount", "deepep-installer")), False),
    ("host-paths-allowed", *ds(volumes=host("/run/containerd")), True),
    ("host-paths-allowed", *ds(volumes=host("/var/run/docker.sock")), True),
    ("host-paths-allowed", *ds(volumes=host("/var/lib/kubelet")), True),
    ("host-paths-allowed", *ds(volumes=host("/etc")), True),
    ("host-paths-allowed", *ds(volumes=host("/home/kubernetes/bin/deepep/../../../etc")), True),
    ("host-paths-allowed", *ds(volumes=host("/home/kubernetes/bin/gibber")), True),
    ("host-paths-allowed", *ds("kube-system", volumes=host("/home/kubernetes/bin/gib")), True),
    (
        "host-paths-allowed",
        "kubernetes:core/v1:PodTemplate",
        {
            "metadata": {"namespace": "deepep-a4"},
            "template": {"spec": {"containers": [{"name": "c"}], "volumes": host("/etc")}},
        },
        True,
    ),
    (
        "host-paths-allowed",
        "kubernetes:apps/v1:DaemonSetPatch",
        {
            "metadata": {"name": "kube-proxy", "namespace": "kube-system"},
            "spec": {"template": {"spec": {"volumes": host("/var/lib/kubelet")}}},
        },
        True,
    ),
    ("host-paths-allowed", "kubernetes:core/v1:PersistentVolume", {"spec": {"hostPath": {"path": "/var/lib"}}}, True),
    ("host-paths-allowed", "kubernetes:core/v1:PersistentVolume", {"spec": {"csi": {"driver": "pd"}}}, False),
    ("host-paths-allowed", *ds(volumes=host("/home/kubernetes/bin/gib")), False),
    ("host-paths-allowed", *ds(volumes=host("/home/kubernetes/bin/nvidia/deepep/state")), False),
    ("capabilities-and-host-ipc", *ds(hostIPC=True), True),
    ("capabilities-and-host-ipc", *ds(containers=caps("SYS_ADMIN")), True),
    ("capabilities-and-host-ipc", *ds(containers=caps("CAP_NET_ADMIN")), True),
    ("capabilities-and-host-ipc", *ds(containers=caps("ALL")), True),
    ("capabilities-and-host-ipc", *ds("other", containers=caps("IPC_LOCK")), True),
    ("capabilities-and-host-ipc", *ds(containers=caps("IPC_LOCK")), False),
    ("capabilities-and-host-ipc", *ds(containers=caps("CHOWN", "DAC_OVERRIDE", "FOWNER")), False),
    ("node-identity", A4_POOL, pool(serviceAccount="123-compute@developer.gserviceaccount.com"), True),
    ("node-identity", A4_POOL, pool(serviceAccount="default"), True),
    ("node-identity", A4_POOL, pool(workloadMetadataConfig={"mode": "GCE_METADATA"}), True),
    ("node-identity", A4_POOL, pool(metadata={"disable-legacy-endpoints": "false"}), True),
    ("node-identity", A4_POOL, pool(metadata={"disable-legacy-endpoints": "true", "serial-port-enable": "true"}), True),
    ("node-identity", powers.CLUSTER, {"nodePools": [pool(serviceAccount="default")]}, True),
    ("node-identity", powers.INSTANCE, vm(serviceAccount={"email": "9-compute@developer.gserviceaccount.com"}), True),
    ("node-identity", powers.INSTANCE_TEMPLATE, vm(metadata={"serial-port-enable": "TRUE"}), True),
    ("node-identity", powers.FROM_TEMPLATE, vm(serviceAccount={"email": "default"}), True),
    ("node-identity", powers.INSTANCE, vm(metadata={"disable-legacy-endpoints": False}), True),
    ("node-identity", A4_POOL, pool(), False),
    # No account: GKE runs the nodes as the default one (a value unknown in a preview is never judged).
    ("node-identity", A4_POOL, pool(serviceAccount=None), True),
    ("node-identity", A4_POOL, pool(workloadMetadataConfig=None), False),  # the cluster's Workload Identity
    ("node-identity", powers.INSTANCE, vm(), False),
    ("no-global-address", trust.FIREWALL, fw("1.0.0.0/8"), True),
    ("no-global-address", trust.FIREWALL, fw("0.0.0.0/1"), True),
    ("no-global-address", trust.FIREWALL, fw("10.0.0.0/8", "8.8.8.8/32"), True),
    ("no-global-address", trust.FIREWALL, fw("2000::/3"), True),
    ("no-global-address", trust.FIREWALL, fw("172.0.0.0/8"), True),  # overlaps public space around 172.16/12
    ("no-global-address", trust.FIREWALL, fw("10.0.0.0/8", "35.235.240.0/20", "192.168.0.0/16"), False),
    ("no-global-address", trust.FIREWALL, {**fw("1.0.0.0/8"), "allows": [], "denies": [{"protocol": "all"}]}, False),
    (
        "no-global-address",
        "gcp:compute/networkFirewallPolicyRule:NetworkFirewallPolicyRule",
        {"direction": "INGRESS", "action": "allow", "match": {"srcIpRanges": ["1.0.0.0/8"]}},
        True,
    ),
    (
        "no-global-address",
        "gcp:compute/firewallPolicyRule:FirewallPolicyRule",
        {"direction": "INGRESS", "action": "deny", "match": {"srcIpRanges": ["1.0.0.0/8"]}},
        False,
    ),
    ("no-global-address", trust.CLUSTER, authorized("1.0.0.0/8"), True),
    ("no-global-address", trust.CLUSTER, authorized("0.0.0.0/1"), True),
    ("no-global-address", trust.CLUSTER, authorized("198.51.100.0/24", "8.0.0.0/16"), True),
    ("no-global-address", trust.CLUSTER, authorized("8.8.4.0/24"), True),
    ("no-global-address", trust.CLUSTER, authorized("203.0.113.0/24", "8.8.4.0/28", "10.0.0.0/8"), False),
]


@pytest.mark.parametrize(("rule", "type_", "props", "refused"), CASES)
def test_each_rule_refuses_and_allows(rule: str, type_: str, props: dict[str, Any], refused: bool) -> None:
    _, check = rules.RESOURCE_RULES[rule]
    problems = check(type_, props)
    assert bool(problems) == refused, problems


def test_every_rule_has_a_refused_and_an_allowed_case() -> None:
    for rule in powers.RESOURCE_RULES:
        assert {refused for r, _, _, refused in CASES if r == rule} == {True, False}, rule


def test_global_means_what_python_and_iana_say() -> None:
    # ipaddress's is_global follows IANA's special-purpose registries; a range that holds one global address
    # reaches the internet.
    for text in ("1.0.0.0/8", "0.0.0.0/1", "128.0.0.0/1", "35.235.240.0/20", "2001:4860::/32", "100.0.0.0/6"):
        assert powers.reaches_global(ipaddress.ip_network(text)), text
    for text in ("10.0.0.0/8", "10.4.0.0/14", "192.168.1.0/24", "100.64.0.0/10", "fd00::/8", "203.0.113.0/24"):
        assert not powers.reaches_global(ipaddress.ip_network(text)), text


# -- every kind that carries a pod, as pulumi-kubernetes defines them -----------------------------------------


def _sdk_tokens() -> set[str]:
    """Every resource type token of the installed pulumi-kubernetes SDK (each class's `super().__init__(
    'kubernetes:<group>/<version>:<Kind>', ...)`), the names the engine shows the pack."""
    import pulumi_kubernetes

    root = pathlib.Path(pulumi_kubernetes.__file__).parent
    found: set[str] = set()
    for f in root.rglob("*.py"):
        found |= set(re.findall(r"'(kubernetes:[a-z0-9.]+/[a-z0-9]+:[A-Za-z]+)'", f.read_text()))
    return found


def test_every_pod_carrying_kind_of_the_sdk_gets_the_pod_rules() -> None:
    tokens = _sdk_tokens()
    carriers = {t for t in tokens if trust.kind_of(t).removesuffix("List") in trust.POD_SPEC_BY_KIND}
    # The SDK's Patch kinds (server-side apply) and PodTemplate are among them.
    expected = ("apps/v1:DaemonSetPatch", "core/v1:PodTemplate", "batch/v1:CronJobPatch", "core/v1:PodList")
    expected += ("extensions/v1beta1:DaemonSet", "core/v1:ReplicationController", "settings.k8s.io/v1alpha1:PodPreset")
    assert {f"kubernetes:{t}" for t in expected} <= carriers
    for token in sorted(carriers):
        kind = trust.kind_of(token)
        spec = {"containers": [{"name": "c", "image": IMG}], "hostIPC": True, "volumes": host("/etc")}
        if kind == "PodPreset":
            spec = {"volumes": host("/etc")}
        obj: dict[str, Any] = {}
        at: Any = obj
        path = trust.POD_SPEC_BY_KIND[kind.removesuffix("List")]
        for key in path[:-1]:
            at = at.setdefault(key, {})
        at[path[-1]] = spec
        props = {"items": [obj]} if kind.endswith("List") else {**obj, "metadata": {"namespace": "deepep-a4"}}
        assert powers.host_paths_allowed(token, props), token
        if kind != "PodPreset":
            assert powers.capabilities_and_host_ipc(token, props), token


def test_a_custom_resource_with_a_pod_template_gets_the_pod_rules() -> None:
    pod = {"containers": [{"name": "c", "image": IMG}], "volumes": host("/var/lib/kubelet")}
    job = {"template": {"spec": {"template": {"spec": pod}}}}
    jobset = {"metadata": {"namespace": "deepep-a4"}, "spec": {"replicatedJobs": [job]}}
    assert powers.host_paths_allowed("kubernetes:jobset.x-k8s.io/v1alpha2:JobSet", jobset)


# -- the deadline's account: nothing in the plan lets anyone act as it --------------------------------------


def test_no_grant_in_the_plan_lets_anyone_act_as_a_service_account_of_the_stack() -> None:
    result = plan("gke-b200")
    accounts = {
        f"{r['inputs']['accountId']}@" for r in result.resources if r["type"] == "gcp:serviceaccount/account:Account"
    }
    deadline = [a for a in accounts if a.endswith("-deadline@")]
    assert deadline, "the GKE stack has a deadline account"
    for r in result.resources:
        if r["type"].startswith("gcp:serviceaccount/") and "IAM" in r["type"]:
            pytest.fail(f"{r['name']} grants on a service account: nothing but Cloud Scheduler may act as one")
        for role, _member in powers._grants(r["type"], r["inputs"]):
            assert role not in powers.IMPERSONATION_ROLES, (r["name"], role)
    # The job is the one place the account is named for acting: Cloud Scheduler's OAuth token.
    [job] = [r for r in result.resources if r["type"] == "gcp:cloudscheduler/job:Job"]
    assert job["inputs"]["httpTarget"]["oauthToken"]["serviceAccountEmail"].startswith(deadline[0])
    # And the pack refuses the grant that would break the fence.
    email = job["inputs"]["httpTarget"]["oauthToken"]["serviceAccountEmail"]
    fence = {"serviceAccountId": email, "role": "roles/iam.serviceAccountTokenCreator", "member": "user:a@example.com"}
    assert powers.iam_roles_allowed(SA_MEMBER, fence)


# -- the plans of every stack pass --------------------------------------------------------------------------


@pytest.mark.parametrize("stack", plan_engine.available_stacks())
def test_the_stacks_plans_pass_the_power_rules(stack: str) -> None:
    gke = stack_config(stack).get("deepep-a4:platform", "gke") == "gke"
    results = [plan(stack), plan(stack, podNetworking="multiNetwork")] if gke else [plan(stack)]
    problems = [
        (name, r["name"], msg)
        for result in results
        for r in result.resources
        for name, (_, check) in powers.RESOURCE_RULES.items()
        for msg in check(r["type"], r["inputs"])
    ]
    assert problems == []


# -- as the engine hands them: pulumi-policy's proxies ------------------------------------------------------


def test_every_case_is_judged_the_same_through_pulumi_policys_proxies() -> None:
    # The engine's resource policies get props wrapped by pulumi_policy/proxy.py unknown_checking_proxy: a
    # Mapping and Sequence proxy per dict and list (not dicts and lists), which raises UnknownValueError on
    # reading an unknown value (policy.py then skips the rule for that resource). A rule that tested
    # isinstance(x, list) would pass everything under the real engine.
    pp = pytest.importorskip("pulumi_policy.proxy")
    for rule, type_, props, refused in [*CASES, *test_policy_trust.CASES]:
        _, check = rules.RESOURCE_RULES[rule]
        assert bool(check(type_, pp.unknown_checking_proxy(props))) == refused, (rule, type_, props)


def test_an_unknown_value_is_not_judged_but_raises_for_the_engine_to_skip() -> None:
    pp = pytest.importorskip("pulumi_policy.proxy")
    kind, props = ds(volumes=[{"name": "v", "hostPath": {"path": pp.UNKNOWN_STRING_VALUE}}])
    with pytest.raises(pp.UnknownValueError):
        powers.host_paths_allowed(kind, pp.unknown_checking_proxy(props))

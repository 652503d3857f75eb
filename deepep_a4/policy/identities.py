"""Who a resource grants to or runs as, and what an RBAC role allows, judged by what they are, not by name.

- Shared and foreign identities: Compute Engine's and App Engine's default accounts, Google's service agents
  and the Google APIs account, a Kubernetes namespace's `default` service account; custom roles the stack does
  not define; one of our accounts used to run something anywhere but the place it was made for.
- RBAC by its rules: `*` anywhere, escalate/bind/impersonate, Secrets, pods/exec (attach, portforward),
  nodes/proxy, serviceaccounts/token, aggregation (aggregationRule, aggregate-to-* labels), bindings of
  admin/edit/cluster-admin, and bindings to subjects outside our namespace (a missing namespace is `default`,
  as the API server reads it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from deepep_a4.policy.grants import iam_grants, is_custom
from deepep_a4.policy.trust import Props, as_list, get_path, is_list, kind_of
from scripts import names

# Google's shared accounts (https://cloud.google.com/iam/docs/service-account-types "Default service
# accounts", "Service agents"; https://cloud.google.com/iam/docs/service-agents "Google APIs Service Agent").
SHARED_ACCOUNTS = (
    (re.compile(r"[0-9]+-compute@developer\.gserviceaccount\.com"), "Compute Engine's default account"),
    (re.compile(r"[a-z0-9-]+@appspot\.gserviceaccount\.com"), "App Engine's default account"),
    (re.compile(r"service-[0-9]+@gcp-sa-[a-z0-9-]+\.iam\.gserviceaccount\.com"), "a Google service agent"),
    (re.compile(r"[0-9]+@cloudservices\.gserviceaccount\.com"), "the Google APIs service agent"),
    (re.compile(r"[0-9]+@cloudbuild\.gserviceaccount\.com"), "Cloud Build's legacy account"),
    (re.compile(r"[a-z0-9.:-]+\.svc\.id\.goog\[[^/\]]+/default\]"), "a namespace's default KSA"),
    (re.compile(r"/subject/ns/[^/]+/sa/default\Z"), "a namespace's default KSA"),
    (re.compile(r"/subject/ns/\*|/attribute\.|principalSet://"), "a set of principals"),
)
# Where each of our accounts may run something (components/gke/nodepool.py, deadline.py, gce_fleet.py,
# components/node/store_grants.py): by the account id's suffix, the resource types that may name it as the
# identity they run as. IAM members name them as grantees, not runners: not judged here.
OUR_ACCOUNT = re.compile(r"deepep-[a-z0-9-]+-(nodes|system|deadline|vms|builder)@[a-z0-9-]+\.iam\.gserviceaccount\.com")
RUNS_AS_KEYS = frozenset({"serviceAccount", "serviceAccountEmail", "email", "serviceAccountName"})
PLACES = {
    "nodes": ("gcp:container/nodePool:NodePool", "gcp:container/cluster:Cluster"),
    "system": ("gcp:container/nodePool:NodePool", "gcp:container/cluster:Cluster"),
    "deadline": ("gcp:cloudscheduler/job:Job",),
    "vms": ("gcp:compute/instance:Instance", "gcp:compute/instanceTemplate:InstanceTemplate"),
    "builder": (),
}
RBAC = "kubernetes:rbac.authorization.k8s.io/"
# Resources and verbs that reach beyond what they name (https://kubernetes.io/docs/concepts/security/
# rbac-good-practices/ "Privilege escalation risks": secrets, pods/exec, nodes/proxy, escalate/bind,
# impersonate, serviceaccounts/token, CSR approval).
ESCALATING_VERBS = frozenset({"escalate", "bind", "impersonate", "*"})
ESCALATING_RESOURCES = frozenset(
    {
        "secrets", "pods/exec", "pods/attach", "pods/portforward", "pods/ephemeralcontainers", "nodes/proxy",
        "services/proxy", "serviceaccounts/token", "serviceaccounts", "certificatesigningrequests/approval",
        "signers", "tokenreviews", "mutatingwebhookconfigurations", "validatingwebhookconfigurations",
        "clusterroles", "clusterrolebindings", "roles", "rolebindings", "*",
    }
)  # fmt: skip
SUPERUSER_ROLES = frozenset({"cluster-admin", "admin", "edit"})
AGGREGATE_LABEL = "rbac.authorization.k8s.io/aggregate-to-"


def _strings(value: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], str]]:
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from _strings(v, (*path, str(k)))
    elif is_list(value):
        for v in value:
            yield from _strings(v, path)
    elif isinstance(value, str):
        yield path, value


def shared_identities(type_: str, props: Props) -> list[str]:
    problems = []
    for path, text in _strings(props):
        for pattern, what in SHARED_ACCOUNTS:
            if pattern.search(text):
                problems.append(f"{'.'.join(path) or type_} names {text}: {what}, shared with others; use our own")
                break
    for role, member, _ in iam_grants(type_, props):
        # A project's custom role is the stack's only if the stack defines it (custom_roles_defined, a stack
        # rule, and the lock's template); an organization's never is.
        if is_custom(role) and role.startswith("organizations/"):
            problems.append(f"grants custom role {role} to {member}: an organization's role, not this stack's")
    return problems


def runs_as_ours_elsewhere(type_: str, props: Props) -> list[str]:
    if type_.startswith("gcp:") and ("IAM" in type_ or "Iam" in type_):
        return []  # a grant to the account, not the account running something
    problems = []
    for path, text in _strings(props):
        found = OUR_ACCOUNT.search(text)
        if found and path and path[-1] in RUNS_AS_KEYS | {"serviceAccountId"} and type_ not in PLACES[found.group(1)]:
            problems.append(f"{type_} runs as {found.group(0)}: that account runs only in {found.group(1)}'s place")
    return problems


def custom_roles_defined(resources: list[tuple[str, str, Props]]) -> list[str]:
    """Stack rule: every custom role granted is one the stack defines (an IAMCustomRole of its own)."""
    defined = {
        str(p.get("roleId") or "")
        for t, _, p in resources
        if t.startswith("gcp:") and t.endswith(("IAMCustomRole", "IamCustomRole"))
    }
    return [
        f"{name} grants custom role {role}: the stack does not define it"
        for t, name, p in resources
        for role, _, _ in iam_grants(t, p)
        if is_custom(role) and role.rsplit("/", 1)[-1] not in defined
    ]


def _namespace(props: Props) -> str:
    return str(get_path(props, "metadata", "namespace") or "default")


def rbac_by_rules(type_: str, props: Props) -> list[str]:
    if not type_.startswith(RBAC):
        return []
    kind = kind_of(type_)
    problems = []
    labels = get_path(props, "metadata", "labels") or {}
    for key in labels if isinstance(labels, Mapping) else {}:
        if str(key).startswith(AGGREGATE_LABEL):
            problems.append(f"{kind} carries {key}: its rules join a built-in role everyone bound to it gets")
    if props.get("aggregationRule") is not None:
        problems.append(f"{kind} has an aggregationRule: it gains every rule of the roles its selector matches")
    for i, rule in enumerate(as_list(props.get("rules"))):
        verbs = {str(v) for v in as_list(get_path(rule, "verbs"))}
        resources = {str(r) for r in as_list(get_path(rule, "resources"))}
        groups = {str(g) for g in as_list(get_path(rule, "apiGroups"))}
        bad = sorted((verbs & ESCALATING_VERBS) | (resources & ESCALATING_RESOURCES) | (groups & {"*"}))
        if as_list(get_path(rule, "nonResourceURLs")):
            bad.append("nonResourceURLs")
        if bad:
            problems.append(f"{kind} rule {i} allows {', '.join(bad)}: a power over other identities or nodes")
    if kind in ("RoleBinding", "ClusterRoleBinding"):
        role = str(get_path(props, "roleRef", "name") or "")
        if role in SUPERUSER_ROLES:
            problems.append(f"{kind} binds {role}: a built-in role over every object; bind a narrow role")
        if kind == "RoleBinding" and _namespace(props) != names.NAMESPACE:
            problems.append(f"RoleBinding in namespace {_namespace(props)}: the stack binds only in {names.NAMESPACE}")
        for s in as_list(props.get("subjects")):
            sk, sn = str(get_path(s, "kind") or ""), str(get_path(s, "name") or "")
            ns = str(get_path(s, "namespace") or "default")
            if sk != "ServiceAccount":
                problems.append(f"{kind} binds {sk} {sn}: the stack binds only its own service accounts")
            elif ns != names.NAMESPACE or sn == "default":
                problems.append(f"{kind} binds ServiceAccount {ns}/{sn}: outside our namespace or its default KSA")
    return problems


def pods_as_default_ksa(type_: str, props: Props) -> list[str]:
    """A pod spec naming the `default` KSA: every pod of the namespace shares it."""
    from deepep_a4.policy.trust import pod_specs

    return [
        "a pod runs as the namespace's default service account: give it its own"
        for spec in pod_specs(type_, props)
        if get_path(spec, "serviceAccountName") == "default" or get_path(spec, "serviceAccount") == "default"
    ]


RESOURCE_RULES = {
    "shared-identities": (
        "No default accounts, service agents, default KSAs or custom roles the stack does not define.",
        shared_identities,
    ),
    "ours-only-in-place": ("Our accounts run only where they were made to.", runs_as_ours_elsewhere),
    "rbac-by-rules": ("RBAC judged by its rules, aggregation and subjects.", rbac_by_rules),
    "no-default-ksa": ("No pod runs as a namespace's default service account.", pods_as_default_ksa),
}

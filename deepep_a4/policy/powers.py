"""The pack's rules on what a resource grants or mounts, whatever it is called.

Like trust.py, each takes a resource type token and its properties (camelCase) and returns violations;
rules.py registers them. They refuse:

- IAM roles outside an allow-list per kind of member: the stack grants roles to single principals only (its
  own service accounts, or one Kubernetes service account through Workload Identity), and only the roles it
  uses; it never grants a role that acts as an account (actAs, token creation) or changes IAM, to anyone.
  Custom roles hold no such permission either. This is what fences the deadline's account: nothing the stack
  creates lets a user or another account act as it (Cloud Scheduler acts through its own service agent);
- RBAC bindings whose subjects are everyone (system:authenticated, system:anonymous, ...) or that bind
  cluster-admin;
- hostPath volumes outside our own folders, or in an object that is not ours (the installer alone mounts /);
- added capabilities outside the few our pods use, and hostIPC anywhere;
- node identities: the Compute Engine default service account, the node's metadata server instead of GKE's,
  the legacy metadata endpoints, the serial port;
- firewall sources and control-plane authorized networks that reach a global (public) address, not only
  0.0.0.0/0: a firewall may take IAP's range, an authorized network a small public range (your office).
"""

from __future__ import annotations

import ipaddress
import json
import posixpath
from collections.abc import Iterator, Mapping
from typing import Any

from deepep_a4.policy.trust import Props, as_list, containers, get_path, kind_of, pods_of
from scripts import names

# -- IAM: roles by member ------------------------------------------------------------------------------

# The predefined roles the stack grants (components/gke/nodepool.py NODE_ROLES, store.py, gce_results.py), each
# on the one kind of resource it is granted on: object roles on a bucket, image reads on a repository, never
# project-wide. Custom roles (projects/P/roles/R) are judged by their permissions (custom_role_permissions).
ALLOWED_ROLES: dict[str, str] = {
    "roles/container.defaultNodeServiceAccount": "gcp:projects/",
    "roles/artifactregistry.reader": "gcp:artifactregistry/",
    "roles/storage.objectViewer": "gcp:storage/",
    "roles/storage.objectCreator": "gcp:storage/",
    "roles/storage.objectAdmin": "gcp:storage/",
    # The store builder writes its Cloud Build log (components/node/store_grants.py StoreBuilder).
    "roles/logging.logWriter": "gcp:projects/",
}
# Roles that act as another identity or change who may: never granted by the stack, to anyone
# (https://cloud.google.com/iam/docs/service-account-permissions: "roles that let principals impersonate").
IMPERSONATION_ROLES = frozenset(
    {
        "roles/owner",
        "roles/editor",
        "roles/iam.serviceAccountUser",
        "roles/iam.serviceAccountTokenCreator",
        "roles/iam.serviceAccountOpenIdTokenCreator",
        "roles/iam.workloadIdentityUser",
        "roles/iam.serviceAccountKeyAdmin",
        "roles/iam.serviceAccountAdmin",
        "roles/iam.securityAdmin",
        "roles/resourcemanager.projectIamAdmin",
        "roles/container.admin",
        "roles/container.clusterAdmin",
    }
)
# Permissions no custom role of the stack holds: acting as an account, its keys, or IAM policies.
FORBIDDEN_PERMISSIONS = (
    "iam.serviceAccounts.actAs",
    "iam.serviceAccounts.getAccessToken",
    "iam.serviceAccounts.getOpenIdToken",
    "iam.serviceAccounts.implicitDelegation",
    "iam.serviceAccounts.signBlob",
    "iam.serviceAccounts.signJwt",
    "iam.serviceAccountKeys.create",
    "iam.roles.update",
    "container.clusters.create",
    "container.clusters.delete",
    "container.clusters.getCredentials",
)
# Single principals: a service account, a user, one Kubernetes service account through Workload Identity
# Federation (principal://.../subject/ns/NS/sa/SA). Everything else names many: allUsers,
# allAuthenticatedUsers, group:, domain:, principalSet:, projectOwner:/projectEditor:/projectViewer:.
SINGLE_MEMBER_PREFIXES = ("serviceAccount:", "user:", "principal://")


def _grants(type_: str, props: Props) -> Iterator[tuple[str, str]]:
    """(role, member) of every IAM member, binding or policy resource of any Google service."""
    if not type_.startswith("gcp:"):
        return
    kind = type_.rsplit(":", 1)[-1]
    role = str(props.get("role") or "")
    if kind.endswith(("IAMMember", "IamMember")):
        yield role, str(props.get("member") or "")
    elif kind.endswith(("IAMBinding", "IamBinding")):
        yield from ((role, str(m)) for m in as_list(props.get("members")))
    elif kind.endswith(("IAMPolicy", "IamPolicy")) and isinstance(props.get("policyData"), str):
        try:
            policy = json.loads(props["policyData"])
        except ValueError:
            yield "<unreadable policyData>", "<unknown>"
            return
        for binding in as_list(get_path(policy, "bindings")):
            for m in as_list(get_path(binding, "members")):
                yield str(get_path(binding, "role") or ""), str(m)


def _custom(role: str) -> bool:
    return role.startswith(("projects/", "organizations/")) and "/roles/" in role


def iam_roles_allowed(type_: str, props: Props) -> list[str]:
    problems = []
    for role, member in _grants(type_, props):
        if not role or not member:  # unknown during a preview
            continue
        if role in IMPERSONATION_ROLES:
            problems.append(f"grants {role} to {member}: it acts as other identities or owns the project")
        elif not member.startswith(SINGLE_MEMBER_PREFIXES) or member.startswith("principalSet:"):
            problems.append(f"grants {role} to {member}, which names many principals: grant one account")
        elif role not in ALLOWED_ROLES and not _custom(role):
            problems.append(
                f"grants {role} to {member}: not a role the stack uses ({', '.join(sorted(ALLOWED_ROLES))})"
            )
        elif role in ALLOWED_ROLES and not type_.startswith(ALLOWED_ROLES[role]):
            where = ALLOWED_ROLES[role].removeprefix("gcp:").rstrip("/")
            problems.append(f"grants {role} to {member} on a {type_}: the stack grants it on one {where} resource")
    return problems


def custom_role_permissions(type_: str, props: Props) -> list[str]:
    if not type_.startswith("gcp:") or not type_.endswith(("IAMCustomRole", "IamCustomRole")):
        return []
    perms = [str(p) for p in as_list(props.get("permissions"))]
    bad = [p for p in perms if p in FORBIDDEN_PERMISSIONS or p.endswith(".setIamPolicy") or "*" in p]
    return [f"custom role holds {', '.join(bad)}: acting as accounts or changing IAM"] if bad else []


# -- RBAC subjects ---------------------------------------------------------------------------------------

# Kubernetes' groups and user of everyone (https://kubernetes.io/docs/reference/access-authn-authz/rbac/
# "Be careful when granting permissions to these groups"; authentication.md "Anonymous requests").
BROAD_SUBJECTS = frozenset(
    {
        ("Group", "system:authenticated"),
        ("Group", "system:unauthenticated"),
        ("Group", "system:anonymous"),
        ("User", "system:anonymous"),
        ("Group", "system:serviceaccounts"),
        ("Group", "system:masters"),
    }
)
SUPERUSER_ROLES = frozenset({"cluster-admin", "admin", "edit"})


def rbac_subjects(type_: str, props: Props) -> list[str]:
    if not type_.startswith("kubernetes:rbac.authorization.k8s.io/") or kind_of(type_) not in (
        "ClusterRoleBinding",
        "RoleBinding",
    ):
        return []
    problems = []
    role = str(get_path(props, "roleRef", "name") or "")
    for s in as_list(props.get("subjects")):
        who = (str(get_path(s, "kind") or ""), str(get_path(s, "name") or ""))
        if who in BROAD_SUBJECTS or who[1].startswith("system:serviceaccounts:"):
            problems.append(f"binds {role or 'a role'} to {who[0]} {who[1]}: everyone who reaches the API server")
        elif role in SUPERUSER_ROLES and who[0] in ("Group", "User"):
            problems.append(f"binds {role} to {who[0]} {who[1]}: bind a narrow role to one service account")
    if role == "cluster-admin" and not problems and as_list(props.get("subjects")):
        problems.append("binds cluster-admin: the stack's objects never need the whole cluster")
    return problems


# -- hostPath, capabilities, hostIPC -----------------------------------------------------------------------

# Our own host folders (scripts/names.py, components/gke/objects.py): the staged root, the driver's folder
# where the host-install installer puts its files, gIB's plugin. Only objects in our namespace mount them;
# the installer DaemonSet alone mounts / (trust.py's rule).
OUR_HOST_DIRS = (names.STAGED_ROOTS["gke"], names.GKE_HOST_NVIDIA, "/home/kubernetes/bin/gib")
INSTALLER = ("kubernetes:apps/v1:DaemonSet", names.NAMESPACE, names.INSTALLER_NAME)
# What our containers add (components/gke/pod_security.py): the init containers' file ownership, the RDMA
# benchmarks' pinned memory. Nothing else: SYS_ADMIN, NET_ADMIN, SYS_PTRACE, ALL... are refused.
ALLOWED_CAPABILITIES = frozenset({"CHOWN", "DAC_OVERRIDE", "FOWNER", "IPC_LOCK"})


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def host_paths_allowed(type_: str, props: Props) -> list[str]:
    who, specs = pods_of(type_, props)
    ours = who[1] == names.NAMESPACE
    problems = []
    if kind_of(type_) == "PersistentVolume":  # a volume any claim mounts: the stack makes none on the host
        for key in ("hostPath", "local"):
            raw = get_path(props, "spec", key, "path")
            if isinstance(raw, str):
                problems.append(f"PersistentVolume on the host's {raw} ({key}): any pod that claims it mounts it")
    for spec in specs:
        for v in as_list(get_path(spec, "volumes")):
            raw = get_path(v, "hostPath", "path")
            if not isinstance(raw, str):
                continue
            path = "/" + posixpath.normpath("/" + raw).lstrip("/")
            if path == "/" and who == INSTALLER:
                continue
            if path == "/":
                continue  # trust.py's host-namespaces rule refuses it with its own message
            if not ours or not any(_under(path, root) for root in OUR_HOST_DIRS):
                problems.append(
                    f"hostPath {raw} (volume {get_path(v, 'name')}) in {who[1] or 'another namespace'}: only our "
                    f"objects in {names.NAMESPACE!r} mount host folders, and only {', '.join(OUR_HOST_DIRS)}"
                )
    return problems


def capabilities_and_host_ipc(type_: str, props: Props) -> list[str]:
    who, specs = pods_of(type_, props)
    problems = []
    for spec in specs:
        if get_path(spec, "hostIPC") is True:
            problems.append("hostIPC: the pod shares the node's IPC namespace (shared memory of every process)")
        for c in containers(spec):
            added = {
                str(a).upper().removeprefix("CAP_")
                for a in as_list(get_path(c, "securityContext", "capabilities", "add"))
            }
            extra = sorted(added - ALLOWED_CAPABILITIES) if who[1] == names.NAMESPACE else sorted(added)
            if extra:
                problems.append(
                    f"container {c.get('name', '?')} adds {', '.join(extra)}: our pods add only "
                    f"{', '.join(sorted(ALLOWED_CAPABILITIES))}, in {names.NAMESPACE!r}"
                )
    return problems


# -- node identity -----------------------------------------------------------------------------------------

INSTANCE = "gcp:compute/instance:Instance"
INSTANCE_TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
REGION_TEMPLATE = "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate"
FROM_TEMPLATE = "gcp:compute/instanceFromTemplate:InstanceFromTemplate"
NODE_POOL = "gcp:container/nodePool:NodePool"
CLUSTER = "gcp:container/cluster:Cluster"
# Compute Engine's default account, PROJECT_NUMBER-compute@developer.gserviceaccount.com, holds project
# Editor unless an org policy stops it (https://cloud.google.com/compute/docs/access/service-accounts
# #default_service_account); "default" selects it in both APIs.
DEFAULT_ACCOUNT_SUFFIX = "-compute@developer.gserviceaccount.com"
TRUE = ("true", "1", "yes", "on")


def _node_configs(type_: str, props: Props) -> Iterator[tuple[str, str | None, Mapping[str, Any], Any]]:
    """(where, service account, metadata, workload metadata mode) of each node or VM the resource creates."""
    if type_ in (INSTANCE, INSTANCE_TEMPLATE, REGION_TEMPLATE, FROM_TEMPLATE):
        sa = get_path(props, "serviceAccount", "email")
        yield "the VM", sa if isinstance(sa, str) else None, props.get("metadata") or {}, None
    elif type_ in (NODE_POOL, CLUSTER):
        configs = [("nodeConfig", props.get("nodeConfig"))]
        configs += [
            (f"nodePools[{i}]", get_path(p, "nodeConfig")) for i, p in enumerate(as_list(props.get("nodePools")))
        ]
        for where, nc in configs:
            if isinstance(nc, Mapping):
                # GKE runs a node config without a service account as the default one ("default"); a value
                # still unknown in a preview never gets here (pulumi-policy skips the rule on reading it).
                sa = nc.get("serviceAccount") or "default"
                mode = get_path(nc, "workloadMetadataConfig", "mode")
                yield where, sa if isinstance(sa, str) else None, nc.get("metadata") or {}, mode


def node_identity(type_: str, props: Props) -> list[str]:
    problems = []
    for where, sa, metadata, mode in _node_configs(type_, props):
        if sa is not None and (sa == "default" or sa.endswith(DEFAULT_ACCOUNT_SUFFIX)):
            problems.append(f"{where} runs as the Compute Engine default account {sa} (project Editor): use its own")
        if mode is not None and mode != "GKE_METADATA":
            problems.append(
                f"{where} has workloadMetadataConfig.mode {mode}: pods reach the node's credentials; use GKE_METADATA"
            )
        if str(metadata.get("disable-legacy-endpoints", "true")).lower() not in TRUE:
            problems.append(f"{where} turns the legacy metadata endpoints on (disable-legacy-endpoints false)")
        if str(metadata.get("serial-port-enable", "false")).lower() in TRUE:
            problems.append(f"{where} enables the interactive serial console (serial-port-enable)")
    return problems


# -- global addresses ---------------------------------------------------------------------------------------

# IAP's TCP forwarding range, the one public source a firewall may admit
# (https://cloud.google.com/iap/docs/using-tcp-forwarding#create-firewall-rule).
IAP_RANGE = ipaddress.ip_network("35.235.240.0/20")
# An authorized network may be one public range this small (the deployer's own addresses: 16 IPv4, one IPv6
# /64), never more; 1.0.0.0/8 or 0.0.0.0/1 is the internet, not an office.
AUTHORIZED_MAX = {4: 28, 6: 64}
# IANA's special-purpose ranges that are not globally reachable (RFC 6890 registries, "Globally Reachable:
# False"); a range inside one of them reaches no global address.
NOT_GLOBAL = [
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
        "192.0.0.0/24", "192.0.2.0/24", "192.168.0.0/16", "198.18.0.0/15", "198.51.100.0/24",
        "203.0.113.0/24", "240.0.0.0/4", "::/128", "::1/128", "::ffff:0:0/96", "100::/64", "2001:db8::/32",
        "fc00::/7", "fe80::/10",
    )
]  # fmt: skip


def reaches_global(net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> bool:
    """True when the range holds any globally reachable address (it overlaps a global range)."""
    if net.is_global:
        return True
    return not any(net.version == n.version and net.subnet_of(n) for n in NOT_GLOBAL)  # type: ignore[arg-type]


def _nets(values: list[Any]) -> Iterator[tuple[str, Any]]:
    for text in values:
        try:
            yield str(text), ipaddress.ip_network(str(text).strip(), strict=False)
        except ValueError:
            continue


def no_global_address(type_: str, props: Props) -> list[str]:
    problems = []
    if type_ == "gcp:compute/firewall:Firewall" and props.get("disabled") is not True and as_list(props.get("allows")):
        if str(props.get("direction") or "INGRESS").upper() == "INGRESS":
            for text, net in _nets(as_list(props.get("sourceRanges"))):
                if reaches_global(net) and not (net.version == 4 and net.subnet_of(IAP_RANGE)):  # type: ignore[arg-type]
                    problems.append(
                        f"firewall allows ingress from {text}, public addresses: admit private ranges or IAP's"
                    )
    # Firewall policies' rules (gcp:compute/firewallPolicyRule, networkFirewallPolicyRule, region...): the
    # same test on match.srcIpRanges of an ingress rule whose action admits.
    if type_.startswith("gcp:compute/") and type_.endswith("FirewallPolicyRule") and props.get("disabled") is not True:
        ingress = str(props.get("direction") or "INGRESS").upper() == "INGRESS"
        if ingress and str(props.get("action") or "").lower() in ("allow", "goto_next"):
            for text, net in _nets(as_list(get_path(props, "match", "srcIpRanges"))):
                if reaches_global(net) and not (net.version == 4 and net.subnet_of(IAP_RANGE)):  # type: ignore[arg-type]
                    problems.append(f"firewall policy rule admits {text}, public addresses: admit private ranges")
    if type_ == CLUSTER:
        blocks = [
            get_path(b, "cidrBlock") for b in as_list(get_path(props, "masterAuthorizedNetworksConfig", "cidrBlocks"))
        ]
        for text, net in _nets(blocks):
            if reaches_global(net) and net.prefixlen < AUTHORIZED_MAX[net.version]:
                problems.append(
                    f"control plane authorized network {text} holds public addresses beyond a /"
                    f"{AUTHORIZED_MAX[net.version]}: list your own addresses"
                )
    return problems


RESOURCE_RULES = {
    "iam-roles-allowed": (
        "IAM grants name one principal and a role the stack uses; no role acts as others, to anyone.",
        iam_roles_allowed,
    ),
    "custom-role-permissions": ("No custom role acts as an account or changes IAM.", custom_role_permissions),
    "rbac-subjects": ("No RBAC binding to everyone, and no cluster-admin binding.", rbac_subjects),
    "host-paths-allowed": ("hostPath only in our namespace and under our own host folders.", host_paths_allowed),
    "capabilities-and-host-ipc": ("No hostIPC; added capabilities only those our pods use.", capabilities_and_host_ipc),
    "node-identity": (
        "Nodes run as their own account, behind GKE's metadata server, no legacy endpoints, no serial port.",
        node_identity,
    ),
    "no-global-address": (
        "Firewalls admit no public source but IAP's; authorized networks hold at most a small public range.",
        no_global_address,
    ),
}

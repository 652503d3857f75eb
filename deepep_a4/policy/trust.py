"""The pack's trust rules: what no one should deploy, whatever the stack's config says.

Like rules.py, each takes a resource type token and its properties (camelCase) and returns violations;
rules.py registers them. They refuse: IAM grants to everyone (allUsers, allAuthenticatedUsers), a bucket
anyone could be granted (no public-access prevention or no uniform bucket-level access), service-account
keys, firewall rules and control-plane authorized networks that cover every address (one CIDR or pieces
that add up to it), the host's PID namespace and root file system outside the installer, the host's network
outside the installer and the RDMA benchmark Jobs, and container images without a digest.
"""

from __future__ import annotations

import ipaddress
import json
import posixpath
import re
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from scripts import names

PUBLIC_MEMBERS = ("allUsers", "allAuthenticatedUsers")
BUCKET = "gcp:storage/bucket:Bucket"
SA_KEY = "gcp:serviceaccount/key:Key"
FIREWALL = "gcp:compute/firewall:Firewall"
CLUSTER = "gcp:container/cluster:Cluster"
DIGEST = re.compile(r"@sha256:[0-9a-f]{64}\Z")  # \Z: `$` would accept a trailing newline
# The objects that may use the host's namespaces, by kind, namespace and name (components/gke/objects.py,
# gke_bench.py): the installer DaemonSet (host PID, the host's root), and the benchmark Jobs that run over
# RDMA (the host's network with `podNetworking: hostNetwork`).
INSTALLER = ("kubernetes:apps/v1:DaemonSet", names.NAMESPACE, names.INSTALLER_NAME)
RDMA_JOBS = {
    ("kubernetes:batch/v1:Job", names.NAMESPACE, f"deepep-{t}") for t in ("internode", "low-latency", "elastic")
}
# Where each kind that runs pods keeps its pod spec. pulumi-kubernetes names every kind of every API version
# `kubernetes:<group>/<version>:<Kind>`, and for each one a server-side-apply `<Kind>Patch` of the same shape
# (pulumi-kubernetes provider/pkg/gen/schema.go: `kinds = append(kinds, kind+"Patch")`); PodTemplate and
# ReplicationController carry pod templates too. pod_specs also finds a pod spec wherever a `containers` list
# sits (a custom resource such as a JobSet), so no kind escapes the pod rules by its name.
POD_SPEC_BY_KIND: dict[str, tuple[str, ...]] = {
    "Pod": ("spec",),
    "PodTemplate": ("template", "spec"),
    "ReplicationController": ("spec", "template", "spec"),
    "DaemonSet": ("spec", "template", "spec"),
    "Deployment": ("spec", "template", "spec"),
    "StatefulSet": ("spec", "template", "spec"),
    "ReplicaSet": ("spec", "template", "spec"),
    "Job": ("spec", "template", "spec"),
    "CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
    # settings.k8s.io/v1alpha1 PodPreset injects its volumes (hostPath ones too) into the pods it selects.
    "PodPreset": ("spec",),
}

Props = Mapping[str, Any]


def get_path(props: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(props, Mapping):
            return None
        props = props.get(key)
    return props


def is_list(value: Any) -> bool:
    """A list as the rules see one: pulumi-policy hands them its own Sequence proxies (pulumi_policy/proxy.py
    _ListProxy, which raise on reading an unknown value), not lists."""
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def as_list(value: Any) -> list[Any]:
    return list(value) if is_list(value) else []


def kind_of(type_: str) -> str:
    """`kubernetes:apps/v1:DaemonSetPatch` -> DaemonSet; '' for a type that is not a Kubernetes kind."""
    if not type_.startswith("kubernetes:") or type_.count(":") != 2:
        return ""
    return type_.rsplit(":", 1)[-1].removesuffix("Patch")


def _find_pod_specs(value: Any, depth: int = 0) -> Iterator[Mapping[str, Any]]:
    if depth > 12:
        return
    if isinstance(value, Mapping):
        if is_list(value.get("containers")):
            yield value
            return
        for key, inner in value.items():
            if key != "metadata":
                yield from _find_pod_specs(inner, depth + 1)
    elif is_list(value):
        for inner in value:
            yield from _find_pod_specs(inner, depth + 1)


def pod_specs(type_: str, props: Props) -> list[Mapping[str, Any]]:
    """Every pod spec a Kubernetes object carries: at its kind's place (any API version, Patch kinds too), and
    any other mapping with a `containers` list. A patch or template without containers still has its spec
    judged (a patch may add only volumes or hostPID)."""
    kind = kind_of(type_)
    if not kind:
        return []
    found: list[Mapping[str, Any]] = []
    path = POD_SPEC_BY_KIND.get(kind)
    at = get_path(props, *path) if path else None
    if isinstance(at, Mapping):
        found.append(at)
    found += [spec for spec in _find_pod_specs(props) if all(spec is not f for f in found)]
    return found


def containers(spec: Any) -> list[Mapping[str, Any]]:
    return [
        c
        for key in ("initContainers", "containers", "ephemeralContainers")
        for c in as_list(get_path(spec, key))
        if isinstance(c, Mapping)
    ]


# -- IAM for everyone --------------------------------------------------------------------------------


def _members(type_: str, props: Props) -> Iterator[str]:
    """Every principal an IAM member, binding or policy resource of any Google service grants."""
    if not type_.startswith("gcp:"):
        return
    kind = type_.rsplit(":", 1)[-1]
    if kind.endswith("IAMMember") or kind.endswith("IamMember"):
        yield str(props.get("member") or "")
    if kind.endswith(("IAMBinding", "IamBinding")):
        yield from (str(m) for m in as_list(props.get("members")))
    if kind.endswith(("IAMPolicy", "IamPolicy")) and isinstance(props.get("policyData"), str):
        try:
            policy = json.loads(props["policyData"])
        except ValueError:
            return
        for binding in as_list(get_path(policy, "bindings")):
            yield from (str(m) for m in as_list(get_path(binding, "members")))
    if "AccessControl" in kind or kind.endswith(("ACL", "Acl")):  # legacy bucket and object ACLs
        yield str(props.get("entity") or "")
        yield from (str(e).split(":", 1)[-1] for e in as_list(props.get("roleEntities")))


def no_public_iam(type_: str, props: Props) -> list[str]:
    public = sorted({m for m in _members(type_, props) if m in PUBLIC_MEMBERS})
    return [f"grants {', '.join(public)}: everyone on the internet; grant named principals only"] if public else []


# -- public buckets ----------------------------------------------------------------------------------


def no_public_bucket(type_: str, props: Props) -> list[str]:
    if type_ != BUCKET:
        return []
    problems = []
    if props.get("publicAccessPrevention") != "enforced":
        problems.append("bucket without publicAccessPrevention: enforced (a grant could make it public)")
    if props.get("uniformBucketLevelAccess") is not True:
        problems.append("bucket without uniformBucketLevelAccess: object ACLs could make objects public")
    return problems


# -- service account keys ----------------------------------------------------------------------------


def no_service_account_key(type_: str, props: Props) -> list[str]:
    del props
    if type_ == SA_KEY:
        return ["a service-account key is a long-lived secret: act as the account (impersonation) instead"]
    return []


# -- every address, in one CIDR or in pieces ----------------------------------------------------------


def covers_every_address(cidrs: list[Any]) -> bool:
    """True when the ranges, collapsed, are all of IPv4 or all of IPv6 (0.0.0.0/1 + 128.0.0.0/1 too)."""
    nets: dict[int, list[Any]] = {4: [], 6: []}
    for text in cidrs:
        try:
            net = ipaddress.ip_network(str(text).strip(), strict=False)
        except ValueError:
            continue
        nets[net.version].append(net)
    for version, found in nets.items():
        whole = ipaddress.ip_network("0.0.0.0/0" if version == 4 else "::/0")
        if found and list(ipaddress.collapse_addresses(found)) == [whole]:  # type: ignore[arg-type]
            return True
    return False


def no_every_address(type_: str, props: Props) -> list[str]:
    if type_ == FIREWALL and props.get("disabled") is not True and as_list(props.get("allows")):
        direction = str(props.get("direction") or "INGRESS").upper()
        ranges = as_list(props.get("sourceRanges" if direction == "INGRESS" else "destinationRanges"))
        if direction == "INGRESS" and covers_every_address(ranges):
            return [f"firewall allows ingress from every address ({', '.join(map(str, ranges))}): narrow it"]
    if type_ == CLUSTER:
        cidrs = as_list(get_path(props, "masterAuthorizedNetworksConfig", "cidrBlocks"))
        blocks = [get_path(b, "cidrBlock") for b in cidrs]
        if covers_every_address(blocks):
            return [f"control plane authorized networks cover every address ({', '.join(map(str, blocks))})"]
    return []


# -- the host's namespaces and root ------------------------------------------------------------------


def pods_of(type_: str, props: Props) -> tuple[tuple[str, str, str], list[Mapping[str, Any]]]:
    """(kind, namespace, name) and the pod specs of an object that runs pods. A missing namespace is
    `default`, as pulumi-kubernetes places it: the provider's `namespace`, else the kubeconfig context's, else
    "default" (pulumi/pulumi-kubernetes provider/pkg/provider/provider.go Configure, PR #1896 "infer default
    namespace unless provided by provider config", 2022-02-03); our provider and our kubeconfig's context set
    none (components/gke/cluster.py). Never our own: an
    object that leaves it out is not the installer. (An unknown namespace at preview: pulumi-policy's proxy
    raises UnknownValueError, and the rule reports it cannot run.)"""
    meta = props.get("metadata") or {}
    # A List kind's items carry their own namespaces: judged as nobody's (the strictest).
    default = "" if kind_of(type_).endswith("List") else "default"
    who = (type_, str(get_path(meta, "namespace") or default), str(get_path(meta, "name") or ""))
    return who, pod_specs(type_, props)


def host_namespaces_only_where_needed(type_: str, props: Props) -> list[str]:
    who, specs = pods_of(type_, props)
    installer = who == INSTALLER
    problems = []
    for spec in specs:
        if spec.get("hostPID") is True and not installer:
            problems.append("hostPID outside the installer DaemonSet: the pod sees and can signal every host process")
        roots = [
            v.get("name")
            for v in as_list(spec.get("volumes"))
            if isinstance(get_path(v, "hostPath", "path"), str)
            and posixpath.normpath(v["hostPath"]["path"]) in ("/", "//")
        ]
        if roots and not installer:
            problems.append(f"hostPath / ({', '.join(map(str, roots))}) outside the installer: the host's whole disk")
        if spec.get("hostNetwork") is True and not installer and who not in RDMA_JOBS:
            problems.append(
                "hostNetwork outside the installer and the RDMA benchmark Jobs: the node's network and ports"
            )
    return problems


# -- images by digest --------------------------------------------------------------------------------


def images_by_digest(type_: str, props: Props) -> list[str]:
    bad = [
        f"{c.get('name', '?')}={c.get('image')}"
        for spec in pod_specs(type_, props)
        for c in containers(spec)
        if isinstance(c.get("image"), str) and not DIGEST.search(c["image"])
    ]
    return [f"image(s) without @sha256:<digest>: {', '.join(bad)} (a tag can move to other bytes)"] if bad else []


RESOURCE_RULES = {
    "no-public-iam": ("No IAM grant or ACL to allUsers or allAuthenticatedUsers.", no_public_iam),
    "no-public-bucket": ("Buckets enforce public-access prevention and uniform bucket-level access.", no_public_bucket),
    "no-service-account-key": ("No service-account keys.", no_service_account_key),
    "no-every-address": (
        "No firewall rule or authorized network covers every address, in one CIDR or in pieces.",
        no_every_address,
    ),
    "host-namespaces-only-where-needed": (
        "hostPID and hostPath / only in the installer; hostNetwork only there and in the RDMA benchmark Jobs.",
        host_namespaces_only_where_needed,
    ),
    "images-by-digest": ("Every container image is pinned by digest.", images_by_digest),
}

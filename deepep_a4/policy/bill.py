"""A resource's bill of powers: what the lock (lock.py) records of it and what the pack compares.

A resource is known by its type and its logical name (the Pulumi name, which does not carry the stack; node
indices become `{n}`, content hashes `{hash}`). Its bill is:

- its property *paths* (every key, list items as `[]`), outside the free-form maps a user may fill (labels,
  a ConfigMap's files): a property the stack never sets (`hostNetwork`, `masterAuth.clientCertificateConfig`,
  metadata `ssh-keys`, an annotation) is a new path, refused whatever its value;
- its *power values*: every leaf under a key that grants, runs as, exposes or opens something (IAM members and
  roles, RBAC rules and subjects, security contexts, host namespaces and folders, service accounts, firewall
  sources, Service types, cluster endpoint and node settings, VM metadata that opens logins). Values that carry
  the stack or the project are written with `{stack}`, `{stack_}` (underscores) and `{project}`; a bucket in a
  store condition as `{bucket}`, the store's prefix as `{prefix}`.

Everything else (a label, a node count, a disk size, a version, a script's text) may change without a new lock.
"""

from __future__ import annotations

import functools
import ipaddress
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from deepep_a4.policy.powers import AUTHORIZED_MAX, reaches_global
from deepep_a4.policy.trust import is_list

# Maps whose keys a user or the program fills freely: no key below them is a path of the bill (their values
# are judged by the rules that read them: rbac.py reads aggregation labels).
FREE_MAPS = frozenset({"labels", "resourceLabels", "defaultLabels", "userLabels", "data", "binaryData"})
# What pulumi-kubernetes' Check adds to an object's inputs (provider/pkg/provider/provider.go: an auto-name in
# metadata.name and the `pulumi.com/autonamed` annotation; client-side apply's last-applied annotation).
PROVIDER_ANNOTATIONS = ("pulumi.com/", "kubectl.kubernetes.io/last-applied-configuration")
PROVIDER_PATHS = frozenset({"metadata.name"})
# What the engine adds to a provider resource's inputs: its plugin's version and download URL (pulumi/pulumi
# sdk/go/common/resource/plugin providers: SetProviderVersion, SetProviderURL), and the `__internal` bag.
ENGINE_PROVIDER_KEYS = frozenset({"version", "pluginDownloadURL", "__internal"})
# Keys under which every leaf is a power value (wherever the key sits).
POWER_KEYS = frozenset(
    {
        # IAM (any provider's member, binding, policy, condition) and custom roles
        "member", "members", "role", "policyData", "permissions", "auditConfigs", "exemptedMembers",
        # identities a resource runs as or acts through
        "serviceAccount", "serviceAccountName", "serviceAccountEmail", "serviceAccountJson", "scopes",
        "oauthScopes", "automountServiceAccountToken", "impersonateServiceAccount", "workloadIdentityConfig",
        "workloadPool", "workloadMetadataConfig", "accessToken", "credentials",
        # Kubernetes RBAC and admission
        "rules", "subjects", "roleRef", "aggregationRule", "webhooks", "validations", "matchConstraints",
        "paramRef", "policyName", "validationActions", "matchResources", "failurePolicy",
        # pods: what they run as and what of the host they touch
        "securityContext", "hostNetwork", "hostPID", "hostIPC", "hostPath", "hostPort", "hostUsers",
        "capabilities", "privileged", "allowPrivilegeEscalation", "procMount", "volumeDevices",
        "shareProcessNamespace", "nodeName", "runtimeClassName",
        # network exposure
        "ports", "sourceRanges", "destinationRanges", "sourceTags", "targetTags", "allows", "denies",
        "direction", "disabled", "priority", "externalTrafficPolicy", "loadBalancerSourceRanges", "externalIPs",
        "loadBalancerIP", "accessConfigs", "ipv6AccessConfigs", "addressType", "purpose", "policyTypes",
        "ingress", "egress", "podSelector", "canIpForward", "nicType",
        # clusters and nodes
        "privateClusterConfig", "masterAuthorizedNetworksConfig", "masterAuth", "enableLegacyAbac",
        "networkPolicy", "datapathProvider", "addonsConfig", "nodePoolAutoConfig", "nodePoolDefaults",
        "kubeletConfig", "insecureKubeletReadonlyPortEnabled", "shieldedInstanceConfig", "confidentialNodes",
        "binaryAuthorization", "securityPostureConfig", "enableK8sBetaApis", "controlPlaneEndpointsConfig",
        "gcfsConfig", "linuxNodeConfig", "sandboxConfig",
        # buckets and objects
        "publicAccessPrevention", "uniformBucketLevelAccess", "predefinedAcl", "entity", "roleEntities",
        "defaultAcl", "website", "cors",
        # anything that schedules or triggers work as an identity
        "httpTarget", "oauthToken", "oidcToken", "pubsubTarget", "appEngineHttpTarget",
    }
)  # fmt: skip
# Keys of VM and node metadata that open or close logins and consoles: their values are power values.
METADATA_POWER = frozenset(
    {
        "enable-oslogin", "enable-oslogin-2fa", "block-project-ssh-keys", "ssh-keys", "sshKeys",
        "serial-port-enable", "serial-port-logging-enable", "disable-legacy-endpoints", "enable-guest-attributes",
    }
)  # fmt: skip
# Annotations that grant (Workload Identity) or pick a service account token.
ANNOTATION_POWER = ("iam.gke.io/", "kubernetes.io/service-account", "kubernetes.io/enforce-mountable-secrets")
# A value pulumi encrypts: the plan shows it wrapped under this signature key (pulumi's sdk/python
# pulumi/runtime/rpc.py _special_secret_sig), the engine unwrapped.
SECRET_SIG = "1b47061264138c4ac30d75fd1eb44270"  # noqa: S105 (a marker, not a secret)
SECRET_KEY = "4dabf18193072939515e22adb298388d"  # noqa: S105 (pulumi.runtime.rpc._special_sig_key)
ACCOUNT = re.compile(r"(?<![a-z0-9-])([a-z][a-z0-9-]{4,28})-(nodes|system|deadline|vms)(?=@)")
REGION = r"(?:asia|europe|us|northamerica|southamerica|australia|me|africa)-[a-z]+[0-9]"
HASH = re.compile(r"(?<=[-_])[0-9a-f]{8}(?=$|[^0-9a-z])")
INDEX = re.compile(r"-\d+(?=-|$)")
CIDR = re.compile(
    r"(?<![0-9.])(?:\d{1,3}\.){3}\d{1,3}/\d{1,2}(?![0-9])|(?<![0-9a-fA-F:])[0-9a-fA-F:]*::?[0-9a-fA-F:]*/\d{1,3}"
)


@dataclass(frozen=True)
class Context:
    """What a stack's values carry that its shape does not: its name and project (None: not known)."""

    stack: str | None = None
    project: str | None = None
    # The stack's namePrefix (components/config/parse.py: namePrefix or deepep-<stack>, cut to 30).
    name_prefix: str | None = None

    @property
    def prefix(self) -> str | None:
        if self.name_prefix:
            return self.name_prefix
        if not self.stack:
            return None
        return ("deepep-" + re.sub(r"[^a-z0-9-]", "-", self.stack.lower()).strip("-"))[:30].rstrip("-")


def logical(name: str) -> str:
    """gce-vm-1 -> gce-vm-{n}; pin-google-cloud-packages-aca674fe -> ...-{hash}."""
    return INDEX.sub("-{n}", HASH.sub("{hash}", name))


def template(text: str, ctx: Context) -> str:
    """A value with its stack, project, store bucket and prefix written as placeholders."""
    out = text
    if ctx.stack:
        # The installer's KSA is named for the stack (components/gke/objects.py installer_ksa), its principal too.
        out = out.replace(_installer_ksa(ctx.stack), "{installer-ksa}")
    if ctx.prefix:
        # Account ids cut the prefix to fit 30 characters (components/gke/nodepool.py service_account_id,
        # deadline.py account_id, components/gce/fleet.py service_account_id).
        prefix = ctx.prefix
        out = ACCOUNT.sub(lambda m: "{stack}-" + m.group(2) if prefix.startswith(m.group(1)) else m.group(0), out)
        out = out.replace(ctx.prefix, "{stack}").replace(ctx.prefix.replace("-", "_"), "{stack_}")
    if ctx.project:
        out = re.sub(rf"(?<![a-z0-9-]){re.escape(ctx.project)}(?![a-z0-9-])", "{project}", out)
    # A store grant's condition (components/node/store_grants.py prefix_condition): the bucket and the prefix are the
    # user's; conditions.py judges the prefix against the declared one.
    out = re.sub(r'buckets/[a-z0-9._-]+/objects/[^"]*', "buckets/{bucket}/objects/{prefix}", out)
    # The region and zone (config), and the machine type a pool is named for, are the user's choice.
    out = re.sub(rf"\b{REGION}-[a-z]\b", "{zone}", out)
    out = re.sub(rf"\b{REGION}\b", "{region}", out)
    out = re.sub(r"nodePools/[a-z0-9-]+", "nodePools/{pool}", out)
    # A project's number (a Workload Identity pool's principal) is the user's project's.
    out = re.sub(r"projects/[0-9]{6,}(?=/)", "projects/{project-number}", out)
    out = CIDR.sub(_cidr, out)
    return HASH.sub("{hash}", out)


@functools.cache
def _installer_ksa(stack: str) -> str:
    from components.gke.objects import installer_ksa  # loads pulumi_kubernetes: only once a stack is known

    return installer_ksa(stack)


def template_path(dotted: str, ctx: Context) -> str:
    """A property path with the stack's prefix as `{stack}`: a key named for the stack's objects (a pod's
    `networking.gke.io.networks/<prefix>-rdma-0` request, components/gke/network_resources.py)."""
    return dotted.replace(ctx.prefix, "{stack}") if ctx.prefix else dotted


def _cidr(match: re.Match[str]) -> str:
    """A private range is the user's choice (hostCidr, podsCidr...); a public one beyond an office's size is
    kept as it is (IAP's), so a new public source is a new power."""
    try:
        net = ipaddress.ip_network(match.group(0), strict=False)
    except ValueError:
        return match.group(0)
    if not reaches_global(net):
        return "{private-range}"
    return "{small-public-range}" if net.prefixlen >= AUTHORIZED_MAX[net.version] else match.group(0)


# Placeholders a value is compared through when its stack and project are not known; the others template()
# writes into both sides, so they compare as text.
_PLACEHOLDER = {
    "{stack}": "[a-z][a-z0-9-]*[a-z0-9]",
    "{stack_}": "[a-z][a-z0-9_]*[a-z0-9]",
    "{project}": "[a-z][a-z0-9-]{4,28}[a-z0-9]",
    "{installer-ksa}": "deepep-installer-[a-z0-9-]*-[0-9a-f]{6}",
}
_SPLIT = re.compile("(" + "|".join(re.escape(p) for p in _PLACEHOLDER) + ")")


@functools.cache
def pattern(tmpl: str) -> re.Pattern[str]:
    """A lock's template as a regex, for a value whose stack and project are not known."""
    return re.compile("".join(_PLACEHOLDER.get(part, re.escape(part)) for part in _SPLIT.split(tmpl)))


def _plain(value: Any) -> Any:
    """JSON-able: numbers that are whole as ints, proxies as dicts and lists, secrets unwrapped."""
    kind = type(value)
    if kind is str or kind is bool or kind is int or value is None:
        return value
    if isinstance(value, Mapping):
        if value.get(SECRET_KEY) == SECRET_SIG:
            return _plain(value.get("value"))
        return {str(k): _plain(v) for k, v in value.items()}
    if is_list(value):
        return [_plain(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _power_key(path: tuple[str, ...]) -> bool:
    # A Service's or Secret's type (LoadBalancer, a token Secret); IAM conditions' expressions.
    if path in (("spec", "type"), ("type",)) or path[-2:] == ("condition", "expression"):
        return True
    if any(k in POWER_KEYS for k in path):
        return True
    if len(path) >= 2 and path[-2] == "metadata" and path[-1] in METADATA_POWER:
        return True
    return len(path) >= 2 and path[-2] == "annotations" and path[-1].startswith(ANNOTATION_POWER)


def _walk(value: Any, path: tuple[str, ...], out: list[tuple[tuple[str, ...], Any]]) -> None:
    """(path, leaf) of every leaf of plain data (_plain's) into `out`; lists as `[]`; free maps end the path."""
    kind = type(value)
    if kind is dict:
        if path and path[-1] in FREE_MAPS:
            out.append((path, None))
            return
        # The Terraform bridge's Check fills schema defaults into the inputs the engine hands a policy pack
        # and lists them in `__defaults` (pulumi/pulumi-terraform-bridge pkg/tfbridge/schema.go; issue #3434
        # "how Pulumi tracks defaults"): the provider's, not the program's choices.
        defaulted = value.get("__defaults")
        skip = {"__defaults", *(defaulted if type(defaulted) is list else ())}
        if not value:
            out.append((path, {}))
        for key, inner in value.items():
            if key in skip or (path and path[-1] == "annotations" and key.startswith(PROVIDER_ANNOTATIONS)):
                continue
            _walk(inner, (*path, key), out)
    elif kind is list:
        if not value:
            out.append((path, []))
        for inner in value:
            _walk(inner, (*path, "[]"), out)
    else:
        out.append((path, value))


def _read(props: Any) -> Any:
    """The properties as plain data; a value pulumi-policy cannot know yet (a preview) reads as None."""
    try:
        return _plain(props)
    except Exception as err:  # pulumi_policy.proxy.UnknownValueError: known only after the update
        if type(err).__name__ != "UnknownValueError":
            raise
    out: dict[str, Any] = {}
    for key in list(props):
        try:
            out[str(key)] = _plain(props[key])
        except Exception as err:
            if type(err).__name__ != "UnknownValueError":
                raise
            out[str(key)] = None
    return out


@dataclass(frozen=True)
class Bill:
    """One resource's entry: its paths and its power values (`path = json`)."""

    key: str  # "<type> <logical name>"
    paths: frozenset[str]
    powers: frozenset[str]


def bill_of(type_: str, name: str, props: Mapping[str, Any], ctx: Context) -> Bill:
    paths: set[str] = set()
    powers: set[str] = set()
    leaves: list[tuple[tuple[str, ...], Any]] = []
    _walk(_read(props), (), leaves)
    for path, leaf in leaves:
        if not path:
            continue
        dotted = ".".join(path)
        if dotted in PROVIDER_PATHS and type_.startswith("kubernetes:"):
            continue
        if path[0] in ENGINE_PROVIDER_KEYS and type_.startswith("pulumi:providers:"):
            continue
        paths.add(template_path(dotted, ctx))
        if _power_key(path) and leaf is not None:
            text = leaf if isinstance(leaf, str) else json.dumps(leaf, sort_keys=True)
            powers.add(f"{dotted} = {template(text, ctx)}")
    return Bill(f"{type_} {logical(name)}", frozenset(paths), frozenset(powers))

"""Cluster and node exposure, read from the settings that open them (one rule each), and project-wide
metadata that opens every VM of the project.

The settings are pulumi-gcp's (provider schema gcp:container/cluster:Cluster, nodePool, compute instance and
projectMetadata); what each opens is GKE's and Compute Engine's documentation:
- a public control-plane endpoint with no authorized networks admits the internet to the API server
  (https://cloud.google.com/kubernetes-engine/docs/concepts/network-overview#public-endpoint);
- a cluster with no nodeConfig (or a pool without one) runs its nodes as Compute Engine's default account
  (https://cloud.google.com/kubernetes-engine/docs/how-to/hardening-your-cluster#use_least_privilege_sa);
- client certificates are long-lived credentials GKE cannot revoke (hardening guide, "Disable client
  certificate"); basic auth (masterAuth username/password) the same;
- without Dataplane V2 (datapathProvider ADVANCED_DATAPATH) the NetworkPolicies the stack relies on are not
  enforced unless Calico is on, and multi-networking is unavailable;
- the kubelet's read-only port 10255 answers without authentication
  (https://cloud.google.com/kubernetes-engine/docs/how-to/disable-kubelet-readonly-port);
- OS Login off with ssh-keys in metadata lets any key holder in, outside IAM
  (https://cloud.google.com/compute/docs/oslogin#metadata-key), and project metadata applies to every VM.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from deepep_a4.policy.trust import Props, as_list, get_path

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
VM_TYPES = (
    "gcp:compute/instance:Instance",
    "gcp:compute/instanceTemplate:InstanceTemplate",
    "gcp:compute/regionInstanceTemplate:RegionInstanceTemplate",
    "gcp:compute/instanceFromTemplate:InstanceFromTemplate",
)
PROJECT_METADATA = (
    "gcp:compute/projectMetadata:ProjectMetadata",
    "gcp:compute/projectMetadataItem:ProjectMetadataItem",
)
TRUE = ("true", "1", "yes", "on")


def _true(value: Any) -> bool:
    return value is True or str(value).lower() in TRUE


def public_endpoint_without_networks(type_: str, props: Props) -> list[str]:
    if type_ != CLUSTER:
        return []
    private_endpoint = get_path(props, "privateClusterConfig", "enablePrivateEndpoint") is True
    ip_off = get_path(props, "controlPlaneEndpointsConfig", "ipEndpointsConfig", "enabled") is False
    public = not private_endpoint and not ip_off
    public = (
        public or get_path(props, "controlPlaneEndpointsConfig", "ipEndpointsConfig", "enablePublicEndpoint") is True
    )
    blocks = as_list(get_path(props, "masterAuthorizedNetworksConfig", "cidrBlocks"))
    if public and not blocks:
        return ["the control plane has a public endpoint and no authorized networks: the internet reaches its API"]
    if public and _true(get_path(props, "masterAuthorizedNetworksConfig", "gcpPublicCidrsAccessEnabled")):
        return ["the public endpoint admits every Google Cloud address (gcpPublicCidrsAccessEnabled)"]
    return []


def default_node_config(type_: str, props: Props) -> list[str]:
    if type_ == CLUSTER:
        problems = []
        if not isinstance(props.get("nodeConfig"), Mapping):
            problems.append("cluster without nodeConfig: its default pool runs as Compute Engine's default account")
        for i, pool in enumerate(as_list(props.get("nodePools"))):
            if not isinstance(get_path(pool, "nodeConfig"), Mapping):
                problems.append(f"nodePools[{i}] without nodeConfig: it runs as Compute Engine's default account")
        return problems
    if type_ == NODE_POOL and not isinstance(props.get("nodeConfig"), Mapping):
        return ["node pool without nodeConfig: it runs as Compute Engine's default account"]
    return []


def client_certificates(type_: str, props: Props) -> list[str]:
    if type_ != CLUSTER:
        return []
    problems = []
    if _true(get_path(props, "masterAuth", "clientCertificateConfig", "issueClientCertificate")):
        problems.append("the cluster issues a client certificate: a credential that cannot be revoked")
    if get_path(props, "masterAuth", "username") or get_path(props, "masterAuth", "password"):
        problems.append("the cluster has basic auth (masterAuth username/password)")
    if _true(props.get("enableLegacyAbac")):
        problems.append("legacy ABAC on: every service account may act on the whole cluster")
    return problems


def dataplane_v2(type_: str, props: Props) -> list[str]:
    if type_ == CLUSTER and props.get("datapathProvider") != "ADVANCED_DATAPATH":
        return [
            f"datapathProvider {props.get('datapathProvider') or 'unset (legacy)'}: without Dataplane V2 the "
            "stack's NetworkPolicies go unenforced; use ADVANCED_DATAPATH"
        ]
    return []


def _kubelet_configs(type_: str, props: Props) -> Iterator[tuple[str, Any]]:
    if type_ == CLUSTER:
        yield "nodeConfig.kubeletConfig", get_path(props, "nodeConfig", "kubeletConfig")
        yield "nodePoolDefaults", get_path(props, "nodePoolDefaults", "nodeConfigDefaults")
        yield "nodePoolAutoConfig", get_path(props, "nodePoolAutoConfig", "nodeKubeletConfig")
        for i, pool in enumerate(as_list(props.get("nodePools"))):
            yield f"nodePools[{i}]", get_path(pool, "nodeConfig", "kubeletConfig")
    elif type_ == NODE_POOL:
        yield "nodeConfig.kubeletConfig", get_path(props, "nodeConfig", "kubeletConfig")


def kubelet_readonly_port(type_: str, props: Props) -> list[str]:
    return [
        f"{where} opens the kubelet's read-only port 10255 (insecureKubeletReadonlyPortEnabled)"
        for where, cfg in _kubelet_configs(type_, props)
        if isinstance(cfg, Mapping) and _true(cfg.get("insecureKubeletReadonlyPortEnabled"))
    ]


def _metadata(type_: str, props: Props) -> Iterator[tuple[str, Mapping[str, Any]]]:
    if type_ in VM_TYPES:
        yield "the VM", props.get("metadata") or {}
    elif type_ in (CLUSTER, NODE_POOL):
        yield "nodeConfig", get_path(props, "nodeConfig", "metadata") or {}
        for i, pool in enumerate(as_list(props.get("nodePools"))):
            yield f"nodePools[{i}]", get_path(pool, "nodeConfig", "metadata") or {}
    elif type_ == PROJECT_METADATA[0]:
        yield "project metadata", get_path(props, "metadata") or {}
    elif type_ == PROJECT_METADATA[1]:
        yield "project metadata", {str(props.get("key")): props.get("value")}


def ssh_keys_without_os_login(type_: str, props: Props) -> list[str]:
    problems = []
    for where, md in _metadata(type_, props):
        if not isinstance(md, Mapping):
            continue
        keys = md.get("ssh-keys") or md.get("sshKeys")
        oslogin = md.get("enable-oslogin")
        if keys and (oslogin is None or not _true(oslogin)):
            problems.append(f"{where} has ssh-keys with OS Login off: any key holder logs in, outside IAM")
        elif oslogin is not None and not _true(oslogin):
            problems.append(f"{where} turns OS Login off (enable-oslogin {oslogin}): logins leave IAM's control")
    return problems


def project_wide_metadata(type_: str, props: Props) -> list[str]:
    """Project metadata is every VM's: the stack sets none (a serial port or a key there opens them all)."""
    if type_ in PROJECT_METADATA:
        return [f"{type_.rsplit(':', 1)[-1]} changes every VM of the project: the stack sets only its own VMs'"]
    return []


RESOURCE_RULES = {
    "public-endpoint-authorized": (
        "A public control-plane endpoint has authorized networks.",
        public_endpoint_without_networks,
    ),
    "node-config-present": (
        "Clusters and pools name their node config (never the default account).",
        default_node_config,
    ),
    "no-client-certificates": ("No client certificate, basic auth or legacy ABAC.", client_certificates),
    "dataplane-v2": ("Clusters run Dataplane V2.", dataplane_v2),
    "kubelet-readonly-port-off": ("The kubelet's read-only port stays closed.", kubelet_readonly_port),
    "os-login-with-keys": (
        "No ssh-keys metadata without OS Login; OS Login never turned off.",
        ssh_keys_without_os_login,
    ),
    "no-project-metadata": ("The stack sets no project-wide metadata.", project_wide_metadata),
}

"""The supported profile's staging pod: what it may reach on the pod network, and who it is to Google.

Design: the staging pod stays on the pod network (no hostNetwork) and reads the store as its own Kubernetes
service account, through Workload Identity Federation for GKE. The alternative, host networking, gives the pod
the node's network namespace and the node's service account: NetworkPolicies do not apply to host-network pods
(https://kubernetes.io/docs/concepts/services-networking/network-policies/ "NetworkPolicy and hostNetwork pods";
GKE's Dataplane V2 treats them as the node), and GKE's metadata server does not serve them a workload identity
("Workload Identity Federation for GKE can't be used with Pods running on the host network": limitations in
https://cloud.google.com/kubernetes-engine/docs/concepts/workload-identity). So host networking would open
every destination and every host port, and the store grant would go to an account every pod of the node's
host network shares. On the pod network the grant names one principal, and the egress below names the
only places the pod talks to:

- DNS (UDP and TCP 53): metadata.google.internal and storage.googleapis.com are names; kube-dns, or NodeLocal
  DNSCache where GKE runs it (rendezvous.py DNS_PEERS);
- the GKE metadata server: the pod asks 169.254.169.254:80. GKE's network-policy page says what a policy must
  allow for it by datapath (https://cloud.google.com/kubernetes-engine/docs/how-to/network-policy, the note on
  Workload Identity Federation for GKE and the metadata server, read 2026-12-02): 169.254.169.252/32 port 988
  on clusters without Dataplane V2 (GKE 1.21.0-gke.1000 and later), 169.254.169.254/32 ports 80 and 8080 on
  Dataplane V2. The cluster always runs Dataplane V2 (cluster.py `ADVANCED_DATAPATH`), so the rule is the
  second, and 169.254.169.252:988 stays closed;
- Cloud Storage on TCP 443: storage.googleapis.com resolves to Google's public addresses (Private Google
  Access on the host subnet routes them; network.py). NetworkPolicy matches addresses, not names, so this
  rule is any address on 443 except the private and link-local ranges and the stack's own ranges: nothing
  inside the cluster or the VPC is opened by it;
- the control plane on TCP 443 (the init container labels its node): the `kubernetes` Service's endpoint is the
  private endpoint in `master_ipv4_cidr_block`; Dataplane V2 (Cilium) applies policy to the Service's
  backend address.

The principal (Workload Identity Federation for GKE, "Configure authorization and principals" in
https://cloud.google.com/kubernetes-engine/docs/how-to/workload-identity):
`principal://iam.googleapis.com/projects/PROJECT_NUMBER/locations/global/workloadIdentityPools/
PROJECT_ID.svc.id.goog/subject/ns/NAMESPACE/sa/KSA_NAME`. The A4 pool runs GKE_METADATA (gke_nodepool.py),
so a pod-network pod gets exactly that identity; no Google service account and no impersonation grant.
"""

from __future__ import annotations

import ipaddress
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.config import StackConfig
from components.gke.objects import INSTALLER_LABELS, INSTALLER_NAME, NAMESPACE, child_opts, installer_ksa, k8s_spec
from components.gke.rendezvous import DNS_PEERS, DNS_PORTS

# The GKE metadata server as GKE's network-policy page lists it for Dataplane V2 clusters (module doc): the
# address pods ask, on ports 80 and 8080. 169.254.169.252:988 is the other datapath's and is not opened.
METADATA_ADDRESS = "169.254.169.254/32"
METADATA_PORTS = (80, 8080)
HTTPS_PORT = 443
# Not the internet: RFC 1918, shared address space (RFC 6598), link-local (RFC 3927), loopback.
NOT_INTERNET = ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16", "100.64.0.0/10", "169.254.0.0/16", "127.0.0.0/8")
POLICY_NAME = f"{INSTALLER_NAME}-egress"


def stack_ranges(cfg: StackConfig) -> list[str]:
    n = cfg.network
    return [n.host_cidr, n.pods_cidr, n.services_cidr, n.gvnic_cidr, n.rdma_cidr, n.master_cidr]


def internet_except(cfg: StackConfig) -> list[str]:
    """What the 443 rule leaves out: the non-internet ranges, and the stack's own ranges outside them."""
    blocked = [ipaddress.IPv4Network(c) for c in NOT_INTERNET]
    extra = [c for c in stack_ranges(cfg) if not any(ipaddress.IPv4Network(c).subnet_of(b) for b in blocked)]
    return [*NOT_INTERNET, *sorted(set(extra))]


def _tcp(port: int) -> list[dict[str, Any]]:
    return [{"protocol": "TCP", "port": port}]


def egress_rules(cfg: StackConfig) -> list[dict[str, Any]]:
    """The staging pod's egress, one rule per destination (see the module doc)."""
    return [
        {"to": DNS_PEERS, "ports": DNS_PORTS},
        {"to": [{"ip_block": {"cidr": METADATA_ADDRESS}}], "ports": [p for port in METADATA_PORTS for p in _tcp(port)]},
        {"to": [{"ip_block": {"cidr": "0.0.0.0/0", "except": internet_except(cfg)}}], "ports": _tcp(HTTPS_PORT)},
        {"to": [{"ip_block": {"cidr": cfg.network.master_cidr}}], "ports": _tcp(HTTPS_PORT)},
    ]


def egress_policy(
    parent: pulumi.Resource, name: str, cfg: StackConfig, namespace: Any
) -> k8s.networking.v1.NetworkPolicy:
    """The staging pod's egress; the installer's no-ingress policy (gke_objects) still denies the rest."""
    return k8s.networking.v1.NetworkPolicy(
        f"{name}-egress",
        metadata={"name": POLICY_NAME, "namespace": namespace, "labels": INSTALLER_LABELS},
        spec=k8s_spec(
            {
                "pod_selector": {"match_labels": {"app.kubernetes.io/name": INSTALLER_NAME}},
                "policy_types": ["Egress"],
                "egress": egress_rules(cfg),
            }
        ),
        opts=child_opts(parent),
    )


def wif_principal(project_number: str, project_id: str, namespace: str, ksa: str) -> str:
    """A Kubernetes service account's principal under Workload Identity Federation for GKE."""
    return (
        f"principal://iam.googleapis.com/projects/{project_number}/locations/global/workloadIdentityPools/"
        f"{project_id}.svc.id.goog/subject/ns/{namespace}/sa/{ksa}"
    )


def staging_principal(cfg: StackConfig, provider: pulumi.ProviderResource | None) -> pulumi.Output[str]:
    """The staging pod's principal: its KSA (installer_ksa, named for the stack, in NAMESPACE) in the stack
    project's pool; the principal names the project by number, which the stack's gcp provider looks up."""
    project = gcp.organizations.get_project_output(
        project_id=cfg.project, opts=pulumi.InvokeOutputOptions(provider=provider)
    )
    return project.number.apply(lambda n: wif_principal(str(n), cfg.project, NAMESPACE, installer_ksa(cfg.stack)))

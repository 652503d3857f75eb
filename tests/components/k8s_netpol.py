"""A small evaluator of Kubernetes NetworkPolicies (networking.k8s.io/v1), written from Kubernetes' own words.

Sources (each rule below names the one it follows):
- [API] k8s.io/api networking/v1 types.go, the field comments of NetworkPolicySpec, NetworkPolicyEgressRule,
  NetworkPolicyIngressRule, NetworkPolicyPort, IPBlock, NetworkPolicyPeer (kubernetes/kubernetes
  staging/src/k8s.io/api/networking/v1/types.go, read at 00737ac5f2dc2b61c4b18406f488db007ad8caf6);
- [SEL] metav1.LabelSelector: matchLabels and matchExpressions are ANDed; In, NotIn, Exists, DoesNotExist; an
  empty selector matches everything (k8s.io/apimachinery pkg/apis/meta/v1/types.go LabelSelector,
  pkg/labels/selector.go: NotIn and DoesNotExist hold for a missing key);
- [DOC] https://kubernetes.io/docs/concepts/services-networking/network-policies/ ("The two sorts of pod
  isolation": a pod is isolated for egress/ingress when any policy selects it and has that type in
  policyTypes; policies are additive; "NetworkPolicy and hostNetwork pods": undefined, plugins treat them as
  node traffic). GKE: network policies are not enforced for hostNetwork pods
  (https://cloud.google.com/kubernetes-engine/docs/how-to/network-policy), so here they are never isolated.

Deliberately conservative where Kubernetes leaves it to the plugin: an ipBlock is matched against every
destination address, a pod's too ([DOC]: it is undefined whether NAT happens before policy), so "nothing else
is open" holds whichever way a plugin does it. Named ports match a destination pod's named container ports.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Pod:
    name: str
    namespace: str
    labels: dict[str, str]
    ip: str
    host_network: bool = False
    ports: dict[str, tuple[str, int]] = field(default_factory=dict)  # named container ports: name -> (proto, n)


@dataclass(frozen=True)
class Endpoint:
    """Where a connection goes: a pod (selectors can match it) or a bare address, a port and a protocol."""

    ip: str
    port: int
    protocol: str = "TCP"
    pod: Pod | None = None
    what: str = ""

    def __str__(self) -> str:
        return self.what or f"{self.ip}:{self.port}/{self.protocol}"


def namespace_labels(namespace: str) -> dict[str, str]:
    # The API server sets kubernetes.io/metadata.name on every namespace (NamespaceDefaultLabelName, GA 1.22).
    return {"kubernetes.io/metadata.name": namespace}


def selector_matches(selector: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    """[SEL]; `None` here means an empty selector (the caller decides what an absent one means)."""
    selector = selector or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expr in selector.get("matchExpressions") or []:
        key, op, values = expr["key"], expr["operator"], expr.get("values") or []
        present = key in labels
        ok = {
            "In": present and labels.get(key) in values,
            "NotIn": not present or labels.get(key) not in values,
            "Exists": present,
            "DoesNotExist": not present,
        }.get(op)
        if ok is None:
            raise ValueError(f"matchExpressions operator {op!r} is not one of In, NotIn, Exists, DoesNotExist")
        if not ok:
            return False
    return True


def policy_types(spec: dict[str, Any]) -> list[str]:
    """[API] policyTypes: when unset, Ingress always, Egress only when the policy has an egress section."""
    if spec.get("policyTypes"):
        return list(spec["policyTypes"])
    return ["Ingress", *(["Egress"] if "egress" in spec else [])]


def in_block(ip: str, block: dict[str, Any]) -> bool:
    """[API] IPBlock: inside cidr and inside none of except."""
    addr = ipaddress.ip_address(ip)
    if addr not in ipaddress.ip_network(block["cidr"]):
        return False
    return not any(addr in ipaddress.ip_network(e) for e in block.get("except") or [])


def peer_matches(peer: dict[str, Any], policy_ns: str, other_ip: str, other: Pod | None) -> bool:
    """[API] NetworkPolicyPeer: ipBlock alone; else podSelector within the policy's namespace, namespaceSelector
    alone for every pod of the selected namespaces, both together for the selected pods of those namespaces."""
    if "ipBlock" in peer:
        return in_block(other_ip, peer["ipBlock"])
    if other is None or other.host_network:  # selectors select pods; a host-network pod is the node's traffic
        return False
    if "namespaceSelector" in peer:
        if not selector_matches(peer["namespaceSelector"], namespace_labels(other.namespace)):
            return False
    elif other.namespace != policy_ns:
        return False
    return "podSelector" not in peer or selector_matches(peer["podSelector"], other.labels)


def port_matches(ports: list[dict[str, Any]] | None, port: int, protocol: str, dest: Pod | None) -> bool:
    """[API] NetworkPolicyPort: protocol defaults to TCP; no port matches every port; endPort makes a range;
    an empty or missing list matches every port."""
    if not ports:
        return True
    for p in ports:
        if p.get("protocol", "TCP") != protocol:
            continue
        want = p.get("port")
        if want is None:
            return True
        if isinstance(want, str):  # a named port of the destination pod
            named = dest.ports.get(want) if dest else None
            if named == (protocol, port):
                return True
            continue
        if want <= port <= p.get("endPort", want):
            return True
    return False


def rule_matches(
    rule: dict[str, Any],
    peers_key: str,
    ns: str,
    other_ip: str,
    other: Pod | None,
    port: int,
    protocol: str,
    dest: Pod | None,
) -> bool:
    """[API] a rule allows traffic that matches its ports AND one of its peers; an empty or missing peer list
    matches every peer."""
    if not port_matches(rule.get("ports"), port, protocol, dest):
        return False
    peers = rule.get(peers_key)
    return not peers or any(peer_matches(p, ns, other_ip, other) for p in peers)


def selecting(policies: Iterable[dict[str, Any]], pod: Pod, kind: str) -> list[dict[str, Any]]:
    """The policies of the pod's namespace that select it and have `kind` among their types."""
    return [
        p
        for p in policies
        if p["metadata"].get("namespace") == pod.namespace
        and selector_matches(p["spec"].get("podSelector"), pod.labels)
        and kind in policy_types(p["spec"])
    ]


def egress_allowed(policies: list[dict[str, Any]], src: Pod, dst: Endpoint) -> bool:
    """[API] egress: allowed when no Egress policy selects the pod, or when any rule of any of them matches."""
    if src.host_network:
        return True
    chosen = selecting(policies, src, "Egress")
    if not chosen:
        return True
    return any(
        rule_matches(r, "to", src.namespace, dst.ip, dst.pod, dst.port, dst.protocol, dst.pod)
        for p in chosen
        for r in p["spec"].get("egress") or []
    )


def ingress_allowed(
    policies: list[dict[str, Any]], src: Pod | None, src_ip: str, dst: Pod, port: int, protocol: str = "TCP"
) -> bool:
    """[API] ingress: the same for the destination pod, with `from` and the destination's own ports."""
    if dst.host_network:
        return True
    chosen = selecting(policies, dst, "Ingress")
    if not chosen:
        return True
    return any(
        rule_matches(r, "from", dst.namespace, src_ip, src, port, protocol, dst)
        for p in chosen
        for r in p["spec"].get("ingress") or []
    )


def connects(policies: list[dict[str, Any]], src: Pod, dst: Endpoint) -> bool:
    """A connection needs the source's egress and, to a pod, the destination's ingress."""
    if not egress_allowed(policies, src, dst):
        return False
    return dst.pod is None or ingress_allowed(policies, src, src.ip, dst.pod, dst.port, dst.protocol)


# Where a pod's DNS query lands, the part of the path that NetworkPolicy sees.
# - [NLD-GKE] https://cloud.google.com/kubernetes-engine/docs/how-to/nodelocal-dns-cache (read 2026-12-02): GKE
#   Standard enables NodeLocal DNSCache by default from 1.33.1 (it can be disabled); a DaemonSet runs a cache on
#   every node and "the request goes to the DNS cache that runs on the same node as the Pod"; Pods need no change.
# - [NLD-K8S] kubernetes/kubernetes cluster/addons/dns/nodelocaldns/nodelocaldns.yaml at
#   028f956d2f934d6c82ca815e3f8d622da7e480cb: DaemonSet `node-local-dns` in kube-system, label
#   `k8s-app: node-local-dns`, `hostNetwork: true`, listening on `-localip __PILLAR__LOCAL__DNS__` (169.254.20.10
#   by default, the addon's README) on a dummy interface of the node.
# - [NLD-DPV2] GKE's variant on Dataplane V2: the node's node-local-dns pod is a pod-network backend that the
#   kube-dns Service address is redirected to on the pod's own node, so a pod selector on `k8s-app:
#   node-local-dns` admits it; Google's own policy allows that peer beside the two others
#   (gke-labs/kube-agents examples/vllm-gemma/networkpolicy.yaml at 1905108845fc3e5dcae64668f881bdb200bf0f31).
#   GKE's manifest of the addon is not public: both variants are kept, and a policy must pass both.
# - Cache off: kube-dns; Dataplane V2 resolves the Service to a kube-dns pod before policy ([DOC]: undefined
#   whether NAT happens before policy; Cilium's socket load balancer does it first).
NODE_LOCAL_DNS_IP = "169.254.20.10"  # [NLD-K8S] __PILLAR__LOCAL__DNS__ default
NODE_LOCAL_DNS_LABELS = {"k8s-app": "node-local-dns"}  # [NLD-K8S] the DaemonSet's pod template labels
KUBE_DNS_LABELS = {"k8s-app": "kube-dns"}


@dataclass(frozen=True)
class DnsPath:
    """One way the cluster may answer a pod's DNS query: its name and every place a query may go (UDP and TCP
    53 to each); a pod resolves names on this path only if it reaches all of them."""

    name: str
    servers: tuple[Endpoint, ...]


def dns_paths(node_local_dns_cache: bool, kube_dns_ip: str, local_pod_ip: str) -> list[DnsPath]:
    """The DNS paths of a cluster with NodeLocal DNSCache on or off (sources above): off, kube-dns's pods; on,
    the node's cache, either GKE Dataplane V2's pod-network node-local-dns pod [NLD-DPV2] or the upstream
    manifest's host-network cache on 169.254.20.10 [NLD-K8S]: a host-network pod is the node's traffic, so
    the destination is a bare address that only an ipBlock admits (peer_matches)."""

    def on_53(ip: str, pod: Pod | None, what: str) -> tuple[Endpoint, ...]:
        return tuple(Endpoint(ip, 53, proto, pod, f"{what}:53/{proto}") for proto in ("UDP", "TCP"))

    if not node_local_dns_cache:
        kube_dns = Pod("kube-dns", "kube-system", KUBE_DNS_LABELS, kube_dns_ip)
        return [DnsPath("kube-dns (NodeLocal DNSCache off)", on_53(kube_dns.ip, kube_dns, "kube-dns"))]
    gke = Pod("node-local-dns", "kube-system", NODE_LOCAL_DNS_LABELS, local_pod_ip)
    return [
        DnsPath("node-local-dns pod (GKE Dataplane V2)", on_53(gke.ip, gke, "node-local-dns pod")),
        DnsPath("node-local-dns on 169.254.20.10 (hostNetwork)", on_53(NODE_LOCAL_DNS_IP, None, "node-local-dns")),
    ]

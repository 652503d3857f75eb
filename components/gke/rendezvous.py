"""Who may reach the benchmarks: the internode rendezvous (MASTER_PORT) and every benchmark pod's traffic.

The internode test's rank 0 listens on MASTER_PORT (torch.distributed's TCPStore) with no authentication:
whoever connects first can join or break the run. Where it listens depends on the pod networking:

- `hostNetwork`: on the A4 node's own address. NetworkPolicies do not cover host-network pods (Kubernetes
  leaves their behaviour undefined and plugins treat them as the node: "NetworkPolicy and hostNetwork pods",
  https://kubernetes.io/docs/concepts/services-networking/network-policies/), and the host VPC admits every
  node and pod of the cluster (network.py `host-internal`). So two GCE firewall rules on the host VPC
  decide it: MASTER_PORT is allowed between the A4 nodes (their service account, the source and the target)
  and denied to every other address of the host VPC, both above `host-internal` in priority. A connection
  from the same node never meets the VPC firewall: that node runs only our DaemonSets and the benchmark pod
  that owns its 8 GPUs.
- pod network (`multiNetwork`'s eth0, and intranode always): Kubernetes NetworkPolicies, which GKE Dataplane
  V2 (the cluster's ADVANCED_DATAPATH) enforces. Ingress: an internode pod admits only internode pods (the
  rendezvous and NCCL's bootstrap, which listens on ephemeral ports); every other benchmark pod admits
  nothing. Egress: DNS (kube-dns, or NodeLocal DNSCache where GKE runs it: DNS_PEERS) and the internode
  peers, nothing else: not the metadata server
  (169.254.169.254), not the Kubernetes API (the pods mount no token), not the internet (the runner
  downloads nothing).
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s

from components.config import StackConfig
from components.gke.objects import BENCH_COMPONENT, BENCH_LABELS, MASTER_PORT, PART_OF, TEST_LABEL, child_opts, k8s_spec
from components.network import A4Network

# Above network.py's `host-internal` (priority 1000, the default): lower numbers win.
ALLOW_PRIORITY = 900
DENY_PRIORITY = 910
KUBE_DNS = {
    "namespace_selector": {"match_labels": {"kubernetes.io/metadata.name": "kube-system"}},
    "pod_selector": {"match_labels": {"k8s-app": "kube-dns"}},
}
# Where a pod's DNS query goes depends on the cluster's NodeLocal DNSCache, which the stack leaves to GKE: GKE
# Standard enables it by default from 1.33.1 and it can be switched on or off later
# (https://cloud.google.com/kubernetes-engine/docs/how-to/nodelocal-dns-cache, read 2026-12-02). So the DNS rule
# admits all three peers Google's own example policy admits (gke-labs/kube-agents
# examples/vllm-gemma/networkpolicy.yaml at 1905108845fc3e5dcae64668f881bdb200bf0f31), each needed by one
# setting, which tests/components/gke/test_egress_and_principals.py proves with the evaluator's DNS path
# (tests/components/k8s_netpol.py dns_paths):
# - cache off: kube-dns's pods (Dataplane V2 resolves the kube-dns Service to them before policy);
# - cache on, GKE Dataplane V2: the node's `k8s-app: node-local-dns` pod in kube-system, the backend the
#   kube-dns Service address is redirected to on the pod's own node;
# - cache on, the upstream manifest's way: node-local-dns runs hostNetwork and listens on the link-local
#   169.254.20.10 (kubernetes/kubernetes cluster/addons/dns/nodelocaldns/nodelocaldns.yaml at
#   028f956d2f934d6c82ca815e3f8d622da7e480cb: `hostNetwork: true`, `-localip __PILLAR__LOCAL__DNS__`), an address
#   no pod selector can match: only an ipBlock admits it.
NODE_LOCAL_DNS = {
    "namespace_selector": {"match_labels": {"kubernetes.io/metadata.name": "kube-system"}},
    "pod_selector": {"match_labels": {"k8s-app": "node-local-dns"}},
}
NODE_LOCAL_DNS_ADDRESS = "169.254.20.10/32"
DNS_PEERS = [KUBE_DNS, NODE_LOCAL_DNS, {"ip_block": {"cidr": NODE_LOCAL_DNS_ADDRESS}}]
DNS_PORTS = [{"protocol": "UDP", "port": 53}, {"protocol": "TCP", "port": 53}]


class RendezvousFirewall(pulumi.ComponentResource):
    """MASTER_PORT on the host VPC: open between the A4 nodes, closed to every other node and pod."""

    def __init__(
        self,
        name: str,
        cfg: StackConfig,
        network: A4Network,
        a4_account_email: pulumi.Input[str],
        opts: pulumi.ResourceOptions | None = None,
    ):
        super().__init__("deepep-a4:gke:RendezvousFirewall", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        port = [str(MASTER_PORT)]
        # Both rules guard the A4 nodes' rendezvous port on the host VPC; they differ in who and what.
        common = {"network": network.host.network.id, "direction": "INGRESS", "opts": child}
        common["target_service_accounts"] = [a4_account_email]
        self.allow = gcp.compute.Firewall(
            f"{name}-a4",
            name=f"{cfg.name_prefix}-rendezvous-a4",
            priority=ALLOW_PRIORITY,
            source_service_accounts=[a4_account_email],
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=port)],
            description="The internode rendezvous: between the stack's A4 nodes only",
            **common,
        )
        self.deny = gcp.compute.Firewall(
            f"{name}-others",
            name=f"{cfg.name_prefix}-rendezvous-others",
            priority=DENY_PRIORITY,
            source_ranges=[cfg.network.host_cidr, cfg.network.pods_cidr],
            denies=[gcp.compute.FirewallDenyArgs(protocol="tcp", ports=port)],
            description="The internode rendezvous: no other node or pod of the cluster",
            **common,
        )
        self.register_outputs({})


def bench_pods(test: str | None = None) -> dict[str, Any]:
    labels = {"app.kubernetes.io/component": BENCH_COMPONENT, **PART_OF}
    return {"match_labels": {**labels, TEST_LABEL: test} if test else labels}


def bench_network_policies(parent: pulumi.Resource, name: str, namespace: Any) -> list[k8s.networking.v1.NetworkPolicy]:
    """Ingress and egress of every benchmark pod on the pod network (no effect on host-network pods)."""
    internode = bench_pods("internode")

    def policy(suffix: str, spec: dict[str, Any]) -> k8s.networking.v1.NetworkPolicy:
        return k8s.networking.v1.NetworkPolicy(
            f"{name}-{suffix}",
            metadata={"name": f"deepep-bench-{suffix}", "namespace": namespace, "labels": BENCH_LABELS},
            spec=k8s_spec(spec),
            opts=child_opts(parent),
        )

    return [
        # Every benchmark pod: no ingress, and egress to DNS and the internode peers only.
        policy(
            "isolated",
            {
                "pod_selector": bench_pods(),
                "policy_types": ["Ingress", "Egress"],
                "egress": [{"to": DNS_PEERS, "ports": DNS_PORTS}, {"to": [{"pod_selector": internode}]}],
            },
        ),
        # The internode pods admit each other (MASTER_PORT and NCCL's bootstrap ports), nobody else.
        policy(
            "internode-peers",
            {
                "pod_selector": internode,
                "policy_types": ["Ingress"],
                "ingress": [{"from_": [{"pod_selector": internode}]}],
            },
        ),
    ]

"""The internode rendezvous is reachable from the stack's A4 nodes only, in both pod networkings."""

from __future__ import annotations

from components.gke import rendezvous as gke_rendezvous
from components.gke.objects import MASTER_PORT
from tests.conftest import of_type, one, plan

FIREWALL = "gcp:compute/firewall:Firewall"
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"


def test_host_network_rendezvous_is_open_between_a4_nodes_and_closed_to_every_other_node_and_pod() -> None:
    result = plan("gke-b200", podNetworking="hostNetwork")
    rules = {r["name"]: r["inputs"] for r in of_type(result, FIREWALL)}
    allow, deny = rules["gke-rendezvous-a4"], rules["gke-rendezvous-others"]
    a4_nodes = "deepep-gke-b200-nodes@deepep-a4-demo.iam.gserviceaccount.com"
    pool = one(result, "gcp:container/nodePool:NodePool", "gke-a4")
    assert pool["inputs"]["nodeConfig"]["serviceAccount"] == a4_nodes
    assert allow["sourceServiceAccounts"] == allow["targetServiceAccounts"] == [a4_nodes]
    assert allow["allows"] == [{"protocol": "tcp", "ports": [str(MASTER_PORT)]}]
    assert deny["targetServiceAccounts"] == [a4_nodes]
    assert deny["denies"] == [{"protocol": "tcp", "ports": [str(MASTER_PORT)]}]
    internal = rules["a4-host-internal"]
    # Everything the host VPC admits from inside is denied on the port, above host-internal (default 1000).
    assert set(internal["sourceRanges"]) <= set(deny["sourceRanges"])
    assert allow["priority"] < deny["priority"] < internal.get("priority", 1000)
    assert allow["network"] == deny["network"] == internal["network"]


def test_multi_network_rendezvous_is_guarded_by_network_policies_not_the_host_firewall() -> None:
    result = plan("gke-b200", podNetworking="multiNetwork")
    assert not [r for r in of_type(result, FIREWALL) if "rendezvous" in r["name"]]
    policies = {p["inputs"]["metadata"]["name"]: p["inputs"]["spec"] for p in of_type(result, POLICY)}
    internode = gke_rendezvous.bench_pods("internode")["match_labels"]
    assert policies["deepep-bench-internode-peers"]["ingress"] == [
        {"from": [{"podSelector": {"matchLabels": internode}}]}
    ]
    assert "ingress" not in policies["deepep-bench-isolated"]

"""A4Network under mocks: the RoCE VPC, its eight subnets, the gVNIC VPCs, NAT and firewall."""

from __future__ import annotations

from tests.conftest import of_type, one, plan

NETWORK = "gcp:compute/network:Network"
SUBNET = "gcp:compute/subnetwork:Subnetwork"
FIREWALL = "gcp:compute/firewall:Firewall"


def test_rdma_vpc_uses_the_zones_roce_profile_and_max_mtu() -> None:
    result = plan("gke-b200", region="us-central1", zone="us-central1-b")
    rdma = one(result, NETWORK, "a4-rdma")["inputs"]
    assert rdma["networkProfile"] == "projects/deepep-a4-demo/global/networkProfiles/us-central1-b-vpc-roce"
    assert rdma["mtu"] == 8896
    assert rdma["autoCreateSubnetworks"] is False
    assert rdma["name"] == "deepep-gke-b200-rdma"


def test_eight_rdma_subnets_in_the_region_and_the_rdma_vpc() -> None:
    result = plan("gke-b200", rdmaCidr="10.128.0.0/16", region="us-central1", zone="us-central1-b")
    rdma_id = "a4-rdma-id"
    subnets = [r for r in of_type(result, SUBNET) if r["name"].startswith("a4-rdma-")]
    assert len(subnets) == 8
    by_index = {int(r["name"].rsplit("-", 1)[1]): r["inputs"] for r in subnets}
    assert sorted(by_index) == list(range(8))
    for i, inputs in by_index.items():
        assert inputs["region"] == "us-central1"
        assert inputs["network"] == rdma_id
        assert inputs["ipCidrRange"] == f"10.128.{32 * i}.0/19"
        assert inputs["name"] == f"deepep-gke-b200-rdma-{i}"


def test_two_gvnic_vpcs_each_with_one_subnet() -> None:
    result = plan("gke-b200")
    host = one(result, SUBNET, "a4-host")["inputs"]
    assert host["network"] == "a4-host-id"
    assert host["ipCidrRange"] == "10.0.0.0/20"
    assert host["privateIpGoogleAccess"] is True
    assert host["secondaryIpRanges"] == [
        {"rangeName": "pods", "ipCidrRange": "10.4.0.0/14"},
        {"rangeName": "services", "ipCidrRange": "10.8.0.0/20"},
    ]
    gvnic = one(result, SUBNET, "a4-gvnic")["inputs"]
    assert gvnic["network"] == "a4-gvnic-id"
    assert gvnic["ipCidrRange"] == "10.1.0.0/20"
    for name in ("a4-host", "a4-gvnic"):
        net = one(result, NETWORK, name)["inputs"]
        assert "networkProfile" not in net
        assert net["autoCreateSubnetworks"] is False
    assert len(of_type(result, NETWORK)) == 3


def test_router_and_nat_serve_the_host_vpc() -> None:
    result = plan("gke-b200")
    router = one(result, "gcp:compute/router:Router")["inputs"]
    assert router["network"] == "a4-host-id"
    assert router["region"] == "asia-southeast1"
    nat = one(result, "gcp:compute/routerNat:RouterNat")["inputs"]
    assert nat["router"] == "deepep-gke-b200-router"
    assert nat["natIpAllocateOption"] == "AUTO_ONLY"
    assert nat["sourceSubnetworkIpRangesToNat"] == "ALL_SUBNETWORKS_ALL_IP_RANGES"


def test_firewall_is_internal_only_and_ssh_from_iap() -> None:
    result = plan("gke-b200")
    # The network's own rules (the GKE rendezvous rules: tests/components/gke/test_rendezvous.py).
    rules = {r["name"]: r["inputs"] for r in of_type(result, FIREWALL) if r["name"].startswith("a4-")}
    assert set(rules) == {"a4-host-internal", "a4-gvnic-internal", "a4-iap-ssh"}
    assert rules["a4-host-internal"]["sourceRanges"] == ["10.0.0.0/20", "10.4.0.0/14"]
    assert rules["a4-gvnic-internal"]["sourceRanges"] == ["10.1.0.0/20"]
    assert rules["a4-iap-ssh"]["sourceRanges"] == ["35.235.240.0/20"]
    assert rules["a4-iap-ssh"]["allows"] == [{"protocol": "tcp", "ports": ["22"]}]
    for inputs in rules.values():
        assert "0.0.0.0/0" not in inputs["sourceRanges"]


def test_ssh_rule_only_when_enabled() -> None:
    result = plan("gke-b200", sshViaIap=False)
    assert "a4-iap-ssh" not in {r["name"] for r in of_type(result, FIREWALL)}


def test_names_derive_from_the_stack() -> None:
    result = plan("gke-b200", namePrefix="team2")
    names = {r["inputs"]["name"] for r in of_type(result, NETWORK)}
    assert names == {"team2-host", "team2-gvnic", "team2-rdma"}


def test_network_children_are_parented_to_the_component_and_use_the_gcp_provider() -> None:
    result = plan("gke-b200")
    component = one(result, "deepep-a4:network:A4Network")
    assert component["parent"] is None
    children = [r for r in result.resources if r["parent"] == "a4"]
    assert len(children) == 3 + 10 + 2 + 3  # networks, subnets, router+nat, firewalls
    assert {r["provider"] for r in children} == {"gcp"}
    provider = one(result, "pulumi:providers:gcp")["inputs"]
    assert (provider["project"], provider["region"], provider["zone"]) == (
        "deepep-a4-demo",
        "asia-southeast1",
        "asia-southeast1-b",
    )

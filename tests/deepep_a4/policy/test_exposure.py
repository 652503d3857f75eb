"""Cluster and node exposure (deepep_a4/policy/exposure.py), one test per setting, on the plan's own cluster, pool
and VM: the plan passes, the one edit is refused by its rule."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from deepep_a4.policy import exposure
from tests.deepep_a4.policy.runner import find, resources

CLUSTER = exposure.CLUSTER
POOL = exposure.NODE_POOL
VM = "gcp:compute/instance:Instance"


@pytest.fixture(scope="module")
def gke() -> dict[str, Any]:
    found = resources("gke-b200")
    return {"cluster": find(found, "gke", "cluster:Cluster"), "pool": find(found, "gke-a4", "nodePool:NodePool")}


@pytest.fixture(scope="module")
def vm() -> dict[str, Any]:
    return find(resources("gce-b200"), "gce-vm-0", "instance:Instance")


def test_public_endpoint_needs_authorized_networks(gke: dict[str, Any]) -> None:
    cluster = copy.deepcopy(gke["cluster"])
    assert exposure.public_endpoint_without_networks(CLUSTER, cluster) == []
    cluster["privateClusterConfig"]["enablePrivateEndpoint"] = False
    assert exposure.public_endpoint_without_networks(CLUSTER, cluster)
    cluster["masterAuthorizedNetworksConfig"] = {"cidrBlocks": [{"cidrBlock": "203.0.114.16/28"}]}
    assert exposure.public_endpoint_without_networks(CLUSTER, cluster) == []
    cluster.pop("masterAuthorizedNetworksConfig")
    assert exposure.public_endpoint_without_networks(CLUSTER, cluster)


def test_a_cluster_or_pool_without_node_config_is_refused(gke: dict[str, Any]) -> None:
    cluster, pool = copy.deepcopy(gke["cluster"]), copy.deepcopy(gke["pool"])
    assert exposure.default_node_config(CLUSTER, cluster) == [] and exposure.default_node_config(POOL, pool) == []
    cluster.pop("nodeConfig")
    pool.pop("nodeConfig")
    assert exposure.default_node_config(CLUSTER, cluster) and exposure.default_node_config(POOL, pool)
    assert exposure.default_node_config(CLUSTER, {**gke["cluster"], "nodePools": [{"name": "extra"}]})


def test_client_certificates_are_refused(gke: dict[str, Any]) -> None:
    cluster = copy.deepcopy(gke["cluster"])
    assert exposure.client_certificates(CLUSTER, cluster) == []
    cluster["masterAuth"] = {"clientCertificateConfig": {"issueClientCertificate": True}}
    [msg] = exposure.client_certificates(CLUSTER, cluster)
    assert "client certificate" in msg


def test_dataplane_v2_is_required(gke: dict[str, Any]) -> None:
    cluster = copy.deepcopy(gke["cluster"])
    assert exposure.dataplane_v2(CLUSTER, cluster) == []
    cluster["datapathProvider"] = "LEGACY_DATAPATH"
    assert exposure.dataplane_v2(CLUSTER, cluster)
    cluster.pop("datapathProvider")
    assert exposure.dataplane_v2(CLUSTER, cluster)


@pytest.mark.parametrize("where", ["pool", "cluster-defaults", "autoconfig"])
def test_the_kubelet_read_only_port_stays_closed(gke: dict[str, Any], where: str) -> None:
    cluster, pool = copy.deepcopy(gke["cluster"]), copy.deepcopy(gke["pool"])
    assert exposure.kubelet_readonly_port(POOL, pool) == exposure.kubelet_readonly_port(CLUSTER, cluster) == []
    if where == "pool":
        pool["nodeConfig"]["kubeletConfig"] = {"insecureKubeletReadonlyPortEnabled": "TRUE"}
        assert exposure.kubelet_readonly_port(POOL, pool)
    elif where == "cluster-defaults":
        cluster["nodePoolDefaults"] = {"nodeConfigDefaults": {"insecureKubeletReadonlyPortEnabled": "TRUE"}}
        assert exposure.kubelet_readonly_port(CLUSTER, cluster)
    else:
        cluster["nodePoolAutoConfig"] = {"nodeKubeletConfig": {"insecureKubeletReadonlyPortEnabled": "TRUE"}}
        assert exposure.kubelet_readonly_port(CLUSTER, cluster)


def test_ssh_keys_without_os_login_are_refused(vm: dict[str, Any]) -> None:
    props = copy.deepcopy(vm)
    assert exposure.ssh_keys_without_os_login(VM, props) == []
    props["metadata"]["ssh-keys"] = "eve:ssh-ed25519 AAAA eve"
    assert exposure.ssh_keys_without_os_login(VM, props) == []  # OS Login on: the key is ignored
    props["metadata"]["enable-oslogin"] = "FALSE"
    [msg] = exposure.ssh_keys_without_os_login(VM, props)
    assert "ssh-keys" in msg
    item = {"key": "enable-oslogin", "value": "FALSE"}
    assert exposure.ssh_keys_without_os_login("gcp:compute/projectMetadataItem:ProjectMetadataItem", item)
    assert exposure.project_wide_metadata("gcp:compute/projectMetadataItem:ProjectMetadataItem", item)

"""Pod security of the GKE workloads: network policies, the image, and the scanner's exceptions."""

from __future__ import annotations

import re

import pytest

from components import config
from components.gke import bench as gke_bench
from components.gke import pod_security as security
from deepep_a4.plan import engine as plan_engine
from tests.components.gke.test_workloads import GIB_DS, INSTALLER_DS, JOB, STACK, Built, build
from tests.conftest import stack_config

DIGEST = "ubuntu@sha256:" + "ab" * 32
POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
DAEMONSET = "kubernetes:apps/v1:DaemonSet"


@pytest.fixture(scope="module")
def tagged() -> Built:
    return build()


def skipped_checks(annotations: dict[str, str]) -> dict[str, str]:
    found = {}
    for key, value in annotations.items():
        if key.startswith("checkov.io/skip"):
            check, _, reason = value.partition("=")
            found[check] = reason
    return found


def test_benchmark_pods_admit_only_internode_peers_and_reach_only_dns_and_peers(tagged: Built) -> None:
    policies = {p.inputs["metadata"]["name"]: p.inputs["spec"] for p in tagged.of(POLICY)}
    isolated = policies["deepep-bench-isolated"]
    selector = isolated["podSelector"]["matchLabels"]
    assert isolated["policyTypes"] == ["Ingress", "Egress"] and "ingress" not in isolated  # no ingress at all
    for job in tagged.of(JOB):  # every benchmark pod is selected by it
        labels = job.inputs["spec"]["template"]["metadata"]["labels"]
        assert selector.items() <= labels.items()
    internode = {"matchLabels": {**selector, "deepep-a4/test": "internode"}}
    dns, peers = isolated["egress"]
    kube_system = {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}}
    # DNS: kube-dns, or NodeLocal DNSCache's pod or address (test_network_identity proves each is needed).
    assert dns["to"] == [
        {"namespaceSelector": kube_system, "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}}},
        {"namespaceSelector": kube_system, "podSelector": {"matchLabels": {"k8s-app": "node-local-dns"}}},
        {"ipBlock": {"cidr": "169.254.20.10/32"}},
    ]
    assert sorted(p["port"] for p in dns["ports"]) == [53, 53]
    assert peers == {"to": [{"podSelector": internode}]}
    # Nothing else leaves a benchmark pod: one ipBlock, the DNS cache's, so not the metadata server either.
    assert str(isolated).count("ipBlock") == 1
    peers_in = policies["deepep-bench-internode-peers"]
    assert peers_in["podSelector"] == internode
    assert peers_in["ingress"] == [{"from": [{"podSelector": internode}]}]
    # The installer's and gIB's pods serve nothing and fetch nothing on the pod network.
    for app, ds in (("deepep-installer", INSTALLER_DS), ("nccl-gib-installer", GIB_DS)):
        policy = policies[f"{app}-no-ingress"]
        assert policy["policyTypes"] == ["Ingress", "Egress"]
        assert "ingress" not in policy and "egress" not in policy
        pod_labels = tagged.one(DAEMONSET, ds).inputs["spec"]["template"]["metadata"]["labels"]
        assert policy["podSelector"]["matchLabels"].items() <= pod_labels.items()


def test_intranode_runs_on_the_pod_network_and_only_rdma_tests_on_the_hosts(tagged: Built) -> None:
    assert tagged.cfg.gke.pod_networking == "hostNetwork"
    intranode = tagged.job("intranode")["spec"]["template"]["spec"]
    assert "hostNetwork" not in intranode and "dnsPolicy" not in intranode
    env = {e["name"]: e.get("value") for e in intranode["containers"][0]["env"]}
    assert env["NCCL_SOCKET_IFNAME"] == "eth0"
    for test in ("low-latency", "internode"):
        assert tagged.job(test)["spec"]["template"]["spec"]["hostNetwork"] is True


def test_every_container_runs_the_stacks_image(tagged: Built) -> None:
    """Except Google's gIB plugin DaemonSet, which runs Google's image (test_gke_gib.py)."""
    b = build(containerImage=DIGEST)
    ds = b.one(DAEMONSET, INSTALLER_DS).inputs["spec"]["template"]["spec"]
    images = [c["image"] for c in ds["initContainers"] + ds["containers"]]
    images += [c["image"] for j in b.of(JOB) for c in j.inputs["spec"]["template"]["spec"]["containers"]]
    assert images and set(images) == {DIGEST}


def test_every_image_is_pinned_by_digest_and_no_scanner_exception_says_otherwise(tagged: Built) -> None:
    assert "@sha256:" in tagged.cfg.gke.container_image  # the default
    for r in [tagged.one(DAEMONSET, INSTALLER_DS), tagged.one(DAEMONSET, GIB_DS), *tagged.of(JOB)]:
        skips = skipped_checks(r.inputs["metadata"]["annotations"])
        assert "CKV_K8S_43" not in skips, r.name
        pod = r.inputs["spec"]["template"]["spec"]
        for c in pod.get("initContainers", []) + pod["containers"]:
            assert re.search(r"@sha256:[0-9a-f]{64}\Z", c["image"]), (r.name, c["image"])


def test_an_unpinned_image_is_refused_unless_allowed_and_then_the_scan_says_how_to_pin_it() -> None:
    with pytest.raises(config.ConfigError, match=r"containerImage.*pinned by digest.*allowUnpinnedImages"):
        config.parse(plan_engine.project_keys(stack_config(STACK, containerImage="ubuntu:24.04")), STACK)
    b = build(containerImage="ubuntu:24.04", allowUnpinnedImages=True)
    for r in [b.one(DAEMONSET, INSTALLER_DS), *b.of(JOB)]:
        skips = skipped_checks(r.inputs["metadata"]["annotations"])
        assert "pin it in the stack as name@sha256:<digest>" in skips["CKV_K8S_43"]


def test_only_the_installer_is_excused_from_privilege_with_multi_networking() -> None:
    tagged = build(podNetworking="multiNetwork")
    privilege = {"CKV_K8S_16", "CKV_K8S_20", "CKV_K8S_19"}
    assert not privilege & set(skipped_checks(tagged.one(DAEMONSET, GIB_DS).inputs["metadata"]["annotations"]))
    ds_skips = skipped_checks(tagged.one(DAEMONSET, INSTALLER_DS).inputs["metadata"]["annotations"])
    assert {"CKV_K8S_16", "CKV_K8S_17"} <= set(ds_skips)
    assert "kernel modules" in ds_skips["CKV_K8S_16"]
    for job in tagged.of(JOB):
        skips = skipped_checks(job.inputs["metadata"]["annotations"])
        assert not privilege & set(skips), job.inputs["metadata"]["name"]
        assert all(reason.strip() for reason in skips.values())
    intranode = skipped_checks(tagged.job("intranode")["metadata"]["annotations"])
    assert not {"CKV_K8S_23", "CKV_K8S_40", "CKV_K8S_37"} & set(intranode)  # non-root, no capability


def test_host_network_makes_the_rdma_pods_privileged_and_says_why(tagged: Built) -> None:
    b = tagged  # hostNetwork is the default (Google's A4 recipes, field report R2)
    assert b.cfg.gke.pod_networking == "hostNetwork"
    for job in b.of(JOB):
        rdma = job.inputs["metadata"]["name"] != gke_bench.job_name("intranode")
        skips = skipped_checks(job.inputs["metadata"]["annotations"])
        # Each exception is true of its object: only a host-network pod is excused from CKV_K8S_19.
        assert ("CKV_K8S_19" in skips) == rdma == bool(job.inputs["spec"]["template"]["spec"].get("hostNetwork"))
        if rdma:
            assert "podNetworking hostNetwork" in skips["CKV_K8S_19"]
        assert ("CKV_K8S_16" in skips) == rdma


def test_the_installer_mounts_a_token_only_where_it_labels_the_node_and_no_skip_says_otherwise(tagged: Built) -> None:
    ds = tagged.one(DAEMONSET, INSTALLER_DS).inputs
    pod = ds["spec"]["template"]["spec"]
    assert pod["automountServiceAccountToken"] is False
    assert "CKV_K8S_38" not in skipped_checks(ds["metadata"]["annotations"])
    [token] = [v for v in pod["volumes"] if "projected" in v]
    sources = token["projected"]["sources"]
    assert sources[0] == {"serviceAccountToken": {"path": "token", "expirationSeconds": 3600}}
    [init] = pod["initContainers"]
    sa_dir = "/var/run/secrets/kubernetes.io/serviceaccount"
    assert {"name": token["name"], "mountPath": sa_dir, "readOnly": True} in init["volumeMounts"]
    for c in pod["containers"]:  # the ready container never talks to the API server
        assert all(m["name"] != token["name"] for m in c.get("volumeMounts", []))


def test_rdma_tests_are_exactly_the_ones_that_open_the_nics() -> None:
    assert [t for t in config.BENCHMARK_TESTS if security.bench_needs_rdma(t)] == [
        "low-latency",
        "internode",
        "elastic",
    ]


@pytest.mark.parametrize("bad", ["Ubuntu:24.04", "ubuntu:24.04@sha256:123", "ubuntu 24.04", ""])
def test_a_bad_image_reference_is_refused(bad: str) -> None:
    with pytest.raises(config.ConfigError, match="containerImage"):
        config.parse(plan_engine.project_keys(stack_config(STACK, containerImage=bad)), STACK)


def test_a_skip_reason_with_an_equals_sign_is_refused_as_checkov_would_crash_on_it() -> None:
    # checkov reads `CHECK_ID=reason` with split("="): a second "=" raised inside checkov (seen in CI).
    with pytest.raises(ValueError, match="CKV_K8S_16"):
        security.skip_annotations({"CKV_K8S_16": "podNetworking=hostNetwork"})
    every = {**security.INSTALLER_SKIPS, **security.GIB_SKIPS}
    assert all(v.count("=") == 1 for v in security.skip_annotations(every).values())

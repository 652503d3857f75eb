"""Every pod of a `gke-b200` plan with a user's store, against Kubernetes' NetworkPolicy semantics and GKE's
identity rules: each endpoint a pod needs is reachable, nothing else is, and the Google identity GKE gives the
pod holds the store grant it needs and no other.

The objects are the plan's own rendering: `kubernetes_manifests` is what `deepep-a4 plan` writes as
files/k8s/*.yaml, the IAM members are plan.json's resources. The evaluator (k8s_netpol.py) and the identity
rules (gke_identity.py) are written from Kubernetes' and GKE's documents, cited there; every rule of every
policy is removed once in turn to show the test notices (test_removing_any_rule_breaks_a_needed_endpoint).
"""

from __future__ import annotations

import copy
import ipaddress
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config.parse import parse
from components.gke.objects import installer_ksa
from deepep_a4.plan import engine as plan_engine
from deepep_a4.plan.command import kubernetes_manifests
from scripts import names
from tests.components.gke import identity as gid
from tests.components.k8s_netpol import Endpoint, Pod, connects, dns_paths, ingress_allowed
from tests.conftest import plan, stack_config

ROOT = Path(__file__).resolve().parents[3]
PROJECT = "my-own-project-4711"
BUCKET = f"{PROJECT}-artifacts"
PREFIX = "deepep-a4"
USER = {"project": PROJECT, "artifactStore": f"gs://{BUCKET}/{PREFIX}", "artifactStoreManifest": "ab" * 32}
NS = names.NAMESPACE
GOOGLE_API = "142.250.4.207"  # one of storage.googleapis.com's public addresses
PRIVATE_GOOGLE_API = "199.36.153.8"  # private.googleapis.com


class Plan:
    def __init__(self, **overrides: Any):
        self.result = plan("gke-b200", **USER, **overrides)
        self.cfg = parse(plan_engine.project_keys(stack_config("gke-b200", **USER, **overrides)), "gke-b200")
        self.objects = [yaml.safe_load(t) for t in kubernetes_manifests(self.result.resources).values()]
        self.policies = [o for o in self.objects if o["kind"] == "NetworkPolicy"]
        net = self.cfg.network
        self.pod_ips = ipaddress.ip_network(net.pods_cidr).hosts()
        self.master = str(next(ipaddress.ip_network(net.master_cidr).hosts()) + 1)
        self.node_ip = str(next(ipaddress.ip_network(net.host_cidr).hosts()) + 5)

    def pod(self, kind: str, name: str, suffix: str = "") -> tuple[Pod, dict[str, Any]]:
        found = [o for o in self.objects if o["kind"] == kind and o["metadata"]["name"] == name]
        assert len(found) == 1, f"{kind} {name}: {[o['metadata']['name'] for o in self.objects if o['kind'] == kind]}"
        template = found[0]["spec"]["template"]
        spec = template["spec"]
        labels = template["metadata"].get("labels") or {}
        ip = self.node_ip if spec.get("hostNetwork") else str(next(self.pod_ips))
        return Pod(name + suffix, NS, labels, ip, bool(spec.get("hostNetwork"))), spec

    def other_pod(self, namespace: str, labels: dict[str, str]) -> Pod:
        return Pod(f"{namespace}/{labels}", namespace, labels, str(next(self.pod_ips)))

    def cluster(self) -> gid.Cluster:
        res = self.result.resources
        one = next(r for r in res if r["type"] == "gcp:container/cluster:Cluster")
        pools = {r["name"]: r["inputs"]["nodeConfig"] for r in res if r["type"] == "gcp:container/nodePool:NodePool"}
        ksas = {
            (o["metadata"]["namespace"], o["metadata"]["name"]): o
            for o in self.objects
            if o["kind"] == "ServiceAccount"
        }
        wi_users = {
            (r["inputs"]["serviceAccountId"].rsplit("/", 1)[-1], r["inputs"]["member"])
            for r in res
            if r["type"] == "gcp:serviceaccount/iAMMember:IAMMember" and r["inputs"].get("role") == gid.WI_USER_ROLE
        }
        pool = (one["inputs"].get("workloadIdentityConfig") or {}).get("workloadPool")
        return gid.Cluster(PROJECT, plan_engine.MOCK_PROJECT_NUMBER, pool, pools, ksas, wi_users)

    def grants(self) -> list[dict[str, Any]]:
        return [
            r["inputs"] for r in self.result.resources if r["type"] == "gcp:storage/bucketIAMMember:BucketIAMMember"
        ]


@pytest.fixture(scope="module")
def multi() -> Plan:
    return Plan()


def pool_of(p: Plan, spec: dict[str, Any]) -> str:
    """The node pool whose node labels the pod's nodeSelector asks for (GKE puts nodeConfig.labels on nodes)."""
    want = {k: v for k, v in spec["nodeSelector"].items() if k != names.INSTALLED_LABEL}
    found = [n for n, c in p.cluster().pools.items() if want.items() <= (c.get("labels") or {}).items()]
    assert len(found) == 1, (want, found)
    return found[0]


# GKE's network-policy page, the note on Workload Identity Federation for GKE and the metadata server
# (https://cloud.google.com/kubernetes-engine/docs/how-to/network-policy, read 2026-12-02): what a restricted pod
# must reach for the GKE metadata server, by datapath.
METADATA_SERVER = {
    "ADVANCED_DATAPATH": [("169.254.169.254", 80), ("169.254.169.254", 8080)],
    "LEGACY_DATAPATH": [("169.254.169.252", 988)],  # GKE 1.21.0-gke.1000 and later without Dataplane V2
}


def world(p: Plan, node_local_dns_cache: bool = False, dns_variant: int = 0) -> dict[str, Any]:
    """The pods and places a connection may go to, with what each pod needs; DNS as the cluster serves it with
    NodeLocal DNSCache on or off (k8s_netpol.dns_paths; `dns_variant` picks one of that setting's paths)."""
    staging, _ = p.pod("DaemonSet", "deepep-installer")
    gib, _ = p.pod("DaemonSet", "nccl-gib-installer")
    internode, _ = p.pod("Job", "deepep-internode")
    peer, _ = p.pod("Job", "deepep-internode", "-peer")
    intranode, _ = p.pod("Job", "deepep-intranode")
    low_latency, _ = p.pod("Job", "deepep-low-latency")
    kube_dns = Pod("kube-dns", "kube-system", {"k8s-app": "kube-dns"}, str(next(p.pod_ips)))
    paths = dns_paths(node_local_dns_cache, kube_dns.ip, str(next(p.pod_ips)))
    dns = list(paths[dns_variant].servers)
    datapath = next(
        r["inputs"]["datapathProvider"] for r in p.result.resources if r["type"] == "gcp:container/cluster:Cluster"
    )
    metadata = [Endpoint(ip, port, what=f"GKE metadata server {ip}:{port}") for ip, port in METADATA_SERVER[datapath]]
    other_metadata = [
        Endpoint(ip, port, what=f"the {dp} metadata server {ip}:{port}")
        for dp, pairs in METADATA_SERVER.items()
        if dp != datapath
        for ip, port in pairs
    ]
    storage = Endpoint(GOOGLE_API, 443, what="storage.googleapis.com:443")
    control_plane = Endpoint(p.master, 443, what="the control plane's private endpoint :443")
    rendezvous = [
        Endpoint(peer.ip, names.MASTER_PORT, pod=peer, what="the internode peer's rendezvous port"),
        Endpoint(peer.ip, 41000, pod=peer, what="an internode peer's NCCL bootstrap port"),
    ]
    fake_dns = Pod("fake-dns", "default", {"k8s-app": "kube-dns"}, str(next(p.pod_ips)))
    fake_cache = Pod("fake-cache", "default", {"k8s-app": "node-local-dns"}, str(next(p.pod_ips)))
    web = p.other_pod("default", {"app": "web"})
    never = [
        Endpoint("203.0.113.7", 80, what="an internet address :80"),
        Endpoint("203.0.113.7", 22, what="an internet address :22"),
        Endpoint("8.8.8.8", 53, "UDP", what="a public DNS resolver"),
        Endpoint(PRIVATE_GOOGLE_API, 80, what="private.googleapis.com :80"),
        Endpoint(fake_dns.ip, 53, "UDP", fake_dns, "a pod labelled k8s-app=kube-dns in another namespace"),
        Endpoint(fake_cache.ip, 53, "UDP", fake_cache, "a pod labelled k8s-app=node-local-dns in another namespace"),
        Endpoint("169.254.20.10", 80, what="the NodeLocal DNSCache address on another port"),
        *other_metadata,
        Endpoint(web.ip, 443, pod=web, what="another namespace's pod :443"),
        Endpoint(web.ip, 8080, pod=web, what="another namespace's pod :8080"),
        Endpoint(p.node_ip, 10250, what="a node's kubelet"),
        Endpoint(p.node_ip, 443, what="a node's address :443"),
        Endpoint(gib.ip, 80, pod=gib, what="the gIB pod"),
        Endpoint("169.254.169.254", 8081, what="the metadata address on another port"),
    ]
    bench_never = [*never, *metadata, storage, control_plane, Endpoint(staging.ip, 443, pod=staging, what="staging")]
    return {
        "pods": {
            "staging": staging,
            "gib": gib,
            "internode": internode,
            "intranode": intranode,
            "low-latency": low_latency,
        },
        "needs": {
            "staging": [*dns, *metadata, storage, control_plane],
            "gib": [],  # copies files between its image and a host folder; the kubelet pulls its image
            "internode": [*dns, *rendezvous],
            "intranode": dns,
            "low-latency": dns,
        },
        "never": {
            "staging": [*never, *rendezvous],
            "gib": [*never, *dns, *metadata, storage, control_plane],
            "internode": bench_never,
            "intranode": [*bench_never, *rendezvous],
            "low-latency": [*bench_never, *rendezvous],
        },
        "callers": [web, fake_dns, fake_cache, kube_dns, staging, gib, intranode, low_latency],
    }


def missing(policies: list[dict[str, Any]], w: dict[str, Any]) -> list[str]:
    return [
        f"{n} cannot reach {e}" for n, pod in w["pods"].items() for e in w["needs"][n] if not connects(policies, pod, e)
    ]


def test_each_pod_reaches_what_it_needs(multi: Plan) -> None:
    assert missing(multi.policies, world(multi)) == []


@pytest.mark.parametrize("cache", [False, True], ids=["nodelocal-dns-off", "nodelocal-dns-on"])
def test_staging_and_benchmark_pods_resolve_names_with_and_without_nodelocal_dns_cache(
    multi: Plan, cache: bool
) -> None:
    """The cluster leaves NodeLocal DNSCache to GKE (on by default from GKE 1.33.1, off before, switchable), so
    the staging pod (metadata.google.internal, storage.googleapis.com) and the internode pods (MASTER_ADDR, pod
    0's DNS name) must resolve names on every path either setting may take (k8s_netpol.dns_paths)."""
    kube_dns = str(next(multi.pod_ips))
    for variant, path in enumerate(dns_paths(cache, kube_dns, str(next(multi.pod_ips)))):
        w = world(multi, cache, variant)
        assert missing(multi.policies, w) == [], path.name
        for name in ("staging", "internode", "intranode", "low-latency"):
            assert all(connects(multi.policies, w["pods"][name], e) for e in path.servers), (name, path.name)
        assert not any(connects(multi.policies, w["pods"]["gib"], e) for e in path.servers), path.name


def test_a_kube_dns_only_rule_fails_under_nodelocal_dns_cache(multi: Plan) -> None:
    """What issue 42 feared: with only the kube-dns peer, every NodeLocal DNSCache path drops the staging and
    internode pods' queries while the cache-off path works. Proves the evaluator's DNS path can fail."""
    kube_only = copy.deepcopy(multi.policies)
    for policy in kube_only:
        for rule in policy["spec"].get("egress") or []:
            if any(p.get("port") == 53 for p in rule.get("ports") or []):
                rule["to"] = [
                    p for p in rule["to"] if (p.get("podSelector") or {}).get("matchLabels") == {"k8s-app": "kube-dns"}
                ]
    assert missing(kube_only, world(multi, False)) == []
    for variant in range(2):
        w = world(multi, True, variant)
        broken = missing(kube_only, w)
        assert any(b.startswith("staging ") for b in broken) and any(b.startswith("internode ") for b in broken)


def test_each_dns_peer_serves_one_cluster_setting(multi: Plan) -> None:
    """Every peer of both policies' DNS rules is needed on one DNS path: none is there for nothing."""
    settings = [(False, 0), (True, 0), (True, 1)]
    for i, policy in enumerate(multi.policies):
        for j, rule in enumerate(policy["spec"].get("egress") or []):
            if not any(p.get("port") == 53 for p in rule.get("ports") or []):
                continue
            for k in range(len(rule["to"])):
                mutated = copy.deepcopy(multi.policies)
                del mutated[i]["spec"]["egress"][j]["to"][k]
                assert any(missing(mutated, world(multi, c, v)) for c, v in settings), (policy["metadata"]["name"], k)


def test_the_world_model_matches_the_cluster(multi: Plan) -> None:
    """The endpoints above hold for this cluster: kube-dns answers DNS, with or without NodeLocal DNSCache (no
    Cloud DNS, which would move the resolver to 169.254.169.254:53), and the cluster does not set the cache
    either way (GKE's version default holds; both settings are proven above); Dataplane V2 enforces the
    policies and resolves Service addresses to their endpoints before policy (Cilium's socket load balancer),
    and decides which metadata server addresses a policy must admit (METADATA_SERVER); the control plane's
    private endpoint is in masterCidr."""
    cluster = next(r["inputs"] for r in multi.result.resources if r["type"] == "gcp:container/cluster:Cluster")
    assert cluster["datapathProvider"] == "ADVANCED_DATAPATH"
    assert not cluster.get("dnsConfig")
    assert "dnsCacheConfig" not in (cluster.get("addonsConfig") or {})
    assert cluster["privateClusterConfig"]["masterIpv4CidrBlock"] == multi.cfg.network.master_cidr


def test_nothing_else_is_open(multi: Plan) -> None:
    w = world(multi)
    opened = [
        f"{n} reaches {e}" for n, pod in w["pods"].items() for e in w["never"][n] if connects(multi.policies, pod, e)
    ]
    assert opened == []
    # Nobody connects to the installer pods; only internode pods connect to internode pods.
    for name, pod in w["pods"].items():
        for caller in w["callers"]:
            if caller is pod:
                continue
            for port in (443, names.MASTER_PORT, 8080):
                assert not ingress_allowed(multi.policies, caller, caller.ip, pod, port), (caller.name, name, port)
    peer = multi.pod("Job", "deepep-internode", "-peer")[0]
    assert ingress_allowed(multi.policies, peer, peer.ip, w["pods"]["internode"], names.MASTER_PORT)


def test_the_one_known_width_is_internet_443_for_the_staging_pod(multi: Plan) -> None:
    """NetworkPolicy matches addresses, not names (GKE's FQDNNetworkPolicy is a separate feature, not enabled here), and
    storage.googleapis.com's addresses are Google's public ones: any internet address on TCP 443 is open to
    the staging pod, and to no other pod. Said here so that a narrower design has to change this test."""
    w = world(multi)
    anywhere = Endpoint("203.0.113.7", 443, what="an internet address :443")
    assert connects(multi.policies, w["pods"]["staging"], anywhere)
    assert [n for n, pod in w["pods"].items() if connects(multi.policies, pod, anywhere)] == ["staging"]


def test_removing_any_rule_breaks_a_needed_endpoint(multi: Plan) -> None:
    w = world(multi)
    for i, policy in enumerate(multi.policies):
        for kind in ("egress", "ingress"):
            for j in range(len(policy["spec"].get(kind) or [])):
                mutated = copy.deepcopy(multi.policies)
                del mutated[i]["spec"][kind][j]
                if kind == "ingress":
                    peer = multi.pod("Job", "deepep-internode", "-peer")[0]
                    broken = not ingress_allowed(mutated, peer, peer.ip, w["pods"]["internode"], names.MASTER_PORT)
                else:
                    broken = bool(missing(mutated, w))
                assert broken, f"{policy['metadata']['name']} {kind}[{j}] can go and nothing a pod needs breaks"


def test_narrowing_rules_are_load_bearing(multi: Plan) -> None:
    """Dropping an `except`, or widening the namespaceSelector to every namespace, opens something the test
    names as never reachable."""
    w = world(multi)
    staging = w["pods"]["staging"]
    egress = next(p for p in multi.policies if p["metadata"]["name"] == "deepep-installer-egress")
    for rule in egress["spec"]["egress"]:
        for peer in rule.get("to") or []:
            mutated = copy.deepcopy(multi.policies)
            found = next(p for p in mutated if p["metadata"]["name"] == "deepep-installer-egress")
            target = found["spec"]["egress"][egress["spec"]["egress"].index(rule)]["to"][rule["to"].index(peer)]
            if "except" in peer.get("ipBlock", {}):
                del target["ipBlock"]["except"]
            elif "namespaceSelector" in peer:
                target["namespaceSelector"] = {}  # present but empty: every namespace
            else:
                continue
            assert any(connects(mutated, staging, e) for e in w["never"]["staging"]), peer


def identities(p: Plan) -> dict[str, str | None]:
    cluster = p.cluster()
    out = {}
    for kind, name in (
        ("DaemonSet", "deepep-installer"),
        ("DaemonSet", "nccl-gib-installer"),
        ("Job", "deepep-internode"),
        ("Job", "deepep-intranode"),
    ):
        _, spec = p.pod(kind, name)
        out[name] = gid.google_identity(cluster, pool_of(p, spec), NS, spec)
    return out


def test_each_pod_gets_the_identity_gke_gives_it_and_only_the_staging_pod_reads_the_store(multi: Plan) -> None:
    who = identities(multi)
    staging = gid.wif_principal(plan_engine.MOCK_PROJECT_NUMBER, PROJECT, NS, installer_ksa("gke-b200"))
    assert who["deepep-installer"] == staging  # pod network on a GKE_METADATA pool: its own KSA's principal
    grants = multi.grants()
    inside = gid.object_name(BUCKET, f"{PREFIX}/artifacts/stage/python.tar.gz")
    outside = gid.object_name(BUCKET, "someone-else/data")
    # What the staging pod needs: objects.get on the store's objects (store.sh issues GETs of object names only).
    assert gid.may(grants, staging, "storage.objects.get", BUCKET, inside)
    assert not gid.may(grants, staging, "storage.objects.get", BUCKET, outside)
    assert not gid.may(grants, staging, "storage.objects.create", BUCKET, inside)  # artifactStorePublish is off
    # Nothing more: no other member holds a store grant, the node account included.
    assert {g["member"] for g in grants} == {staging}
    # The pool the principal names exists once the cluster enables Workload Identity: the grants wait for it.
    cluster = next(r["name"] for r in multi.result.resources if r["type"] == "gcp:container/cluster:Cluster")
    for r in multi.result.resources:
        if r["type"] == "gcp:storage/bucketIAMMember:BucketIAMMember":
            assert cluster in r["dependsOn"], r["name"]
    for name in ("nccl-gib-installer", "deepep-internode", "deepep-intranode"):
        assert not gid.may(grants, who[name], "storage.objects.get", BUCKET, inside), name


def test_the_store_client_needs_no_list(multi: Plan) -> None:
    """A prefix condition never admits objects.list (checked on the bucket): the store client must not list."""
    store = (ROOT / "scripts/install/store.sh").read_text()
    calls = [line for line in store.splitlines() if "$GCS_API/" in line]
    assert calls and all("/o/" in c or "uploadType=" in c for c in calls), calls


def test_host_network_bench_pods_run_as_the_node_which_holds_no_store_grant() -> None:
    p = Plan(podNetworking="hostNetwork")
    cluster = p.cluster()
    _, spec = p.pod("Job", "deepep-internode")
    node_sa = f"serviceAccount:{cluster.pools[pool_of(p, spec)]['serviceAccount']}"
    assert gid.google_identity(cluster, pool_of(p, spec), NS, spec) == node_sa
    assert not gid.may(p.grants(), node_sa, "storage.objects.get", BUCKET, gid.object_name(BUCKET, f"{PREFIX}/x"))


def test_the_identity_rules_follow_gke() -> None:
    pools = {
        "wi": {"serviceAccount": "n@p.iam.gserviceaccount.com", "workloadMetadataConfig": {"mode": "GKE_METADATA"}},
        "gce": {"serviceAccount": "n@p.iam.gserviceaccount.com", "workloadMetadataConfig": {"mode": "GCE_METADATA"}},
    }
    annotated = {("ns", "a"): {"metadata": {"annotations": {gid.WI_ANNOTATION: "g@p.iam.gserviceaccount.com"}}}}
    member = "serviceAccount:p.svc.id.goog[ns/a]"
    c = gid.Cluster("p", "42", "p.svc.id.goog", pools, annotated, set())
    assert gid.google_identity(c, "gce", "ns", {}) == "serviceAccount:n@p.iam.gserviceaccount.com"
    assert gid.google_identity(c, "wi", "ns", {"hostNetwork": True}) == "serviceAccount:n@p.iam.gserviceaccount.com"
    assert gid.google_identity(c, "wi", "ns", {}) == gid.wif_principal("42", "p", "ns", "default")
    assert gid.google_identity(c, "wi", "ns", {"serviceAccountName": "a"}) is None  # annotated, not allowed
    c = gid.Cluster("p", "42", "p.svc.id.goog", pools, annotated, {("g@p.iam.gserviceaccount.com", member)})
    assert (
        gid.google_identity(c, "wi", "ns", {"serviceAccountName": "a"}) == "serviceAccount:g@p.iam.gserviceaccount.com"
    )


def test_host_install_reads_the_store_as_the_node_because_it_fetches_from_the_hosts_network() -> None:
    """`host-install` (gke-b200-ubuntu): the installer runs in the host's network namespace (nsenter --net), so
    GKE's metadata server answers it as the node (host-network traffic gets the node's account, as above): the
    grant names the node account, and the installer gets no egress policy (it sends nothing on the pod network)."""
    result = plan("gke-b200-ubuntu", **USER)
    init = (ROOT / "scripts/gke/installer-init.sh").read_text()
    assert re.search(r"^nsenter --target 1 [^\n]*--net", init, re.M)
    members = {
        r["inputs"]["member"] for r in result.resources if r["type"] == "gcp:storage/bucketIAMMember:BucketIAMMember"
    }
    pool = next(r for r in result.resources if r["type"] == "gcp:container/nodePool:NodePool" and r["name"] == "gke-a4")
    assert members == {f"serviceAccount:{pool['inputs']['nodeConfig']['serviceAccount']}"}
    names_ = {o["metadata"].get("name") for o in map(yaml.safe_load, kubernetes_manifests(result.resources).values())}
    assert "deepep-installer-egress" not in names_ and "deepep-installer-no-ingress" in names_


def test_the_staging_principal_is_one_stacks_not_every_cluster_of_the_projects(multi: Plan) -> None:
    """A principal names the project's pool, the namespace and the KSA, not the cluster: with one fixed KSA
    name, a second stack's cluster (or any cluster of the project with that namespace and KSA) got the store
    grant. The KSA carries the stack: the grant names this stack's, the DaemonSet runs as it, another stack's
    differs."""
    ksa = installer_ksa("gke-b200")
    assert "gke-b200" in ksa and ksa != names.INSTALLER_NAME
    _, spec = multi.pod("DaemonSet", "deepep-installer")
    assert spec["serviceAccountName"] == ksa
    staging = gid.wif_principal(plan_engine.MOCK_PROJECT_NUMBER, PROJECT, NS, ksa)
    assert {g["member"] for g in multi.grants()} == {staging}
    fixed = gid.wif_principal(plan_engine.MOCK_PROJECT_NUMBER, PROJECT, NS, names.INSTALLER_NAME)
    inside = gid.object_name(BUCKET, f"{PREFIX}/artifacts/stage/python.tar.gz")
    assert not gid.may(multi.grants(), fixed, "storage.objects.get", BUCKET, inside)
    for other in ("gke-b200-team2", "gke_b200", "GKE-B200", "x" * 100):
        assert installer_ksa(other) != ksa
        assert len(installer_ksa(other)) <= 63 and re.fullmatch(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?", installer_ksa(other))

"""GKE platform under mocks: the cluster, the A4 node pool flag by flag, identity, provider, multi-network."""

from __future__ import annotations

import json
import re
from typing import Any

import pulumi
import pulumi_gcp as gcp
import pulumi_kubernetes as k8s
import pytest

from ci.gates import k8s_schemas
from components import config
from components.gke import cluster as gke_cluster
from components.gke import nodepool as gke_nodepool
from deepep_a4.plan import engine as plan_engine
from tests.conftest import ROOT, of_type, one, plan, stack_config

CLUSTER = "gcp:container/cluster:Cluster"
NODE_POOL = "gcp:container/nodePool:NodePool"
ACCOUNT = "gcp:serviceaccount/account:Account"
IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
REPO_MEMBER = "gcp:artifactregistry/repositoryIamMember:RepositoryIamMember"
K8S_PROVIDER = "pulumi:providers:kubernetes"
PARAM_SET = "kubernetes:networking.gke.io/v1:GKENetworkParamSet"
NETWORK = "kubernetes:networking.gke.io/v1:Network"
STACK = "gke-b200-ubuntu"
PREFIX = "deepep-gke-b200-ubuntu"
RDMA_NAMES = [f"{PREFIX}-rdma-{i}" for i in range(8)]
# What the mocked engine-versions lookup offers in the REGULAR channel (plan_engine.MOCK_ENGINE_VERSIONS).
MOCK_REGULAR = plan_engine.MOCK_ENGINE_VERSIONS["releaseChannelDefaultVersion"]["REGULAR"]
NODE_SA = f"{PREFIX}-nodes@deepep-a4-demo.iam.gserviceaccount.com"
SECRET_SIG_KEY, SECRET_SIG_VALUE = "4dabf18193072939515e22adb298388d", "1b47061264138c4ac30d75fd1eb44270"


@pytest.fixture(scope="module")
def gke_plan() -> plan_engine.PlanResult:
    return plan(STACK)


def cluster_of(result: plan_engine.PlanResult) -> dict[str, Any]:
    return one(result, CLUSTER)["inputs"]


def a4_pool_of(result: plan_engine.PlanResult) -> dict[str, Any]:
    return one(result, NODE_POOL, "gke-a4")["inputs"]


def dig(doc: Any, path: str) -> Any:
    """doc['a']['b'][0]... for 'a.b.0'; None where the path ends early."""
    for part in path.split("."):
        if isinstance(doc, list):
            doc = doc[int(part)] if int(part) < len(doc) else None
        elif isinstance(doc, dict):
            doc = doc.get(part)
        else:
            return None
    return doc


# -- the cluster ------------------------------------------------------------------------------------


def test_cluster_is_vpc_native_on_the_host_subnets_secondary_ranges(gke_plan: plan_engine.PlanResult) -> None:
    c = cluster_of(gke_plan)
    assert (c["network"], c["subnetwork"]) == ("a4-host-id", "a4-host-id")
    assert c["networkingMode"] == "VPC_NATIVE"
    assert c["ipAllocationPolicy"] == {"clusterSecondaryRangeName": "pods", "servicesSecondaryRangeName": "services"}


def test_cluster_has_dataplane_v2_and_multi_networking(gke_plan: plan_engine.PlanResult) -> None:
    c = cluster_of(gke_plan)
    assert c["datapathProvider"] == "ADVANCED_DATAPATH"
    assert c["enableMultiNetworking"] is True


def test_cluster_nodes_are_private_with_the_configured_master_range(gke_plan: plan_engine.PlanResult) -> None:
    private = cluster_of(gke_plan)["privateClusterConfig"]
    assert private["enablePrivateNodes"] is True
    assert private["masterIpv4CidrBlock"] == "172.16.0.0/28"
    assert private["enablePrivateEndpoint"] is True  # no public IP endpoint unless gkePublicEndpoint


def test_control_plane_is_reached_through_the_dns_endpoint_by_default(gke_plan: plan_engine.PlanResult) -> None:
    c = cluster_of(gke_plan)
    assert c["controlPlaneEndpointsConfig"] == {
        "dnsEndpointConfig": {"allowExternalTraffic": True},
        "ipEndpointsConfig": {"enabled": True},  # the private IP endpoint, for the nodes
    }
    # Authorized networks on, with no entry: nothing but the VPC reaches the IP endpoints.
    assert c["masterAuthorizedNetworksConfig"] == {"cidrBlocks": []}
    assert gke_plan.outputs["getCredentials"].endswith(" --dns-endpoint")
    assert config.KEYS_BY_NAME["gkeDnsEndpoint"].default is True
    assert config.KEYS_BY_NAME["gkePublicEndpoint"].default is False


def test_private_ip_endpoint_and_authorized_networks_from_config() -> None:
    # Private ranges reach only the private IP endpoint, from inside the stack's new VPC: pulumi itself comes
    # through the DNS endpoint (a private range with the DNS endpoint off is refused: test_mistakes.py).
    result = plan(
        STACK,
        gkeDnsEndpoint=True,
        gkePublicEndpoint=False,
        masterCidr="172.31.0.16/28",
        gkeAuthorizedNetworks=["10.200.0.0/24"],
    )
    c = cluster_of(result)
    assert c["privateClusterConfig"]["enablePrivateEndpoint"] is True
    assert c["privateClusterConfig"]["masterIpv4CidrBlock"] == "172.31.0.16/28"
    assert c["controlPlaneEndpointsConfig"]["dnsEndpointConfig"] == {"allowExternalTraffic": True}
    assert [b["cidrBlock"] for b in c["masterAuthorizedNetworksConfig"]["cidrBlocks"]] == ["10.200.0.0/24"]
    assert result.outputs["getCredentials"].endswith(" --dns-endpoint")


def test_public_ip_endpoint_only_with_authorized_networks() -> None:
    result = plan(STACK, gkeDnsEndpoint=False, gkePublicEndpoint=True, gkeAuthorizedNetworks=["203.0.113.0/24"])
    c = cluster_of(result)
    assert c["privateClusterConfig"]["enablePrivateEndpoint"] is False
    assert [b["cidrBlock"] for b in c["masterAuthorizedNetworksConfig"]["cidrBlocks"]] == ["203.0.113.0/24"]
    kubeconfig = json.loads(one(result, K8S_PROVIDER)["inputs"]["kubeconfig"]["value"])
    # An IP endpoint is served with the cluster's own CA.
    assert kubeconfig["clusters"][0]["cluster"] == {
        "server": "https://203.0.113.10",
        "certificate-authority-data": plan_engine.MOCK_CA_CERT,
    }
    assert not result.outputs["getCredentials"].endswith(("--internal-ip", "--dns-endpoint"))


@pytest.mark.parametrize(
    ("raw", "key", "fragment"),
    [
        ({"gkePublicEndpoint": True}, "gkePublicEndpoint", "needs gkeAuthorizedNetworks"),
        ({"gkeVersion": "1.32.4-gke.1236000"}, "gkeVersion", "1.32.7-gke.1067000 (1.32) or 1.33.3-gke.1247000 (1.33)"),
        ({"gkeVersion": "1.32"}, "gkeVersion", "1.32.7-gke.1067000 (1.32)"),
        ({"gkeVersion": "1.33.3-gke.1246999"}, "gkeVersion", "on UBUNTU_CONTAINERD"),
        ({"gkeVersion": "latest"}, "gkeVersion", "GKE version such as"),
    ],
)
def test_unsafe_endpoint_and_old_versions_are_refused(raw: dict[str, Any], key: str, fragment: str) -> None:
    with pytest.raises(config.ConfigError) as err:
        config.parse(plan_engine.project_keys(stack_config(STACK, **raw)), STACK)
    assert [p.key for p in err.value.problems] == [key] and fragment in err.value.problems[0].allowed, err.value


def test_pins_at_or_above_the_a4_minimum_are_accepted() -> None:
    for version in ("1.32.7-gke.1067000", "1.33.3-gke.1247000", "1.34", "1.35.8-gke.1180000"):
        cfg = config.parse(plan_engine.project_keys(stack_config(STACK, gkeVersion=version)), STACK)
        assert cfg.gke.version == version


def test_workload_identity_pool_of_the_project(gke_plan: plan_engine.PlanResult) -> None:
    assert cluster_of(gke_plan)["workloadIdentityConfig"] == {"workloadPool": "deepep-a4-demo.svc.id.goog"}


# -- the version: chosen once at deploy from the channel, never below A4's minimum ------------------------


def test_stack_pins_no_version_and_follows_the_regular_channel(gke_plan: plan_engine.PlanResult) -> None:
    assert "deepep-a4:gkeVersion" not in stack_config(STACK)
    c = cluster_of(gke_plan)
    assert c["releaseChannel"] == {"channel": "REGULAR"}
    # The mocked lookup's REGULAR default, for the control plane and (through its masterVersion) the A4 pool.
    assert c["minMasterVersion"] == MOCK_REGULAR
    assert a4_pool_of(gke_plan)["version"] == MOCK_REGULAR
    assert gke_plan.outputs["gkeVersion"] == MOCK_REGULAR


def test_the_chosen_version_is_kept_by_later_updates(gke_plan: plan_engine.PlanResult) -> None:
    """A later `pulumi up` whose lookup moved must not upgrade: the version properties are ignored on update."""
    cluster = one(gke_plan, CLUSTER)
    assert cluster["ignoreChanges"] == ["minMasterVersion", "nodeConfig"]
    assert one(gke_plan, NODE_POOL, "gke-a4")["ignoreChanges"] == [
        "nodeConfig.ephemeralStorageLocalSsdConfig",
        "version",
    ]


def test_the_a4_pool_ignores_its_local_ssd_block_as_googles_module_does(gke_plan: plan_engine.PlanResult) -> None:
    """A4 bundles its local SSDs: a differently reported block must not replace the pool (and reinstall nodes)."""
    pool = one(gke_plan, NODE_POOL, "gke-a4")
    assert pool["inputs"]["nodeConfig"]["ephemeralStorageLocalSsdConfig"] == {"localSsdCount": 32}
    assert "nodeConfig.ephemeralStorageLocalSsdConfig" in pool["ignoreChanges"]
    conformance = (ROOT / "docs" / "conformance.md").read_text()
    row = next(line for line in conformance.splitlines() if line.startswith("| local SSD | 32 as ephemeral"))
    assert "ignore_changes" in row and "**same**" in row


def test_another_channel_takes_that_channels_default() -> None:
    result = plan(STACK, gkeReleaseChannel="RAPID")
    assert cluster_of(result)["releaseChannel"] == {"channel": "RAPID"}
    assert (
        cluster_of(result)["minMasterVersion"]
        == plan_engine.MOCK_ENGINE_VERSIONS["releaseChannelDefaultVersion"]["RAPID"]
    )


def test_an_explicit_gke_version_still_pins() -> None:
    result = plan(STACK, gkeVersion="1.35.8-gke.1180000", gkeReleaseChannel="STABLE")
    assert cluster_of(result)["minMasterVersion"] == "1.35.8-gke.1180000"
    assert a4_pool_of(result)["version"] == "1.35.8-gke.1180000"


def offered(defaults: dict[str, str], latest: dict[str, str], default: str = "", newest: str = "") -> Any:
    return gcp.container.GetEngineVersionsResult(
        default_cluster_version=default,
        latest_master_version=newest,
        release_channel_default_version=defaults,
        release_channel_latest_version=latest,
        valid_master_versions=[],
        valid_node_versions=[],
    )


def test_choose_version_prefers_the_channel_default_then_its_newest() -> None:
    both = offered({"REGULAR": "1.36.4-gke.1221000"}, {"REGULAR": "1.37.2-gke.1139000"})
    assert gke_cluster.choose_version("REGULAR", "asia-southeast1", both) == "1.36.4-gke.1221000"
    old_default = offered({"REGULAR": "1.32.2-gke.1000"}, {"REGULAR": "1.32.4-gke.1236000"})
    assert gke_cluster.choose_version("REGULAR", "asia-southeast1", old_default, "COS_CONTAINERD") == (
        "1.32.4-gke.1236000"
    )
    # The Ubuntu A4 pool's floor is higher on the same minor: 1.32.4 is refused, 1.33.3-gke.1247000 taken.
    ubuntu = offered({"REGULAR": "1.32.4-gke.1236000"}, {"REGULAR": "1.33.3-gke.1247000"})
    assert gke_cluster.choose_version("REGULAR", "asia-southeast1", ubuntu, "UBUNTU_CONTAINERD") == (
        "1.33.3-gke.1247000"
    )
    below = offered({"REGULAR": "1.33.2-gke.1"}, {"REGULAR": "1.32.6-gke.9"})
    with pytest.raises(pulumi.RunError, match=re.escape("1.32.7-gke.1067000")):
        gke_cluster.choose_version("REGULAR", "asia-southeast1", below, "UBUNTU_CONTAINERD")
    no_channel = offered({}, {}, default="1.35.8-gke.1180000", newest="1.37.3-gke.1078000")
    assert gke_cluster.choose_version("UNSPECIFIED", "asia-southeast1", no_channel) == "1.35.8-gke.1180000"


def test_choose_version_fails_in_one_line_when_the_channel_is_below_the_a4_minimum() -> None:
    too_old = offered({"STABLE": "1.31.9-gke.1"}, {"STABLE": "1.32.3-gke.1927000"})
    with pytest.raises(pulumi.RunError) as err:
        gke_cluster.choose_version("STABLE", "asia-southeast1", too_old)
    message = str(err.value)
    assert "\n" not in message
    assert "gkeReleaseChannel" in message and "1.32.3-gke.1927000" in message and "1.32.7-gke.1067000" in message


def test_the_program_refuses_a_channel_below_the_a4_minimum(monkeypatch: pytest.MonkeyPatch) -> None:
    old = {**plan_engine.MOCK_ENGINE_VERSIONS, "releaseChannelDefaultVersion": {"REGULAR": "1.31.9-gke.1"}}
    old["releaseChannelLatestVersion"] = {"REGULAR": "1.32.3-gke.1927000"}
    monkeypatch.setattr(plan_engine, "MOCK_ENGINE_VERSIONS", old)
    with pytest.raises(Exception, match=re.escape("below A4's floor on UBUNTU_CONTAINERD (1.32.7-gke.1067000")):
        plan(STACK)


def test_schema_gate_validates_against_the_chosen_minor(gke_plan: plan_engine.PlanResult, tmp_path) -> None:
    (tmp_path / "plan.json").write_text(json.dumps({"resources": gke_plan.resources}))
    assert k8s_schemas.plan_minor(tmp_path) == ".".join(MOCK_REGULAR.split(".")[:2])
    (tmp_path / "plan.json").write_text(json.dumps({"resources": []}))
    assert k8s_schemas.plan_minor(tmp_path) is None


# -- upgrades: held back while the A4 nodes run --------------------------------------------------------------


def test_node_upgrades_wait_for_the_end_of_support_as_googles_a4_blueprint(gke_plan: plan_engine.PlanResult) -> None:
    policy = cluster_of(gke_plan)["maintenancePolicy"]
    assert policy["maintenanceExclusions"] == [
        {
            "exclusionName": "no-minor-or-node-upgrades-indefinite",
            "startTime": "2025-12-01T00:00:00Z",
            "exclusionOptions": {"scope": "NO_MINOR_OR_NODE_UPGRADES", "endTimeBehavior": "UNTIL_END_OF_SUPPORT"},
        }
    ]
    assert policy["dailyMaintenanceWindow"] == {"startTime": "09:00"}
    # With a channel GKE keeps node auto-upgrade on; the exclusion holds it back.
    assert a4_pool_of(gke_plan)["management"] == {"autoUpgrade": True, "autoRepair": True}


def test_without_a_channel_the_a4_pool_turns_auto_upgrade_off() -> None:
    result = plan(STACK, gkeReleaseChannel="UNSPECIFIED")
    c = cluster_of(result)
    assert "maintenancePolicy" not in c  # the exclusion scope needs a channel
    assert c["minMasterVersion"] == plan_engine.MOCK_ENGINE_VERSIONS["defaultClusterVersion"]
    assert a4_pool_of(result)["management"] == {"autoUpgrade": False, "autoRepair": True}


def test_upgrades_replace_one_node_without_a_surge_node(gke_plan: plan_engine.PlanResult) -> None:
    assert a4_pool_of(gke_plan)["upgradeSettings"] == {"strategy": "SURGE", "maxSurge": 0, "maxUnavailable": 1}


def test_the_cluster_waits_for_the_node_account_and_its_roles(gke_plan: plan_engine.PlanResult) -> None:
    depends = one(gke_plan, CLUSTER)["dependsOn"]
    assert {"gke-nodes-container.defaultNodeServiceAccount"} <= set(depends)


def test_the_a4_pool_waits_for_the_nat_and_the_store_grants() -> None:
    with_store = plan(STACK, artifactStore="gs://deepep-a4-demo-artifacts/deepep-a4")
    depends = set(one(with_store, NODE_POOL, "gke-a4")["dependsOn"])
    assert {"a4-nat", "gke-nodes-container.defaultNodeServiceAccount"} <= depends
    assert any(d.startswith("store-") for d in depends)


def test_default_node_pool_is_removed(gke_plan: plan_engine.PlanResult) -> None:
    c = cluster_of(gke_plan)
    assert c["removeDefaultNodePool"] is True
    assert c["initialNodeCount"] == 1
    assert c["location"] == "asia-southeast1"
    assert c["name"] == f"{PREFIX}-gke"


def test_the_temporary_default_pool_runs_as_the_node_account(gke_plan: plan_engine.PlanResult) -> None:
    """Not the Compute Engine default account, which some projects disable (cluster creation would fail)."""
    node = cluster_of(gke_plan)["nodeConfig"]
    assert node["serviceAccount"] == NODE_SA
    assert node["oauthScopes"] == list(gke_nodepool.NODE_SCOPES)
    assert node["workloadMetadataConfig"] == {"mode": "GKE_METADATA"}
    assert node["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableIntegrityMonitoring": True}


def test_deletion_protection_is_off_by_default() -> None:
    assert config.KEYS_BY_NAME["gkeDeletionProtection"].default is False
    raw = {k: v for k, v in stack_config(STACK).items() if k != "deepep-a4:gkeDeletionProtection"}
    result, _ = plan_engine.run_program(STACK, raw)
    assert cluster_of(result)["deletionProtection"] is False


def test_deletion_protection_can_be_turned_on() -> None:
    assert cluster_of(plan(STACK, gkeDeletionProtection=True))["deletionProtection"] is True


# -- the A4 node pool: every flag of the field report's `gcloud beta container node-pools create` ------------

SEED_FLAGS: dict[str, tuple[str, Any]] = {
    "--machine-type": ("nodeConfig.machineType", "a4-highgpu-8g"),
    "--accelerator type": ("nodeConfig.guestAccelerators.0.type", "nvidia-b200"),
    "--accelerator count": ("nodeConfig.guestAccelerators.0.count", 8),
    "--accelerator gpu-driver-version=disabled": (
        "nodeConfig.guestAccelerators.0.gpuDriverInstallationConfig.gpuDriverVersion",
        "INSTALLATION_DISABLED",
    ),
    "--image-type": ("nodeConfig.imageType", "UBUNTU_CONTAINERD"),
    "--disk-type": ("nodeConfig.diskType", "hyperdisk-balanced"),
    # R2 ran 1000 GB; the installer writes under 60 GB, so the stack takes Google's 200 (docs/conformance.md).
    "--disk-size": ("nodeConfig.diskSizeGb", 200),
    "--ephemeral-storage-local-ssd count": ("nodeConfig.ephemeralStorageLocalSsdConfig.localSsdCount", 32),
    "--metadata disable-legacy-endpoints": ("nodeConfig.metadata.disable-legacy-endpoints", "true"),
    "--node-locations": ("nodeLocations", ["asia-southeast1-b"]),
    "--region": ("location", "asia-southeast1"),
    "--cluster": ("cluster", f"{PREFIX}-gke"),
    # R2 pinned 1.33.5-gke.1162000, which GKE no longer creates: the version now comes from the channel.
    "--node-version": ("version", MOCK_REGULAR),
    "--spot": ("nodeConfig.spot", True),
    "--num-nodes": ("nodeCount", 2),
    "--enable-private-nodes": ("networkConfig.enablePrivateNodes", True),
    "--enable-autoupgrade": ("management.autoUpgrade", True),
    "--enable-autorepair": ("management.autoRepair", True),
    # R2 ran surge 1 / unavailable 0; Google's GPU pool default is 0 / 1 (no extra spot A4 in the placement).
    "--max-surge-upgrade": ("upgradeSettings.maxSurge", 0),
    "--max-unavailable-upgrade": ("upgradeSettings.maxUnavailable", 1),
    "--shielded-integrity-monitoring": ("nodeConfig.shieldedInstanceConfig.enableIntegrityMonitoring", True),
    "--no-shielded-secure-boot": ("nodeConfig.shieldedInstanceConfig.enableSecureBoot", False),
    "--placement-type=COMPACT": ("placementPolicy.type", "COMPACT"),
    # Not in the field report's line, needed by this design:
    "workload identity on the node": ("nodeConfig.workloadMetadataConfig.mode", "GKE_METADATA"),
    "bill cap (ttl 8h)": ("nodeConfig.maxRunDuration", "28800s"),
    "label for the workloads": (f"nodeConfig.labels.{gke_nodepool.NODE_POOL_LABEL_KEY}", "a4"),
    "stack labels on the node VMs": ("nodeConfig.resourceLabels", {"deepep-a4-stack": STACK, "managed-by": "pulumi"}),
    "GPU taint": (
        "nodeConfig.taints",
        [{"key": "nvidia.com/gpu", "value": "present", "effect": "NO_SCHEDULE"}],
    ),
    "least-privilege account (not --scopes on the default one)": ("nodeConfig.serviceAccount", NODE_SA),
    "spot never consumes a reservation (Google's gke-node-pool requires it)": (
        "nodeConfig.reservationAffinity",
        {"consumeReservationType": "NO_RESERVATION"},
    ),
}


@pytest.mark.parametrize("flag", list(SEED_FLAGS))
def test_a4_pool_carries_seed_flag(gke_plan: plan_engine.PlanResult, flag: str) -> None:
    path, expected = SEED_FLAGS[flag]
    assert dig(a4_pool_of(gke_plan), path) == expected, f"{flag}: {path}"


def test_a4_pool_leaves_gvnic_to_the_machine_type_as_the_seed_does(gke_plan: plan_engine.PlanResult) -> None:
    # GKE documents the gVNIC flag for COS images only; the field report's Ubuntu pool does not pass it.
    assert "gvnic" not in a4_pool_of(gke_plan)["nodeConfig"]


def test_a4_pool_has_nine_additional_networks_in_nic_order(gke_plan: plan_engine.PlanResult) -> None:
    nets = a4_pool_of(gke_plan)["networkConfig"]["additionalNodeNetworkConfigs"]
    assert nets == [{"network": f"{PREFIX}-gvnic", "subnetwork": f"{PREFIX}-gvnic"}] + [
        {"network": f"{PREFIX}-rdma", "subnetwork": name} for name in RDMA_NAMES
    ]


def test_node_pool_label_contract() -> None:
    assert (gke_nodepool.NODE_POOL_LABEL_KEY, gke_nodepool.NODE_POOL_LABEL_VALUE) == ("deepep-a4/node-pool", "a4")


# GKE's own drivers (DEFAULT, LATEST) are refused by the config (PeerMappingOverride never applies to them).
@pytest.mark.parametrize(("driver", "expected"), [("installer", "INSTALLATION_DISABLED")])
def test_gpu_driver_modes(driver: str, expected: str) -> None:
    pool = a4_pool_of(plan(STACK, gkeGpuDriver=driver))
    accel = pool["nodeConfig"]["guestAccelerators"]
    assert accel == [{"type": "nvidia-b200", "count": 8, "gpuDriverInstallationConfig": {"gpuDriverVersion": expected}}]


CAPACITY: dict[str, tuple[dict[str, Any], dict[str, Any]]] = {
    # provisioning: (overrides, expected values by path; None = absent)
    "spot": (
        {},
        {
            "nodeConfig.spot": True,
            "nodeConfig.flexStart": None,
            "nodeConfig.reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
            "nodeCount": 2,
            "autoscaling": None,
            "management.autoRepair": True,
            "placementPolicy": {"type": "COMPACT"},
        },
    ),
    "reservation": (
        # placement stays compact (the default): the reservation's dense block places the nodes, no policy.
        {"reservationName": "a4-res-1", "ttl": "off"},
        {
            "nodeConfig.spot": None,
            "nodeConfig.reservationAffinity": {
                "consumeReservationType": "SPECIFIC_RESERVATION",
                "key": "compute.googleapis.com/reservation-name",
                "values": ["a4-res-1"],
            },
            "nodeConfig.maxRunDuration": None,
            "nodeCount": 2,
            "placementPolicy": None,
        },
    ),
    "flex-start": (
        {"ttl": "2h"},
        {
            "nodeConfig.spot": None,
            "nodeConfig.flexStart": True,
            "nodeConfig.reservationAffinity": {"consumeReservationType": "NO_RESERVATION"},
            "nodeConfig.maxRunDuration": "7200s",
            "nodeCount": None,
            "initialNodeCount": 0,
            "autoscaling": {"totalMinNodeCount": 0, "totalMaxNodeCount": 2, "locationPolicy": "ANY"},
            "management.autoRepair": False,
        },
    ),
    "on-demand": (
        {"ttl": "off"},
        {
            "nodeConfig.spot": None,
            "nodeConfig.flexStart": None,
            "nodeConfig.reservationAffinity": None,
            "nodeConfig.maxRunDuration": None,
            "nodeCount": 2,
        },
    ),
}


@pytest.mark.parametrize("provisioning", list(CAPACITY))
def test_each_provisioning_mode(provisioning: str) -> None:
    overrides, expected = CAPACITY[provisioning]
    pool = a4_pool_of(plan(STACK, provisioning=provisioning, **overrides))
    for path, value in expected.items():
        assert dig(pool, path) == value, f"{provisioning}: {path}"
    assert dig(pool, "nodeConfig.guestAccelerators.0.type") == "nvidia-b200"


def test_on_demand_keeps_a_ttl_when_set() -> None:
    pool = a4_pool_of(plan(STACK, provisioning="on-demand", ttl="90m"))
    assert pool["nodeConfig"]["maxRunDuration"] == "5400s"


def test_placement_none_and_no_local_ssd() -> None:
    pool = a4_pool_of(plan(STACK, placement="none", localSsdCount=0))
    assert "placementPolicy" not in pool
    assert "ephemeralStorageLocalSsdConfig" not in pool["nodeConfig"]


def test_node_count_from_config() -> None:
    assert a4_pool_of(plan(STACK, nodeCount=4))["nodeCount"] == 4


@pytest.mark.parametrize(
    ("raw", "key", "fragment"),
    [
        ({"provisioning": "flex-start", "reservationName": "r1"}, "reservationName", "only used with"),
        ({"nodeCount": 151}, "nodeCount", "compact placement allows at most 150"),
        ({"gkeGpuDriver": "disabled"}, "gkeGpuDriver", "one of: installer, DEFAULT, LATEST, cos-installer"),
        ({"podNetworking": "sriov"}, "podNetworking", "one of: hostNetwork, multiNetwork"),
    ],
)
def test_bad_gke_combinations_are_refused_by_the_config_model(raw: dict[str, Any], key: str, fragment: str) -> None:
    with pytest.raises(config.ConfigError) as err:
        config.parse(plan_engine.project_keys(stack_config(STACK, **raw)), STACK)
    assert any(p.key == key and fragment in p.allowed for p in err.value.problems), err.value


# -- identity and the system pool -------------------------------------------------------------------


def test_nodes_have_a_dedicated_account_with_googles_node_role_only(
    gke_plan: plan_engine.PlanResult,
) -> None:
    account = one(gke_plan, ACCOUNT, "gke-nodes")["inputs"]
    assert account["accountId"] == "deepep-gke-b200-ubuntu-nodes"
    grants = [g for g in of_type(gke_plan, IAM_MEMBER) if g["parent"] == "gke-nodes"]
    assert sorted(g["inputs"]["role"] for g in grants) == [
        "roles/container.defaultNodeServiceAccount",  # GKE's documented minimum for a node account
    ]
    assert not of_type(gke_plan, REPO_MEMBER)  # every image of the example stacks is public
    for g in grants:
        assert g["inputs"]["member"] == f"serviceAccount:{NODE_SA}"
        assert g["inputs"]["project"] == "deepep-a4-demo"


# Registries whose images anyone may pull without a grant: Docker Hub (an image with no registry host,
# https://docs.docker.com/reference/cli/docker/image/pull/), GKE's public gke.gcr.io, and Google's public
# gce-ai-infra Artifact Registry project that its A4 guides pull gIB from
# (https://cloud.google.com/kubernetes-engine/docs/how-to/gpu-bandwidth-gpudirect-rdma).
PUBLIC_REGISTRIES = ("gke.gcr.io/", "us-docker.pkg.dev/gce-ai-infra/")


def _images(result: plan_engine.PlanResult) -> set[str]:
    found: set[str] = set()

    def walk(value: Any, key: str = "") -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, k)
        elif isinstance(value, list):
            for v in value:
                walk(v, key)
        elif key in ("image", "value") and isinstance(value, str) and re.match(r"^[\w.-]+(/[\w.-]+)*[:@]", value):
            if key == "image" or "pkg.dev/" in value:
                found.add(value)

    for r in result.resources:
        if r["type"].startswith("kubernetes:"):
            walk(r["inputs"])
    return found


def _pullable(image: str, granted: set[tuple[str, str, str]]) -> bool:
    host = image.split("/", 1)[0] if "/" in image else ""
    if "." not in host and ":" not in host:  # Docker Hub: no registry host before the first slash
        return True
    if image.startswith(PUBLIC_REGISTRIES):
        return True
    m = gke_nodepool.AR_IMAGE.match(image)
    return bool(m) and (m["location"], m["project"], m["repository"]) in granted


@pytest.mark.parametrize(
    ("overrides", "repositories"),
    [
        ({}, []),
        (
            {"containerImage": "europe-west4-docker.pkg.dev/deepep-a4-demo/bench/deepep@sha256:" + "a" * 64},
            [("europe-west4", "bench")],
        ),
        # Another project's repository: the nodes get nothing there (its owner grants it).
        ({"containerImage": "us-docker.pkg.dev/other/bench/deepep@sha256:" + "a" * 64}, []),
    ],
)
def test_a4_nodes_read_only_the_repositories_their_images_come_from(
    overrides: dict[str, Any], repositories: list[tuple[str, str]]
) -> None:
    result = plan("gke-b200", **overrides) if overrides else plan("gke-b200")
    grants = of_type(result, REPO_MEMBER)
    assert sorted((g["inputs"]["location"], g["inputs"]["repository"]) for g in grants) == repositories
    for g in grants:
        assert g["inputs"]["role"] == "roles/artifactregistry.reader" and g["parent"] == "gke-nodes"
        assert g["inputs"]["member"].startswith("serviceAccount:deepep-gke-b200-nodes@")
    granted = {(g["inputs"]["location"], g["inputs"]["project"], g["inputs"]["repository"]) for g in grants}
    images = _images(result)
    assert any("gce-ai-infra" in i for i in images), images  # gIB's image is among what the nodes pull
    missing = [i for i in images if not _pullable(i, granted) and "/other/" not in i]
    assert missing == [], "the A4 nodes pull these without a grant"


def test_service_account_id_fits_gcp_limits() -> None:
    assert gke_nodepool.service_account_id("a" * 30) == "a" * 24 + "-nodes"
    assert 6 <= len(gke_nodepool.service_account_id("ab")) <= 30


def test_system_pool_is_small_untainted_and_has_its_own_account(gke_plan: plan_engine.PlanResult) -> None:
    pool = one(gke_plan, NODE_POOL, "gke-system")["inputs"]
    assert pool["nodeCount"] == 1
    assert pool["nodeLocations"] == ["asia-southeast1-b"]
    node = pool["nodeConfig"]
    assert node["machineType"] == "e2-standard-4"
    assert "taints" not in node and "guestAccelerators" not in node
    # Its own account with GKE's node minimum only: a pod on the system pool reaches no A4 grant (store, images).
    assert node["serviceAccount"] == "deepep-gke-b200-ubuntu-system@deepep-a4-demo.iam.gserviceaccount.com"
    assert node["serviceAccount"] != a4_pool_of(gke_plan)["nodeConfig"]["serviceAccount"]
    grants = [
        g for g in of_type(gke_plan, IAM_MEMBER) if g["inputs"]["member"] == f"serviceAccount:{node['serviceAccount']}"
    ]
    assert [g["inputs"]["role"] for g in grants] == ["roles/container.defaultNodeServiceAccount"]
    store_grants = of_type(gke_plan, "gcp:storage/bucketIAMMember:BucketIAMMember")
    assert all(g["inputs"]["member"] != f"serviceAccount:{node['serviceAccount']}" for g in store_grants)
    assert node["shieldedInstanceConfig"] == {"enableSecureBoot": True, "enableIntegrityMonitoring": True}
    assert pool["networkConfig"] == {"enablePrivateNodes": True}
    assert len(of_type(gke_plan, NODE_POOL)) == 2


# -- the Kubernetes provider -------------------------------------------------------------------------


def k8s_without_explicit_provider(result: plan_engine.PlanResult, provider_name: str) -> list[str]:
    return [
        r["name"] for r in result.resources if r["type"].startswith("kubernetes:") and r["provider"] != provider_name
    ]


@pytest.mark.parametrize("pod_networking", ["hostNetwork", "multiNetwork"])
def test_every_kubernetes_resource_uses_the_explicit_provider(pod_networking: str) -> None:
    result = plan(STACK, podNetworking=pod_networking)
    provider = one(result, K8S_PROVIDER)
    assert provider["name"] == "gke-k8s"
    k8s_resources = [r for r in result.resources if r["type"].startswith("kubernetes:")]
    assert len(k8s_resources) >= 18 + 5  # the multi-network objects and at least the workloads' core
    assert k8s_without_explicit_provider(result, "gke-k8s") == []


def test_the_provider_check_catches_a_resource_on_the_default_provider() -> None:
    def program() -> None:
        explicit = k8s.Provider("gke-k8s", kubeconfig="{}")
        k8s.core.v1.ConfigMap("good", opts=pulumi.ResourceOptions(provider=explicit))
        k8s.core.v1.ConfigMap("stray")

    result, _ = plan_engine.run_program(STACK, stack_config(STACK), program)
    assert k8s_without_explicit_provider(result, "gke-k8s") == ["stray"]


def test_kubeconfig_uses_the_auth_plugin_and_the_dns_endpoint(gke_plan: plan_engine.PlanResult) -> None:
    wrapped = one(gke_plan, K8S_PROVIDER)["inputs"]["kubeconfig"]
    # Pulumi's wire form of a secret: the provider receives (and the state stores) it encrypted.
    assert wrapped[SECRET_SIG_KEY] == SECRET_SIG_VALUE
    kubeconfig = json.loads(wrapped["value"])
    cluster = kubeconfig["clusters"][0]["cluster"]
    # The DNS endpoint the mocked cluster reports; its certificate is public, so no cluster CA (it would fail TLS).
    assert re.fullmatch(r"https://gke-[0-9a-f]{32}-123456789012\.asia-southeast1\.gke\.goog", cluster["server"])
    assert "certificate-authority-data" not in cluster
    user = kubeconfig["users"][0]["user"]
    assert user["exec"]["command"] == "gke-gcloud-auth-plugin"
    assert "token" not in user and "client-key-data" not in user
    assert kubeconfig["current-context"] == f"gke_deepep-a4-demo_asia-southeast1_{PREFIX}-gke"


def test_outputs_name_the_cluster_pool_and_keep_the_kubeconfig_secret(gke_plan: plan_engine.PlanResult) -> None:
    out = gke_plan.outputs
    assert out["clusterName"] == f"{PREFIX}-gke"
    assert out["clusterLocation"] == "asia-southeast1"
    assert out["nodePool"] == "a4-highgpu-8g"
    assert out["getCredentials"] == (
        f"gcloud container clusters get-credentials {PREFIX}-gke --location asia-southeast1 --project deepep-a4-demo"
        " --dns-endpoint"
    )
    assert out["kubeconfig"] == "[secret]"


# -- multi-network objects ---------------------------------------------------------------------------


def in_nic_order(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Registration order is not creation order: sort gvnic-1 first, then rdma-0..7."""
    names = [f"{PREFIX}-gvnic-1", *RDMA_NAMES]
    return sorted((r["inputs"] for r in resources), key=lambda i: names.index(i["metadata"]["name"]))


@pytest.mark.parametrize("pod_networking", ["hostNetwork", "multiNetwork"])
def test_eighteen_multi_network_objects_in_nic_order(pod_networking: str) -> None:
    result = plan(STACK, podNetworking=pod_networking)
    params = in_nic_order(of_type(result, PARAM_SET))
    networks = in_nic_order(of_type(result, NETWORK))
    assert len(params) == len(networks) == 9
    names = [f"{PREFIX}-gvnic-1", *RDMA_NAMES]
    assert [p["metadata"]["name"] for p in params] == names
    assert [p["apiVersion"] for p in params + networks] == ["networking.gke.io/v1"] * 18
    assert params[0]["spec"] == {"vpc": f"{PREFIX}-gvnic", "vpcSubnet": f"{PREFIX}-gvnic", "deviceMode": "NetDevice"}
    for i, p in enumerate(params[1:]):
        assert p["spec"] == {"vpc": f"{PREFIX}-rdma", "vpcSubnet": RDMA_NAMES[i], "deviceMode": "RDMA"}
    assert [n["metadata"]["name"] for n in networks] == names
    for n in networks:
        assert n["spec"] == {
            "type": "Device",
            "parametersRef": {
                "group": "networking.gke.io",
                "kind": "GKENetworkParamSet",
                "name": n["metadata"]["name"],
            },
        }


def test_multi_network_pods_name_the_eight_rdma_networks_in_order() -> None:
    result = plan(STACK, podNetworking="multiNetwork")
    jobs = of_type(result, "kubernetes:batch/v1:Job")
    assert jobs
    for job in jobs:
        pod = job["inputs"]["spec"]["template"]
        assert not pod["spec"].get("hostNetwork")
        if job["inputs"]["metadata"]["name"] == "deepep-intranode":
            continue  # NVLink only: gets no NICs
        annotation = pod["metadata"]["annotations"]["networking.gke.io/interfaces"]
        named = [i["network"] for i in json.loads(annotation)]
        assert [n for n in named if n in RDMA_NAMES] == RDMA_NAMES


def test_host_network_pods_carry_no_interface_annotation() -> None:
    jobs = of_type(plan(STACK, podNetworking="hostNetwork"), "kubernetes:batch/v1:Job")
    assert jobs
    for job in jobs:
        pod = job["inputs"]["spec"]["template"]
        # The RDMA tests on the host's network; intranode (NVLink only) on the pod network.
        assert bool(pod["spec"].get("hostNetwork")) is (job["inputs"]["metadata"]["name"] != "deepep-intranode")
        assert "networking.gke.io/interfaces" not in (pod["metadata"].get("annotations") or {})

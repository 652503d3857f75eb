"""The policy pack's rules on passing and failing fixtures, on the plans of both stacks, and through pulumi-policy."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.gke import objects as gke_objects
from deepep_a4.plan import engine as plan_engine
from deepep_a4.policy import rules
from tests.conftest import plan

# -- fixtures ------------------------------------------------------------------------------------------

PROFILE = "projects/p/global/networkProfiles/asia-southeast1-b-vpc-roce"
RESERVED = {"type": "SPECIFIC_RESERVATION"}


def spot_vm(**sched: Any) -> dict[str, Any]:
    scheduling = {
        "provisioningModel": "SPOT",
        "preemptible": True,
        "instanceTerminationAction": "DELETE",
        "maxRunDuration": {"seconds": 28800},
        **sched,
    }
    return {
        "machineType": "a4-highgpu-8g",
        "zone": "asia-southeast1-b",
        "scheduling": {k: v for k, v in scheduling.items() if v is not None},
        "networkInterfaces": [
            {"network": "projects/p/global/networks/host"},
            {"network": "projects/p/global/networks/rdma", "nicType": "MRDMA"},
        ],
    }


def spot_pool(**node_config: Any) -> dict[str, Any]:
    nc = {"machineType": "a4-highgpu-8g", "spot": True, "maxRunDuration": "28800s", **node_config}
    return {
        "nodeConfig": {k: v for k, v in nc.items() if v is not None},
        "nodeLocations": ["asia-southeast1-b"],
        "networkConfig": {"additionalNodeNetworkConfigs": [{"network": "rdma", "subnetwork": "rdma-0"}]},
    }


def pod_template(kind: str, namespace: str | None, privileged: bool) -> tuple[str, dict[str, Any]]:
    container = {"name": "c", "securityContext": {"privileged": privileged}}
    spec = {"template": {"spec": {"initContainers": [container], "containers": [{"name": "main"}]}}}
    meta = {"namespace": namespace} if namespace else {}
    return f"kubernetes:apps/v1:{kind}", {"metadata": meta, "spec": spec}


# -- 1. capacity model ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "props",
    [
        spot_vm(),
        spot_vm(provisioningModel="FLEX_START", preemptible=None),
        spot_vm(provisioningModel="RESERVATION_BOUND", preemptible=None),
        {
            **spot_vm(provisioningModel="STANDARD", preemptible=None),
            "reservationAffinity": {"type": "SPECIFIC_RESERVATION"},
        },
        {**spot_vm(provisioningModel="STANDARD", preemptible=None), "machineType": "n2-standard-4"},  # not A4
    ],
)
def test_capacity_model_passes(props: dict[str, Any]) -> None:
    assert rules.a4_capacity_model(rules.INSTANCE, props) == []


def test_capacity_model_refuses_on_demand_a4() -> None:
    [msg] = rules.a4_capacity_model(rules.INSTANCE, spot_vm(provisioningModel="STANDARD", preemptible=None))
    assert "STANDARD" in msg and "spot, flex-start or reservation" in msg
    assert rules.a4_capacity_model(rules.NODE_POOL, spot_pool(spot=None))
    assert rules.a4_capacity_model(rules.NODE_POOL, spot_pool(spot=None, flexStart=True)) == []
    reserved = spot_pool(spot=None, reservationAffinity={"consumeReservationType": "SPECIFIC_RESERVATION"})
    assert rules.a4_capacity_model(rules.NODE_POOL, reserved) == []


# -- 2. spot has a TTL ---------------------------------------------------------------------------------


def test_spot_ttl_passes_with_struct_and_string() -> None:
    assert rules.spot_has_ttl(rules.INSTANCE, spot_vm()) == []
    assert rules.spot_has_ttl(rules.NODE_POOL, spot_pool()) == []
    # Not spot: no TTL needed.
    assert (
        rules.spot_has_ttl(
            rules.INSTANCE, spot_vm(provisioningModel="FLEX_START", preemptible=None, maxRunDuration=None)
        )
        == []
    )


@pytest.mark.parametrize(
    ("type_", "props", "needle"),
    [
        (rules.INSTANCE, spot_vm(maxRunDuration=None), "maxRunDuration"),
        (rules.INSTANCE, spot_vm(maxRunDuration={"seconds": 0}), "maxRunDuration"),
        (rules.INSTANCE, spot_vm(instanceTerminationAction=None), "instanceTerminationAction"),
        (rules.NODE_POOL, spot_pool(maxRunDuration=None), "maxRunDuration"),
        (rules.NODE_POOL, spot_pool(maxRunDuration="8h"), "'8h'"),  # the API wants "<seconds>s"
    ],
)
def test_spot_ttl_fails_without_a_cap(type_: str, props: dict[str, Any], needle: str) -> None:
    problems = rules.spot_has_ttl(type_, props)
    assert len(problems) == 1 and needle in problems[0]


# -- 3. no external IPs --------------------------------------------------------------------------------


def test_external_ips_are_refused() -> None:
    vm = spot_vm()
    assert rules.no_external_ip(rules.INSTANCE, vm) == []
    vm["networkInterfaces"][0]["accessConfigs"] = [{"natIp": ""}]
    assert rules.no_external_ip(rules.INSTANCE, vm) == ["nic0 has an access config (an external IP): remove it"]
    assert rules.no_external_ip(rules.ADDRESS, {"addressType": "INTERNAL"}) == []
    assert rules.no_external_ip(rules.ADDRESS, {})  # the API's default is EXTERNAL
    assert rules.no_external_ip(rules.CLUSTER, {"privateClusterConfig": {"enablePrivateNodes": True}}) == []
    assert rules.no_external_ip(rules.CLUSTER, {"privateClusterConfig": {"enablePrivateNodes": False}})
    assert rules.no_external_ip(rules.NODE_POOL, {"networkConfig": {"enablePrivateNodes": False}})


# -- 4. no firewall open to the world ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("props", "violates"),
    [
        ({"sourceRanges": ["35.235.240.0/20"], "allows": [{"protocol": "tcp", "ports": ["22"]}]}, False),
        ({"sourceRanges": ["0.0.0.0/0"], "allows": [{"protocol": "tcp", "ports": ["22"]}]}, True),
        ({"sourceRanges": ["10.0.0.0/8", "::/0"], "allows": [{"protocol": "all"}]}, True),
        ({"sourceRanges": ["0.0.0.0/0"], "denies": [{"protocol": "all"}]}, False),  # a deny rule closes
        ({"sourceRanges": ["0.0.0.0/0"], "allows": [{"protocol": "all"}], "disabled": True}, False),
        ({"direction": "EGRESS", "destinationRanges": ["0.0.0.0/0"], "allows": [{"protocol": "all"}]}, False),
    ],
)
def test_open_firewall(props: dict[str, Any], violates: bool) -> None:
    assert bool(rules.no_open_firewall(rules.FIREWALL, props)) is violates


# -- 5. privileged containers ---------------------------------------------------------------------------


def test_privileged_only_in_the_installer_namespace() -> None:
    assert rules.INSTALLER_NAMESPACE == gke_objects.NAMESPACE  # the pack cannot import the program
    assert rules.privileged_only_in_installer_namespace(*pod_template("DaemonSet", "deepep-a4", True)) == []
    assert rules.privileged_only_in_installer_namespace(*pod_template("Deployment", "apps", False)) == []
    [msg] = rules.privileged_only_in_installer_namespace(*pod_template("DaemonSet", "kube-system", True))
    assert "'kube-system'" in msg and rules.INSTALLER_NAMESPACE in msg
    assert rules.privileged_only_in_installer_namespace(*pod_template("StatefulSet", None, True))  # default ns
    job = {"metadata": {"namespace": "x"}, "spec": {"template": {"spec": {"containers": [
        {"name": "bench", "securityContext": {"privileged": True}}]}}}}  # fmt: skip
    assert rules.privileged_only_in_installer_namespace("kubernetes:batch/v1:Job", job)
    cron = {"metadata": {"namespace": "x"}, "spec": {"jobTemplate": {"spec": job["spec"]}}}
    assert rules.privileged_only_in_installer_namespace("kubernetes:batch/v1:CronJob", cron)


# -- 6. RDMA VPC zone = node zone (stack rule) ----------------------------------------------------------


def stack_fixture(vm_zone: str = "asia-southeast1-b", pool_zones: tuple[str, ...] = ("asia-southeast1-b",)):
    vm = spot_vm()
    vm["zone"] = vm_zone
    pool = spot_pool()
    pool["nodeLocations"] = list(pool_zones)
    return [
        rules.Resource(rules.NETWORK, "a4-rdma", {"name": "rdma", "networkProfile": PROFILE}),
        rules.Resource(rules.NETWORK, "a4-host", {"name": "host"}),
        rules.Resource(rules.INSTANCE, "vm-0", vm),
        rules.Resource(rules.NODE_POOL, "pool", pool),
    ]


def test_rdma_zone_passes_when_everything_is_in_the_profile_zone() -> None:
    assert rules.rdma_zone_matches_nodes(stack_fixture()) == []


def test_rdma_zone_fails_for_a_vm_or_pool_elsewhere() -> None:
    [vm_problem] = rules.rdma_zone_matches_nodes(stack_fixture(vm_zone="asia-southeast1-c"))
    assert "vm-0" in vm_problem and "asia-southeast1-c" in vm_problem and "asia-southeast1-b" in vm_problem
    [pool_problem] = rules.rdma_zone_matches_nodes(stack_fixture(pool_zones=("asia-southeast1-b", "asia-southeast1-a")))
    assert "pool" in pool_problem and "asia-southeast1-a" in pool_problem
    [unpinned] = rules.rdma_zone_matches_nodes(stack_fixture(pool_zones=()))
    assert "no pinned zone" in unpinned


# -- the plans of both stacks pass every rule ----------------------------------------------------------


def engine_like(result: plan_engine.PlanResult) -> list[rules.Resource]:
    """Plan resources as the engine shows them to a stack policy: the mocks' `<name>-id` become real ids."""
    ids = {}
    for r in result.resources:
        if r["type"].startswith("gcp:compute/") and r["inputs"].get("name"):
            kind = r["type"].split(":")[-1][0].lower() + r["type"].split(":")[-1][1:]
            ids[f"{r['name']}-id"] = f"projects/{result.project}/global/{kind}s/{r['inputs']['name']}"

    def fix(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: fix(v) for k, v in value.items()}
        if isinstance(value, list):
            return [fix(v) for v in value]
        return ids.get(value, value) if isinstance(value, str) else value

    return [rules.Resource(r["type"], r["name"], fix(r["inputs"])) for r in result.resources]


@pytest.fixture(scope="module", params=["gke-b200", "gce-b200"])
def stack_resources(request: pytest.FixtureRequest) -> list[rules.Resource]:
    return engine_like(plan(request.param))


# The supported GKE stack's staging image is pinned by default (keys.STAGING_IMAGE); a tag a stack sets instead
# is refused by the pack (and flagged by the plan).
def test_an_unpinned_staging_image_is_refused() -> None:
    refused = [
        msg
        for r in engine_like(plan("gke-b200", installerImage="buildpack-deps:noble", allowUnpinnedImages=True))
        for name, (_, rule) in rules.RESOURCE_RULES.items()
        for msg in rule(r.type, r.props)
    ]
    assert refused and all("buildpack-deps:noble" in m for m in refused), refused


def test_both_stacks_pass_every_resource_rule(stack_resources: list[rules.Resource]) -> None:
    problems = [
        (name, r.name, msg)
        for r in stack_resources
        for name, (_, rule) in rules.RESOURCE_RULES.items()
        for msg in rule(r.type, r.props)
    ]
    assert problems == []


def test_both_stacks_pass_the_rdma_zone_rule_and_a_moved_node_fails(stack_resources: list[rules.Resource]) -> None:
    assert rules.rdma_zone_matches_nodes(stack_resources) == []
    nodes = [r for r in stack_resources if r.type in (rules.INSTANCE, rules.NODE_POOL)]
    rdma_nodes = [r for r in nodes if "rdma" in str(r.props.get("networkInterfaces") or r.props.get("networkConfig"))]
    assert rdma_nodes, "every stack puts its A4 nodes on the RDMA network"
    moved = copy.deepcopy(rdma_nodes[0])
    moved.props["zone" if moved.type == rules.INSTANCE else "nodeLocations"] = (  # type: ignore[index]
        "asia-southeast1-c" if moved.type == rules.INSTANCE else ["asia-southeast1-c"]
    )
    others = [r for r in stack_resources if r is not rdma_nodes[0]]
    assert rules.rdma_zone_matches_nodes([*others, moved])


# -- through pulumi-policy ----------------------------------------------------------------------------


def test_the_pack_wraps_every_rule_as_a_policy_mandatory_but_the_capacity_warning() -> None:
    pp = pytest.importorskip("pulumi_policy")
    from deepep_a4.policy import pack

    policies: dict[str, Any] = {p.name: p for p in pack.policies()}
    assert set(policies) == set(rules.RESOURCE_RULES) | set(rules.STACK_RULES) | set(rules.NAMED_RESOURCE_RULES)
    levels = {name: p.enforcement_level for name, p in policies.items()}
    assert levels.pop("a4-capacity-model") == pp.EnforcementLevel.ADVISORY  # config allows on-demand
    assert set(levels.values()) == {pp.EnforcementLevel.MANDATORY}

    reported: list[str] = []
    opts = pp.PolicyResourceOptions(False, [], False, [], pp.PolicyCustomTimeouts(0, 0, 0), [], None)
    bad_vm = spot_vm(maxRunDuration=None)
    args = pp.ResourceValidationArgs(rules.INSTANCE, bad_vm, "urn:vm", "vm-0", opts, None)
    policies["spot-has-ttl"].validate(args, lambda msg, urn=None: reported.append(msg))
    assert reported and "maxRunDuration" in reported[0]

    reported.clear()
    resources = [
        pp.PolicyResource(r.type, r.props, f"urn:{r.name}", r.name, opts, None, None, [], {})
        for r in stack_fixture(vm_zone="asia-southeast1-c")
    ]
    policies["rdma-zone-matches-nodes"].validate(
        pp.StackValidationArgs(resources), lambda m, u=None: reported.append(m)
    )
    assert len(reported) == 1 and "vm-0" in reported[0]

    # the named rule gets the resource's logical name from the engine: a resource no lock declares is refused
    reported.clear()
    args = pp.ResourceValidationArgs("gcp:storage/hmacKey:HmacKey", {}, "urn:k", "k", opts, None)
    policies["declared-resource"].validate(args, lambda msg, urn=None: reported.append(msg))
    assert reported and "gcp:storage/hmacKey:HmacKey" in reported[0]

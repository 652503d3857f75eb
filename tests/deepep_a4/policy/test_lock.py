"""The declared bill of powers (deepep_a4/policy/lock.py, policy/powers/*.lock): fresh for every shape, what it
refuses and how it says so, names that carry the stack, the shape the CLI's config selects, and the pinned role
definitions it resolves grants with."""

from __future__ import annotations

import json
import runpy
from typing import Any

import pytest

from deepep_a4.plan import engine as plan_engine
from deepep_a4.policy import bill, declared, grants, lock, rules
from tests.conftest import stack_config
from tests.deepep_a4.policy.runner import find, refusals, resources
from tests.deepep_a4.policy.test_pack import engine_like


@pytest.mark.parametrize("shape", list(lock.SHAPES))
def test_every_committed_lock_is_what_the_plan_makes_now(shape: str) -> None:
    path = lock.lock_path(shape)
    assert path.exists(), f"{path} is missing: {lock.REGENERATE}"
    assert path.read_text() == lock.lock_text(lock.make_lock(shape)), f"{path} is stale: {lock.REGENERATE}"


def test_the_locks_are_the_shapes_and_every_grant_resolves() -> None:
    assert set(lock.locks()) == set(lock.SHAPES), "a lock without a shape (or a shape without one)"
    platforms = {s.split("-", 1)[0] for s in lock.SHAPES if s != lock.STORE_SHAPE}
    # platform x profile x model, each with its rehearsal's shape (components/rehearsal.py), and the store's
    assert platforms == {"gke", "gce"} and len(lock.SHAPES) == 2 * 2 * len(lock.MODELS) * 2 + 1
    assert all(f"{s}-rehearsal" in lock.SHAPES for s in lock.SHAPES if s != lock.STORE_SHAPE and "rehearsal" not in s)
    for shape, found in lock.locks().items():
        assert found["grants"], shape
        assert all(g["permissions"] != "UNRESOLVED" for g in found["grants"]), shape
        # the deadline's role is resolved from the stack's own definition, the others from policy/roles.json
        for g in found["grants"]:
            if not grants.is_custom(g["role"]):
                assert g["permissions"] == grants.predefined(g["role"])


def test_a_lock_lists_what_the_issue_asks() -> None:
    gke = lock.locks()["gke-host-install-spot"]
    installer = gke["resources"]["kubernetes:apps/v1:DaemonSet deepep-installer"]
    assert "spec.template.spec.hostPID = true" in installer  # host access
    assert any(p.startswith("spec.template.spec.volumes.[].hostPath.path = /") for p in installer)
    assert any(k.startswith("kubernetes:rbac.authorization.k8s.io/v1:ClusterRole ") for k in gke["resources"])
    firewall = gke["resources"]["gcp:compute/firewall:Firewall a4-iap-ssh"]
    assert "sourceRanges.[] = 35.235.240.0/20" in firewall  # network exposure, IAP's public range kept as is
    deadline = [g for g in gke["grants"] if "deadline" in g["member"]]
    assert deadline and deadline[0]["member"] == "serviceAccount:{stack}-deadline@{project}.iam.gserviceaccount.com"
    assert "container.clusters.update" in deadline[0]["permissions"]


def test_an_addition_is_refused_in_one_line_naming_it() -> None:
    found = resources("gce-b200")
    found.append(rules.Resource("gcp:storage/hmacKey:HmacKey", "sneaky", {"serviceAccountEmail": "x@y"}))
    msgs = [m for m in refusals(found) if m.startswith("declared-")]
    assert msgs and all("\n" not in m for m in msgs)
    assert any("gcp:storage/hmacKey:HmacKey" in m and "sneaky" in m for m in msgs), msgs
    props = find(found, "gce-vm-0", "instance:Instance")
    props["metadata"]["startup-script-url"] = "gs://evil/x.sh"
    [added] = [
        m for m in declared.declared_resource("gcp:compute/instance:Instance", "gce-vm-0", props) if "property" in m
    ]
    assert "metadata.startup-script-url" in added and "gce-b200" not in added


def _env(monkeypatch: pytest.MonkeyPatch, stack: str, cfg: dict[str, Any]) -> None:
    monkeypatch.setenv("PULUMI_STACK", stack)
    monkeypatch.setenv("PULUMI_PROJECT", "deepep-a4")
    monkeypatch.setenv(
        "PULUMI_CONFIG", json.dumps({k: str(v) if not isinstance(v, str) else v for k, v in cfg.items()})
    )


def test_a_renamed_stack_matches_its_shape_exactly(monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = stack_config("gke-b200")
    result, _ = plan_engine.run_program("team-x-gke", cfg)
    found = engine_like(result)
    _env(monkeypatch, "team-x-gke", cfg)
    assert lock.env_context() == (bill.Context("team-x-gke", "deepep-a4-demo", None), "gke-supported-spot")
    assert refusals(found) == []
    # exact names: another stack's node account is not ours
    find(found, "gke-a4", "nodePool:NodePool")["nodeConfig"]["serviceAccount"] = (
        "deepep-other-nodes@deepep-a4-demo.iam.gserviceaccount.com"
    )
    assert any("deepep-other-nodes" in m for m in refusals(found))


def test_the_config_selects_the_shape_and_an_unknown_one_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    found = resources("gke-b200")
    _env(monkeypatch, "gke-b200", stack_config("gce-b200"))  # a GKE stack's resources under a GCE config
    assert any("policy/powers/gce-supported-spot.lock" in m for m in refusals(found))
    assert lock.shape_of({"deepep-a4:platform": "gke"}) == "gke-supported-spot"  # keys' defaults fill the rest
    rehearsal = {**stack_config("gke-b200"), "deepep-a4:rehearsal": "true"}
    assert lock.shape_of(rehearsal) == "gke-supported-spot-rehearsal"
    _env(monkeypatch, "gke-b200", rehearsal)
    if "gke-supported-spot-rehearsal" not in lock.SHAPES:  # until its line in SHAPES: refused, not waved through
        assert any("has no lock" in m for m in refusals(found))


@pytest.mark.parametrize("stack", ["gke-b200", "gce-b200-ubuntu"])
def test_a_renamed_stacks_rehearsal_runs_under_its_rehearsal_shape(stack: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """As `rehearse` runs it (deepep_a4/rehearse/stack.py): stack `<name>-rehearsal`, `rehearsal: true` and a name
    prefix of its own; the installer's KSA is named for that stack (components/gke/objects.py installer_ksa)."""
    from deepep_a4.rehearse import stack as rehearsal_stack

    name = rehearsal_stack.stack_name("team-y")
    cfg = rehearsal_stack.config(stack_config(stack), "deepep-team-y")
    result, _ = plan_engine.run_program(name, cfg)
    _env(monkeypatch, name, cfg)
    assert lock.env_context()[1] == lock.shape_of(cfg) and lock.shape_of(cfg).endswith("-rehearsal")
    assert refusals(engine_like(result)) == []


def test_a_preview_s_unknown_values_do_not_break_the_bill() -> None:
    proxy = pytest.importorskip("pulumi_policy.proxy")
    deserialize = pytest.importorskip("pulumi_policy.deserialize")
    unknown = deserialize.deserialize_properties({"role": "04da6b54-80e4-46f7-96ec-b56ff0331ba9", "member": "x"})
    props = proxy.unknown_checking_proxy(unknown)
    out = bill.bill_of("gcp:projects/iAMMember:IAMMember", "x", props, bill.Context())
    assert "member" in out.paths and "member = x" in out.powers


def test_a_predefined_role_outside_the_pinned_definitions_is_refused() -> None:
    props = {
        "bucket": "b",
        "role": "roles/storage.hmacKeyAdmin",
        "member": "serviceAccount:a@p.iam.gserviceaccount.com",
    }
    [msg] = grants.roles_resolved("gcp:storage/bucketIAMMember:BucketIAMMember", props)
    assert "policy/roles.json" in msg
    pinned = json.loads(grants.ROLES_FILE.read_text())
    assert pinned["source"]["commit"] == "2073fa52ac008a45477aa0b1b4580cd99135bf60"


def test_the_store_project_runs_under_the_pack(monkeypatch: pytest.MonkeyPatch) -> None:
    def program() -> None:
        runpy.run_path(str(plan_engine.ROOT / "store/__main__.py"), run_name="__main__")

    cfg = {"deepep-a4-store:project": "my-proj-123", "deepep-a4-store:prefix": "team/deepep"}
    result, _ = plan_engine.run_program("prod", cfg, program=program)
    found = [rules.Resource(r["type"], r["name"], r["inputs"]) for r in result.resources]
    assert refusals(found) == []  # without the CLI's config: the store's lock among all
    monkeypatch.setenv("PULUMI_PROJECT", "deepep-a4-store")
    monkeypatch.setenv("PULUMI_STACK", "prod")
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps(cfg))
    assert lock.env_context()[1] == lock.STORE_SHAPE
    assert refusals(found) == []
    creator = find(found, "builder-objectcreator", "BucketIAMMember")
    creator["condition"]["expression"] = 'resource.name.startsWith("projects/_/buckets/my-proj-123-artifacts/objects/")'
    assert any("storage-conditions" in m for m in refusals(found))
    creator.pop("condition")
    assert any("with no condition" in m for m in refusals(found))


def test_what_the_providers_check_adds_is_not_the_program_s() -> None:
    """The bridge's Check fills Terraform defaults and lists them in `__defaults`; pulumi-kubernetes auto-names."""
    found = resources("gce-b200")
    fw = find(found, "a4-iap-ssh", "firewall:Firewall")
    fw.update(priority=1000, enableLogging=False, __defaults=["priority", "enableLogging"])
    assert refusals(found) == []
    fw["__defaults"] = ["priority"]  # a key the program did not set and the provider did not default
    assert any("enableLogging" in m for m in refusals(found))
    gke = resources("gke-b200")
    role = find(gke, "deepep-installer-label-nodes", ":ClusterRole")
    role["metadata"].update(name="deepep-installer-label-nodes-1a2b3c4d", annotations={"pulumi.com/autonamed": "true"})
    find(gke, "gcp", "providers:gcp").update(version="9.0.0")  # the engine sets a provider's plugin version
    assert refusals(gke) == []
    find(gke, "gcp", "providers:gcp").update(impersonateServiceAccount="x@p.iam.gserviceaccount.com")
    assert refusals(gke)

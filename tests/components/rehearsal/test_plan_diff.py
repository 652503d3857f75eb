"""The rehearsal's plan is the stack's plan but for the categories components/rehearsal.py names: every difference
is listed and sorted into one, for each example stack; one outside them fails (ci/rehearsal_diff.py)."""

from __future__ import annotations

import copy
from functools import cache

import pytest

from ci import rehearsal_diff as plan_diff
from deepep_a4.plan import command as plan
from deepep_a4.plan import engine as plan_engine
from deepep_a4.rehearse import stack as rehearsal_stack

STACKS = ("gke-b200", "gce-b200", "gke-b200-ubuntu", "gce-b200-ubuntu")


@cache
def plans(stack: str) -> tuple[str, list, list]:
    name, raw, cfg = plan.load_stack(stack)
    real, _ = plan_engine.run_program(name, raw)
    rehearsed, _ = plan_engine.run_program(
        rehearsal_stack.stack_name(name), rehearsal_stack.config(raw, cfg.name_prefix)
    )
    return cfg.name_prefix, real.resources, rehearsed.resources


@pytest.mark.parametrize("stack", STACKS)
def test_every_difference_of_the_rehearsal_is_one_it_may_have(stack: str) -> None:
    prefix, real, rehearsed = plans(stack)
    by_category, findings = plan_diff.classify(plan_diff.differences(stack, prefix, real, rehearsed))
    assert not findings, "differences outside the rehearsal's categories:\n" + "\n".join(d.line() for d in findings)
    # The three differences are there (a rehearsal that changed nothing would prove nothing about itself).
    cats = set(by_category)
    assert any(c.startswith("machine:") for c in cats)
    assert "short TTL" in cats
    assert any(c.startswith("probes") for c in cats)
    assert any(c.startswith("no RDMA NIC") for c in cats)


@pytest.mark.parametrize("stack", ["gke-b200", "gce-b200"])
def test_a_difference_outside_the_categories_is_a_finding(stack: str) -> None:
    prefix, real, rehearsed = plans(stack)
    broken = copy.deepcopy(rehearsed)
    # A rehearsal whose network differed would prove nothing about the real one's.
    subnet = next(r for r in broken if r["type"] == "gcp:compute/subnetwork:Subnetwork")
    subnet["inputs"]["privateIpGoogleAccess"] = not subnet["inputs"].get("privateIpGoogleAccess")
    # ... nor one that left out a resource of the real plan.
    broken = [r for r in broken if r["type"] != "gcp:compute/routerNat:RouterNat"]
    _, findings = plan_diff.classify(plan_diff.differences(stack, prefix, real, broken))
    lines = [d.line() for d in findings]
    assert any("privateIpGoogleAccess" in line for line in lines), lines
    assert any("RouterNat" in line and "only in the real plan" in line for line in lines), lines


def test_the_rehearsals_node_pool_is_a_cpu_pool_without_gpu_or_rdma() -> None:
    _, _, rehearsed = plans("gke-b200")
    pool = next(r for r in rehearsed if r["type"] == "gcp:container/nodePool:NodePool" and r["name"] == "gke-a4")
    node = pool["inputs"]["nodeConfig"]
    assert node["machineType"] == "e2-standard-4"
    assert node.get("spot") is True
    assert not node.get("guestAccelerators") and not node.get("taints")
    assert len(pool["inputs"]["networkConfig"]["additionalNodeNetworkConfigs"]) == 1  # the second gVNIC only
    assert node["maxRunDuration"] == "2700s"  # components/rehearsal.py TTL_SECONDS["gke"]


@pytest.mark.parametrize("stack", ["gke-b200", "gke-b200-ubuntu"])
def test_the_rehearsals_kubernetes_objects_pass_the_schema_gate(stack: str, tmp_path) -> None:
    """The probe pods are new objects: the same offline schemas as the real plan's (ci/gates/k8s_schemas.py)."""
    from ci.gates import k8s_schemas

    name, raw, cfg = plan.load_stack(stack)
    result, _ = plan_engine.run_program(rehearsal_stack.stack_name(name), rehearsal_stack.config(raw, cfg.name_prefix))
    plan.write_plan(result, tmp_path / "plan")
    _, count, problems = k8s_schemas.validate_plan(tmp_path / "plan")
    assert count > 10 and not problems, "\n".join(str(p) for p in problems)
    outsider = (tmp_path / "plan" / "files" / "k8s").glob("*.yaml")
    text = "".join(p.read_text() for p in outsider)
    assert "deepep-rehearsal-outsider" in text and "suspend: true" in text


@pytest.mark.parametrize("stack", STACKS)
def test_the_rehearsal_passes_the_policy_packs_rules_as_the_stack_does(stack: str) -> None:
    """The rehearsal runs under the policy pack (as `run` does): its plan breaks none of the pack's rules."""
    from deepep_a4.policy import rules

    _, _, rehearsed = plans(stack)
    found = [
        f"{rule} {r['name']}: {v}"
        for r in rehearsed
        for rule, (_, check) in rules.RESOURCE_RULES.items()
        for v in check(r["type"], r["inputs"])
    ]
    resources = [rules.Resource(r["type"], r["name"], r["inputs"]) for r in rehearsed]
    found += [f"{rule}: {v}" for rule, (_, check) in rules.STACK_RULES.items() for v in check(resources)]
    assert not found, found

"""What the rehearsal renders gives each probe every input its docstring calls required (scripts/rehearse/*.py,
"Inputs (environment)"): the staging DaemonSet's init container, the internode pods, the outsider, the GCE startup
script and the store builder's build step. Needs the probes (another engineer's files)."""

from __future__ import annotations

import re
from dataclasses import replace
from functools import cache
from pathlib import Path

import pytest

from components import rehearsal
from deepep_a4.plan import command as plan
from deepep_a4.plan import engine as plan_engine
from deepep_a4.rehearse import build
from deepep_a4.rehearse import stack as rehearsal_stack

if not (rehearsal.PROBE_SOURCE / rehearsal.PROBE_STAGE).is_file():
    pytest.skip("the probes (scripts/rehearse/) are not in this checkout", allow_module_level=True)

# Set by the kubelet in every container, not by the pod spec.
KUBELET = {"KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"}


def required(probe: str, role: str = "") -> set[str]:
    """The names the probe's docstring marks required (for `role` where it names one: `(peer; required)`)."""
    doc = (rehearsal.PROBE_SOURCE / probe).read_text().split('"""')[1].split("Inputs (environment")[1]
    entries = re.split(r"\n  (?=[A-Z])", doc)
    names: set[str] = set()
    for entry in entries:
        m = re.match(r"([A-Z][A-Z_, ]*[A-Z])\s+(.*)", entry, re.S)
        if not m or not re.search(r"\((\w+; )?required", m[2]):  # "(required)", "(peer; required)"
            continue
        roles = re.search(r"\((\w+); required", m[2])
        if roles and role and roles[1] != role:
            continue
        names |= {n.strip() for n in m[1].split(",")}
    return names - KUBELET


@cache
def resources(stack: str) -> list[dict]:
    name, raw, cfg = plan.load_stack(stack)
    raw = {**raw, "deepep-a4:artifactStore": "gs://my-store/deepep", "deepep-a4:artifactStoreManifest": "a" * 64}
    result, _ = plan_engine.run_program(rehearsal_stack.stack_name(name), rehearsal_stack.config(raw, cfg.name_prefix))
    return result.resources


def env_of(stack: str, type_: str, name: str, containers: str) -> set[str]:
    r = next(r for r in resources(stack) if r["type"] == type_ and r["name"] == name)
    container = r["inputs"]["spec"]["template"]["spec"][containers][0]
    return {e["name"] for e in container["env"] if e.get("value") or e.get("valueFrom")}


@pytest.mark.parametrize("stack", ["gke-b200", "gke-b200-ubuntu"])
def test_the_gke_probe_pods_carry_every_required_input(stack: str) -> None:
    stage = env_of(stack, "kubernetes:apps/v1:DaemonSet", "deepep-installer", "initContainers")
    assert required(rehearsal.PROBE_STAGE) <= stage, required(rehearsal.PROBE_STAGE) - stage
    peers = env_of(stack, "kubernetes:batch/v1:Job", "deepep-bench-internode", "containers")
    assert required(rehearsal.PROBE_INTERNODE, "peer") <= peers
    outsider = env_of(stack, "kubernetes:batch/v1:Job", "deepep-bench-rehearsal-outsider", "containers")
    assert required(rehearsal.PROBE_INTERNODE, "outsider") <= outsider


def test_the_gce_startup_script_and_the_build_step_carry_every_required_input() -> None:
    vm = next(r for r in resources("gce-b200") if r["type"] == "gcp:compute/instance:Instance")
    exported = set(re.findall(r"^export ([A-Z_]+)=", vm["inputs"]["metadata"]["startup-script"], re.M))
    assert required(rehearsal.PROBE_GCE_VM) <= exported, required(rehearsal.PROBE_GCE_VM) - exported
    _, _, cfg = plan.load_stack("gce-b200")
    cfg = replace(cfg, installer=replace(cfg.installer, store_url="gs://my-store/deepep"))
    step_env = {e.split("=", 1)[0] for e in build.request(cfg, "run-1").steps[0].env}
    assert required("probe_build.py") <= step_env


def test_required_reads_the_docstrings() -> None:
    assert {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE"} <= required(rehearsal.PROBE_INTERNODE, "peer")
    assert "RANK" not in required(rehearsal.PROBE_INTERNODE, "outsider")
    assert Path(rehearsal.PROBE_SOURCE / "probe_stage.py").is_file()

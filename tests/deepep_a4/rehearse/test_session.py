"""One rehearsal against fakes of the Pulumi stack, the cluster and Google (deepep_a4/rehearse/session.py): the
probes' lines become the checklist, the outsider starts only after rank 0 listens, the deadline is fired and
watched, and the teardown (destroy with refresh, then the stack removed) runs after a pass, a failed probe and
Ctrl-C alike. Needs the probes' side of the checks (scripts/rehearse/)."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest

pytest.importorskip("scripts.rehearse.probe_deadline")

from components import rehearsal
from deepep_a4.plan import command as plan
from deepep_a4.rehearse import stack as rehearsal_stack
from deepep_a4.rehearse.checklist import Checklist
from deepep_a4.rehearse.session import Clients, Session


def line(seam: str, ok: bool = True) -> str:
    return "REHEARSAL " + json.dumps(
        {"seam": seam, "status": "PASS" if ok else "FAIL", "evidence": "e", "seconds": 0.1}
    )


class FakeStack:
    name = "gke-b200-rehearsal"

    def __init__(self, outputs: dict[str, Any], interrupt_at: str = ""):
        self.calls: list[str] = []
        self._outputs, self.interrupt_at = outputs, interrupt_at

    def _call(self, what: str) -> None:
        self.calls.append(what)
        if what == self.interrupt_at:
            raise KeyboardInterrupt

    def preview(self, on_output: Any) -> None:
        self._call("preview")

    def up(self, on_output: Any) -> None:
        self._call("up")

    def outputs(self) -> dict[str, Any]:
        return self._outputs

    def destroy(self, on_output: Any) -> None:
        self._call("destroy")

    def remove(self) -> None:
        self._call("remove")


class Reads:
    def machine_type_offered(self, *a: Any, **k: Any) -> bool:
        return True

    def gpu_quota_metric(self, provisioning: str) -> str:
        return "PREEMPTIBLE_NVIDIA_B200_GPUS"

    def region_quotas(self, *a: Any, **k: Any) -> dict[str, tuple[float, float]]:
        return {"PREEMPTIBLE_NVIDIA_B200_GPUS": (8.0, 0.0)}  # fewer than two A4s need


class FakePods:
    def __init__(self, stage_ok: bool = True):
        self.resumed: list[str] = []
        self.stage_ok = stage_ok

    def logs(self, selector: str, container: str) -> dict[str, str]:
        if "installer" in selector:
            return {"stage-a": f"{line('stage-dns')}\n{line('stage-store', self.stage_ok)}", "stage-b": "no lines"}
        if "outsider" in selector:
            return {"outsider": line("internode-outsider")} if self.resumed else {"outsider": ""}
        return {"rank0": line("internode-rendezvous"), "rank1": f"{line('internode-dns')}\n{line('internode-hello')}"}

    def resume(self, job: str) -> None:
        self.resumed.append(job)


class Scheduler:
    def __init__(self) -> None:
        self.ran: list[str] = []

    def run_job(self, name: str) -> Any:
        self.ran.append(name)
        return type("Job", (), {"state": "ENABLED"})()


class Container:
    def get_node_pool(self, name: str) -> Any:
        from google.api_core import exceptions

        raise exceptions.NotFound("gone")


def cfg_of(stack: str) -> Any:
    name, raw, cfg = plan.load_stack(stack)
    reh = rehearsal_stack.config(raw, cfg.name_prefix)
    return replace(rehearsal.rehearsed(cfg), name_prefix=reh["deepep-a4:namePrefix"], stack=name + "-rehearsal")


def session(stack: FakeStack, pods: FakePods, account: str = "") -> tuple[Session, Scheduler]:
    cfg = cfg_of("gke-b200")
    who = account or rehearsal_stack.deadline_account(cfg)
    post = lambda url, body: {"entries": [{"protoPayload": {"authenticationInfo": {"principalEmail": who}}}]}  # noqa: E731
    sched = Scheduler()
    clients = Clients(reads=Reads(), scheduler=sched, container=Container(), logging_post=post, pods=lambda k, n: pods)
    s = Session(stack, cfg, Checklist("gke-b200", "h", "gke"), clients, say=lambda t: None, sleep=lambda t: None)
    return s, sched


OUTPUTS = {"kubeconfig": "{}", "benchNamespace": "deepep-a4", "clusterName": "c", "nodePool": "a4-highgpu-8g"}


def test_a_gke_rehearsal_collects_every_probe_fires_the_deadline_and_tears_down() -> None:
    stack, pods = FakeStack(OUTPUTS), FakePods()
    s, sched = session(stack, pods)
    sheet = s.run()
    got = {(x.seam, x.where): x.status for x in sheet.seams}
    assert got[("stage-dns", "stage-a")] == "PASS"
    assert got[("stage-probe", "stage-b")] == "FAIL"  # a pod without lines is a FAIL, never silent
    assert got[("internode-outsider", "outsider")] == "PASS" and pods.resumed == ["deepep-rehearsal-outsider"]
    assert got[("google-quota", "workstation")] == "FAIL"  # 8 GPUs free, two A4s need 16
    assert got[("deadline-pool", "workstation")] == "PASS"
    assert sched.ran and sched.ran[0].endswith("/jobs/deepep-gke-b200-rh-a4-deadline")
    assert stack.calls == ["preview", "up", "destroy", "remove"]
    assert sheet.teardown.startswith("destroyed") and not sheet.passed


def test_the_pool_deleted_by_another_principal_fails_the_deadline_seam() -> None:
    s, _ = session(FakeStack(OUTPUTS), FakePods(), account="someone@example.com")
    got = {x.seam: x.status for x in s.run().seams}
    assert got["deadline-pool"] == "FAIL"


@pytest.mark.parametrize("at", ["up", "preview"])
def test_ctrl_c_tears_down_whatever_up_made(at: str) -> None:
    stack = FakeStack(OUTPUTS, interrupt_at=at)
    s, _ = session(stack, FakePods())
    sheet = s.run()
    if at == "up":
        assert stack.calls == ["preview", "up", "destroy", "remove"]
    else:  # nothing was made: nothing to destroy
        assert stack.calls == ["preview"]
    assert any(x.seam == "rehearsal-complete" and x.status == "FAIL" for x in sheet.seams)


def test_a_failed_probe_still_tears_down() -> None:
    stack = FakeStack(OUTPUTS)
    s, _ = session(stack, FakePods(stage_ok=False))
    sheet = s.run()
    assert "destroy" in stack.calls and any(x.seam == "stage-store" and x.status == "FAIL" for x in sheet.seams)


class FakeCompute:
    """compute_v1.InstancesClient: the serial console and instances.get of the rehearsal's VMs."""

    def __init__(self, scheduling: dict[str, Any]):
        self.scheduling = scheduling
        self.gets = 0

    def get_serial_port_output(self, project: str, zone: str, instance: str, port: int) -> Any:
        text = "\n".join(f"startup-script: {line(s)}" for s in ("gce-dns", "gce-token", "gce-store", "gce-results"))
        return type("Out", (), {"contents": text})()

    def get(self, project: str, zone: str, instance: str) -> Any:
        self.gets += 1
        return {"name": instance, "status": "RUNNING", "scheduling": self.scheduling}


@pytest.mark.parametrize("action,ok", [("DELETE", True), ("STOP", False)])
def test_a_gce_rehearsal_reads_the_serial_console_and_checks_the_scheduling_block(action: str, ok: bool) -> None:
    cfg = cfg_of("gce-b200")
    asked = {"provisioningModel": "SPOT", "instanceTerminationAction": action, "maxRunDuration": {"seconds": "720"}}
    stack = FakeStack({"instanceNames": ["vm-0", "vm-1"]})
    clients = Clients(reads=Reads(), compute=FakeCompute(asked))
    s = Session(stack, cfg, Checklist("gce-b200", "h", "gce"), clients, say=lambda t: None, sleep=lambda t: None)
    got = {(x.seam, x.where): x.status for x in s.run().seams}
    assert got[("gce-results", "vm-1")] == "PASS"
    assert got[("gce-scheduling", "vm-0")] == ("PASS" if ok else "FAIL")  # the API kept what the plan asked
    assert stack.calls[-2:] == ["destroy", "remove"]

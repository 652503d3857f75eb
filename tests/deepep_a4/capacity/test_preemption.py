"""A preempted internode run restarts as a whole (deepep_a4/capacity/preemption.py): a rank is lost mid-test, the
watchdog ends every rank and starts the group again, bounded, and the report folder says so."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

from kubernetes import client

from deepep_a4.capacity import preemption
from deepep_a4.run import command as rb
from tests.deepep_a4.run.test_command import FakeProbe, FakeStack, ready

NS = "deepep-a4"
NOW = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)


def pod(name: str, node: str, disrupted: bool = False) -> client.V1Pod:
    """An internode pod as the API returns it; a preempted node's pod carries DisruptionTarget, set by the kubelet's
    graceful node shutdown (reason TerminationByKubelet: kubernetes.io/docs/concepts/workloads/pods/disruptions)."""
    conditions = [client.V1PodCondition(type="Ready", status="True")]
    if disrupted:
        conditions.append(
            client.V1PodCondition(
                type="DisruptionTarget",
                status="True",
                reason="TerminationByKubelet",
                message="Pod was terminated in response to imminent node shutdown.",
            )
        )
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, namespace=NS),
        spec=client.V1PodSpec(containers=[], node_name=node),
        status=client.V1PodStatus(phase="Running", conditions=conditions),
    )


class FakeCore:
    """CoreV1Api's two calls: each list answers from a script; an eviction is recorded."""

    def __init__(self, script: list[list[client.V1Pod]]):
        self.script, self.evicted, self.selectors = script, [], []

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> client.V1PodList:
        self.selectors.append(label_selector)
        items = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        return client.V1PodList(items=items)

    def create_namespaced_pod_eviction(self, name: str, namespace: str, body: client.V1Eviction) -> None:
        assert body.metadata is not None and body.metadata.name == name and namespace == NS
        self.evicted.append(name)


def benchmark_run(probe: Any, said: list[str], out: Path) -> rb.BenchmarkRun:
    settings = rb.Settings(keep=True, interactive=False, poll_seconds=1, out=out)
    return rb.BenchmarkRun(FakeStack([]), probe, settings, say=said.append, sleep=lambda _: None)


def test_a_lost_rank_restarts_the_whole_group_and_the_report_says_so(tmp_path: Path) -> None:
    healthy = [pod("deepep-bench-internode-0-a", "n0"), pod("deepep-bench-internode-1-b", "n1")]
    lost = [pod("deepep-bench-internode-0-a", "n0"), pod("deepep-bench-internode-1-b", "n1", disrupted=True)]
    again = [pod("deepep-bench-internode-0-c", "n0"), pod("deepep-bench-internode-1-d", "n2")]
    # Each poll lists twice when a rank is lost (lost_ranks, then restart_group).
    core = FakeCore([healthy, lost, lost, again])
    said: list[str] = []
    watchdog = preemption.Watchdog(preemption.GkeGroup(lambda _: core, NS), 1800, say=said.append, now=lambda: NOW)
    calls: list[str] = []
    probe = preemption.WatchedProbe(FakeProbe(calls, [ready(2)], [ready(0), ready(0), ready(2)]), watchdog)
    rc = benchmark_run(probe, said, tmp_path / "report").run()
    assert rc == rb.EXIT_PASS
    assert core.evicted == ["deepep-bench-internode-0-a", "deepep-bench-internode-1-b"]  # every rank, not one
    assert core.selectors[0] == "deepep-a4/test=internode"
    text = "\n".join(said)
    assert "internode restart 1/2: deepep-bench-internode-1-b: TerminationByKubelet on n1" in text
    assert "evicted every internode pod" in text
    doc = json.loads((tmp_path / "report" / preemption.RESTARTS_FILE).read_text())
    (restart,) = doc["restarts"]
    assert restart["causes"] == [
        "deepep-bench-internode-1-b: TerminationByKubelet on n1: Pod was terminated in response to imminent node "
        "shutdown."
    ]
    assert doc["maxRestarts"] == 2 and "notRestarted" not in doc
    # The report's own page says it too (deepep_a4/report/writers.py restarts_section).
    from deepep_a4.report import writers

    page = "\n".join(writers.restarts_section(tmp_path / "report"))
    assert "## Restarts" in page and "restart 1 at " in page and "TerminationByKubelet on n1" in page


class FakeOps:
    def __init__(self, lost: list[preemption.Lost]):
        self.lost, self.restarted = lost, 0

    def lost_ranks(self, outputs: dict[str, Any]) -> list[preemption.Lost]:
        return self.lost

    def restart_group(self, outputs: dict[str, Any], lost: list[preemption.Lost]) -> str:
        self.restarted += 1
        return "restarted"


def test_restarts_are_bounded_and_the_report_says_why_it_stopped(tmp_path: Path) -> None:
    ops = FakeOps([preemption.Lost("vm-1", "VM deleted")])
    said: list[str] = []
    watchdog = preemption.Watchdog(ops, 1800, max_restarts=2, say=said.append, now=lambda: NOW)
    for _ in range(4):
        watchdog.check({})
    assert ops.restarted == 2
    assert watchdog.gave_up.startswith("2 restarts already (the bound); lost again: vm-1: VM deleted")
    doc = json.loads(watchdog.write(tmp_path).read_text())
    assert len(doc["restarts"]) == 2 and doc["notRestarted"] == watchdog.gave_up


def test_no_restart_when_the_deadline_leaves_less_than_one_test() -> None:
    ops = FakeOps([preemption.Lost("vm-1", "VM deleted")])
    watchdog = preemption.Watchdog(ops, 1800, say=lambda _: None, now=lambda: NOW)
    watchdog.check({"deadline": (NOW + dt.timedelta(minutes=20)).isoformat()})
    assert ops.restarted == 0 and "leaves 20 min, less than one test" in watchdog.gave_up


class FakeInstances:
    """InstancesClient.get raises NotFound for a deleted VM, as the Compute API answers 404."""

    def __init__(self, deleted: set[str]):
        self.deleted, self.resets = deleted, []

    def get(self, project: str, zone: str, instance: str) -> Any:
        from google.api_core import exceptions

        if instance in self.deleted:
            raise exceptions.NotFound(
                f"The resource 'projects/{project}/zones/{zone}/instances/{instance}' was not found"
            )
        return object()

    def reset(self, project: str, zone: str, instance: str) -> None:
        self.resets.append(instance)


class RefreshStack:
    def __init__(self, instances: FakeInstances):
        self.instances, self.refreshed = instances, 0

    def refresh_up(self, on_output: Any) -> None:
        self.refreshed += 1
        self.instances.deleted.clear()  # `pulumi up --refresh` creates the deleted VM again


def test_gce_a_deleted_vm_is_recreated_with_up_refresh_and_the_survivor_reset() -> None:
    instances = FakeInstances({"deepep-gce-vm-1"})
    stack = RefreshStack(instances)
    said: list[str] = []
    group = preemption.GceGroup("deepep-a4-demo", stack, instances)
    watchdog = preemption.Watchdog(group, 1800, say=said.append, now=lambda: NOW)
    outputs = {"instanceNames": ["deepep-gce-vm-0", "deepep-gce-vm-1"], "zone": "asia-southeast1-b"}
    watchdog.check(outputs)
    watchdog.check(outputs)  # back: nothing more to do
    assert stack.refreshed == 1 and instances.resets == ["deepep-gce-vm-0"]
    (restart,) = watchdog.restarts
    assert restart.causes == ["deepep-gce-vm-1: VM deleted (spot preemption, terminationAction DELETE)"]
    assert "pulumi up --refresh recreated deepep-gce-vm-1; reset deepep-gce-vm-0" in said[0]

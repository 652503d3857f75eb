"""`deepep-a4 run` records each node's bring-up times: the run's console and results folder, and the probes
that read them from GKE (kubernetes client) and GCE (the stack's state and the bucket's status files)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k

from components.gke import objects as gke_objects
from deepep_a4 import expected_times as bringup_table
from deepep_a4.run import command as rb
from deepep_a4.run import platforms as run_platforms
from deepep_a4.timeline import NodeTimeline
from tests.deepep_a4.run.test_command import OUTPUTS, REPORT_DIR, FakeProbe, ready, run
from tests.deepep_a4.test_timeline import INSTANCE, LOG_A, at, node, pod, terminated

# What the GCE probe's VMs reported: created 18:00:00.123Z, installer ready 18:03, first line 18:03:20.623.
VM0 = NodeTimeline("deepep-gce-b200-vm-0", created=at(0, 0.123), ready=at(3), installed=at(3), first_line=at(3, 20.623))
NO_STATUS = "the VM wrote no status to the bucket yet"
VM1 = NodeTimeline(
    "deepep-gce-b200-vm-1", created=at(0, 0.5), why=dict.fromkeys(("ready", "firstBenchmarkLine"), NO_STATUS)
)


@pytest.fixture(autouse=True)
def report_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """As in test_run_benchmark.py: a terminal, and the report in this test's own folder."""
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr(rb.run_preflight, "check", lambda *args, **kwargs: [])  # test_run_preflight.py's
    REPORT_DIR[:] = [tmp_path / "report"]
    yield REPORT_DIR[0]
    REPORT_DIR.clear()


class ReportingProbe(FakeProbe):
    """collect() writes what the report writes (results.json, report.md), as the real one does."""

    def collect(self, outputs: dict[str, Any], out: Path) -> int:
        out.mkdir(parents=True, exist_ok=True)
        (out / "results.json").write_text(json.dumps({"verdict": "PASS"}))
        (out / "report.md").write_text("# DeepEP on A4\n")
        return super().collect(outputs, out)


def test_the_run_prints_a_line_per_node_the_totals_and_the_table_and_writes_them(report_dir: Path) -> None:
    calls: list[str] = []
    probe = ReportingProbe(calls, [ready(2)], [ready(2)], nodes=[VM0, VM1])
    rc, said, _ = run([], calls, probe)
    assert rc == rb.EXIT_PASS and calls[-3:] == ["collect", "timeline", "destroy"]
    text = "\n".join(said)
    table = bringup_table.expected_bringup("gce", "supported").total
    assert (
        "collect: bring-up node deepep-gce-b200-vm-0: created 2026-11-25T18:00:00.123Z; created->ready 180 s, "
        "ready->first line 21 s, created->first line 200 s"
    ) in text
    assert "bring-up node deepep-gce-b200-vm-1: created 2026-11-25T18:00:00.500Z; created->ready not recorded " in text
    assert "bring-up totals over 2 node(s): created->ready 180 s" in text
    assert (
        f"bring-up created->first line (gce, supported): measured 200 s vs table {table[0]:.0f}-{table[1]:.0f} s, "
        "1 of 2 nodes recorded"
    ) in text
    assert f"bring-up times in {report_dir / 'timeline.json'}" in text
    doc = json.loads((report_dir / "timeline.json").read_text())
    assert doc["stack"] == "gce-b200" and doc["profile"] == "supported" and doc["table"]["total"] == list(table)
    assert doc["nodes"][0]["seconds"]["createdToFirstLine"] == 200.5
    assert doc["nodes"][1]["firstBenchmarkLine"] == "not recorded"
    assert json.loads((report_dir / "results.json").read_text())["bringUp"] == doc
    assert "## Bring-up per node" in (report_dir / "report.md").read_text()


def test_times_that_cannot_be_read_are_said_and_the_run_goes_on_to_the_destroy(report_dir: Path) -> None:
    calls: list[str] = []
    probe = FakeProbe(calls, [ready(2)], [ready(2)], nodes=RuntimeError("cluster unreachable"))
    rc, said, _ = run([], calls, probe)
    assert rc == rb.EXIT_PASS and calls[-2:] == ["timeline", "destroy"]
    assert any("bring-up times not recorded: RuntimeError: cluster unreachable" in line for line in said)
    assert not (report_dir / "timeline.json").exists()


# -- GKE: Nodes, installer pods and the benchmark pods' logs through CoreV1Api ---------------------------------


class FakeCoreV1:
    """The CoreV1Api calls the probe makes, answering with the client's own models."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, Any]] = []

    def list_node(self, label_selector: str) -> k.V1NodeList:
        self.asked.append(("nodes", label_selector))
        return k.V1NodeList(items=[node("gke-a4-a", at(0), at(1, 35))])

    def list_namespaced_pod(self, namespace: str, label_selector: str) -> k.V1PodList:
        self.asked.append(("pods", (namespace, label_selector)))
        if "deepep-installer" in label_selector:
            return k.V1PodList(items=[pod("deepep-installer-1", "gke-a4-a", [terminated("install", at(3, 30))])])
        return k.V1PodList(items=[pod("deepep-intranode-0-x", "gke-a4-a"), pod("deepep-internode-0-z", "gke-a4-a")])

    def read_namespaced_pod_log(self, name: str, namespace: str, **kw: Any) -> str:
        self.asked.append(("log", (name, kw)))
        if name == "deepep-internode-0-z":
            raise RuntimeError("container is waiting to start")
        return LOG_A


def test_the_gke_probe_reads_nodes_installer_pods_and_the_first_log_line_with_timestamps() -> None:
    core = FakeCoreV1()
    probe = run_platforms.GkeProbe(rb.stack_cfg("gke-b200"), apis=(None, None), core=core)
    (t,) = probe.timeline({"benchNamespace": "deepep-a4"}, [])
    assert (t.created, t.ready, t.installed, t.first_line) == (at(0), at(1, 35), at(3, 30), at(4, 10.25))
    assert ("nodes", "deepep-a4/node-pool=a4") in core.asked
    assert ("pods", ("deepep-a4", "app.kubernetes.io/name=deepep-installer")) in core.asked
    assert ("pods", ("deepep-a4", "app.kubernetes.io/part-of=deepep-a4,app.kubernetes.io/component=benchmark")) in (
        core.asked
    )
    logs = [asked[1][1] for asked in core.asked if asked[0] == "log"]
    assert logs[0] == {"container": "bench", "timestamps": True, "limit_bytes": run_platforms.LOG_HEAD_BYTES}


def test_the_probes_selectors_are_the_labels_the_program_sets() -> None:
    assert (
        run_platforms.INSTALLER_SELECTOR
        == "app.kubernetes.io/name=" + gke_objects.INSTALLER_LABELS["app.kubernetes.io/name"]
    )
    ((key, value),) = gke_objects.NODE_SELECTOR.items()
    assert run_platforms.A4_NODE_SELECTOR == f"{key}={value}"


# -- GCE: the instances in the stack's state, the VMs' status in the bucket ----------------------------------


def test_the_gce_probe_takes_creation_from_the_state_and_the_rest_from_the_vms_status() -> None:
    docs = {
        0: {
            "state": "done",
            "installerReady": "2026-11-25T18:03:00Z",
            "firstBenchmarkLine": "2026-11-25T18:03:20.623Z",
        },
    }

    def runner(cmd: list[str]) -> tuple[int, str]:
        rank = int(cmd[-1].split("/node-")[1].split("/")[0])
        return (0, json.dumps(docs[rank])) if rank in docs else (1, "")

    state = [
        {
            "type": "gcp:compute/instance:Instance",
            "outputs": {"name": f"deepep-gce-b200-vm-{r}", "creationTimestamp": INSTANCE["creationTimestamp"]},
        }
        for r in (0, 1)
    ]
    probe = run_platforms.GceProbe(rb.stack_cfg("gce-b200"), runner=runner)
    a, b = probe.timeline(OUTPUTS, state)
    assert a.seconds("createdToFirstLine") == 200.5 and a.ready == at(3)
    assert b.ready is None and b.why["ready"] == "the VM wrote no status to the bucket yet"


def test_the_automation_stack_lists_the_resources_of_its_state() -> None:
    from pulumi.automation import Deployment

    class Auto:
        def export_stack(self) -> Deployment:
            return Deployment(version=3, deployment={"resources": [{"type": "pulumi:pulumi:Stack"}, {"type": "x"}]})

    stack = object.__new__(run_platforms.AutomationStack)
    stack._stack = Auto()  # type: ignore[assignment]
    assert stack.resources() == [{"type": "pulumi:pulumi:Stack"}, {"type": "x"}]
    empty = object.__new__(run_platforms.AutomationStack)
    empty._stack = type("E", (), {"export_stack": lambda self: Deployment(version=3, deployment=None)})()  # type: ignore[assignment]
    assert empty.resources() == []

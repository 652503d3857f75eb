"""Bring-up times per node (deepep_a4/timeline.py) from what GKE and GCE report, offline.

The Kubernetes objects are built with the kubernetes client's own models (kubernetes==37.0.2:
kubernetes/client/models/v1_node.py, v1_node_condition.py, v1_pod.py, v1_container_status.py,
v1_container_state_terminated.py) and handed over as `to_dict()` (snake_case, datetimes) or as the API's
JSON (`ApiClient().sanitize_for_serialization`, camelCase, RFC 3339 strings), the field names of the
Kubernetes API reference: Node v1 `metadata.creationTimestamp`, `status.conditions[].type/status/
lastTransitionTime` (https://kubernetes.io/docs/reference/kubernetes-api/cluster-resources/node-v1/),
Pod v1 `spec.nodeName`, `status.initContainerStatuses[].state.terminated.exitCode/finishedAt`, and the
pod log's `timestamps` ("add an RFC3339 or RFC3339Nano timestamp at the beginning of every line",
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/). The GCE instance is a
compute v1 Instance (https://cloud.google.com/compute/docs/reference/rest/v1/instances: `creationTimestamp`
"[Output Only] Creation timestamp in RFC3339 text format.", which GCE writes with the zone's offset).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k

from deepep_a4 import timeline as tl
from deepep_a4.expected_times import Expected

UTC = dt.UTC


def at(minute: int, second: float = 0) -> dt.datetime:
    whole = int(second)
    return dt.datetime(2026, 11, 25, 18, minute, whole, round((second - whole) * 1e6), tzinfo=UTC)


def node(name: str, created: dt.datetime, ready: dt.datetime | None, ready_status: str = "True") -> k.V1Node:
    conditions = [
        k.V1NodeCondition(type="MemoryPressure", status="False", last_transition_time=created),
        k.V1NodeCondition(type="Ready", status=ready_status, last_transition_time=ready or created),
    ]
    return k.V1Node(
        metadata=k.V1ObjectMeta(name=name, creation_timestamp=created, labels={"deepep-a4/node-pool": "a4"}),
        status=k.V1NodeStatus(conditions=conditions),
    )


def terminated(name: str, finished: dt.datetime | None, code: int = 0) -> k.V1ContainerStatus:
    state = (
        k.V1ContainerState(terminated=k.V1ContainerStateTerminated(exit_code=code, finished_at=finished))
        if finished
        else k.V1ContainerState(running=k.V1ContainerStateRunning(started_at=at(1)))
    )
    return k.V1ContainerStatus(
        name=name, image="img", image_id="img@sha256:0", ready=False, restart_count=0, state=state
    )


def pod(
    name: str, node_name: str, inits: list[k.V1ContainerStatus] | None = None, ready: dt.datetime | None = None
) -> k.V1Pod:
    conditions = [k.V1PodCondition(type="Ready", status="True", last_transition_time=ready)] if ready else []
    return k.V1Pod(
        metadata=k.V1ObjectMeta(name=name, namespace="deepep-a4"),
        spec=k.V1PodSpec(node_name=node_name, containers=[k.V1Container(name="bench")]),
        status=k.V1PodStatus(phase="Running", conditions=conditions, init_container_statuses=inits or []),
    )


def as_json(obj: Any) -> dict[str, Any]:
    """The object as the API server sends it (camelCase, RFC 3339 strings)."""
    doc = k.ApiClient().sanitize_for_serialization(obj)
    assert isinstance(doc, dict)
    return doc


# The kubelet's RFC3339Nano prefix; the bench container's first line is the wrapper's (components/gke/bench.py).
LOG_A = (
    "2026-11-25T18:04:10.250000000Z [runner] env sourced /home/kubernetes/bin/deepep/unified-env.sh\n"
    "2026-11-25T18:04:11.000000000Z [runner] start "
    '{"host": "n-a", "tests": "intranode", "utc": "2026-11-25T18:04:11.000Z"}\n'
)


def gke_fixture(shape: str = "to_dict") -> list[tl.NodeTimeline]:
    nodes = [node("gke-a4-a", at(0), at(1, 35)), node("gke-a4-b", at(0, 2), None, ready_status="False")]
    installers = [
        pod("deepep-installer-1", "gke-a4-a", [terminated("install", at(3, 30))], ready=at(3, 45)),
        pod("deepep-installer-2", "gke-a4-b", [terminated("install", None)]),
    ]
    bench = [pod("deepep-intranode-0-x", "gke-a4-a"), pod("deepep-low-latency-0-y", "gke-a4-b")]
    heads = {"deepep-intranode-0-x": LOG_A, "deepep-low-latency-0-y": None}
    convert = (lambda o: o.to_dict()) if shape == "to_dict" else as_json
    return tl.gke_nodes(
        [convert(n) for n in nodes], [convert(p) for p in installers], [convert(p) for p in bench], heads
    )


@pytest.mark.parametrize("shape", ["to_dict", "api-json"])
def test_gke_times_come_from_the_node_the_installer_pod_and_the_kubelets_first_log_line(shape: str) -> None:
    a, b = gke_fixture(shape)
    assert a.node == "gke-a4-a" and (a.created, a.ready, a.installed) == (at(0), at(1, 35), at(3, 30))
    assert a.first_line == at(4, 10.25)  # the kubelet's time of the bench container's first line
    assert a.seconds("createdToReady") == 95 and a.seconds("readyToFirstLine") == 155.25
    assert a.seconds("createdToFirstLine") == 250.25 and a.seconds("installedToFirstLine") == 40.25
    # Not Ready, installer still running, no log yet: each says so, nothing is made up.
    assert (b.ready, b.installed, b.first_line) == (None, None, None)
    doc = b.to_dict()
    assert doc["ready"] == tl.NOT_RECORDED and doc["firstBenchmarkLine"] == tl.NOT_RECORDED
    assert doc["seconds"]["createdToReady"] is None and doc["created"] == "2026-11-25T18:00:02.000Z"
    assert "not Ready" in doc["notRecorded"]["ready"] and doc["notRecorded"]["firstBenchmarkLine"] == "no log line yet"
    assert doc["notRecorded"]["installed"] == "its installer pod is not done"


def test_the_installer_pods_ready_condition_stands_in_where_its_init_containers_did_not_all_finish() -> None:
    failed_once = pod("deepep-installer-1", "n", [terminated("install", at(3), code=75)], ready=at(5))
    assert tl._installer_finished(failed_once.to_dict()) == at(5)
    assert tl._installer_finished(pod("p", "n").to_dict()) is None


def test_first_log_time_reads_the_kubelet_prefix_else_the_runners_own_start_line() -> None:
    assert tl.first_log_time(LOG_A) == at(4, 10.25)
    runner_only = '[runner] start {"utc": "2026-11-25T18:04:11.000Z"}\n'
    assert tl.first_log_time(runner_only) == at(4, 11)
    assert tl.first_log_time("") is None and tl.first_log_time(None) is None
    assert tl.first_log_time("no time here\n") is None


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-25T10:00:00.123-08:00", at(0, 0.123)),  # GCE's creationTimestamp, with the zone's offset
        ("2026-11-25T18:00:00Z", at(0)),
        ("2026-11-25T18:00:00.123456789Z", at(0, 0.123456)),  # RFC3339Nano: cut to microseconds
        ("2026-11-25T18:00:00", None),  # no zone: no measurement
        ("yesterday", None),
        (None, None),
    ],
)
def test_parse_time(text: str | None, expected: dt.datetime | None) -> None:
    assert tl.parse_time(text) == expected


# compute v1 Instance, as `instances.get` returns it (trimmed).
INSTANCE = {
    "kind": "compute#instance",
    "id": "4410284923372312345",
    "name": "deepep-gce-b200-vm-0",
    "creationTimestamp": "2026-11-25T10:00:00.123-08:00",
    "status": "RUNNING",
    "lastStartTimestamp": "2026-11-25T10:00:41.532-08:00",
    "labels": {"deepep-a4-stack": "gce-b200", "deepep-a4-platform": "gce", "deepep-a4-rank": "0"},
    "machineType": "https://www.googleapis.com/compute/v1/projects/p/zones/asia-southeast1-b/machineTypes/a4-highgpu-8g",
}


def status_doc(rank: int, **times: str) -> dict[str, Any]:
    """What scripts/gce/bench_stage.py writes to runs/RUN_ID/node-R/status.json."""
    doc = {"state": "done", "rank": rank, "host": f"deepep-gce-b200-vm-{rank}", "updated": "2026-11-25T18:30:00Z"}
    return doc | times


def test_gce_times_come_from_the_instance_and_the_vms_status_in_the_bucket() -> None:
    vm1 = {**INSTANCE, "name": "deepep-gce-b200-vm-1", "labels": {"deepep-a4-rank": "1"}}
    vm2 = {**INSTANCE, "name": "deepep-gce-b200-vm-2", "labels": {}}  # rank from the name
    statuses = {
        0: status_doc(0, installerReady="2026-11-25T18:03:00Z", firstBenchmarkLine="2026-11-25T18:03:20.623Z"),
        1: status_doc(1, installerReady="2026-11-25T18:04:00Z"),  # no test started yet
        2: None,  # never wrote a status
    }
    a, b, c = tl.gce_nodes([vm2, vm1, INSTANCE], statuses)
    assert [t.node for t in (a, b, c)] == ["deepep-gce-b200-vm-0", "deepep-gce-b200-vm-1", "deepep-gce-b200-vm-2"]
    assert a.created == at(0, 0.123) and a.ready == a.installed == at(3)
    assert (a.seconds("createdToReady"), a.seconds("readyToFirstLine"), a.seconds("createdToFirstLine")) == (
        179.877,
        20.623,
        200.5,
    )
    assert b.first_line is None and "no test started" in b.why["firstBenchmarkLine"]
    assert c.to_dict()["notRecorded"]["ready"] == "the VM wrote no status to the bucket yet"


def test_a_time_older_than_the_vm_is_an_earlier_vm_of_its_name_not_a_measurement() -> None:
    (t,) = tl.gce_nodes([INSTANCE], {0: status_doc(0, installerReady="2026-11-25T17:00:00Z")})
    assert t.installed is None and "older than this VM" in t.why["installed"]


def test_instances_from_the_pulumi_state_take_the_providers_creation_timestamp() -> None:
    resources = [
        {"urn": "urn:pulumi:gce-b200::deepep-a4::gcp:storage/bucket:Bucket::r", "type": "gcp:storage/bucket:Bucket"},
        {
            "urn": "urn:pulumi:gce-b200::deepep-a4::deepep:gce:A4Fleet$gcp:compute/instance:Instance::gce-vm-0",
            "type": "gcp:compute/instance:Instance",
            "outputs": {
                "name": "deepep-gce-b200-vm-0",
                "creationTimestamp": "2026-11-25T10:00:00.123-08:00",
                "currentStatus": "RUNNING",
                "labels": {"deepep-a4-rank": "0"},
            },
        },
    ]
    (inst,) = tl.instances_from_state(resources)
    assert inst == {
        "name": "deepep-gce-b200-vm-0",
        "creationTimestamp": "2026-11-25T10:00:00.123-08:00",
        "labels": {"deepep-a4-rank": "0"},
        "status": "RUNNING",
    }


EXPECTED = Expected("gke", "supported", known=(15.82, 16.93), total=(121.82, 376.93), estimated_steps=8)


def test_console_lines_one_per_node_then_the_totals_then_the_table() -> None:
    nodes = gke_fixture()
    doc = tl.document(nodes, "gke-b200", "gke", "supported", EXPECTED, now=at(30))
    lines = tl.console_lines(doc, nodes)
    assert lines[0] == (
        "node gke-a4-a: created 2026-11-25T18:00:00.000Z; created->ready 95 s, ready->first line 155 s, "
        "created->first line 250 s"
    )
    assert lines[1].startswith("node gke-a4-b: created 2026-11-25T18:00:02.000Z; created->ready not recorded (")
    assert lines[2] == (
        "totals over 2 node(s): created->ready 95 s, ready->first line 155 s, created->first line 250 s"
    )
    assert lines[3] == (
        "created->first line (gke, supported): measured 250 s vs table 122-377 s, 1 of 2 nodes recorded; "
        "within the table"
    )
    assert doc["totals"]["createdToFirstLine"] == [250.25, 250.25] and doc["table"]["total"] == [121.82, 376.93]


@pytest.mark.parametrize(("seconds", "says"), [(100.0, "below the table"), (400.0, "above the table")])
def test_the_comparison_says_where_the_measurement_falls(seconds: float, says: str) -> None:
    t = tl.NodeTimeline("n", created=at(0), first_line=at(0) + dt.timedelta(seconds=seconds))
    assert tl.compare([t], EXPECTED).endswith(says)
    assert tl.compare([tl.NodeTimeline("n")], EXPECTED) == (
        "created->first line (gke, supported): measured not recorded vs table 122-377 s"
    )
    assert tl.compare([t], None) == f"created->first line: measured {seconds:.0f} s vs no table total"


def test_write_puts_the_times_into_the_results_folder(tmp_path: Path) -> None:
    (tmp_path / "results.json").write_text(json.dumps({"verdict": "PASS"}))
    (tmp_path / "report.md").write_text("# DeepEP on A4\n")
    nodes = gke_fixture()
    doc = tl.document(nodes, "gke-b200", "gke", "supported", EXPECTED, now=at(30))
    path = tl.write(tmp_path, doc, tl.console_lines(doc, nodes))
    assert path == tmp_path / "timeline.json"
    saved = json.loads(path.read_text())
    assert saved["kind"] == tl.KIND and saved["recorded"] == "2026-11-25T18:30:00.000Z"
    assert saved["nodes"][0]["firstBenchmarkLine"] == "2026-11-25T18:04:10.250Z"
    assert json.loads((tmp_path / "results.json").read_text()) == {"verdict": "PASS", "bringUp": saved}
    report = (tmp_path / "report.md").read_text()
    assert "## Bring-up per node" in report and "- node gke-a4-a: created" in report
    # Without a report (nothing collected), timeline.json alone.
    alone = tl.write(tmp_path / "none", doc, [])
    assert alone.is_file() and sorted(p.name for p in alone.parent.iterdir()) == ["timeline.json"]

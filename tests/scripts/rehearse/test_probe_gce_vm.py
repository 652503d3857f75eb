"""The GCE VM's probe against its stand-ins, and the scheduling check against Instance resources as the Compute
API answers them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from scripts.rehearse import common, probe_gce_vm
from tests.fixtures.rehearse.gcs_iam import READ, VIEWER_AND_CREATOR, Grant
from tests.scripts.rehearse.conftest import RESULTS_BUCKET, STORE_BUCKET, STORE_PREFIX, World, evidence_of, status_of

VM = "deepep-a4-vm@demo-project.iam.gserviceaccount.com"
SEAMS = ["gce-dns", "gce-token", "gce-store", "gce-results"]


@pytest.fixture
def vm(world: World) -> World:
    world.metadata.email = VM
    world.gcs.tokens = {world.metadata.token: VM}
    world.gcs.grants = [
        Grant(VM, STORE_BUCKET, STORE_PREFIX, READ),
        Grant(VM, RESULTS_BUCKET, "", VIEWER_AND_CREATOR),  # objectAdmin on the stack's own bucket
    ]
    world.env |= {"REHEARSAL_EXPECT_EMAIL": VM, "REHEARSAL_RESULTS_URL": f"gs://{RESULTS_BUCKET}"}
    return world


def run(vm: World, **env: str) -> list[dict[str, object]]:
    rc, lines = vm.run(lambda env, out: probe_gce_vm.main([], env=env, out=out), **env)
    assert rc == 0
    return lines


def test_every_seam_passes_against_the_stand_ins(vm: World) -> None:
    lines = run(vm)
    assert [ln["seam"] for ln in lines] == SEAMS
    assert set(status_of(lines).values()) == {"PASS"}, lines
    assert f"gs://{RESULTS_BUCKET}/rehearsal/r1/" in evidence_of(lines, "gce-results")
    assert vm.metadata.token not in repr(lines)


def test_no_results_grant_fails_gce_results(vm: World) -> None:
    vm.gcs.grants = vm.gcs.grants[:1]
    lines = run(vm)
    assert status_of(lines) == {"gce-dns": "PASS", "gce-token": "PASS", "gce-store": "PASS", "gce-results": "FAIL"}
    assert "-> 403" in evidence_of(lines, "gce-results")
    assert "does not have storage.objects.create access" in evidence_of(lines, "gce-results")


def test_no_dns_fails_gce_dns(vm: World) -> None:
    vm.hosts.write_text("")
    assert status_of(run(vm))["gce-dns"] == "FAIL"


def test_a_refused_token_fails_gce_token_and_what_needs_it(vm: World) -> None:
    vm.metadata.token_status = 403
    assert status_of(run(vm)) == {"gce-dns": "PASS", "gce-token": "FAIL", "gce-store": "FAIL", "gce-results": "FAIL"}


def test_a_wrong_pin_fails_gce_store(vm: World) -> None:
    assert status_of(run(vm, REHEARSAL_STORE_MANIFEST="e" * 64))["gce-store"] == "FAIL"


# -- gce-scheduling: the Instance resource as compute.instances.get answers it ------------------------------

WANT = {
    "provisioningModel": "SPOT",
    "preemptible": True,
    "automaticRestart": False,
    "onHostMaintenance": "TERMINATE",
    "instanceTerminationAction": "DELETE",
    "terminationTime": "2026-12-02T16:00:00Z",
    "maxRunDuration": {"seconds": 3600},
}
# The REST answer: int64 as a string, the instant in another spelling (the Compute API's reference,
# https://cloud.google.com/compute/docs/reference/rest/v1/instances: maxRunDuration.seconds is "string (int64
# format)", terminationTime is an RFC 3339 text).
INSTANCE = {
    "name": "rehearsal-vm-0",
    "scheduling": {
        "provisioningModel": "SPOT",
        "preemptible": True,
        "automaticRestart": False,
        "onHostMaintenance": "TERMINATE",
        "instanceTerminationAction": "DELETE",
        "terminationTime": "2026-12-02T08:00:00.000-08:00",
        "maxRunDuration": {"seconds": "3600"},
    },
}


def test_the_scheduling_block_as_asked_passes() -> None:
    assert "as asked (provisioningModel" in probe_gce_vm.check_scheduling(INSTANCE, WANT)


@pytest.mark.parametrize(
    ("field", "got"),
    [
        ("instanceTerminationAction", "STOP"),
        ("terminationTime", "2026-12-02T17:00:00Z"),
        ("maxRunDuration", {"seconds": "7200"}),
        ("provisioningModel", "STANDARD"),
        ("terminationTime", None),
    ],
)
def test_a_scheduling_field_the_api_did_not_keep_fails(field: str, got: object) -> None:
    instance = json.loads(json.dumps(INSTANCE))
    instance["scheduling"][field] = got
    with pytest.raises(common.SeamFailedError, match=f"{field}: asked"):
        probe_gce_vm.check_scheduling(instance, WANT)


def test_the_scheduling_check_runs_from_the_command_line(tmp_path: Path) -> None:
    (tmp_path / "i.json").write_text(json.dumps(INSTANCE))
    (tmp_path / "w.json").write_text(json.dumps(WANT | {"instanceTerminationAction": "STOP"}))
    out = io.StringIO()
    argv = ["--scheduling", str(tmp_path / "i.json"), "--want", str(tmp_path / "w.json")]
    assert probe_gce_vm.main(argv, out=out) == 0
    line = common.parse_line(out.getvalue().strip())
    assert line and (line["seam"], line["status"]) == ("gce-scheduling", "FAIL")
    assert "instanceTerminationAction: asked 'STOP', got 'DELETE'" in str(line["evidence"])

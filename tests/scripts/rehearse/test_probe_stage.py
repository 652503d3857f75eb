"""The staging pod's probe against its stand-ins: every seam PASSes on a sound setup and FAILs when it is broken."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest

from scripts.rehearse import probe_stage
from tests.scripts.rehearse.conftest import PART, Kube, World, evidence_of, status_of

ROOT = Path(__file__).resolve().parents[3]
SEAMS = ["stage-dns", "stage-token", "stage-store", "stage-node-label", "stage-denied"]
NODE = "gke-rehearsal-a4-1"


def closed_port() -> int:
    """A port on 127.0.0.1 that nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def stage_env(world: World, kube: Kube) -> dict[str, str]:
    return world.env | {
        "NODE_NAME": NODE,
        "REHEARSAL_NODE_LABEL": "deepep-a4/rehearsal=r1",
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(kube.port),
        "REHEARSAL_SA_DIR": str(kube.sa_dir),
        "REHEARSAL_DENIED": f"127.0.0.1:{closed_port()}",
        "REHEARSAL_CONNECT_TIMEOUT_S": "2",
    }


@pytest.fixture
def staged(world: World, kube: Kube) -> World:
    world.env = stage_env(world, kube)
    return world


def test_every_seam_passes_against_the_stand_ins(staged: World, kube: Kube) -> None:
    rc, lines = staged.run(probe_stage.main)
    assert rc == 0
    assert [ln["seam"] for ln in lines] == SEAMS
    assert set(status_of(lines).values()) == {"PASS"}, lines
    assert kube.api.nodes[NODE]["metadata"]["labels"]["deepep-a4/rehearsal"] == "r1"
    assert kube.api.requests == [f"PATCH /api/v1/nodes/{NODE} application/merge-patch+json"]
    assert PART in evidence_of(lines, "stage-store")
    assert "demo-project.svc.id.goog" in evidence_of(lines, "stage-token")
    # No secret in the evidence: neither the Google token nor the Kubernetes one.
    text = repr(lines)
    assert staged.metadata.token not in text and kube.api.token not in text
    assert all(isinstance(ln["seconds"], float) for ln in lines)


def test_no_dns_fails_stage_dns(staged: World) -> None:
    staged.hosts.write_text("127.0.0.1 metadata.google.internal\n")
    _, lines = staged.run(probe_stage.main)
    assert status_of(lines)["stage-dns"] == "FAIL"
    assert "storage.googleapis.com" in evidence_of(lines, "stage-dns")


def test_a_refused_token_fails_stage_token_and_the_store_is_not_tried(staged: World) -> None:
    staged.metadata.token_status = 403
    _, lines = staged.run(probe_stage.main)
    assert status_of(lines) | {} == {
        "stage-dns": "PASS",
        "stage-token": "FAIL",
        "stage-store": "FAIL",
        "stage-node-label": "PASS",
        "stage-denied": "PASS",
    }
    assert "-> 403" in evidence_of(lines, "stage-token")


def test_another_principal_fails_stage_token(staged: World) -> None:
    staged.metadata.email = "123-compute@developer.gserviceaccount.com"  # the node's account: no Workload Identity
    _, lines = staged.run(probe_stage.main)
    assert status_of(lines)["stage-token"] == "FAIL"
    assert "another principal" in evidence_of(lines, "stage-token")


def test_a_manifest_with_another_sha256_fails_stage_store(staged: World) -> None:
    _, lines = staged.run(probe_stage.main, REHEARSAL_STORE_MANIFEST="0" * 64)
    assert status_of(lines)["stage-store"] == "FAIL"
    assert "-> 404" in evidence_of(lines, "stage-store")
    # The manifest is there but its bytes are not the pin (a tampered manifest under the pinned name).
    sha = staged.store.manifest_sha
    from tests.scripts.rehearse.conftest import STORE_BUCKET, STORE_PREFIX, put

    put(staged.emulator_port, STORE_BUCKET, f"{STORE_PREFIX}/manifests/{sha}.txt", b"0" * 64 + b"  " + PART.encode())
    _, lines = staged.run(probe_stage.main)
    assert status_of(lines)["stage-store"] == "FAIL"
    assert f"not the pinned {sha}" in evidence_of(lines, "stage-store")


def test_a_part_with_another_sha256_fails_stage_store(staged: World) -> None:
    staged.store.publish({PART: b"corrupt"}, listed={PART: "f" * 64})
    _, lines = staged.run(probe_stage.main, REHEARSAL_STORE_MANIFEST=staged.store.manifest_sha)
    assert status_of(lines)["stage-store"] == "FAIL"
    assert "but the manifest lists " + "f" * 64 in evidence_of(lines, "stage-store")


def test_no_store_grant_fails_stage_store(staged: World) -> None:
    staged.gcs.grants.clear()
    _, lines = staged.run(probe_stage.main)
    assert status_of(lines)["stage-store"] == "FAIL"
    assert "does not have storage.objects.get access" in evidence_of(lines, "stage-store")


def test_a_refused_label_patch_fails_stage_node_label(staged: World, kube: Kube) -> None:
    kube.api.allowed = {"get"}
    _, lines = staged.run(probe_stage.main)
    assert status_of(lines)["stage-node-label"] == "FAIL"
    assert 'Forbidden: nodes "gke-rehearsal-a4-1" is forbidden: User' in evidence_of(lines, "stage-node-label")


def test_an_untrusted_api_server_fails_stage_node_label(staged: World, kube: Kube, tmp_path: Path) -> None:
    from tests.fixtures.rehearse.serve import self_signed

    other, _ = self_signed(tmp_path)
    (kube.sa_dir / "ca.crt").write_bytes(other.read_bytes())
    _, lines = staged.run(probe_stage.main)
    assert status_of(lines)["stage-node-label"] == "FAIL"
    assert "CERTIFICATE_VERIFY_FAILED" in evidence_of(lines, "stage-node-label")
    assert kube.api.requests == []


def test_a_reachable_denied_address_fails_stage_denied(staged: World) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listening:
        port = listening.getsockname()[1]
        _, lines = staged.run(probe_stage.main, REHEARSAL_DENIED=f"127.0.0.1:{port}")
    assert status_of(lines)["stage-denied"] == "FAIL"
    assert "connected: the egress policy let it through" in evidence_of(lines, "stage-denied")


def test_a_missing_input_is_exit_2_with_no_line(staged: World, capsys: pytest.CaptureFixture[str]) -> None:
    rc, lines = staged.run(probe_stage.main, NODE_NAME="")
    assert (rc, lines) == (2, [])
    assert "NODE_NAME is not set" in capsys.readouterr().err


def test_it_runs_as_a_plain_file_with_the_standard_library_only(staged: World) -> None:
    # -E -s -S: no site-packages and no PYTHONPATH, so no project on sys.path: the pod has only these files.
    probe = ROOT / "scripts" / "rehearse" / "probe_stage.py"
    proc = subprocess.run(
        [sys.executable, "-E", "-s", "-S", str(probe)], env=staged.env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert [ln.split('"')[3] for ln in proc.stdout.splitlines()] == SEAMS
    assert proc.stdout.count('"status": "PASS"') == len(SEAMS), proc.stdout

"""The checklist (deepep_a4/rehearse/checklist.py) and `run`'s gate (gate.py): the settings hash leaves out what
the rehearsal does not prove (the zone within the region), a FAIL names its troubleshooting entry, and `run`
rehearses first unless these settings passed, or warns with --skip-rehearsal."""

from __future__ import annotations

import json
from pathlib import Path

from deepep_a4.rehearse import checklist as checklists
from deepep_a4.rehearse import gate
from deepep_a4.run import command as rb
from tests.conftest import stack_config


def test_the_hash_leaves_out_the_zone_and_keeps_what_the_rehearsal_proves() -> None:
    base = checklists.settings_hash(stack_config("gke-b200"))
    assert checklists.settings_hash(stack_config("gke-b200", zone="asia-southeast1-c")) == base
    assert checklists.settings_hash(stack_config("gke-b200", cudaVersion="12.8")) == base
    assert checklists.settings_hash(stack_config("gke-b200", region="us-central1")) != base
    assert checklists.settings_hash(stack_config("gke-b200", artifactStoreManifest="b" * 64)) != base
    assert checklists.settings_hash(stack_config("gke-b200", podsCidr="10.12.0.0/14")) != base
    # A default written out is the same setting.
    assert checklists.settings_hash(stack_config("gke-b200", sshViaIap=True)) == base


def test_lines_with_a_console_prefix_parse_and_a_fail_names_its_troubleshooting_entry(monkeypatch) -> None:
    monkeypatch.setattr(checklists, "seam_table", lambda: {"stage-dns": {"title": "DNS", "troubleshooting": "T28"}})
    text = "\n".join(
        [
            "noise",
            'google_metadata_script_runner[1]: startup-script: REHEARSAL {"seam": "stage-dns", "status": "FAIL", '
            '"evidence": "getaddrinfo storage.googleapis.com: timed out", "seconds": 5.0}',
            'REHEARSAL {"seam": "stage-token", "status": "PASS", "evidence": "ok", "seconds": 0.1}',
            "REHEARSAL {not json",
        ]
    )
    seams = checklists.parse(text, "pod-a")
    assert [(s.seam, s.status, s.troubleshooting) for s in seams] == [
        ("stage-dns", "FAIL", "T28"),
        ("stage-token", "PASS", ""),
        ("unreadable-line", "FAIL", ""),
    ]


def test_the_checklist_is_kept_under_the_hash_and_run_reads_it(tmp_path: Path) -> None:
    raw = stack_config("gke-b200")
    sheet = checklists.Checklist("gke-b200", checklists.settings_hash(raw), "gke")
    sheet.add([checklists.seam("policy-pack", True, "no violation", 1.0)])
    md = checklists.write(sheet, tmp_path)
    assert "PASSED" in md.read_text() and "| policy-pack" in md.read_text()
    doc = json.loads((md.parent / "checklist.json").read_text())
    assert doc["passed"] and "zone" in doc["notProven"]
    assert checklists.passed("gke-b200", raw, tmp_path)
    assert checklists.passed("gke-b200", {**raw, "deepep-a4:zone": "asia-southeast1-c"}, tmp_path)
    assert not checklists.passed("gke-b200", {**raw, "deepep-a4:region": "us-east4"}, tmp_path)
    failed = checklists.Checklist("gke-b200", checklists.settings_hash(raw), "gke")
    failed.add([checklists.seam("policy-pack", False, "violation", 1.0)])
    checklists.write(failed, tmp_path)
    assert not checklists.passed("gke-b200", raw, tmp_path)


def test_run_rehearses_first_and_stops_when_the_rehearsal_fails(tmp_path: Path) -> None:
    said: list[str] = []
    asked: list[str] = []

    def rehearse(stack: str) -> int:
        asked.append(stack)
        return 1

    assert gate.before_run("gce-b200", False, said.append, rehearse, root=gate.ROOT) == 1
    assert asked == ["gce-b200"] and any("rehearsal FAILED" in line for line in said)
    said.clear()
    assert gate.before_run("gce-b200", True, said.append, rehearse) is None  # --skip-rehearsal
    assert asked == ["gce-b200"] and said[0].startswith("WARNING: --skip-rehearsal")


def test_run_has_the_skip_flag_and_calls_the_gate_once() -> None:
    import inspect

    src = inspect.getsource(rb.execute)
    assert src.count("rehearse_gate.before_run(") == 1
    assert "--skip-rehearsal" in inspect.getsource(rb)


def test_the_hash_leaves_out_what_the_rehearsal_does_not_prove_and_keeps_the_rest() -> None:
    """NOT_PROVEN comes from the config model (its version keys, NVSHMEM's runtime group, the benchmarks' sizes),
    so a key added there is left out with its group; every other key, `benchmarks` included, is hashed."""
    from components.config.keys import KEYS
    from deepep_a4.rehearse import checklist

    names = {k.name for k in KEYS}
    assert checklist.NOT_PROVEN <= names
    assert {"cudaVersion", "nicHandler", "intranodeTokens", "benchTopk", "zone"} <= checklist.NOT_PROVEN
    assert not {"benchmarks", "hostCidr", "artifactStore", "nodeCount", "platform"} & checklist.NOT_PROVEN
    base = checklist.settings_hash({"deepep-a4:zone": "asia-southeast1-b"})
    assert checklist.settings_hash({"deepep-a4:zone": "asia-southeast1-c"}) == base
    assert checklist.settings_hash({"deepep-a4:benchmarks": '["intranode"]'}) != base

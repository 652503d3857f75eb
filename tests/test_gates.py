"""The quality gates' own checks: each must fail on the problem it guards against (no network, no checkov)."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from ci.gates import crd_to_schema, k8s_schemas, security
from tests.conftest import ROOT, plan

DEFS = k8s_schemas._definitions("1.33")

JOB: dict[str, Any] = {
    "apiVersion": "batch/v1",
    "kind": "Job",
    "metadata": {"name": "bench", "namespace": "deepep-a4", "annotations": {"checkov.io/skip1": "CKV_K8S_16=why"}},
    "spec": {
        "backoffLimit": 0.0,  # the mock engine hands numbers over as floats: still an integer
        "template": {
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "bench",
                        "image": "ubuntu:24.04",
                        "securityContext": {"capabilities": {"drop": ["ALL"], "add": ["IPC_LOCK"]}},
                        "resources": {"limits": {"nvidia.com/gpu": 8}},
                    }
                ],
            }
        },
    },
}
PARAMS: dict[str, Any] = {
    "apiVersion": "networking.gke.io/v1",
    "kind": "GKENetworkParamSet",
    "metadata": {"name": "rdma-0"},
    "spec": {"vpc": "net", "vpcSubnet": "net-0", "deviceMode": "RDMA"},
}
NETWORK: dict[str, Any] = {
    "apiVersion": "networking.gke.io/v1",
    "kind": "Network",
    "metadata": {"name": "rdma-0"},
    "spec": {
        "type": "Device",
        "parametersRef": {"group": "networking.gke.io", "kind": "GKENetworkParamSet", "name": "rdma-0"},
    },
}


def errors(doc: dict[str, Any]) -> list[str]:
    return k8s_schemas.validate_doc(doc, "1.33", DEFS)


def changed(doc: dict[str, Any], path: str, value: Any) -> dict[str, Any]:
    """A deep copy of `doc` with the dotted `path` set to `value` (list indexes as numbers)."""
    out = copy.deepcopy(doc)
    *parents, last = path.split(".")
    node: Any = out
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    node[int(last) if isinstance(node, list) else last] = value
    return out


@pytest.mark.parametrize("doc", [JOB, PARAMS, NETWORK], ids=["Job", "GKENetworkParamSet", "Network"])
def test_valid_manifests_pass(doc: dict[str, Any]) -> None:
    assert errors(doc) == []


@pytest.mark.parametrize(
    ("doc", "path", "value", "expect"),
    [
        (JOB, "spec.template.spec.containers.0.securityContext.capabilites", {}, "capabilites"),  # typo: strict
        (JOB, "spec.backoffLimit", "none", "backoffLimit"),
        (JOB, "spec.template.spec.restartPolicy", 7, "restartPolicy"),
        (PARAMS, "spec.deviceMode", "Rdma", "deviceMode"),
        (PARAMS, "spec.subnet", "x", "subnet"),
        (NETWORK, "spec.type", "Devices", "type"),
        (NETWORK, "spec.parametersRef", {"kind": "GKENetworkParamSet", "name": "x"}, "group"),
        (NETWORK, "metadata.labels", ["not", "a", "map"], "labels"),  # metadata is a real ObjectMeta
        (PARAMS, "apiVersion", "networking.gke.io/v2", "no schema"),
        (JOB, "kind", "Jobb", "no schema"),
    ],
)
def test_schema_errors_are_found(doc: dict[str, Any], path: str, value: Any, expect: str) -> None:
    found = errors(changed(doc, path, value))
    assert found, f"{path}={value!r} passed"
    assert any(expect in e for e in found), found


def test_kept_crd_schemas_record_their_source() -> None:
    files = sorted((ROOT / "schemas" / "networking.gke.io").glob("*.json"))
    assert [f.name for f in files] == ["gkenetworkparamset-v1.json", "network-v1.json"]
    for f in files:
        assert (
            "https://github.com/GoogleCloudPlatform/gke-networking-api/blob/" in json.loads(f.read_text())["$comment"]
        )


def test_crd_conversion_is_strict_and_keeps_preserved_fields_open() -> None:
    crd = {
        "spec": {
            "group": "example.com",
            "names": {"kind": "Thing"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "properties": {
                                        "a": {"type": "string"},
                                        "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                                    },
                                }
                            },
                        }
                    },
                },
                {"name": "v0", "served": False, "schema": {"openAPIV3Schema": {}}},
            ],
        }
    }
    out = crd_to_schema.schemas_of(crd, "test")
    assert list(out) == ["example.com/thing-v1.json"]
    schema = out["example.com/thing-v1.json"]
    assert schema["additionalProperties"] is False
    assert schema["properties"]["spec"]["additionalProperties"] is False
    assert "additionalProperties" not in schema["properties"]["spec"]["properties"]["free"]
    assert schema["properties"]["kind"]["enum"] == ["Thing"]


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [("gke-b200", {}), ("gke-b200", {"podNetworking": "hostNetwork"}), ("gce-b200", {})],
    ids=["gke-b200", "gke-b200-hostNetwork", "gce-b200"],
)
def test_every_rendered_manifest_is_valid(stack: str, overrides: dict[str, Any]) -> None:
    """The k8s-schemas gate checks the stacks as they are; this also covers the other pod networking."""
    from deepep_a4.plan.command import kubernetes_manifests

    manifests = kubernetes_manifests(plan(stack, **overrides).resources)
    assert manifests or stack.startswith("gce"), f"{stack} renders no Kubernetes manifest"
    for rel, text in manifests.items():
        for doc in yaml.safe_load_all(text):
            assert errors(doc) == [], f"{stack} {rel}"


def checkov_report(failed: list[dict[str, Any]], skipped: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "check_type": "kubernetes",
        "summary": {"passed": 3, "failed": len(failed), "skipped": len(skipped), "resource_count": 2},
        "results": {"failed_checks": failed, "skipped_checks": skipped},
    }


def check(check_id: str, reason: str | None = None) -> dict[str, Any]:
    return {
        "check_id": check_id,
        "check_name": "Container should not be privileged",
        "resource": "DaemonSet.deepep-a4.deepep-installer.app.kubernetes.io/name-x",
        "file_path": "/09-daemonset-deepep-installer.yaml",
        "check_result": {"result": "SKIPPED" if reason is not None else "FAILED", "suppress_comment": reason},
    }


def test_security_findings_count_failures_and_unexplained_suppressions() -> None:
    report = [
        checkov_report([check("CKV_K8S_20")], [check("CKV_K8S_16", "loads kernel modules"), check("CKV_K8S_17", "")])
    ]
    failed, skipped, summary = security.findings(report)
    assert [f.check for f in failed] == ["CKV_K8S_20"]
    assert failed[0].resource == "DaemonSet.deepep-a4.deepep-installer"
    assert [(f.check, f.reason) for f in skipped] == [("CKV_K8S_16", "loads kernel modules"), ("CKV_K8S_17", "")]
    assert summary == {"passed": 3, "failed": 1, "skipped": 2, "resources": 2}


def test_security_gate_fails_on_a_finding_and_on_a_suppression_without_reason(tmp_path: Path) -> None:
    """The gate's exit code, with a stand-in for checkov that prints a canned report."""
    (tmp_path / "gke" / "files" / "k8s").mkdir(parents=True)
    (tmp_path / "gke" / "files" / "k8s" / "01-job.yaml").write_text(yaml.safe_dump(JOB))
    fake = tmp_path / "checkov"

    def gate(report: dict[str, Any]) -> subprocess.CompletedProcess[str]:
        fake.write_text(f"#!{sys.executable}\nprint({json.dumps(json.dumps(report))})\n")
        fake.chmod(0o755)
        cmd = [sys.executable, "ci/gates/security.py", "--checkov", str(fake), str(tmp_path / "gke")]
        return subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=False)

    assert gate(checkov_report([], [check("CKV_K8S_16", "loads kernel modules")])).returncode == 0
    bad = gate(checkov_report([check("CKV_K8S_20")], []))
    assert bad.returncode == 1 and "FAILED" in bad.stdout and "CKV_K8S_20" in bad.stdout
    unexplained = gate(checkov_report([], [check("CKV_K8S_16", "No comment provided")]))
    assert unexplained.returncode == 1 and "NO REASON" in unexplained.stdout


def test_test_sh_names_every_gate_and_refuses_an_unknown_one() -> None:
    listed = subprocess.run(["bash", "ci/test.sh", "--list"], cwd=ROOT, capture_output=True, text=True, check=True)
    assert listed.stdout.split() == [
        "plan",
        "pyright",
        "ruff-lint",
        "ruff-format",
        "shellcheck",
        "k8s-schemas",
        "security",
        "pytest",
    ]
    unknown = subprocess.run(["bash", "ci/test.sh", "mypy"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert unknown.returncode == 2 and "unknown gate 'mypy'" in unknown.stderr


def test_test_script_help_prints_its_usage() -> None:
    proc = subprocess.run(["bash", "ci/test.sh", "--help"], cwd=ROOT, capture_output=True, text=True, check=False)
    assert proc.returncode == 0
    assert "bash ci/test.sh --list" in proc.stdout and "unknown gate" not in proc.stderr

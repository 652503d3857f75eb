"""Our gIB DaemonSet against Google's own installer manifest, field by field: every difference is one we name,
with the reason it holds.

Google's manifests are described (their fields, with URL and commit), not vendored, in
tests/fixtures/gke/google_gib_manifests.json: [CEA-INST] gpudirect-rdma/nccl-rdma-installer.yaml (privileged,
hostPID, hostNetwork) and [CEA-TEST] gpudirect-rdma/nccl-test-a4.yaml (Google's A4 pod: the same image family's
entry script, unprivileged, no host namespaces), both at container-engine-accelerators
992db81257553607f1477945f1b3219632991829. `container_entry.sh` itself is not published as source (it ships in the
image), so the reasons rest on what the manifests show of it: `install` leaves its output under /var/lib/gib in
the container's own file system (Google's next step copies from there), and Google runs the entry script
without privilege or host namespaces in its own A4 pods.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from deepep_a4.plan.command import kubernetes_manifests
from tests.conftest import plan

ROOT = Path(__file__).resolve().parents[3]
GOOGLE = json.loads((ROOT / "tests/fixtures/gke/google_gib_manifests.json").read_text())
INIT = (ROOT / "scripts/gke/gib-init.sh").read_text()
# Each difference from [CEA-INST], and why `container_entry.sh install` and the copy work without it here.
REASONS = {
    "hostNetwork": "nothing in the init container touches the network: it copies files; Google's A4 pod runs the "
    "image's entry script on the pod network (a4_test_pod.hostNetwork false)",
    "hostPID": "nothing enters another process's namespaces (no nsenter, no /proc/1); Google's A4 pod runs the "
    "entry script without hostPID",
    "privileged": "install writes /var/lib/gib inside the container; the copy writes one root-owned hostPath "
    "folder, which root with CHOWN, DAC_OVERRIDE and FOWNER can do",
    "library-dir-host": "no copy into the driver's lib64: GKE mounts it into every GPU container and a second "
    "rdma-core there broke RDMA (troubleshooting T16/T17); the pods read the plugin from /home/kubernetes/bin/gib",
    "namespace": "our namespace, so `pulumi destroy` removes it",
    "placement": "our A4 pool only (its node label and GPU taint), not every H200/B200 node with every taint",
}


@pytest.fixture(scope="module")
def objects() -> list[dict[str, Any]]:
    return [yaml.safe_load(t) for t in kubernetes_manifests(plan("gke-b200").resources).values()]


@pytest.fixture(scope="module")
def ours(objects: list[dict[str, Any]]) -> dict[str, Any]:
    found = [o for o in objects if o["kind"] == "DaemonSet" and o["metadata"]["name"] == "nccl-gib-installer"]
    assert len(found) == 1
    return found[0]


def differences(google: dict[str, Any], ds: dict[str, Any]) -> set[str]:
    spec = ds["spec"]["template"]["spec"]
    init = spec["initContainers"][0]
    host_paths = {v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    found = set()
    if bool(spec.get("hostNetwork")) != google["hostNetwork"]:
        found.add("hostNetwork")
    if bool(spec.get("hostPID")) != google["hostPID"]:
        found.add("hostPID")
    if bool((init.get("securityContext") or {}).get("privileged")) != google["initContainer"]["privileged"]:
        found.add("privileged")
    for name, path in google["hostPaths"].items():
        if path not in host_paths:
            found.add(name)
    if ds["metadata"]["namespace"] != google["namespace"]:
        found.add("namespace")
    if spec.get("tolerations") != google["tolerations"]:
        found.add("placement")
    return found


def test_every_difference_from_googles_installer_is_named(ours: dict[str, Any]) -> None:
    assert differences(GOOGLE["installer"], ours) == set(REASONS)


def test_google_installer_is_described_as_the_issue_and_conformance_say() -> None:
    inst = GOOGLE["installer"]
    assert (inst["hostNetwork"], inst["hostPID"], inst["initContainer"]["privileged"]) == (True, True, True)
    assert inst["initContainer"]["image"].endswith(":v1.1.1")
    assert "992db81257553607f1477945f1b3219632991829" in inst["url"]
    assert "[CEA-INST]" in (ROOT / "docs/conformance.md").read_text()


def test_the_reasons_hold(ours: dict[str, Any]) -> None:
    spec = ours["spec"]["template"]["spec"]
    init = spec["initContainers"][0]
    test_pod = GOOGLE["a4_test_pod"]
    # hostNetwork, hostPID: Google runs the entry script without them; ours neither uses the network nor PIDs.
    assert test_pod["hostNetwork"] is False and test_pod["hostPID"] is False and test_pod["privileged"] is False
    assert any(s.startswith("/scripts/container_entry.sh") for s in test_pod["steps"])
    code = "\n".join(line for line in INIT.splitlines() if not line.lstrip().startswith("#"))
    for word in ("nsenter", "/proc/1", "sysctl", "ip link", "curl", "wget", "chroot"):
        assert word not in code, word
    # privileged: the entry script's output is the container's own /var/lib/gib (Google's copy reads it there).
    assert any(s.startswith("cp -r /var/lib/gib/") for s in GOOGLE["installer"]["initContainer"]["steps"])
    assert re.search(r'^SRC="\$\{GIB_SRC:-/var/lib/gib\}"', INIT, re.M)
    assert re.search(r'^"\$ENTRY" install ', INIT, re.M)  # the same `container_entry.sh install`
    sc = init["securityContext"]
    assert sc["runAsUser"] == 0 and sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE", "FOWNER"]}
    mounts = {m["mountPath"] for m in init["volumeMounts"]}
    host = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v}
    assert host == {"gib": "/home/kubernetes/bin/gib"}  # one host folder, the plugin's own
    assert not any(m.startswith("/var/lib/gib") for m in mounts)  # the entry script's output stays in the image
    # The pod's own identity is never used: no token, the namespace's default KSA (no grant: the identity test).
    assert spec["automountServiceAccountToken"] is False and "serviceAccountName" not in spec


def test_our_rdma_pods_attach_the_interfaces_googles_a4_pods_attach(objects: list[dict[str, Any]]) -> None:
    """eth0 and rdma-0..7 as eth2..eth9, no gVNIC: the networks behind our stack prefix, the names Google's."""
    want = GOOGLE["a4_test_pod"]["interfaces"]
    assert [i["network"] for i in want] == ["default", *(f"rdma-{i}" for i in range(8))]
    jobs = [o for o in objects if o["kind"] == "Job" and o["metadata"]["name"] != "deepep-intranode"]
    assert jobs
    for job in jobs:
        ann = job["spec"]["template"]["metadata"]["annotations"]
        got = json.loads(ann["networking.gke.io/interfaces"])
        unprefixed = [{**i, "network": re.sub(r"^deepep-gke-b200-", "", i["network"])} for i in got]
        assert unprefixed == want, job["metadata"]["name"]

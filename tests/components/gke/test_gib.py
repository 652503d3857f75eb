"""Google's gIB NCCL plugin on GKE: the DaemonSet under pulumi mocks, and its init script run for real."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from components.gke import gib as gke_gib
from components.gke import objects as gke_objects
from components.gke import pod_security as gke_pod_security
from deepep_a4.plan import engine as plan_engine
from scripts import payload
from scripts.bench.what_ran import GIB_VERSION_FILE
from tests.components.gke.test_workloads import DS, GIB_DS, INSTALLER_DS, JOB, SHELLCHECK, Built, build


@pytest.fixture(scope="module")
def on() -> Built:
    return build()  # the stack's defaults: hostNetwork, ncclGib


def gib_pod(b: Built) -> dict:
    return b.one(DS, GIB_DS).inputs["spec"]["template"]["spec"]


def test_the_daemonset_is_googles_installer_image_on_the_a4_nodes(on: Built) -> None:
    ds = on.one(DS, GIB_DS).inputs
    assert ds["metadata"]["name"] == "nccl-gib-installer" and ds["metadata"]["namespace"] == "deepep-a4"
    spec = gib_pod(on)
    [init] = spec["initContainers"]
    # [CEA-INST]'s tag, v1.1.1, written in one place; the digest it names is looked up at the first deploy and
    # kept (the offline plan's all-zero digest is the mocks' stand-in for Artifact Registry's answer).
    assert gke_gib.GIB_IMAGE == "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1"
    assert init["image"] == f"{gke_gib.GIB_IMAGE}@{plan_engine.MOCK_IMAGE_DIGEST}"
    assert {"name": "GIB_IMAGE", "value": init["image"]} in init["env"]
    assert spec["nodeSelector"] == gke_objects.NODE_SELECTOR
    assert spec["tolerations"] == [gke_objects.GPU_TOLERATION]
    assert spec["priorityClassName"] == "system-node-critical"
    [main] = spec["containers"]
    assert main["image"].startswith("gke.gcr.io/pause:3.8@sha256:")
    assert on.outputs["ncclGib"] == init["image"]


def test_the_gib_digest_is_looked_up_once_and_kept_under_the_tags_name(on: Built) -> None:
    [stash] = [r for r in on.of("pulumi:index:Stash") if "gib-image" in r.name]
    assert stash.name.endswith("-image-v1-1-1")
    with pytest.raises(ValueError, match="no @sha256"):
        gke_gib._checked_digest("us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1")
    ref = "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib@sha256:" + "ab" * 32
    assert gke_gib._checked_digest(ref) == f"{gke_gib.GIB_IMAGE}@sha256:{'ab' * 32}"


def test_it_writes_the_gib_folder_only_never_the_drivers(on: Built) -> None:
    spec = gib_pod(on)
    paths = [v["hostPath"]["path"] for v in spec["volumes"] if "hostPath" in v]
    assert paths == [gke_objects.GIB_HOST_DIR] == ["/home/kubernetes/bin/gib"]
    [init] = spec["initContainers"]
    mounts = {m["mountPath"] for m in init["volumeMounts"]}
    assert gke_gib.HOST_MOUNT in mounts and not any("nvidia" in m for m in mounts)
    assert "/home/kubernetes/bin/nvidia/lib64" not in str(on.one(DS, GIB_DS).inputs)
    # The RDMA benchmark pods mount the same host folder where the runner looks for the plugin; intranode's has
    # no RDMA device and no gIB (test_nccl_net_rule.py).
    for j in on.of(JOB):
        vols = {v["name"]: v for v in j.inputs["spec"]["template"]["spec"]["volumes"]}
        if j.inputs["metadata"]["name"] == "deepep-intranode":
            assert "gib" not in vols
        else:
            assert vols["gib"]["hostPath"]["path"] == gke_objects.GIB_HOST_DIR


def test_its_init_container_is_root_with_file_capabilities_only(on: Built) -> None:
    spec = gib_pod(on)
    assert not spec.get("hostPID") and not spec.get("hostNetwork")
    [init] = spec["initContainers"]
    sc = init["securityContext"]
    assert sc["privileged"] is False and sc["allowPrivilegeEscalation"] is False and sc["runAsUser"] == 0
    assert sc["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE", "FOWNER"]}
    assert spec["automountServiceAccountToken"] is False
    meta = on.one(DS, GIB_DS).inputs["metadata"]
    skips = {v.split("=", 1)[0] for k, v in meta["annotations"].items() if k.startswith("checkov.io/skip")}
    assert skips == set(gke_pod_security.GIB_SKIPS)
    assert "CKV_K8S_16" not in skips  # never privileged


def test_jobs_wait_for_the_plugin_on_every_node(on: Built) -> None:
    gib = on.one(DS, GIB_DS)
    assert int(gib.inputs["metadata"]["annotations"]["pulumi.com/timeoutSeconds"]) >= 1800
    assert "pulumi.com/skipAwait" not in gib.inputs["metadata"]["annotations"]  # Pulumi waits for Ready
    for j in on.of(JOB):
        assert gib.urn in j.deps and on.one(DS, INSTALLER_DS).urn in j.deps, j.name
    assert on.one("kubernetes:core/v1:ResourceQuota").urn in gib.deps  # system-node-critical outside kube-system


def test_ncclgib_false_leaves_the_daemonset_out() -> None:
    off = build(ncclGib=False)
    assert [r.name for r in off.of(DS)] == [INSTALLER_DS]
    assert off.outputs["ncclGib"].startswith("off")
    env = {e["name"]: e.get("value") for e in off.job("internode")["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["BENCH_NCCL_GIB"] == "0" and env["BENCH_PLATFORM"] == "gke"


def test_the_plan_shows_the_manifest_and_the_script(on: Built) -> None:
    assert on.files["gke/gib-daemonset/init.sh"] == payload.gke_gib_init()
    cm = next(r for r in on.of("kubernetes:core/v1:ConfigMap") if gke_gib.INIT_SCRIPT in r.inputs["data"])
    assert cm.inputs["data"][gke_gib.INIT_SCRIPT] == payload.gke_gib_init()


def test_pod_networking_is_labelled_in_the_outputs(on: Built) -> None:
    assert on.outputs["podNetworking"].startswith("hostNetwork (privileged")
    multi = build(podNetworking="multiNetwork")
    assert "unproven on Ubuntu with DOCA-OFED" in multi.outputs["podNetworking"]
    [c] = multi.job("low-latency")["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e.get("value") for e in c["env"]}
    assert env["BENCH_POD_NETWORKING"] == "multiNetwork"


# -- the init script, run against a fake image -------------------------------------------------------------


def image_tree(tmp_path: Path, lib64: list[str], entry_rc: int = 0) -> dict[str, str]:
    src = tmp_path / "var-lib-gib"
    (src / "lib64").mkdir(parents=True)
    (src / "configs").mkdir()
    (src / "scripts").mkdir()
    for name in lib64:
        (src / "lib64" / name).write_text(name)
    (src / "configs" / "tuner_config_a4.txtpb").write_text("tuner")
    (src / "scripts" / "set_nccl_env.sh").write_text("export NCCL_NET=gIB\n")
    entry = tmp_path / "container_entry.sh"
    entry.write_text(f'#!/bin/sh\necho "entry $*"\nexit {entry_rc}\n')
    entry.chmod(0o755)
    dst = tmp_path / "host-gib"
    dst.mkdir()
    return {
        "GIB_SRC": str(src),
        "GIB_DST": str(dst),
        "GIB_ENTRY": str(entry),
        "GIB_IMAGE": gke_gib.GIB_IMAGE,
        "GIB_VERSION_FILE": GIB_VERSION_FILE,
        "PATH": os.environ["PATH"],
    }


def run_init(tmp_path: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "gib-init.sh"
    script.write_text(payload.gke_gib_init())
    return subprocess.run(["/bin/sh", str(script)], env=env, capture_output=True, text=True, check=False, timeout=60)


def test_init_copies_the_gib_libraries_and_leaves_rdma_core_out(tmp_path: Path) -> None:
    shipped = ["libnccl-net.so", "libnccl-net_internal.so", "libnccl-env-profile.so", "libibverbs.so.1", "libmlx5.so.1"]
    env = image_tree(tmp_path, shipped)
    dst = Path(env["GIB_DST"])
    (dst / "lib64").mkdir()
    (dst / "lib64" / "libnccl-net-old.so").write_text("an older plugin")
    proc = run_init(tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert "entry install" in proc.stdout  # Google's own preparation runs first, without --install-nccl
    assert sorted(p.name for p in (dst / "lib64").iterdir()) == [
        "libnccl-env-profile.so",
        "libnccl-net.so",
        "libnccl-net_internal.so",
    ]
    assert "left out lib64/libibverbs.so.1: rdma-core" in proc.stdout
    assert "left out lib64/libmlx5.so.1: rdma-core" in proc.stdout
    assert (dst / "configs" / "tuner_config_a4.txtpb").read_text() == "tuner"
    assert (dst / "scripts" / "set_nccl_env.sh").is_file()
    assert (dst / GIB_VERSION_FILE).read_text().strip() == gke_gib.GIB_IMAGE
    assert not (dst / ".incoming").exists()
    assert "libibverbs.so.1" in proc.stdout.split("left out")[0]  # everything the image ships is listed first


def test_init_refuses_an_image_without_the_plugin(tmp_path: Path) -> None:
    proc = run_init(tmp_path, image_tree(tmp_path, ["libibverbs.so.1"]))
    assert proc.returncode == 1
    assert "no libnccl-net* in" in proc.stderr and gke_gib.GIB_IMAGE in proc.stderr


def test_init_fails_when_googles_preparation_fails(tmp_path: Path) -> None:
    proc = run_init(tmp_path, image_tree(tmp_path, ["libnccl-net.so"], entry_rc=3))
    assert proc.returncode == 1
    assert "install failed (exit 3)" in proc.stderr and "ncclGib=false" in proc.stderr
    assert list(Path(tmp_path / "host-gib").iterdir()) == []


@pytest.mark.skipif(SHELLCHECK is None, reason="no shellcheck")
def test_init_script_passes_shellcheck_as_posix_sh(tmp_path: Path) -> None:
    f = tmp_path / "gib-init.sh"
    f.write_text(payload.gke_gib_init())
    proc = subprocess.run([str(SHELLCHECK), "-s", "sh", str(f)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stdout

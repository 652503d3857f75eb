"""nodeProfile: supported (COS / the accelerator image, user space staged from the store) and host-install.

The plans of the example stacks, the config rules of the profiles, and the staged phases run against a stub
node (tests/components/test_installer.py's Machine) with a local-folder store holding the parts.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import tarfile
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from components import artifacts, config, installer, staging
from components.config import keys
from deepep_a4.tools import plan_engine
from tests.components.test_gke_pod_security import skipped_checks
from tests.components.test_installer import Machine
from tests.conftest import of_type, one, plan, stack_config
from tests.deepep_a4.test_store import FakeGcs

GKE, GCE = "gke-b200", "gce-b200"
# Commands that touch the host: none may run, or appear, in the supported profile's installer.
HOST_COMMANDS = re.compile(r"\b(nsenter|apt-get|apt_get|need_packages|modprobe|insmod|dpkg|ldconfig|shutdown)\b")


def cfg_of(stack: str, **overrides: Any) -> config.StackConfig:
    return config.parse(plan_engine.project_keys(stack_config(stack, **overrides)), stack)


# -- the example stacks ------------------------------------------------------------------------------


def test_gke_b200_plans_a_cos_pool_with_gkes_driver_and_multi_network_pods() -> None:
    result = plan(GKE)
    pool = one(result, "gcp:container/nodePool:NodePool", "gke-a4")["inputs"]["nodeConfig"]
    assert pool["imageType"] == "COS_CONTAINERD"
    (acc,) = pool["guestAccelerators"]
    assert acc["gpuDriverInstallationConfig"]["gpuDriverVersion"] == "LATEST"
    assert pool["shieldedInstanceConfig"]["enableSecureBoot"] is True
    assert pool["gvnic"]["enabled"] is True
    jobs = {j["inputs"]["metadata"]["name"]: j["inputs"] for j in of_type(result, "kubernetes:batch/v1:Job")}
    for name in ("deepep-internode", "deepep-low-latency"):
        annotations = jobs[name]["spec"]["template"]["metadata"]["annotations"]
        nets = json.loads(annotations["networking.gke.io/interfaces"])
        assert [n["interfaceName"] for n in nets] == [f"eth{i}" for i in range(10)]
        assert not jobs[name]["spec"]["template"]["spec"].get("hostNetwork")


def _rdma_pod(result: plan_engine.PlanResult, name: str) -> dict[str, Any]:
    jobs = {j["inputs"]["metadata"]["name"]: j["inputs"] for j in of_type(result, "kubernetes:batch/v1:Job")}
    return jobs[name]["spec"]["template"]["spec"]


def test_rdma_pods_of_the_supported_profile_are_privileged_root_with_the_gke_drivers_libraries() -> None:
    result = plan(GKE)
    for name in ("deepep-internode", "deepep-low-latency"):
        (bench,) = _rdma_pod(result, name)["containers"]
        ctx = bench["securityContext"]
        assert ctx["privileged"] is True and ctx["runAsUser"] == 0
        env = {e["name"]: e.get("value") for e in bench["env"]}
        assert env["LD_LIBRARY_PATH"].split(":")[0] == "/usr/local/nvidia/lib64"
        assert env["NVSHMEM_DISABLE_GDRCOPY"] == "1"
        assert env["NVSHMEM_DEBUG"] == "INFO"  # NVSHMEM names the IBGDA path it took
        assert "/home/kubernetes/bin/deepep/unified-env.sh" in bench["command"][2]
        mounts = {m["mountPath"] for m in bench["volumeMounts"]}
        assert "/home/kubernetes/bin/deepep" in mounts and "/etc/libibverbs.d" not in mounts
    (intra,) = _rdma_pod(result, "deepep-intranode")["containers"]
    assert intra["securityContext"]["privileged"] is False  # NVLink only: no privilege


def test_gke_b200s_rendered_installer_touches_nothing_on_the_host() -> None:
    result = plan(GKE)
    files = {k[len("install/gke/") :]: v for k, v in result.files.items() if k.startswith("install/gke/")}
    phases = sorted(p for p in files if p.startswith("phases/"))
    assert phases == ["phases/13-stage.sh", "phases/14-verify-staged.sh"]
    assert "PHASES=(stage verify-staged)" in files["config.sh"]
    for rel in phases:
        assert not HOST_COMMANDS.search(files[rel]), rel
        # Only the staged interpreter ($R/venv/bin/python, $R/python/bin/python3), never one found on PATH.
        assert not re.search(r"(?<![/\w])python3?\b", files[rel]), rel
    init = result.files["gke/installer-daemonset/init.sh"]
    assert not HOST_COMMANDS.search(init) and "/host" not in init
    ds = one(result, "kubernetes:apps/v1:DaemonSet", "deepep-installer")["inputs"]["spec"]["template"]["spec"]
    assert not ds.get("hostPID")
    (init_c,) = ds["initContainers"]
    assert init_c["securityContext"]["privileged"] is False
    assert init_c["securityContext"]["capabilities"] == {"drop": ["ALL"], "add": ["CHOWN", "DAC_OVERRIDE", "FOWNER"]}
    assert "nvidia.com/gpu" not in json.dumps(init_c["resources"])
    assert init_c["image"] == cfg_of(GKE).gke.installer_image == keys.STAGING_IMAGE
    paths = {v["name"]: v["hostPath"]["path"] for v in ds["volumes"] if "hostPath" in v}
    assert "/" not in paths.values()
    assert paths["staged"] == "/home/kubernetes/bin/deepep"


def test_the_staging_image_is_pinned_by_default_and_a_tag_is_flagged_where_it_would_be_pinned() -> None:
    assert re.fullmatch(r"buildpack-deps:noble-curl@sha256:[0-9a-f]{64}", keys.STAGING_IMAGE)
    assert keys.KEYS_BY_NAME["installerImage"].default == keys.STAGING_IMAGE
    assert "deepep-a4:installerImage" not in stack_config(GKE)  # the example stack takes the default

    def stage_skips(**overrides: Any) -> dict[str, str]:
        ds = one(plan(GKE, **overrides), "kubernetes:apps/v1:DaemonSet", "deepep-installer")["inputs"]
        return skipped_checks(ds["metadata"]["annotations"])

    assert not {"CKV_K8S_43", "CKV_K8S_15"} & set(stage_skips())
    tagged = stage_skips(installerImage="ubuntu:24.04")
    for check in ("CKV_K8S_43", "CKV_K8S_15"):
        assert (
            tagged[check]
            == "installerImage ubuntu:24.04 is an unpinned tag: pin it in the stack as name@sha256:<digest>"
        )


def test_gce_b200_runs_on_the_accelerator_image_without_doca_driver_or_peer_mapping() -> None:
    cfg = cfg_of(GCE)
    assert cfg.gce.image == keys.ACCELERATOR_IMAGE
    artifacts.reset()
    files = installer.render_installer(cfg, "gce")
    phases = sorted(p for p in files if p.startswith("phases/"))
    assert phases == ["phases/12-nccl-gib.sh", "phases/13-stage.sh", "phases/14-verify-staged.sh"]
    assert "IMAGE_DRIVER_BRANCH=580" in files["config.sh"]
    for left in ("doca-ofed", "nvidia-driver", "peermapping", "gdrcopy"):
        assert f"[{left}]=" in files["config.sh"].split("declare -A LEFT_OUT=(")[1]
    startup = installer.render_startup_script(cfg)
    assert "02-doca-ofed.sh" not in startup and "04-peermapping.sh" not in startup


@pytest.mark.parametrize(("stack", "platform"), [("gke-b200-ubuntu", "gke"), ("gce-b200-ubuntu", "gce")])
def test_the_ubuntu_stacks_keep_the_field_reports_path(stack: str, platform: str) -> None:
    cfg = cfg_of(stack)
    assert cfg.node_profile == "host-install" and cfg.installer.use_doca_ofed
    artifacts.reset()
    files = installer.render_installer(cfg, platform)
    for phase in ("02-doca-ofed", "03-nvidia-driver", "04-peermapping", "11-verify"):
        assert f"phases/{phase}.sh" in files
    assert "phases/13-stage.sh" not in files
    if platform == "gke":
        pool = one(plan(stack), "gcp:container/nodePool:NodePool", "gke-a4")["inputs"]["nodeConfig"]
        assert pool["imageType"] == "UBUNTU_CONTAINERD"
        assert (
            pool["guestAccelerators"][0]["gpuDriverInstallationConfig"]["gpuDriverVersion"] == "INSTALLATION_DISABLED"
        )
    else:
        assert cfg.gce.image == keys.PLAIN_UBUNTU_IMAGE


# -- the profiles' config rules ----------------------------------------------------------------------


def test_defaults_follow_the_profile() -> None:
    supported = config.parse({"project": "my-gpu-project"}, "t")
    assert supported.node_profile == "supported" and supported.gke.gpu_driver == "LATEST"
    gce = config.parse({"project": "my-gpu-project", "platform": "gce"}, "t")
    assert gce.gce.image == keys.ACCELERATOR_IMAGE
    host = config.parse({"project": "my-gpu-project", "nodeProfile": "host-install", "platform": "gce"}, "t")
    assert host.gke.gpu_driver == "installer" and host.gce.image == keys.PLAIN_UBUNTU_IMAGE


@pytest.mark.parametrize(
    ("raw", "key", "fragment"),
    [
        ({"docaOfedVersion": "3.2.1"}, "docaOfedVersion", "a host-install key"),
        ({"nvidiaDriverVersion": "580"}, "nvidiaDriverVersion", "a host-install key"),
        ({"gdrcopyKernelModule": True}, "gdrcopyKernelModule", "a host-install key"),
        ({"useDocaOfed": False}, "useDocaOfed", "a host-install key"),
        ({"allowReboot": False}, "allowReboot", "a host-install key"),
        ({"gkeGpuDriver": "installer"}, "gkeGpuDriver", "use DEFAULT or LATEST"),
        ({"platform": "gce", "gceImage": keys.PLAIN_UBUNTU_IMAGE}, "gceImage", "accelerator image"),
        ({"nvshmemVersion": "3.3.9", "deepepRef": "v1.2.1"}, "nvshmemVersion", "needs NVSHMEM 3.4.5 or newer"),
    ],
)
def test_the_supported_profile_refuses_the_other_profiles_keys(raw: dict[str, Any], key: str, fragment: str) -> None:
    with pytest.raises(config.ConfigError) as err:
        config.parse({"project": "my-gpu-project", **raw}, "t")
    (problem,) = [p for p in err.value.problems if p.key == key]
    assert fragment in problem.allowed and "\n" not in str(problem)
    assert str(problem).startswith(f"deepep-a4:{key} = ")


def test_the_host_install_profile_still_refuses_gkes_driver() -> None:
    with pytest.raises(config.ConfigError) as err:
        config.parse({"project": "my-gpu-project", "nodeProfile": "host-install", "gkeGpuDriver": "LATEST"}, "t")
    assert [p.key for p in err.value.problems] == ["gkeGpuDriver"]


# -- the staged phases on a stub node ------------------------------------------------------------------

_VERBS_STUB = """
#include <stdlib.h>
void **ibv_get_device_list(int *n) { *n = 8; return calloc(9, sizeof(void *)); }
void ibv_free_device_list(void **l) { free(l); }
"""


def _tarball(src: Path) -> bytes:
    out = src.parent / f"{src.name}.tar.gz"
    with tarfile.open(out, "w:gz") as tar:
        for p in sorted(src.rglob("*")):
            tar.add(p, arcname=str(p.relative_to(src)), recursive=False)
    return out.read_bytes()


def _fill_store(tmp: Path, cfg: config.StackConfig, target: str, skip: tuple[str, ...] = ()) -> Path:
    """A local-folder store (scripts/install/store.sh) with each part as the builder would publish it."""
    gcc = shutil.which("gcc")
    if not gcc:
        pytest.skip("gcc is needed to build a stand-in libibverbs")
    parts = tmp / "parts"
    for part in staging.PARTS:
        (parts / part).mkdir(parents=True)
    py = parts / "python/bin/python3"
    py.parent.mkdir(parents=True)
    py.write_text(f'#!/bin/sh\nexec {shutil.which("python3")} "$@"\n')
    py.chmod(0o755)
    lib = parts / "rdma-core/lib"
    (lib / "libibverbs").mkdir(parents=True)
    (tmp / "v.c").write_text(_VERBS_STUB)
    subprocess.run([gcc, "-shared", "-fPIC", "-o", str(lib / "libibverbs.so.1"), str(tmp / "v.c")], check=True)
    shutil.copy(lib / "libibverbs.so.1", lib / "libmlx5.so.1")
    shutil.copy(lib / "libibverbs.so.1", lib / "libibverbs/libmlx5-rdmav34.so")
    (parts / "pytorch/torch").mkdir()
    (parts / "pytorch/torch/__init__.py").write_text("__version__ = '2.10.0+cu129'\n")
    (parts / "deepep/deep_ep").mkdir()
    (parts / "deepep/deep_ep/__init__.py").write_text("")
    (parts / "nvshmem/lib").mkdir()
    (parts / "nvshmem/lib/libnvshmem_host.so.3").write_bytes(b"")
    store = tmp / "store"
    for part, rel in staging.objects(cfg, target).items():
        if part in skip:
            continue
        data = _tarball(parts / part)
        (store / rel).mkdir(parents=True)
        (store / rel / "data").write_bytes(data)
        (store / rel / "sha256").write_text(hashlib.sha256(data).hexdigest() + "\n")
    return store


def _staged_machine(tmp: Path, target: str = "gce", **kw: Any) -> tuple[Machine, Path, config.StackConfig]:
    m = Machine(tmp, hca="rocep", driver_loaded="580.95.05")
    for i in range(8):  # what the driver lists once loaded, one folder per GPU
        (m.sys / f"proc/driver/nvidia/gpus/0000:{i:02x}:00.0").mkdir(parents=True)
    cfg = cfg_of(GCE if target == "gce" else GKE, ncclGib="false")
    return m, m.render(cfg, target), cfg


def _run(m: Machine, installer_dir: Path, store: Path) -> subprocess.CompletedProcess[str]:
    env = m.env(DEEPEP_STORE_URL=str(store), DEEPEP_DRIVER_WAIT_S="0")
    return subprocess.run(
        ["bash", str(installer_dir / "run.sh")], env=env, capture_output=True, text=True, timeout=120, check=False
    )


def test_staged_phases_stage_the_parts_record_the_node_and_write_the_env(tmp_path: Path) -> None:
    m, out, cfg = _staged_machine(tmp_path)
    (m.sys / "proc/kallsyms").write_text("0000000000000000 T ib_umem_dmabuf_get\n")  # as a 6.8 kernel lists it
    proc = _run(m, out, _fill_store(tmp_path, cfg, "gce"))
    assert proc.returncode == 0, proc.stderr
    node = json.loads((m.root / "state/node.json").read_text())
    assert node["driver"] == "580.95.05" and node["module"] == "open"
    assert node["hcaPrefix"] == "rocep" and node["verbsDevices"] == 8
    assert node["nvidiaPeermem"] == "absent" and node["dmabuf"] == "kernel"
    assert node["deviceToHca"].startswith("0:rocep")
    env = (m.root / "unified-env.sh").read_text()
    assert "NVSHMEM_HCA_PREFIX=rocep" in env and "NVSHMEM_DISABLE_GDRCOPY=1" in env
    assert (m.root / "rdma-core/etc/libibverbs.d/mlx5.driver").read_text() == (
        f"driver {m.root}/rdma-core/lib/libibverbs/libmlx5\n"
    )
    status = json.loads((m.root / "state/status.json").read_text())
    assert status["ready"] is True and "peermapping" in status["leftOut"]
    calls = m.log.read_text() if m.log.exists() else ""
    assert not HOST_COMMANDS.search(calls) and "python3" not in calls  # no host tool, no host interpreter


def test_a_store_without_the_parts_fails_the_node_with_the_command_that_fills_it(tmp_path: Path) -> None:
    m, out, cfg = _staged_machine(tmp_path)
    proc = _run(m, out, _fill_store(tmp_path, cfg, "gce", skip=("pytorch",)))
    assert proc.returncode == 1
    assert "deepep-a4 store build --stack gce-b200" in proc.stderr and "userspace/pytorch/" in proc.stderr


def test_a_staged_root_that_cannot_execute_fails_verify(tmp_path: Path) -> None:
    """What a noexec mount does to the staged interpreter: verify-staged fails, the benchmark never starts."""
    m, out, cfg = _staged_machine(tmp_path)
    store = _fill_store(tmp_path, cfg, "gce")
    assert _run(m, out, store).returncode == 0
    (m.root / "python/bin/python3").chmod(0o644)
    proc = subprocess.run(
        ["bash", str(out / "run.sh"), "--redo", "verify-staged"],
        env=m.env(DEEPEP_STORE_URL=str(store), DEEPEP_DRIVER_WAIT_S="0"),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 1 and "noexec" in proc.stderr


def test_verify_waits_for_the_driver_and_says_whose_it_is(tmp_path: Path) -> None:
    m, out, cfg = _staged_machine(tmp_path)
    shutil.rmtree(m.sys / "proc/driver")
    proc = _run(m, out, _fill_store(tmp_path, cfg, "gce"))
    assert proc.returncode == 1 and "no NVIDIA driver after 0s" in proc.stderr


def test_the_gke_staging_container_stages_from_cloud_storage_with_no_python3_on_path(tmp_path: Path) -> None:
    """What the staging image (keys.STAGING_IMAGE: bash, curl, coreutils, tar; no Python) runs: the rendered GKE
    installer, stage and verify-staged, against a fake Cloud Storage; only the staged interpreter runs Python."""
    m, out, cfg = _staged_machine(tmp_path, "gke")
    folder = _fill_store(tmp_path, cfg, "gke")
    (m.bin / "python3").unlink()  # the stub machine's python3 (a logging stand-in) is gone: none on PATH
    real_curl = shutil.which("curl")
    assert real_curl, "curl is needed for this test"
    (m.bin / "curl").unlink()
    (m.bin / "curl").symlink_to(real_curl)
    assert shutil.which("python3", path=str(m.bin)) is None
    FakeGcs.objects, FakeGcs.sessions, FakeGcs.seen_auth = {}, {}, set()
    for rel in staging.objects(cfg, "gke").values():
        data = (folder / rel / "data").read_bytes()
        FakeGcs.objects[f"team/{rel}"] = (data, {"sha256": hashlib.sha256(data).hexdigest()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGcs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        env = m.env(
            DEEPEP_STORE_URL="gs://bucket/team",
            DEEPEP_GCS_API=url,
            DEEPEP_METADATA_URL=url,
            DEEPEP_DRIVER_WAIT_S="0",
        )
        proc = subprocess.run(
            ["bash", str(out / "run.sh")], env=env, capture_output=True, text=True, timeout=120, check=False
        )
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stderr
    assert "command not found" not in proc.stdout + proc.stderr
    assert json.loads((m.root / "state/status.json").read_text())["ready"] is True
    assert FakeGcs.seen_auth == {"Bearer tok"}
    assert (m.root / "pytorch/torch/__init__.py").is_file()

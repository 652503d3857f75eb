"""nodeProfile: supported (COS / the accelerator image, user space staged from the store) and host-install.

The plans of the example stacks, the config rules of the profiles, and the staged phases run against a stub
node (tests/components/node/test_installer.py's Machine) with a local-folder store holding the parts.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from components import artifacts, config
from components.config import images, keys
from components.gce import startup as gce_startup
from components.node import installer
from deepep_a4.plan import engine as plan_engine
from tests.components.gke.test_pod_security import skipped_checks
from tests.conftest import of_type, one, plan, stack_config

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
        # eth0 and the eight RDMA NICs as eth2..eth9, as Google's A4 pods (gpudirect-rdma/nccl-test-a4.yaml)
        assert [n["interfaceName"] for n in nets] == ["eth0", *(f"eth{i}" for i in range(2, 10))]
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
    # The config refuses a tag without allowUnpinnedImages (rules.check_installer_image); with it, the tag is flagged.
    tagged = stage_skips(installerImage="buildpack-deps:noble", allowUnpinnedImages=True)
    for check in ("CKV_K8S_43", "CKV_K8S_15"):
        assert (
            tagged[check]
            == "installerImage buildpack-deps:noble is an unpinned tag: pin it in the stack as name@sha256:<digest>"
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
    startup = gce_startup.render_startup_script(cfg)
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
        assert cfg.gce.image == images.PLAIN_UBUNTU_IMAGE


# -- the profiles' config rules ----------------------------------------------------------------------


def test_defaults_follow_the_profile() -> None:
    supported = config.parse({"project": "my-gpu-project"}, "t")
    assert supported.node_profile == "supported" and supported.gke.gpu_driver == "LATEST"
    gce = config.parse({"project": "my-gpu-project", "platform": "gce"}, "t")
    assert gce.gce.image == keys.ACCELERATOR_IMAGE
    host = config.parse({"project": "my-gpu-project", "nodeProfile": "host-install", "platform": "gce"}, "t")
    assert host.gke.gpu_driver == "installer" and host.gce.image == images.PLAIN_UBUNTU_IMAGE


@pytest.mark.parametrize(
    ("raw", "key", "fragment"),
    [
        ({"docaOfedVersion": "3.2.1"}, "docaOfedVersion", "a host-install key"),
        ({"nvidiaDriverVersion": "580"}, "nvidiaDriverVersion", "a host-install key"),
        ({"gdrcopyKernelModule": True}, "gdrcopyKernelModule", "a host-install key"),
        ({"useDocaOfed": False}, "useDocaOfed", "a host-install key"),
        ({"allowReboot": False}, "allowReboot", "a host-install key"),
        ({"gkeGpuDriver": "installer"}, "gkeGpuDriver", "use DEFAULT, LATEST or cos-installer"),
        ({"platform": "gce", "gceImage": images.PLAIN_UBUNTU_IMAGE}, "gceImage", "accelerator image"),
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

"""`gkeGpuDriver: cos-installer`: GKE's driver installation disabled, Google's COS driver installer pinned to one build.

Checked against the sources the module imitates (components/gke/cos_driver.py, components/config/rules/driver.py):
- GKE's NodeConfig enum: INSTALLATION_DISABLED is how a pool leaves the driver to the user
  (https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/NodeConfig#gpudriverversion);
- Google's DaemonSet (GoogleCloudPlatform/container-engine-accelerators nvidia-driver-installer/cos/
  daemonset-preloaded-latest.yaml at 068b15a980977bdaab46eb73e1ac8fba47e41f60): the preloaded installer image
  never pulled, its environment, host folders and node affinity, `install --version=...`;
- the installer's flag (cos_gpu_installer install.go `getDriverVersion`): "" the default, "latest" the latest,
  anything else installed as given: so the rendered flag must hold the stack's build, never "latest" or "".
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml

from components.config import ConfigError, parse
from components.gke import cos_driver
from deepep_a4.plan.command import kubernetes_manifests
from tests.conftest import of_type, plan

BUILD = "570.172.08"
POOL = "gcp:container/nodePool:NodePool"

# daemonset-preloaded-latest.yaml at 068b15a9, as Google wrote it (the fields this DaemonSet must keep).
GOOGLE_ENV = {
    "NVIDIA_INSTALL_DIR_HOST": "/home/kubernetes/bin/nvidia",
    "NVIDIA_INSTALL_DIR_CONTAINER": "/usr/local/nvidia",
    "VULKAN_ICD_DIR_HOST": "/home/kubernetes/bin/nvidia/vulkan/icd.d",
    "VULKAN_ICD_DIR_CONTAINER": "/etc/vulkan/icd.d",
    "ROOT_MOUNT_DIR": "/root",
    "COS_TOOLS_DIR_HOST": "/var/lib/cos-tools",
    "COS_TOOLS_DIR_CONTAINER": "/build/cos-tools",
}
GOOGLE_MOUNTS = {  # volume: (host path, mount path)
    "dev": ("/dev", "/dev"),
    "vulkan-icd-mount": ("/home/kubernetes/bin/nvidia/vulkan/icd.d", "/etc/vulkan/icd.d"),
    "nvidia-install-dir-host": ("/home/kubernetes/bin/nvidia", "/usr/local/nvidia"),
    "root-mount": ("/", "/root"),
    "cos-tools": ("/var/lib/cos-tools", "/build/cos-tools"),
}
GOOGLE_AFFINITY = [
    {"key": "cloud.google.com/gke-accelerator", "operator": "Exists"},
    {"key": "cloud.google.com/gke-gpu-driver-version", "operator": "DoesNotExist"},
]


def manifests(result: Any) -> list[dict[str, Any]]:
    return [yaml.safe_load(t) for t in kubernetes_manifests(result.resources).values()]


@pytest.fixture(scope="module")
def pinned() -> Any:
    return plan("gke-b200", gkeGpuDriver="cos-installer", gkeCosDriverVersion=BUILD)


def test_the_pool_leaves_the_driver_to_the_daemonset(pinned: Any) -> None:
    pools = [p for p in of_type(pinned, POOL) if p["inputs"]["nodeConfig"].get("guestAccelerators")]
    assert pools
    for pool in pools:
        (accel,) = pool["inputs"]["nodeConfig"]["guestAccelerators"]
        assert accel["gpuDriverInstallationConfig"] == {"gpuDriverVersion": "INSTALLATION_DISABLED"}


def test_the_daemonset_is_google_s_pinned_to_the_build(pinned: Any) -> None:
    (ds,) = [o for o in manifests(pinned) if o["kind"] == "DaemonSet" and o["metadata"]["name"] == cos_driver.NAME]
    spec = ds["spec"]["template"]["spec"]
    (init,) = spec["initContainers"]
    assert init["image"] == "cos-nvidia-installer:fixed" and init["imagePullPolicy"] == "Never"
    assert init["command"] == ["/cos-gpu-installer", "install", f"--version={BUILD}"]
    assert {e["name"]: e["value"] for e in init["env"]} == GOOGLE_ENV
    volumes = {v["name"]: v["hostPath"]["path"] for v in spec["volumes"]}
    mounts = {m["name"]: m["mountPath"] for m in init["volumeMounts"]}
    assert {n: (volumes[n], mounts[n]) for n in volumes} == GOOGLE_MOUNTS
    assert init["securityContext"] == {"privileged": True} and spec["hostPID"] and spec["hostNetwork"]
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert terms == [{"matchExpressions": GOOGLE_AFFINITY}]
    # Only on our A4 pool (its label and GPU taint), not on every tainted node as Google's `operator: Exists`.
    assert spec["nodeSelector"] == {"deepep-a4/node-pool": "a4"}
    assert [t["key"] for t in spec["tolerations"]] == ["nvidia.com/gpu"]
    (main,) = spec["containers"]
    assert "@sha256:" in main["image"] and main["securityContext"]["privileged"] is False


def test_staging_waits_for_the_driver(pinned: Any) -> None:
    ds = [r for r in of_type(pinned, "kubernetes:apps/v1:DaemonSet")]
    driver = next(r for r in ds if r["inputs"]["metadata"]["name"] == cos_driver.NAME)
    staging = next(r for r in ds if r["inputs"]["metadata"]["name"] == "deepep-installer")
    assert driver["name"] in staging["dependsOn"]


def test_gke_s_own_drivers_get_no_daemonset() -> None:
    for driver in ("LATEST", "DEFAULT"):
        names = {o["metadata"].get("name") for o in manifests(plan("gke-b200", gkeGpuDriver=driver))}
        assert cos_driver.NAME not in names, driver


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ({"gkeGpuDriver": "cos-installer"}, "set gkeCosDriverVersion"),
        ({"gkeGpuDriver": "cos-installer", "gkeCosDriverVersion": "latest"}, "gkeGpuDriver=DEFAULT or LATEST"),
        ({"gkeGpuDriver": "cos-installer", "gkeCosDriverVersion": ""}, "set gkeCosDriverVersion"),
        ({"gkeGpuDriver": "cos-installer", "gkeCosDriverVersion": "550.54.15"}, "570 branch or newer"),
        ({"gkeGpuDriver": "cos-installer", "gkeCosDriverVersion": "570"}, "a driver build"),
        ({"gkeCosDriverVersion": BUILD}, "only with platform=gke and gkeGpuDriver=cos-installer"),
        ({"gkeGpuDriver": "LATEST", "gkeCosDriverVersion": BUILD}, "only with"),
    ],
)
def test_the_build_goes_with_the_choice_and_names_one_build(raw: dict[str, str], message: str) -> None:
    """The installer installs whatever the flag says ("latest" and "" are its own words for GKE-like choices),
    so the config takes one build, of a branch B200 runs, and only with the choice that uses it."""
    with pytest.raises(ConfigError) as err:
        parse({"project": "my-gpu-project", **raw}, "t")
    (problem,) = err.value.problems
    assert problem.key == "gkeCosDriverVersion" and message in str(err.value), str(err.value)


def test_host_install_keeps_its_own_driver() -> None:
    with pytest.raises(ConfigError) as err:
        parse(
            {
                "project": "my-gpu-project",
                "nodeProfile": "host-install",
                "gkeGpuDriver": "cos-installer",
                "gkeCosDriverVersion": BUILD,
            },
            "t",
        )
    assert [p.key for p in err.value.problems] == ["gkeGpuDriver"]


def test_a_new_build_is_a_new_version_set() -> None:
    """Changing the build relabels the nodes' version set, so the benchmark Jobs wait for the new driver."""
    from components.gke.installer import versions_hash

    a = parse({"project": "p-1234", "gkeGpuDriver": "cos-installer", "gkeCosDriverVersion": BUILD}, "t")
    b = parse({"project": "p-1234", "gkeGpuDriver": "cos-installer", "gkeCosDriverVersion": "570.195.03"}, "t")
    latest = parse({"project": "p-1234"}, "t")
    assert versions_hash(a, {}) != versions_hash(b, {}) != versions_hash(latest, {})

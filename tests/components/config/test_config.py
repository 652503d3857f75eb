"""The config model: every rule with its message, the schema in Pulumi.yaml, every stack file."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from components import config
from components.config import images, keys, upstream, versions
from components.config.model import VersionOverride
from deepep_a4.plan import engine as plan_engine
from tests.conftest import ROOT, stack_config

# The rules below are the host-install profile's (the field reports' path); the supported profile's own rules and
# defaults are in test_node_profile.py.
VALID: dict[str, Any] = {"project": "my-gpu-project", "nodeProfile": "host-install"}
# GCE on Google's accelerator image with its documented companions (inbox RDMA, the image's driver branch).
ACCEL: dict[str, Any] = {
    "platform": "gce",
    "gceImage": keys.ACCELERATOR_IMAGE,
    "nvidiaDriverVersion": "580",
    "useDocaOfed": False,
    "hcaPrefix": "rocep",
}


def problems_of(**raw: Any) -> list[config.Problem]:
    with pytest.raises(config.ConfigError) as err:
        config.parse({**VALID, **raw}, "test")
    return err.value.problems


def only_problem(**raw: Any) -> config.Problem:
    problems = problems_of(**raw)
    assert len(problems) == 1, [str(p) for p in problems]
    return problems[0]


def test_defaults_with_a_project_are_valid() -> None:
    cfg = config.parse(VALID, "dev")
    assert cfg.platform == "gke"
    assert cfg.node_count == 2
    assert cfg.provisioning == "spot"
    assert cfg.ttl_seconds == 8 * 3600
    assert cfg.name_prefix == "deepep-dev"
    assert cfg.shape.accelerator == "nvidia-b200"
    assert cfg.versions.torch_cuda_variant == "cu129"
    assert len(cfg.network.rdma_subnet_cidrs) == 8


def test_pulumi_strings_are_coerced() -> None:
    """The engine hands every value over as a string; lists arrive as JSON."""
    cfg = config.parse(
        {**VALID, "nodeCount": "4", "sshViaIap": "false", "benchmarks": '["intranode"]', "deepepPr466": "true"},
        "dev",
    )
    assert cfg.node_count == 4
    assert cfg.network.ssh_via_iap is False
    assert cfg.benchmarks.tests == ("intranode",)
    assert cfg.versions.deepep_pr466 is True


def test_config_is_frozen() -> None:
    cfg = config.parse(VALID, "dev")
    with pytest.raises(AttributeError):
        cfg.node_count = 3  # type: ignore[misc]


@pytest.mark.parametrize(
    ("raw", "key", "fragment"),
    [
        ({"platform": "eks"}, "platform", "must be one of: gke, gce"),
        ({"zone": "us-central1-a"}, "zone", "must be a zone of region asia-southeast1"),
        ({"region": "mars"}, "region", "region name"),
        ({"nodeCount": 0}, "nodeCount", "at least 1"),
        ({"nodeCount": "two"}, "nodeCount", "a whole number"),
        # (without internode: DeepEP's internode kernels run at most 20 nodes, rules/inputs.py)
        ({"nodeCount": 151, "benchmarks": ["intranode"]}, "nodeCount", "compact placement allows at most 150"),
        ({"hostCidr": "10.0.0.1/20"}, "hostCidr", "no host bits set"),
        ({"hostCidr": "banana"}, "hostCidr", "IPv4 CIDR"),
        ({"gvnicCidr": "8.8.8.0/24"}, "gvnicCidr", "private IPv4 range"),
        ({"gvnicCidr": "10.0.8.0/24"}, "gvnicCidr", "overlaps hostCidr"),
        ({"rdmaCidr": "192.168.0.0/27"}, "rdmaCidr", "/26 or larger"),
        ({"masterCidr": "172.16.0.0/24"}, "masterCidr", "/28"),
        ({"cudaVersion": "twelve"}, "cudaVersion", "must be a version"),
        ({"cudaVersion": "12.4", "torchVersion": "2.6.0+cu124"}, "cudaVersion", "needs CUDA 12.8 or newer"),
        ({"nvshmemVersion": "latest"}, "nvshmemVersion", "must be a version"),
        ({"torchVersion": "2.10.0"}, "torchVersion", "CUDA wheel variant"),
        ({"torchVersion": "2.10.0+cu130"}, "torchVersion", "does not match cudaVersion"),
        ({"deepepRef": "main"}, "deepepRef", "not a DeepEP tag or commit the project knows (v1.2.1, 29d31c095796..."),
        ({"deepepRef": "29d31c0"}, "deepepRef", "not a DeepEP tag or commit the project knows"),
        ({"deepepRef": "v1.2.1"}, "deepepRef", "predates DeepEP #564"),
        ({"deepepRef": "v1.2.1", "nvshmemVersion": "3.2.5"}, "nvshmemVersion", "needs NVSHMEM 3.3.9 or newer"),
        ({"nvshmemVersion": "3.5.21"}, "nvshmemVersion", "no checked NVIDIA/nvshmem source tag"),
        ({"nvshmemVersion": "3.5.20"}, "nvshmemVersion", "not a NVSHMEM release the project knows"),
        ({"nvshmemSource": "pip", "nvshmemVersion": "3.4.5"}, "nvshmemSource", "troubleshooting T12"),
        ({"nicHandler": "cpu"}, "nicHandler", "needs the GDRCopy kernel module"),
        ({"useDocaOfed": False}, "hcaPrefix", "mlx5_* HCA names come from DOCA-OFED"),
        ({"hcaPrefix": "rocep"}, "hcaPrefix", "DOCA-OFED renames HCAs"),
        ({"nvshmemSource": "conda"}, "nvshmemSource", "must be one of: pip, source"),
        ({"gidIndex": 300}, "gidIndex", "0-255"),
        ({"provisioning": "reservation"}, "reservationName", "needs the name of a reservation"),
        ({"provisioning": "flex-start", "reservationName": "r1"}, "reservationName", "only used with"),
        ({"ttl": "forever"}, "ttl", "must be a duration"),
        ({"ttl": "off"}, "ttl", "spot capacity needs a bill cap"),
        ({"ttl": "5m"}, "ttl", "between 10m and 120d"),
        (
            {"platform": "gce", "provisioning": "flex-start", "terminationAction": "STOP"},
            "terminationAction",
            "use DELETE",
        ),
        ({"bootDiskGb": 10}, "bootDiskGb", "100-65536"),
        ({"localSsdCount": 4}, "localSsdCount", "32 or 0"),
        ({"gkeVersion": "latest"}, "gkeVersion", "GKE version"),
        ({"gkeAuthorizedNetworks": ["0.0.0.0/0"]}, "gkeAuthorizedNetworks", "every address"),
        (
            {"platform": "gke", "nodeProfile": "supported", "installerImage": "buildpack-deps:noble-curl"},
            "installerImage",
            "must be pinned by digest",
        ),
        ({"gkeAuthorizedNetworks": ["0.0.0.0/1", "128.0.0.0/1"]}, "gkeAuthorizedNetworks", "cover 0.0.0.0/0"),
        ({"zone": "asia-southeast1-a"}, "zone", "only in asia-northeast1-b, asia-southeast1-b"),
        ({"gceImage": images.PLAIN_UBUNTU_IMAGE}, "gceImage", "read only on platform gce, not gke"),
        ({"platform": "gce", "gkeVersion": "1.33.5-gke.1162000"}, "gkeVersion", "read only on platform gke"),
        ({"provisioning": "reservation", "reservationName": "r", "placement": "compact"}, "placement", "comes placed"),
        ({"artifactStore": "gs://my-bucket"}, "artifactStore", "the prefix limits the nodes' access grant"),
        ({"nvidiaDriverVersion": "550.163.01"}, "nvidiaDriverVersion", "cannot drive a B200"),
        ({"nvidiaDriverVersion": "585"}, "nvidiaDriverVersion", "not one the project knows (570, 575, 580, 590)"),
        (
            {"cudaVersion": "13.0", "torchVersion": "2.10.0+cu130", "nvidiaDriverVersion": "575"},
            "nvidiaDriverVersion",
            "needs driver branch 580",
        ),
        ({"cudaVersion": "12.10"}, "cudaVersion", "not a CUDA toolkit the project"),
        ({"torchVersion": "2.99.0+cu129"}, "torchVersion", "cu129 builds: 2.8.0, 2.10.0"),
        ({"docaOfedVersion": "9.9.9"}, "docaOfedVersion", "not a DOCA-OFED release the project knows"),
        ({"gdrcopyVersion": "2.9.9"}, "gdrcopyVersion", "not a GDRCopy release the project knows"),
        ({"gkeVersion": "1.32.6-gke.1000000"}, "gkeVersion", "1.32.7-gke.1067000 (1.32) or 1.33.3-gke.1247000"),
        ({"gkeVersion": "1.33.2-gke.1"}, "gkeVersion", "on UBUNTU_CONTAINERD"),
        ({"benchmarks": ["intranode", "allreduce"]}, "benchmarks", "one of: intranode"),
        ({"nodeCount": 1}, "benchmarks", "internode test needs nodeCount of 2"),
        ({"benchProcesses": 9}, "benchProcesses", "1-8"),
        ({"intranodeExperts": 100}, "intranodeExperts", "multiple of benchProcesses"),
        ({"benchGateRatio": "1.5"}, "benchGateRatio", "between 0 and 1"),
        ({"project": "X"}, "project", "project ID"),
        ({"namePrefix": "Bad_Prefix"}, "namePrefix", "a-z, 0-9"),
        ({"sshViaIap": "yes"}, "sshViaIap", "true or false"),
        # An accelerator image ships its driver: another branch (or a build the family will not keep) is refused.
        ({**ACCEL, "nvidiaDriverVersion": "570"}, "nvidiaDriverVersion", "gceImage ships NVIDIA driver branch 580"),
        ({**ACCEL, "nvidiaDriverVersion": "580.126.09"}, "nvidiaDriverVersion", "set 580"),
        (
            {**ACCEL, "gceImage": "projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accelerator-2404"},
            "gceImage",
            "must name its driver branch",
        ),
    ],
)
def test_each_rule_names_key_value_and_what_is_allowed(raw: dict[str, Any], key: str, fragment: str) -> None:
    problem = only_problem(**raw)
    assert problem.key == key
    assert fragment in problem.allowed
    text = str(problem)
    assert text.startswith(f"deepep-a4:{key} = ")
    assert fragment in text


def test_unknown_key_is_refused_with_a_hint() -> None:
    problem = only_problem(nodecount=3)
    assert problem.key == "nodecount"
    assert "unknown key" in problem.allowed
    assert "did you mean nodeCount?" in problem.allowed
    assert "did you mean cudaVersion?" in only_problem(cudaVerison="12.9").allowed


def test_every_problem_is_reported_at_once() -> None:
    problems = problems_of(platform="aks", nodeCount=0, cudaVersion="12.0", nicHandler="cpu", tpyo="x")
    keys = {p.key for p in problems}
    assert {"platform", "nodeCount", "cudaVersion", "nicHandler", "tpyo"} <= keys


def test_a_node_profile_outside_its_choices_is_reported_without_advice_built_on_it() -> None:
    """nodeProfile picks the defaults and most rules: with a value it does not know, the plan names it (and
    unknown keys, and values of the wrong type) and nothing else, so no rule advises on a profile the stack does
    not have (`host_install` must not be told to remove its host-install keys)."""
    problems = problems_of(nodeProfile="host_install", nodeCount="two", useDocaOfed=True, tpyo="x")
    assert {p.key for p in problems} == {"nodeProfile", "nodeCount", "tpyo"}


def test_cpu_nic_handler_with_gdrcopy_module_is_valid() -> None:
    cfg = config.parse({**VALID, "nicHandler": "cpu", "gdrcopyKernelModule": True}, "dev")
    assert cfg.nvshmem.nic_handler == "cpu"


def test_the_accelerator_image_with_its_branch_and_the_inbox_stack_is_valid() -> None:
    cfg = config.parse({**VALID, **ACCEL}, "dev")
    assert cfg.gce.image_ref.driver_branch == "580" and not cfg.installer.use_doca_ofed
    # The same image on the gke platform would never be booted: the key is refused, not ignored.
    problem = only_problem(**{**ACCEL, "platform": "gke", "nvidiaDriverVersion": "570"})
    assert problem.key == "gceImage" and "read only on platform gce" in problem.allowed


def test_rocep_without_doca_is_valid() -> None:
    cfg = config.parse({**VALID, "hcaPrefix": "rocep", "useDocaOfed": False}, "dev")
    assert cfg.nvshmem.hca_prefix == "rocep"


def test_on_demand_may_run_without_ttl_and_reservation_with_name() -> None:
    assert config.parse({**VALID, "provisioning": "on-demand", "ttl": "off"}, "dev").ttl_seconds is None
    cfg = config.parse({**VALID, "provisioning": "reservation", "reservationName": "a4-res"}, "dev")
    assert cfg.reservation_name == "a4-res"


def test_flex_start_ttl_is_capped_at_seven_days() -> None:
    flex = {"platform": "gce", "provisioning": "flex-start", "terminationAction": "DELETE"}
    [problem] = problems_of(**flex, ttl="8d")
    assert (problem.key, problem.value) == ("ttl", "8d") and "at most 7d" in problem.allowed
    assert config.parse({**VALID, **flex, "ttl": "7d"}, "dev").ttl_seconds == 7 * 86400
    assert config.parse({**VALID, "provisioning": "spot", "ttl": "8d"}, "dev").ttl_seconds == 8 * 86400


@pytest.mark.parametrize(("text", "seconds"), [("8h", 28800), ("90m", 5400), ("1d12h", 129600), ("off", None)])
def test_ttl_parsing(text: str, seconds: int | None) -> None:
    assert config.parse_ttl(text) == seconds


@pytest.mark.parametrize(
    ("source", "version", "ok"),
    [
        ("source", "3.3.9", True),
        ("source", "3.3.20", False),  # duplicate IBGDA device state without DeepEP #564's RDC
        ("pip", "3.4.5", True),
        ("pip", "3.5.19", False),  # NVSHMEM 3.5's QP layout
    ],
)
def test_deepep_v121_runs_only_the_nvshmem_it_was_checked_with(source: str, version: str, ok: bool) -> None:
    raw = {"deepepRef": "v1.2.1", "nvshmemSource": source, "nvshmemVersion": version, "benchmarks": ["intranode"]}
    if ok:
        assert config.parse({**VALID, **raw}, "test").versions.deepep_ref == "v1.2.1"
    else:
        problem = only_problem(**raw)
        assert (problem.key, problem.value) == ("deepepRef", "v1.2.1")
        assert "only before" in problem.allowed and "29d31c095796f3c8ece47ee9cdcc167051bbeed9" in problem.allowed


def test_a_deepep_commit_the_project_does_not_know_is_refused() -> None:
    problem = only_problem(deepepRef="a" * 40, nvshmemVersion="3.3.9")
    assert (problem.key, problem.value) == ("deepepRef", "a" * 40)
    assert "DEEPEP_REFS" in problem.allowed


def test_rdma_range_is_split_into_eight_subnets_in_order() -> None:
    cfg = config.parse({**VALID, "rdmaCidr": "10.200.0.0/16"}, "dev")
    assert cfg.network.rdma_subnet_cidrs[0] == "10.200.0.0/19"
    assert cfg.network.rdma_subnet_cidrs[7] == "10.200.224.0/19"


def _schema() -> dict[str, Any]:
    return yaml.safe_load((ROOT / "Pulumi.yaml").read_text())


def test_pulumi_yaml_declares_every_key_with_description_and_model_default() -> None:
    declared = {k: v for k, v in _schema()["config"].items() if ":" not in k}
    assert set(declared) == set(config.KEYS_BY_NAME)
    kinds = {str: "string", int: "integer", bool: "boolean", list: "array"}
    for key in config.KEYS:
        entry = declared[key.name]
        assert entry["type"] == kinds[key.kind], key.name
        assert entry["description"].startswith(key.description), key.name
        assert entry["default"] == key.default, key.name


def test_pulumi_yaml_project_settings() -> None:
    doc = _schema()
    assert doc["name"] == config.PROJECT_NAME
    assert doc["runtime"]["name"] == "python"
    assert doc["runtime"]["options"] == {"toolchain": "pip", "virtualenv": ".venv"}
    assert doc["stackConfigDir"] == "stacks"
    assert doc["config"]["pulumi:disable-default-providers"] == ["kubernetes"]


@pytest.mark.parametrize("stack", plan_engine.available_stacks())
def test_every_stack_file_validates(stack: str) -> None:
    raw = plan_engine.project_keys(plan_engine.read_stack_config(stack))
    cfg = config.parse(raw, stack)
    assert cfg.stack == stack


def test_stacks_carry_the_seed_versions() -> None:
    gke = config.parse(plan_engine.project_keys(plan_engine.read_stack_config("gke-b200-ubuntu")), "gke-b200-ubuntu")
    assert gke.platform == "gke"
    # No pinned GKE version: the release channel's is chosen at deploy (tests/components/gke/test_platform.py).
    assert gke.gke.version == ""
    # The field report's NVSHMEM 3.2.5 went with the DeepEP main of its day; a pinned v1.2.1 needs 3.3.9-3.3.19.
    assert (gke.versions.doca_ofed, gke.versions.nvshmem, gke.versions.gdrcopy) == ("3.0.0", "3.3.9", "2.5.1")
    assert gke.versions.deepep_ref == "v1.2.1"
    assert gke.versions.nvidia_driver.startswith("580.")  # R2 ran 575, a branch NVIDIA no longer supports
    gce = config.parse(plan_engine.project_keys(plan_engine.read_stack_config("gce-b200-ubuntu")), "gce-b200-ubuntu")
    assert gce.platform == "gce"
    assert (gce.versions.doca_ofed, gce.versions.nvshmem, gce.versions.cuda) == ("3.2.1", "3.5.19", "12.9")
    assert gce.versions.torch == "2.10.0+cu129"
    assert gce.versions.deepep_pr466 is True
    assert gce.versions.deepep_ref.startswith("29d31c0")  # field report R0: DeepEP 1.2.1+29d31c0
    assert (gce.nvshmem.nic_handler, gce.nvshmem.hca_prefix, gce.nvshmem.gid_index) == ("gpu", "mlx5", 3)


@pytest.mark.parametrize(
    ("version", "url"),
    [
        ("3.2.5", "https://developer.download.nvidia.com/compute/redist/nvshmem/3.2.5/source/nvshmem_src_3.2.5-1.txz"),
        (
            "3.3.9",
            "https://developer.download.nvidia.com/compute/redist/nvshmem/3.3.9/source/"
            "nvshmem_src_cuda12-all-all-3.3.9.tar.gz",
        ),
        ("3.4.5", "https://github.com/NVIDIA/nvshmem/archive/refs/tags/v3.4.5-0.tar.gz"),
        ("3.5.19", "https://github.com/NVIDIA/nvshmem/archive/refs/tags/v3.5.19-1.tar.gz"),  # field report R1
    ],
)
def test_nvshmem_sources_come_from_where_each_release_lives(version: str, url: str) -> None:
    assert upstream.nvshmem_source_url(version) == url


def test_generated_files_equal_the_key_table() -> None:
    # Pulumi.yaml's schema and docs/settings.md come from keys.py; an edit of one without the other fails here.
    from deepep_a4 import schema

    for path, text in schema.targets(ROOT).items():
        assert path.read_text() == text, f"{path} is stale: .venv/bin/python -m deepep_a4.schema --write"


def test_settings_reference_lists_every_key_with_its_allowed_values() -> None:
    text = (ROOT / "docs" / "settings.md").read_text()
    for key in config.KEYS:
        row = next(line for line in text.splitlines() if line.startswith(f"| `{key.name}` |"))
        for choice in key.choices:
            assert choice in row


@pytest.mark.parametrize("driver", ["DEFAULT", "LATEST"])
def test_a_gke_loaded_driver_is_refused_because_peer_mapping_could_never_apply(driver: str) -> None:
    """host-install only: the supported profile runs GKE's driver (test_node_profile.py)."""
    with pytest.raises(config.ConfigError) as err:
        config.parse(
            {"project": "my-project-1", "platform": "gke", "nodeProfile": "host-install", "gkeGpuDriver": driver}, "t"
        )
    (problem,) = err.value.problems
    assert problem.key == "gkeGpuDriver" and "insmod" in problem.allowed and "PeerMappingOverride" in problem.allowed


# -- known-version tables and the override beyond them --------------------------------------------

SHA = "cd" * 32  # rendering only


def _override(component: str, version: str, url: str, sha256: str = SHA) -> str:
    return json.dumps({component: {"version": version, "url": url, "sha256": sha256}})


def test_stack_versions_are_in_the_tables() -> None:
    cfg = config.parse(VALID, "dev")
    v = cfg.versions
    assert v.cuda in versions.CUDA_VERSIONS and v.gdrcopy in versions.GDRCOPY_VERSIONS
    assert v.doca_ofed in versions.DOCA_OFED_VERSIONS and v.nvshmem in versions.NVSHMEM_VERSIONS
    assert v.torch.split("+")[0] in versions.TORCH_BUILDS[v.torch_cuda_variant]
    assert versions.driver_branch(v.nvidia_driver) in versions.DRIVER_BRANCHES
    assert cfg.zone in versions.A4_ZONES[cfg.machine_type] and cfg.untested == ()


def test_an_override_skips_the_table_and_marks_the_stack_untested() -> None:
    url = "https://github.com/NVIDIA/nvshmem/archive/refs/tags/v3.6.5-0.tar.gz"
    cfg = config.parse(
        {**VALID, "nvshmemVersion": "3.6.5", "versionOverrides": _override("nvshmem", "3.6.5", url)}, "t"
    )
    assert cfg.versions.override("nvshmem") == VersionOverride("nvshmem", "3.6.5", url, SHA)
    assert cfg.untested == ("nvshmem 3.6.5",)
    # Without it the same version has no checked source tag.
    assert "no checked NVIDIA/nvshmem source tag" in only_problem(nvshmemVersion="3.6.5").allowed


@pytest.mark.parametrize(
    ("value", "key", "fragment"),
    [
        ("not json", "versionOverrides", "must be a JSON object"),
        (_override("deepep", "v1", "https://x"), "versionOverrides.deepep", "unknown component"),
        (json.dumps({"gdrcopy": {"version": "2.5.1"}}), "versionOverrides.gdrcopy", "three strings"),
        (_override("gdrcopy", "2.6", "https://x"), "versionOverrides.gdrcopy.version", "must equal gdrcopyVersion"),
        (_override("gdrcopy", "2.5.1", "ftp://x"), "versionOverrides.gdrcopy.url", "https://"),
        (_override("gdrcopy", "2.5.1", "https://x", "A" * 64), "versionOverrides.gdrcopy.sha256", "64 lower-case"),
        (_override("docaOfed", "3.2.1", "https://x/key"), "versionOverrides.docaOfed.url", "GPG-KEY-Mellanox.pub"),
    ],
)
def test_a_bad_override_is_one_problem(value: str, key: str, fragment: str) -> None:
    problem = only_problem(versionOverrides=value)
    assert problem.key == key and fragment in problem.allowed


def test_the_installer_fetches_the_override_url_and_checks_its_digest() -> None:
    from components.node import installer

    url = f"{versions.DOCA_REPO_BASE}/3.3.0/ubuntu24.04/x86_64/GPG-KEY-Mellanox.pub"
    raw = {**VALID, "docaOfedVersion": "3.3.0", "versionOverrides": _override("docaOfed", "3.3.0", url)}
    cfg = config.parse(raw, "t")
    assert installer.checksums(cfg)["doca-3.3.0-GPG-KEY-Mellanox.pub"] == SHA
    nv = "https://example.org/nvshmem-3.6.5.tar.gz"
    cfg = config.parse({**VALID, "nvshmemVersion": "3.6.5", "versionOverrides": _override("nvshmem", "3.6.5", nv)}, "t")
    assert installer.nvshmem_src_url(cfg) == nv
    assert installer.checksums(cfg)["nvshmem-3.6.5-source"] == SHA


def test_the_gke_floor_follows_the_node_image_type() -> None:
    assert config.parse(VALID, "dev").gke.image_type == versions.UBUNTU
    assert versions.below_gke_floor("1.32.4-gke.1236000", versions.UBUNTU)
    assert not versions.below_gke_floor("1.32.4-gke.1236000", versions.COS)
    assert versions.below_gke_floor("1.32.3-gke.1", versions.COS)
    assert versions.below_gke_floor("1.33.3-gke.1246999", versions.UBUNTU)
    assert not versions.below_gke_floor("1.33.3-gke.1247000", versions.UBUNTU)
    assert not versions.below_gke_floor("1.34.1-gke.1", versions.UBUNTU)
    assert versions.below_gke_floor("1.31.9-gke.1", versions.UBUNTU)


def test_an_unpinned_installer_image_passes_only_with_allow_unpinned_images() -> None:
    # Kubernetes pulls a tag's current bytes at every pull (https://kubernetes.io/docs/concepts/containers/images/
    # "Image names": a digest "identifies a specific version of the image, so Kubernetes runs the same code
    # every time"); the staging container runs as root on every A4 node.
    tag = {"installerImage": "buildpack-deps:noble-curl"}
    with pytest.raises(config.ConfigError):
        config.parse(plan_engine.project_keys(stack_config("gke-b200", **tag)), "gke-b200")
    cfg = config.parse(plan_engine.project_keys(stack_config("gke-b200", **tag, allowUnpinnedImages=True)), "gke-b200")
    assert cfg.gke.installer_image == "buildpack-deps:noble-curl"
    pinned = {"installerImage": "buildpack-deps:noble-curl@sha256:" + "0" * 64}
    assert config.parse(plan_engine.project_keys(stack_config("gke-b200", **pinned)), "gke-b200")

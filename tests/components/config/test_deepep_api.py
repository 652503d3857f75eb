"""deepepApi: DeepEP V1 or V2 (EPv2), checked against what DeepEP V2 itself requires.

Upstream facts (deepseek-ai/DeepEP at dd758caf451848bd150e1046af3d0a73e5fff38d):
- README.md "Requirements": "PyTorch 2.10 and above", "NCCL 2.30.4 and above" (quoted in
  tests/fixtures/deepep/v2_readme_requirements.txt, which these tests parse).
- deep_ep/__init__.py check_nccl_so(): "Duplicate NCCL runtime found in the current system": one NCCL per process,
  so V2 replaces PyTorch's NCCL instead of adding one.
- third-party/fmt is a git submodule (.gitmodules): a V2 checkout needs it (upstream.DEEPEP_V2_FMT).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from components import config
from components.config import upstream, versions
from tests.conftest import ROOT

VALID: dict[str, Any] = {"project": "my-gpu-project", "nodeProfile": "host-install"}
README = (ROOT / "tests/fixtures/deepep/v2_readme_requirements.txt").read_text()


def _parse(**raw: Any) -> config.StackConfig:
    return config.parse({**VALID, **raw}, "test")


def _only(**raw: Any) -> config.Problem:
    with pytest.raises(config.ConfigError) as err:
        _parse(**raw)
    assert len(err.value.problems) == 1, [str(p) for p in err.value.problems]
    return err.value.problems[0]


def _readme_floor(what: str) -> tuple[int, ...]:
    found = re.search(rf"^- {what} ([\d.]+) and above$", README, re.M)
    assert found, what
    return upstream.version_tuple(found[1])


def test_the_v2_ref_needs_what_deepep_v2_readme_says() -> None:
    ref = upstream.DEEPEP_REFS[upstream.DEEPEP_V2]
    assert README.startswith(f"# deepseek-ai/DeepEP README.md at {ref.commit}")
    assert (ref.api, ref.min_torch, ref.min_nccl) == ("v2", _readme_floor("PyTorch"), _readme_floor("NCCL"))
    assert re.fullmatch(r"[0-9a-f]{40}", ref.commit) and re.fullmatch(r"[0-9a-f]{40}", upstream.DEEPEP_V2_FMT)


def test_v1_stays_the_default() -> None:
    v = _parse().versions
    assert (v.deepep_api, v.deepep_ref, v.nccl) == ("v1", upstream.DEEPEP_NVSHMEM35_FIXES, "")


def test_v2_takes_the_v2_ref_without_pr466_and_a_pinned_nccl() -> None:
    v = _parse(deepepApi="v2").versions
    assert (v.deepep_api, v.deepep_ref, v.deepep_pr466, v.nccl) == ("v2", upstream.DEEPEP_V2, False, "2.32.3")
    # torch 2.10.0+cu129 (the default) gets the CUDA 12 wheel, by hash; torch 2.11.0+cu130 the CUDA 13 one.
    assert versions.nccl_wheel(v.nccl, "cu129")[0] == "nvidia-nccl-cu12"
    package, wheel, sha = versions.nccl_wheel(v.nccl, "cu130")
    assert (package, wheel) == ("nvidia-nccl-cu13", "nvidia_nccl_cu13-2.32.3-py3-none-manylinux_2_27_x86_64.whl")
    assert re.fullmatch(r"[0-9a-f]{64}", sha)


def test_every_pinned_nccl_wheel_meets_the_readme_floor() -> None:
    for version in versions.NCCL_WHEELS:
        assert upstream.version_tuple(version) >= _readme_floor("NCCL")


def test_v2_runs_with_torch_2_11_cu130() -> None:
    # The supported profile: PyTorch comes from the store's artifact there, so no lock file is needed.
    v = _parse(deepepApi="v2", nodeProfile="supported", cudaVersion="13.0", torchVersion="2.11.0+cu130").versions
    assert (v.torch, v.nccl) == ("2.11.0+cu130", "2.32.3")


@pytest.mark.parametrize(
    ("raw", "key", "words"),
    [
        (
            {"deepepApi": "v2", "nodeProfile": "supported", "cudaVersion": "12.8", "torchVersion": "2.9.0+cu128"},
            "torchVersion",
            "PyTorch 2.10",
        ),
        ({"deepepApi": "v2", "ncclVersion": "2.28.9"}, "ncclVersion", "needs NCCL 2.30.4 or newer"),
        ({"deepepApi": "v2", "ncclVersion": "2.30.7"}, "ncclVersion", "not an NCCL wheel the project pins for cu129"),
        ({"deepepApi": "v2", "ncclVersion": "latest"}, "ncclVersion", "must be an NCCL version"),
        ({"deepepApi": "v2", "deepepRef": upstream.DEEPEP_NVSHMEM35_FIXES}, "deepepApi", "needs a DeepEP V2 ref"),
        ({"deepepApi": "v2", "deepepPr466": True}, "deepepPr466", "patches the V1 refs"),
        ({"deepepRef": upstream.DEEPEP_V2}, "deepepRef", "set deepepApi=v2"),
        ({"ncclVersion": "2.32.3"}, "ncclVersion", "only deepepApi=v2 installs its own NCCL"),
        ({"deepepApi": "v3"}, "deepepApi", "must be one of: v1, v2"),
    ],
)
def test_other_combinations_are_refused_with_one_line(raw: dict[str, Any], key: str, words: str) -> None:
    problem = _only(**raw)
    assert problem.key == key and words in problem.allowed, str(problem)


def test_v2_names_itself_and_its_nccl_in_the_staged_parts_and_v1_keys_stay() -> None:
    from components.node import staging

    supported = {"nodeProfile": "supported"}
    v1, v2 = _parse(**supported), _parse(deepepApi="v2", **supported)
    assert "deepepApi" not in staging._inputs(v1, "gke")["pytorch"]  # V1's keys as before V2 existed
    for part in ("pytorch", "deepep"):
        doc = staging._inputs(v2, "gke")[part]
        assert (doc["deepepApi"], doc["nccl"]) == ("v2", "2.32.3")
        assert staging.part_key(v1, "gke", part) != staging.part_key(v2, "gke", part)
    assert staging.part_key(v1, "gke", "nvshmem") == staging.part_key(v2, "gke", "nvshmem")


def test_the_elastic_pod_mounts_the_jit_cache_writable_over_the_read_only_root() -> None:
    # V2 compiles kernels into EP_JIT_CACHE_DIR (csrc/jit/compiler.hpp); the env file points it at <root>/deepep-jit.
    from components.gke import bench as gke_bench

    cfg = _parse(deepepApi="v2", nodeProfile="supported", benchmarks=["intranode", "elastic"])
    spec = gke_bench.bench_pod_spec(cfg, "elastic", "runner-cm", "hash")
    root = gke_bench.node_paths(cfg)["root"]
    mounts = {m["name"]: m for m in spec["containers"][0]["volume_mounts"]}
    assert mounts["install-root"]["read_only"] is True
    assert mounts["deepep-jit"] == {"name": "deepep-jit", "mount_path": f"{root}/deepep-jit"}
    vols = {v["name"]: v for v in spec["volumes"]}
    assert vols["deepep-jit"]["host_path"] == {"path": f"{root}/deepep-jit", "type": "DirectoryOrCreate"}
    v1 = gke_bench.bench_pod_spec(_parse(nodeProfile="supported"), "intranode", "runner-cm", "hash")
    assert "deepep-jit" not in {v["name"] for v in v1["volumes"]}


def test_elastic_is_refused_without_v2() -> None:
    assert _only(benchmarks=["intranode", "elastic"]).allowed.startswith("the elastic test is DeepEP V2's")

"""The host-install PyTorch from a locked requirements file (components/node/torch_lock.py, scripts/install/locks/):
the lock is complete for what torch requires, every line has a sha256, the phase installs it with
--require-hashes, and config refuses a host-install stack whose torch has no lock unless the store brings it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from components import artifacts, config
from components.config import versions
from components.node import installer, torch_lock
from scripts import payload
from tests.components.node.test_installer import Machine, cfg_of, install
from tests.conftest import ROOT

LOCKS = ROOT / "scripts/install/locks"
FIXTURE = ROOT / "tests/fixtures/pytorch/torch-2.10.0_metadata.txt"
# The +cu129 wheel's sha256 as NVIDIA-NeMo/RL's uv.lock records it (the lock's header cites the commit).
TORCH_CU129_CP312 = "a3c703e74a88cccfeb4b1807c49d563a0a73793ba72d4fa035d4ac5885f3aefd"


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def parse_lock(text: str) -> dict[str, tuple[str, list[str]]]:
    """name -> (version, sha256s) of a requirements file in pip's hash-checking form."""
    out: dict[str, tuple[str, list[str]]] = {}
    for block in re.split(r"\n(?=[A-Za-z])", "\n".join(line for line in text.splitlines() if not line.startswith("#"))):
        if not block.strip():
            continue
        head = re.match(r"^([A-Za-z0-9_.-]+)==(\S+) \\$", block.splitlines()[0])
        assert head, block
        hashes = re.findall(r"--hash=sha256:(\S+)", block)
        assert hashes and all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes), block
        assert norm(head[1]) not in out, head[1]
        out[norm(head[1])] = (head[2], hashes)
    return out


def test_the_table_names_exactly_the_lock_files() -> None:
    assert sorted(versions.TORCH_LOCKS.values()) == sorted(p.name for p in LOCKS.glob("*.txt"))
    for torch, name in versions.TORCH_LOCKS.items():
        assert name == f"torch-{torch.replace('+', '-')}-cp312-x86_64.txt"  # ConfigMap keys take no '+'
    cfg = cfg_of()
    assert torch_lock.lock_path(cfg) == "locks/torch-2.10.0-cu129-cp312-x86_64.txt"
    assert torch_lock.lock_text(cfg) == (LOCKS / "torch-2.10.0-cu129-cp312-x86_64.txt").read_text()
    artifacts.reset()
    files = installer.render_installer(cfg, "gce")
    assert "TORCH_LOCK=locks/torch-2.10.0-cu129-cp312-x86_64.txt\n" in files["config.sh"]
    assert files["locks/torch-2.10.0-cu129-cp312-x86_64.txt"] == torch_lock.lock_text(cfg)
    # Only the pytorch phase takes it: a staged node's installer ships no lock.
    assert not [p for p in payload.installer_files(("stage", "verify-staged")) if p.startswith("locks/")]


def test_the_lock_holds_torch_and_everything_it_requires_each_by_sha256() -> None:
    lock = parse_lock((LOCKS / "torch-2.10.0-cu129-cp312-x86_64.txt").read_text())
    assert lock["torch"] == ("2.10.0+cu129", [TORCH_CU129_CP312])
    # What torch 2.10.0 requires (its PyPI wheel's METADATA; the CUDA wheels in their cu129 pins below).
    metadata = FIXTURE.read_text()
    release_pins = dict(re.findall(r"^Requires-Dist: ([\w-]+)==([\d.]+);", metadata, re.M))
    # One pin for every CUDA 12 build of the release:
    for name in ("cuda-bindings", "nvidia-cudnn-cu12", "nvidia-nccl-cu12", "nvidia-nvshmem-cu12"):
        assert lock[name][0] == release_pins[name], name
    assert lock["nvidia-cusparselt-cu12"][0] == release_pins["nvidia-cusparselt-cu12"]
    cuda_wheels = {n for n in release_pins if n.startswith("nvidia-")}
    plain = {"filelock", "typing-extensions", "setuptools", "sympy", "networkx", "jinja2", "fsspec", "triton"}
    transitive = {"mpmath", "markupsafe", "cuda-pathfinder"}  # sympy, jinja2, cuda-bindings
    phase = {"numpy", "ninja", "packaging"}  # the phase's own (NUMPY_SPEC numpy<3)
    assert set(lock) == {"torch", "cuda-bindings"} | cuda_wheels | plain | transitive | phase
    assert lock["triton"][0] == "3.6.0" and int(lock["numpy"][0].split(".")[0]) < 3
    assert int(lock["typing-extensions"][0].split(".")[1]) >= 10 and lock["sympy"][0] >= "1.13.3"


def test_the_phase_installs_the_lock_with_hashes(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render(cfg_of())
    install(m, d)
    calls = m.log.read_text()
    lock = str(d / "locks/torch-2.10.0-cu129-cp312-x86_64.txt")
    pip = [line for line in calls.splitlines() if line.startswith("venv-python -m pip install")]
    assert any("--require-hashes" in line and f"-r {lock}" in line for line in pip), pip
    # Nothing unhashed before it: no pip/setuptools upgrade, no torch named on the command line.
    assert not any("--upgrade pip" in line or "torch==" in line for line in pip), pip


def test_a_node_whose_python_is_not_the_locks_refuses(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render(cfg_of())
    assert m.run(d, STUB_PYTHON_ABI="cp310").returncode == 75
    m.reboot()
    proc = m.run(d, STUB_PYTHON_ABI="cp310")
    assert proc.returncode == 1 and "phase 'pytorch' failed" in proc.stderr
    assert "is for cp312; this node's venv runs cp310" in proc.stderr


def problems(**overrides: Any) -> list[str]:
    with pytest.raises(config.ConfigError) as err:
        cfg_of(**overrides)
    return [str(p) for p in err.value.problems]


def test_config_refuses_host_install_torch_without_a_lock_or_the_store() -> None:
    unlocked = {"nvshmemVersion": "3.4.5", "cudaVersion": "12.8", "torchVersion": "2.9.1+cu128"}
    (line,) = problems(**unlocked)
    assert "torchVersion = '2.9.1+cu128'" in line and "has no locked requirements file with hashes" in line
    assert "artifactStoreManifest" in line and "TORCH_LOCKS" in line
    # The store's artifact brings it (the manifest pins its digest); the supported profile never uses pip.
    cfg_of(**unlocked, artifactStore="gs://bucket/prefix", artifactStoreManifest="ab" * 32)
    cfg_of(**unlocked, artifactStore="gs://bucket/prefix")  # the builder's turn: it makes the artifact
    cfg_of("gce-b200", **unlocked)
    for stack in sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml")):
        cfg_of(stack)  # every example stack keeps working

"""The pytorch phase's NCCL check for DeepEP V2 (scripts/install/phases/08-pytorch.sh check_one_nccl) asks the
library the process loaded, not PyTorch.

`torch.cuda.nccl.version()` returns the NCCL_MAJOR/MINOR/PATCH macros PyTorch was compiled with
(pytorch/pytorch e6f159a3 torch/csrc/cuda/nccl.cpp `version()`): a torch 2.11.0+cu130 whose venv holds only NCCL
2.32.3 still says (2, 28, 9) (the real run on 1 x H200, tests/fixtures/install/hw/hwtest-v2-1xh200-nccl-loaded.txt),
so the old check failed every V2 build. The check now reads /proc/self/maps after `import torch` and calls the
mapped library's own ncclGetVersion. Here it runs in a real venv whose stand-in `torch` maps stand-in libnccl
builds (gcc) that report a chosen version, as libtorch_cuda's DT_NEEDED libnccl.so.2 is mapped at import.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

PHASE = (ROOT / "scripts/install/phases/08-pytorch.sh").read_text()
SNIPPET = PHASE.split('"$(venv_python)" - "$NCCL_VERSION" <<\'PY\'\n', 1)[1].split("\nPY\n", 1)[0]
REAL = (ROOT / "tests/fixtures/install/hw/hwtest-v2-1xh200-nccl-loaded.txt").read_text()
pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc for the stand-in libraries")


def _functions() -> dict[str, Any]:
    space: dict[str, Any] = {"__name__": "check_one_nccl"}  # not "__main__": its functions, not its main()
    exec(compile(SNIPPET, "check_one_nccl", "exec"), space)
    return space


def test_the_real_runs_maps_name_the_venvs_library_and_its_version_code_reads_2_32_3() -> None:
    f = _functions()
    maps = "\n".join(line for line in REAL.splitlines() if "libnccl" in line)
    venv_lib = "/opt/deepep-hwtest/venv/lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"
    # realpath of a path that does not exist here is itself
    assert f["mapped_nccl"](maps) == [venv_lib]
    code = int(REAL.split("ncclGetVersion ", 1)[1].split()[0])
    assert f["version_text"](code) == "2.32.3"
    assert f["version_text"](2708) == "2.7.8"  # the old encoding, NCCL_VERSION for X<=2 and Y<=8
    # What PyTorch says on the same process: its compile-time header, which is why the check cannot ask it.
    assert "torch.cuda.nccl.version() (2, 28, 9)" in REAL


def _libnccl(out: Path, code: int) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.parent / "nccl_standin.c"
    src.write_text(f"int ncclGetVersion(int *v) {{ *v = {code}; return 0; }}\n")
    subprocess.run(["gcc", "-shared", "-fPIC", "-Wl,-soname,libnccl.so.2", "-o", str(out), str(src)], check=True)
    src.unlink()
    return out


def _venv(tmp: Path, code: int, extra: Path | None = None, load_other: Path | None = None) -> Path:
    """A venv with one nvidia-nccl-cu13 2.32.3 distribution whose libnccl reports `code`, and a stand-in torch that
    maps it (or `load_other` instead), plus `extra` beside it."""
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    rel = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})).relative_to(venv)
    site = venv / rel
    lib = _libnccl(site / "nvidia/nccl/lib/libnccl.so.2", code)
    info = site / "nvidia_nccl_cu13-2.32.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-nccl-cu13\nVersion: 2.32.3\n")
    loads = [load_other or lib] + ([extra] if extra else [])
    (site / "torch").mkdir()
    (site / "torch/__init__.py").write_text(
        "import ctypes\n" + "".join(f"ctypes.CDLL({str(p)!r}, mode=ctypes.RTLD_GLOBAL)\n" for p in loads)
    )
    return venv / "bin/python"


def _check(py: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME")}
    return subprocess.run(
        [str(py), "-", "2.32.3"], input=SNIPPET, text=True, capture_output=True, env=env, check=False, timeout=60
    )


def test_one_loaded_nccl_of_the_stacks_version_passes(tmp_path: Path) -> None:
    proc = _check(_venv(tmp_path, 23203))
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip().endswith("nvidia/nccl/lib/libnccl.so.2")


def test_a_loaded_library_of_another_version_fails_naming_both(tmp_path: Path) -> None:
    proc = _check(_venv(tmp_path, 22809))
    assert proc.returncode != 0
    assert "is NCCL 2.28.9 (its ncclGetVersion), not 2.32.3" in proc.stderr


def test_a_second_mapped_nccl_fails(tmp_path: Path) -> None:
    other = _libnccl(tmp_path / "elsewhere/libnccl.so.2", 23203)
    proc = _check(_venv(tmp_path, 23203, extra=other))
    assert proc.returncode != 0 and "maps NCCL" in proc.stderr and "elsewhere" in proc.stderr


def test_a_library_loaded_from_outside_the_venv_fails(tmp_path: Path) -> None:
    other = _libnccl(tmp_path / "system/libnccl.so.2", 23203)
    proc = _check(_venv(tmp_path, 23203, load_other=other))
    assert proc.returncode != 0 and "not only the venv's" in proc.stderr

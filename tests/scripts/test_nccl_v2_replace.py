"""The pytorch phase's NCCL replacement for DeepEP V2 (scripts/install/phases/08-pytorch.sh install_nccl_v2).

DeepEP V2 refuses two NCCL runtimes in one process (deepseek-ai/DeepEP dd758ca deep_ep/__init__.py check_nccl_so,
"Duplicate NCCL runtime found"), and torch pins its own NCCL exactly (tests/fixtures/pytorch/torch-2.11.0_metadata.txt:
nvidia-nccl-cu13==2.28.9). The phase removes the old distribution by its RECORD (as pip uninstall does, PEP 376/627:
RECORD lists every installed file) and unpacks the new wheel into purelib (a wheel is a zip of the files as
installed, PEP 427). This runs the phase's own Python in a real venv with a fake old NCCL and a fake new wheel.
"""

from __future__ import annotations

import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

from tests.conftest import ROOT

PHASE = (ROOT / "scripts/install/phases/08-pytorch.sh").read_text()
SNIPPET = PHASE.split("<<'PY' || die \"replacing PyTorch's NCCL", 1)[1].split("\n", 1)[1].split("\nPY\n", 1)[0]


def test_the_old_nccl_goes_and_exactly_the_new_one_is_there(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / "bin/python"
    rel = Path(sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})).relative_to(venv)
    site = venv / rel
    old_info = site / "nvidia_nccl_cu13-2.28.9.dist-info"
    (site / "nvidia/nccl/lib").mkdir(parents=True)
    (site / "nvidia/nccl/lib/libnccl.so.2").write_bytes(b"old")
    (site / "nvidia/nccl/include").mkdir()
    (site / "nvidia/nccl/include/nccl.h").write_text("#define NCCL_MINOR 28\n")
    old_info.mkdir()
    (old_info / "METADATA").write_text("Metadata-Version: 2.1\nName: nvidia-nccl-cu13\nVersion: 2.28.9\n")
    (old_info / "RECORD").write_text(
        "nvidia/nccl/lib/libnccl.so.2,,\nnvidia/nccl/include/nccl.h,,\n"
        "nvidia_nccl_cu13-2.28.9.dist-info/METADATA,,\nnvidia_nccl_cu13-2.28.9.dist-info/RECORD,,\n"
    )
    wheel = tmp_path / "nvidia_nccl_cu13-2.32.3-py3-none-manylinux_2_27_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr("nvidia/nccl/lib/libnccl.so.2", b"new")
        z.writestr("nvidia/nccl/include/nccl_device/gin.h", "// Gin\n")
        z.writestr(
            "nvidia_nccl_cu13-2.32.3.dist-info/METADATA",
            "Metadata-Version: 2.1\nName: nvidia-nccl-cu13\nVersion: 2.32.3\n",
        )
        z.writestr("nvidia_nccl_cu13-2.32.3.dist-info/RECORD", "")
    subprocess.run([str(py), "-", str(wheel), "nvidia-nccl-cu13"], input=SNIPPET, text=True, check=True)
    assert (site / "nvidia/nccl/lib/libnccl.so.2").read_bytes() == b"new"
    assert not (site / "nvidia/nccl/include/nccl.h").exists() and not old_info.exists()
    assert sorted(p.name for p in site.glob("nvidia_nccl*.dist-info")) == ["nvidia_nccl_cu13-2.32.3.dist-info"]
    assert [p.name for p in site.rglob("libnccl.so*")] == ["libnccl.so.2"]
    probe = "import importlib.metadata as m; print(m.version('nvidia-nccl-cu13'))"
    assert subprocess.run([str(py), "-c", probe], capture_output=True, text=True, check=True).stdout.strip() == "2.32.3"

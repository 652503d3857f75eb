"""The PyTorch environment from the store (scripts/install/phases/08-pytorch.sh, docs/store.md): built at
one install root and published as parts, restored at another root into a fresh venv that works there.
CPU only: a small fake environment (a `torch` package and a console script) stands in for the wheels."""

from __future__ import annotations

import hashlib
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT

LIB = ROOT / "scripts/install/lib.sh"
PHASE = ROOT / "scripts/install/phases/08-pytorch.sh"

# The real lib.sh, store.sh and phase script; only the build (pip here) is replaced by a fake environment.
SCRIPT = """
set -Eeuo pipefail
export REBOOT_EXIT=75 CUDA_VERSION=12.9 DEEPEP_DEFAULT_ROOT=/nonexistent DEEPEP_TARGET=gce
export TORCH_VERSION=2.10.0+cu129 TORCH_INDEX_URL=https://download.pytorch.org/whl/cu129 NUMPY_SPEC='numpy<3'
export NVSHMEM_SOURCE=source STORE_PUBLISH=1 STORE_TRUST_PUBLISHED=1 STORE_ONLY=0 PHASE=pytorch PHASE_SCRIPT="$PHASE_SH"
declare -A ARTIFACT_DEPS=()
source "$LIB"
mkdir -p "$STATE/phases" "$CACHE"
source "$PHASE_SH"
need_packages() { :; }
build_env() {
  "$HOST_PYTHON" -m venv --without-pip "$VENV"
  site="$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  mkdir -p "$site/torch" "$site/fakepkg"
  printf '__version__ = "2.10.0+cu129"\\nfrom . import version\\n' >"$site/torch/__init__.py"
  echo 'cuda = "12.9"' >"$site/torch/version.py"
  echo 'WHERE = __file__' >"$site/fakepkg/__init__.py"
  for i in $(seq 40); do head -c 4096 /dev/urandom >"$site/fakepkg/blob$i.bin"; done
  printf '#!%s/bin/python\\nimport fakepkg, sys\\nprint(sys.prefix, fakepkg.WHERE)\\n' "$VENV" >"$VENV/bin/fakecli"
  chmod +x "$VENV/bin/fakecli"
  echo "$VENV" >"$VENV/$ORIGIN_FILE"
  echo built >>"$T/builds"
}
phase_run
cat "$STATE/phases/pytorch.note"; echo
cat "$STATE/artifacts/pytorch"
"""


def install_at(tmp: Path, root: Path, store: Path) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": "/usr/bin:/bin",
        "T": str(tmp),
        "LIB": str(LIB),
        "PHASE_SH": str(PHASE),
        "HOST_PYTHON": sys.executable,
        "DEEPEP_INSTALL_ROOT": str(root),
        "DEEPEP_STORE_URL": str(store),
        "DEEPEP_PYTORCH_PARTS": "4",
    }
    return subprocess.run(["bash", "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120, check=False)


def test_the_environment_built_at_one_root_restores_and_runs_at_another(tmp_path: Path) -> None:
    store = tmp_path / "store"
    first = install_at(tmp_path, tmp_path / "a", store)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "built and published (4 parts" in first.stdout
    key = first.stdout.strip().splitlines()[-1]
    manifest = store / f"artifacts/pytorch/{key}.parts"
    assert (manifest / "data").is_file() and (manifest / "sha256").is_file()
    parts = (manifest / "data").read_text().split("\n")
    assert len([p for p in parts if p]) == 4

    b = tmp_path / "elsewhere" / "b"
    second = install_at(tmp_path, b, store)
    assert second.returncode == 0, second.stdout + second.stderr
    assert "from the store" in second.stdout
    assert second.stdout.strip().splitlines()[-1] == key, "the key must not depend on the install root"
    assert (tmp_path / "builds").read_text().count("built") == 1

    venv = b / "venv"
    # A fresh venv at the new path: its own pyvenv.cfg and interpreter, the package from the store.
    assert (venv / "pyvenv.cfg").is_file() and (venv / "bin/python").exists()
    out = subprocess.run(
        [str(venv / "bin/python"), "-c", "import sys, fakepkg, torch; print(sys.prefix); print(fakepkg.WHERE)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert out[0] == str(venv) and out[1].startswith(str(venv) + "/lib/")
    # The console script's shebang names the new path, and it runs there.
    script = venv / "bin/fakecli"
    assert script.read_text().splitlines()[0] == f"#!{venv}/bin/python"
    ran = subprocess.run([str(script)], capture_output=True, text=True, check=True).stdout.split()
    assert ran[0] == str(venv) and ran[1].startswith(str(venv))
    assert str(tmp_path / "a") not in (venv / "pyvenv.cfg").read_text()


def test_a_tampered_part_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "store"
    assert install_at(tmp_path, tmp_path / "a", store).returncode == 0
    part = next((store / "artifacts/pytorch").glob("*/*/00.tar/data"))
    part.write_bytes(part.read_bytes()[:-10] + b"x" * 10)
    again = install_at(tmp_path, tmp_path / "b", store)
    assert again.returncode != 0
    assert "tampered" in again.stderr


@pytest.mark.parametrize("line", ["ARTIFACT_RELOCATABLE=1", 'ARTIFACT_PARTS="${DEEPEP_PYTORCH_PARTS:-16}"'])
def test_the_phase_stores_a_relocatable_artifact_in_parts(line: str) -> None:
    assert line in PHASE.read_text()


# -- a crafted pair of parts: one part's symlink, another part's file below it ------------------------------


def _tar(path: Path, build: dict[str, str | Path]) -> None:
    """A tar of `build`: name -> text (a file) or Path (a symlink to it), made by GNU tar as the builder does."""
    src = path.parent / f"{path.name}.src"
    for name, what in build.items():
        at = src / name
        at.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(what, Path):
            at.symlink_to(what)
        else:
            at.write_text(what)
    names = "\n".join(build) + "\n"
    subprocess.run(
        ["tar", "-cf", str(path), "-C", str(src), "--no-recursion", "-T", "-"], input=names, text=True, check=True
    )


def test_gnu_tar_writes_through_a_symlink_an_earlier_archive_left(tmp_path: Path) -> None:
    # The premise, from GNU tar itself: its guard (a placeholder for a symlink whose target is absolute or
    # holds "..", replaced by the link only when that archive ends; tar's src/extract.c
    # create_placeholder_file) works within one archive. A second tar run into the same folder follows the
    # link the first one left as a leading folder of its member: the file lands outside the folder.
    outside, root = tmp_path / "outside", tmp_path / "root"
    outside.mkdir()
    root.mkdir()
    _tar(tmp_path / "a.tar", {"lib": outside})
    _tar(tmp_path / "b.tar", {"lib/evil": "written through the link"})
    for part in ("a.tar", "b.tar"):
        subprocess.run(["tar", "-xf", str(tmp_path / part), "-C", str(root)], check=True)
    assert (outside / "evil").read_text() == "written through the link"


@pytest.mark.parametrize(
    "pair",
    [
        # part 00's symlink to a folder outside, part 01's file below it
        lambda out: ({"lib": out}, {"lib/evil": "x"}),
        # the same through a relative link
        lambda out: ({"lib": Path("../../../../../../../../..") / str(out).lstrip("/")}, {"lib/evil": "x"}),
        # a symlink and a file of the same name in two parts (which wins depends on the order of unpacking)
        lambda out: ({"venv/x": out}, {"venv/x": "x"}),
    ],
)
def test_a_part_writing_through_another_parts_symlink_is_refused(tmp_path: Path, pair: Any) -> None:
    store = tmp_path / "store"
    assert install_at(tmp_path, tmp_path / "a", store).returncode == 0
    outside = tmp_path / "outside"
    outside.mkdir()
    first, second = pair(outside)
    for part, build in zip(sorted((store / "artifacts/pytorch").glob("*/*/0[01].tar")), (first, second), strict=True):
        _tar(tmp_path / f"{part.name}.crafted", build)
        data = (tmp_path / f"{part.name}.crafted").read_bytes()
        (part / "data").write_bytes(data)
        (part / "sha256").write_text(hashlib.sha256(data).hexdigest())
    again = install_at(tmp_path, tmp_path / "b", store)
    assert again.returncode != 0, again.stdout
    assert "refused" in again.stderr and ("below the link" in again.stderr or "also in part" in again.stderr)
    assert not (outside / "evil").exists() and list(outside.iterdir()) == []
    assert not (tmp_path / "b" / "venv" / "lib" / "evil").exists()  # nothing of the parts was unpacked

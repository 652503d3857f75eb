"""The node payload: one list of what ships, and files that run on a node with nothing but Python's stdlib."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from components.node import installer
from scripts import payload


def test_runner_files_are_every_bench_module_and_the_shared_names() -> None:
    files = payload.runner_files()
    bench = {p.name for p in (payload.NODE_DIR / "bench").glob("*.py")} - {"__init__.py"}
    assert set(files) == bench | {"names.py"}
    assert {"run_bench.py", "parse.py", "parse_patterns.py", "parse_records.py"} <= set(files)


def test_shipped_runner_imports_flat_with_the_stdlib_only(tmp_path: Path) -> None:
    # As on a node: the files in one folder, no deepep_a4 package, no site-packages (-I -S).
    for name, text in payload.runner_files().items():
        (tmp_path / name).write_text(text)
    for name, text in payload.gce_stage_files().items():
        (tmp_path / name).write_text(text)
    (tmp_path / "probe.py").write_text(
        "import run_bench, parse, names, bench_stage\nprint(parse.parse_log.__module__, len(parse.TESTS))\n"
    )
    # -E -s -S: no environment, no user or site packages; the script's folder is sys.path[0], as on a node.
    proc = subprocess.run(
        [sys.executable, "-E", "-s", "-S", str(tmp_path / "probe.py")], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["parse", "5"]  # nccl and the four DeepEP tests, elastic (V2) included


def test_installer_files_are_run_sh_lib_sh_and_one_file_per_phase_in_order() -> None:
    files = payload.installer_files(installer.PHASES)
    phases = [k for k in files if k.startswith("phases/")]
    assert list(files)[:2] == ["run.sh", "lib.sh"]
    assert phases == [f"phases/{i:02d}-{p}.sh" for i, p in enumerate(installer.PHASES, start=1)]

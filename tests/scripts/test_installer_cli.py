"""The installer's command line: usage mistakes are refused before anything is written."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from components import artifacts, config
from components.node import installer
from deepep_a4.plan import engine as plan_engine
from tests.conftest import stack_config


@pytest.fixture
def rendered(tmp_path: Path) -> Path:
    cfg = config.parse(plan_engine.project_keys(stack_config("gce-b200-ubuntu")), "gce-b200-ubuntu")
    artifacts.reset()
    out = tmp_path / "installer"
    for rel, text in installer.render_installer(cfg, "gce").items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    return out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--status"], "no install has run under {root} yet"),
        (["--redo"], "--redo needs a phase; phases: preflight doca-ofed"),
        (["--redo", "nosuch"], "unknown phase 'nosuch'; phases: preflight"),
        (["--bogus"], "unknown argument '--bogus'"),
    ],
)
def test_a_usage_mistake_is_refused_and_writes_nothing(rendered: Path, args: list[str], message: str) -> None:
    root = rendered.parent / "root"
    proc = subprocess.run(
        ["bash", str(rendered / "run.sh"), *args],
        env={"PATH": "/usr/bin:/bin", "DEEPEP_INSTALL_ROOT": str(root)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1
    assert message.format(root=root) in proc.stderr
    assert not root.exists()

"""Every `deepep-a4` command in the README's code blocks names a real subcommand and real flags."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()


def code_lines() -> list[str]:
    lines, inside = [], False
    for line in README.splitlines():
        if line.startswith("```"):
            inside = not inside
        elif inside:
            lines.append(line.split("  #")[0].strip())
    return lines


def deepep_commands() -> list[list[str]]:
    out = []
    for line in code_lines():
        for part in line.split("&&"):
            if not part.strip().startswith(".venv/bin/deepep-a4"):
                continue
            out.append(shlex.split(part.strip())[1:])
    return out


def help_of(sub: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "deepep_a4.cli", sub, "--help"], capture_output=True, text=True, check=True
    )
    return proc.stdout


def test_the_readme_shows_each_subcommand() -> None:
    subs = {c[0] for c in deepep_commands()}
    assert {"plan", "run", "report"} <= subs


@pytest.mark.parametrize("words", deepep_commands(), ids=lambda w: " ".join(w))
def test_each_readme_command_names_flags_its_subcommand_has(words: list[str]) -> None:
    text = help_of(words[0])
    for flag in (w.split("=")[0] for w in words[1:] if w.startswith("--")):
        assert re.search(rf"(?<![\w-]){re.escape(flag)}\b", text), f"{flag} is not a flag of deepep-a4 {words[0]}"


def test_readme_command_1_plan_runs_as_written(tmp_path: Path) -> None:
    line = next(c for c in deepep_commands() if c[0] == "plan")
    proc = subprocess.run(
        [sys.executable, "-m", "deepep_a4.cli", *line, "--out", str(tmp_path / "plan")],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "plan" / "plan.json").is_file()


def test_the_report_of_a_recorded_log_runs_as_written(tmp_path: Path) -> None:
    log = ROOT / "tests" / "fixtures" / "bench" / "h200x2_run.log"
    proc = subprocess.run(
        [sys.executable, "-m", "deepep_a4.cli", "report", str(log), "--out", str(tmp_path), "--no-plots"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stderr  # 1: the gate failed, which is a verdict, not an error
    assert (tmp_path / "report.md").is_file()

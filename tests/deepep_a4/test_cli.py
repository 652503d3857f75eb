"""The `deepep-a4` command as a user runs it after README command 1: subcommands, exit codes, no tracebacks."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from deepep_a4 import cli

ROOT = Path(__file__).resolve().parents[2]


def test_one_command_with_the_documented_subcommands() -> None:
    result = CliRunner().invoke(cli.main, ["--help"])
    assert result.exit_code == 0
    for sub in ("plan", "cost", "run", "report"):
        assert f"\n  {sub} " in result.output


def test_console_script_is_installed_in_the_venv() -> None:
    exe = ROOT / ".venv" / "bin" / "deepep-a4"
    if not exe.exists():  # pragma: no cover - the README's set-up makes it
        pytest.skip("no .venv here")
    proc = subprocess.run([str(exe), "--help"], capture_output=True, text=True, check=False, cwd="/")
    assert proc.returncode == 0, proc.stderr


def test_cost_prints_estimate_and_bill_cap_without_writing_a_plan(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # the project is found from the package's checkout
    result = CliRunner().invoke(cli.main, ["cost", "--stack", "gce-b200"])
    assert result.exit_code == 0, result.output
    assert "Estimated cost" in result.output
    lines = result.output.rstrip().splitlines()
    assert lines[-2].startswith("Bill cap: ttl 8h from the first `pulumi up`")
    assert "Compute Engine deletes it" in lines[-2]
    assert lines[-1] == "  source: https://cloud.google.com/compute/docs/instances/limit-vm-runtime"
    assert not (ROOT / "build" / "plan" / "gce-b200-cost").exists()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["cost", "--stack", "nope"], "error: no stack file stacks/Pulumi.nope.yaml"),
        (["plan", "--stack", "stacks/nope.yaml"], "error: stack 'stacks/nope.yaml': give a stack name"),
        (["cost"], "Missing option '--stack'"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str) -> None:
    result = CliRunner().invoke(cli.main, args)
    assert result.exit_code == 2
    assert says in result.output
    assert "Traceback" not in result.output


def test_run_and_report_hand_their_arguments_to_their_own_parsers() -> None:
    for sub in ("run", "report"):
        proc = subprocess.run(
            [sys.executable, "-m", "deepep_a4.cli", sub, "--help"], capture_output=True, text=True, check=False
        )
        assert proc.returncode == 0
        assert proc.stdout.startswith(f"usage: deepep-a4 {sub}")

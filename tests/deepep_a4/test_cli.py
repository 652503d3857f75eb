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


SUBCOMMANDS = ("plan", "cost", "run", "report", "store", "hwtest", "bringup", "capacity")


def test_top_level_help_lists_every_subcommand() -> None:
    result = CliRunner().invoke(cli.main, ["--help"])
    listed = {line.split()[0] for line in result.output.split("Commands:\n", 1)[1].splitlines() if line.strip()}
    assert listed == set(cli.main.commands) and set(SUBCOMMANDS) <= listed  # type: ignore[attr-defined]


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_each_help_is_clicks_own_and_starts_with_the_task_in_one_line(sub: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "deepep_a4.cli", sub, "--help"], capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    usage, task, *rest = proc.stdout.split("\n\n")
    assert usage.startswith(f"Usage: deepep-a4 {sub} [OPTIONS]")
    sentence = " ".join(task.split())  # click wraps at 80 columns: the task is one sentence, one line of text
    assert len(sentence) <= 120 and ". " not in sentence and sentence.endswith((".", ")")), sentence
    assert any(part.startswith(("Options:", "Commands:")) for part in rest)


@pytest.mark.parametrize(
    ("sub", "option", "default"),
    [("run", "--install-timeout", "90.0"), ("run", "--poll", "30.0"), ("hwtest", "--cuda", "13.0")],
)
def test_options_show_their_defaults(sub: str, option: str, default: str) -> None:
    result = CliRunner().invoke(cli.main, [sub, "--help"], terminal_width=200)
    line = next(line for line in result.output.splitlines() if line.strip().startswith(option))
    assert f"[default: {default}" in line


def test_run_and_report_are_click_commands_called_as_functions_too() -> None:
    from deepep_a4.report import cli as report_cli
    from deepep_a4.run import command as run_benchmark

    assert cli.main.commands["run"] is run_benchmark.command  # type: ignore[attr-defined]
    assert cli.main.commands["report"] is report_cli.command  # type: ignore[attr-defined]
    assert report_cli.main(["--help"]) == 0 and run_benchmark.main(["--help"]) == 0

"""The README's deploy steps and `deepep-a4 run` for every example stack, through the stand-in Pulumi CLI
(tests/fixtures/pulumi_standin.py) in a copy of the project, up to the first call that needs Google Cloud; and
what the stand-in does as the real CLI does (issue 41)."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import pytest

from deepep_a4 import stackfile
from deepep_a4.run import command as rb
from tests.conftest import ROOT
from tests.deepep_a4.run.test_preflight import Cli, cli  # noqa: F401 - the fixture

EXAMPLES = ["gke-b200", "gce-b200", "gke-b200-ubuntu", "gce-b200-ubuntu"]
README_BLOCK = re.compile(r"```bash\npulumi login --local.*?```", re.S)
SHA = "0" * 64


class GoogleCallError(Exception):
    """The run reached a call that needs Google Cloud."""


class FirstGoogleCall:
    """The platform probe: the first thing `run` asks Google after `up`."""

    def __getattr__(self, name: str) -> Any:
        raise GoogleCallError(name)


def pulumi(project: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["pulumi", *args], cwd=project, capture_output=True, text=True, check=False)


def readme_steps(stack: str) -> list[list[str]]:
    """The README's deploy block for `stack`, its pulumi commands with the placeholders filled."""
    block = README_BLOCK.search((ROOT / "README.md").read_text())
    assert block, "README.md's deploy block"
    steps = []
    for line in block.group(0).splitlines()[1:-1]:
        command = line.split("  #")[0].strip().replace("gke-b200", stack)
        command = command.replace("YOUR-PROJECT", "my-project-1").replace("SHA256", SHA)
        steps.append(command.split())
    return steps


@pytest.mark.parametrize("stack", EXAMPLES)
def test_readme_path_and_run_reach_the_first_google_call(
    cli: Cli,  # noqa: F811
    stack: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "s3cret")
    monkeypatch.delenv("PULUMI_BACKEND_URL")  # the README logs in
    reached = []
    for step in readme_steps(stack):
        if "destroy" in step:
            continue  # the teardown comes after the run below
        if step[0] == "pulumi":
            done = pulumi(cli.project, *step[1:])
            assert done.returncode == 0, (step, done.stderr)
        elif step[1:3] in (["store", "build"], ["report", "--stack"]):
            reached.append(step[1])  # Cloud Build / Docker and the results bucket: Google's
        # The plan of the stack as it now is, after the README's `config set`s, as `pulumi up` would see it.
        stackfile.parse_stack(stack, cli.project)
    assert "encryptionsalt: v1:" in (cli.project / "stacks" / f"Pulumi.{stack}.yaml").read_text()
    assert reached == ["store", "report"]
    said: list[str] = []
    rb.main(
        ["--stack", stack, "--poll", "1", "--out", str(tmp_path / "report"), "--yes"],
        make_probe=lambda cfg: FirstGoogleCall(),
        which=lambda tool: f"/usr/bin/{tool}" if tool != "pulumi" else str(cli.root / "bin" / "pulumi"),
        say=said.append,
    )
    # The probe's first question (are the nodes installed?) is the first call to Google Cloud.
    assert any("install: FAILED: GoogleCallError: installed" in line for line in said), said
    commands = cli.commands()
    assert "preview" in commands and "up" in commands, (commands, said)


def test_run_destroy_of_an_unknown_stack_creates_nothing(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "s3cret")
    before = (cli.project / "stacks" / "Pulumi.gce-b200.yaml").read_text()
    said: list[str] = []
    rc = rb.main(["--stack", "gce-b200", "--destroy"], say=said.append)
    assert rc == rb.EXIT_PASS, said
    assert "nothing to destroy" in said[-1]
    assert "stack init" not in cli.commands() and "destroy" not in cli.commands()
    assert (cli.project / "stacks" / "Pulumi.gce-b200.yaml").read_text() == before  # no encryptionsalt
    assert not (cli.state / "gce-b200").exists()


def test_config_set_stores_a_string_that_preview_refuses_for_a_list_and_the_plan_refuses_first(
    cli: Cli,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "s3cret")
    assert pulumi(cli.project, "stack", "init", "gke-b200").returncode == 0
    done = pulumi(cli.project, "config", "set", "deepep-a4:benchmarks", '["intranode"]', "-s", "gke-b200")
    assert done.returncode == 0
    preview = pulumi(cli.project, "preview", "-s", "gke-b200")
    assert preview.returncode == 1
    assert "Stack 'gke-b200' with configuration key 'benchmarks' must be of type 'array<string>'" in preview.stderr
    with pytest.raises(stackfile.StackFileError, match=r"must be of type 'array<string>'.*--path"):
        stackfile.read("gke-b200", cli.project)
    # --path builds the list Pulumi accepts.
    done = pulumi(cli.project, "config", "set", "--path", "deepep-a4:benchmarks[0]", "intranode", "-s", "gke-b200")
    assert done.returncode == 0
    assert stackfile.read("gke-b200", cli.project)["deepep-a4:benchmarks"] == '["intranode"]'


def test_config_json_hands_over_pulumi_yamls_defaults(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    from pulumi import automation as auto

    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "s3cret")
    stack = auto.create_or_select_stack("gce-b200", work_dir=str(cli.project))
    values = stack.get_all_config()
    assert "deepep-a4:gkeGpuDriver" in values  # not in the stack file: Pulumi.yaml's default
    assert "deepep-a4:gkeGpuDriver" not in stackfile.read("gce-b200", cli.project)


def test_whoami_without_a_login_fails_as_the_cli_does(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.delenv("PULUMI_BACKEND_URL")
    monkeypatch.delenv("PULUMI_ACCESS_TOKEN", raising=False)
    done = pulumi(cli.project, "--non-interactive", "whoami", "--json")
    assert done.returncode == 1
    assert "PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions" in done.stderr
    assert pulumi(cli.project, "login", "--local").returncode == 0
    assert pulumi(cli.project, "--non-interactive", "whoami", "--json").returncode == 0


def test_a_passphrase_file_with_a_literal_tilde_fails_as_the_cli_reads_it(
    cli: Cli,  # noqa: F811
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE_FILE", "~/.pulumi-passphrase")
    done = pulumi(cli.project, "--non-interactive", "stack", "init", "gce-b200")
    assert done.returncode == 1
    assert f"unable to read PULUMI_CONFIG_PASSPHRASE_FILE: open {cli.project}/~/.pulumi-passphrase" in done.stderr

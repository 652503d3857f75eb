"""A newcomer is not misled by `deepep-a4 run` or the deploy docs (issue 41)."""

from __future__ import annotations

import re
import subprocess

import pytest
from click.testing import CliRunner

from deepep_a4.run import command as rb
from deepep_a4.run import preflight as run_preflight
from tests.conftest import ROOT
from tests.deepep_a4.run.test_preflight import Cli, cli, deepep_run  # noqa: F401 - the fixture


def test_not_logged_in_is_said_with_the_login_commands(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:  # noqa: F811
    monkeypatch.delenv("PULUMI_BACKEND_URL")
    monkeypatch.delenv("PULUMI_ACCESS_TOKEN", raising=False)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "x")
    rc, said = deepep_run("gce-b200-ubuntu")
    assert rc == rb.EXIT_NO_CLI
    assert said[0].startswith("error: the Pulumi CLI is not logged in")
    assert "pulumi login --local" in said[0] and "PULUMI_ACCESS_TOKEN" in said[0]
    assert "did not answer `pulumi version`" not in said[0]


def test_a_passphrase_file_with_a_literal_tilde_says_the_shell_did_not_expand_it() -> None:
    problem = run_preflight.secrets_problem("gce-b200", "file://~", {"PULUMI_CONFIG_PASSPHRASE_FILE": "~/.phrase"})
    assert problem and "the shell did not expand it" in problem
    assert "PULUMI_CONFIG_PASSPHRASE_FILE=$HOME/.phrase" in problem


def test_without_the_pulumi_cli_the_message_names_no_internal_file() -> None:
    said: list[str] = []
    rc = rb.main(["--stack", "gce-b200"], which=lambda tool: None, say=said.append)
    assert rc == rb.EXIT_NO_CLI
    text = "\n".join(said)
    assert "https://www.pulumi.com/docs/install/" in text
    assert not re.search(r"\b[\w/]+\.py\b", text), text


def test_run_help_says_what_it_bills_what_it_needs_and_its_exit_statuses() -> None:
    text = CliRunner().invoke(rb.command, ["--help"]).output
    assert "billed A4 machines" in text
    for need in ("3.208", "PULUMI_CONFIG_PASSPHRASE_FILE", "application-default login", "gke-gcloud-auth-plugin"):
        assert need in text, need
    for status in (rb.EXIT_PASS, rb.EXIT_GATE_FAILED, rb.EXIT_USAGE, rb.EXIT_NO_CLI, rb.EXIT_FAILED):
        assert f" {status} " in " ".join(text.split()), status


def test_policy_venv_is_git_ignored_as_the_link_run_makes() -> None:
    # `run` makes policy/venv a symlink, which a `policy/venv/` (folder-only) pattern does not match.
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", "-q", "policy/venv"], cwd=ROOT, check=False, capture_output=True
    )
    assert done.returncode == 0


def test_deploy_md_names_policy_venv_before_the_first_policy_pack() -> None:
    text = (ROOT / "docs" / "deploy.md").read_text()
    assert text.index("policy/venv") < text.index("--policy-pack")


@pytest.mark.parametrize("doc", ["README.md", "docs/deploy.md"])
def test_the_teardown_names_the_store_stack_too(doc: str) -> None:
    text = (ROOT / doc).read_text()
    block = text[text.index("```bash\npulumi login --local") + 3 :]
    block = block[: block.index("```")]
    assert "pulumi destroy --refresh -s gke-b200" in block
    assert "pulumi -C store destroy -s demo" in block

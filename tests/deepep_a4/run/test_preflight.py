"""`deepep-a4 run` against a stand-in Pulumi CLI (tests/fixtures/pulumi_standin.py, first on PATH, driven by the
real Automation API): it refuses an old CLI, a missing passphrase and a missing store before anything is
created, with no traceback and no `up`; it makes the policy pack's environment; it previews with the pack and
stops on a mandatory violation before `up`."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest

from deepep_a4.run import command as rb
from deepep_a4.run import platforms as run_platforms
from deepep_a4.run import preflight as run_preflight
from tests.conftest import ROOT, stack_config
from tests.deepep_a4.run.test_command import FakeProbe, ready

STANDIN = ROOT / "tests" / "fixtures" / "pulumi_standin.py"
PASSPHRASE_ERROR = (
    "passphrase must be set with PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE environment variables"
)


class Cli:
    """The stand-in's folder, its call log and its stacks."""

    def __init__(self, tmp: Path):
        self.root, self.log, self.state = tmp / "pulumi", tmp / "calls.jsonl", tmp / "state"
        # A copy of the project: the CLI writes into stack files (`stack init`'s salt, `config set`), and the
        # checkout's are tracked.
        self.project = tmp / "project"

    def calls(self) -> list[list[str]]:
        if not self.log.exists():
            return []
        return [[a for a in json.loads(line) if a != "--non-interactive"] for line in self.log.read_text().splitlines()]

    def commands(self) -> list[str]:
        return [" ".join(c[:2]) if c[0] in ("stack",) else c[0] for c in self.calls()]


@pytest.fixture
def cli(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cli:
    standin = Cli(tmp_path)
    bin_dir = standin.root / "bin"
    bin_dir.mkdir(parents=True)
    exe = bin_dir / "pulumi"
    exe.write_text(f"#!{sys.executable}\nimport runpy\nrunpy.run_path({str(STANDIN)!r}, run_name='__main__')\n")
    exe.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("STANDIN_LOG", str(standin.log))
    monkeypatch.setenv("STANDIN_STATE", str(standin.state))
    monkeypatch.setenv("PULUMI_BACKEND_URL", f"file://{tmp_path / 'backend'}")
    monkeypatch.setenv("PULUMI_HOME", str(tmp_path / "home"))
    for var in (
        "PULUMI_CONFIG_PASSPHRASE",
        "PULUMI_CONFIG_PASSPHRASE_FILE",
        "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK",
    ):
        monkeypatch.delenv(var, raising=False)
    # The policy pack in a folder of this test: its venv is made here, not in the checkout.
    pack = tmp_path / "policy"
    shutil.copytree(run_platforms.POLICY_PACK, pack, ignore=shutil.ignore_patterns("venv", "__pycache__"))
    monkeypatch.setattr(run_preflight, "POLICY_PACK", pack)
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    copy_project(standin.project)
    monkeypatch.setattr(run_platforms, "ROOT", standin.project)
    monkeypatch.setattr(rb, "ROOT", standin.project)
    return standin


def copy_project(dest: Path) -> Path:
    """Pulumi.yaml, the stack files and the store project: what the CLI reads and writes."""
    dest.mkdir(parents=True)
    shutil.copy(ROOT / "Pulumi.yaml", dest / "Pulumi.yaml")
    shutil.copytree(ROOT / "stacks", dest / "stacks")
    shutil.copytree(ROOT / "store", dest / "store", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def deepep_run(stack: str, *argv: str, probe: Any = None, tmp: Path | None = None) -> tuple[int, list[str]]:
    said: list[str] = []
    calls: list[str] = []
    rc = rb.main(
        ["--stack", stack, "--poll", "1", "--out", str(tmp or Path("/nonexistent")), *argv],
        make_probe=lambda cfg: probe or FakeProbe(calls, [ready(2)], [ready(2)]),
        say=said.append,
    )
    return rc, said


def test_the_standin_answers_version_as_the_cli_does_and_the_sdk_reads_it(cli: Cli) -> None:
    """pkg/cmd/pulumi/version/version.go prints "v3.x.y"; the SDK drops the v (automation/_cmd.py)."""
    from pulumi import automation as auto

    workspace = auto.LocalWorkspace(work_dir=str(ROOT), pulumi_command=auto.PulumiCommand(skip_version_check=True))
    assert workspace.pulumi_version == "3.208.0"
    assert run_preflight.read_cli().backend_url.startswith("file://")


def test_an_old_cli_is_refused_before_anything_else(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STANDIN_VERSION", "3.207.1")
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "x")
    rc, said = deepep_run("gce-b200-ubuntu")
    assert rc == rb.EXIT_NO_CLI
    assert said[0].startswith("error: the Pulumi CLI is 3.207.1; this program needs 3.208.0 or newer")
    assert "get.pulumi.com" in said[0] and "Nothing was created" in said[-1]
    assert cli.commands() == ["version"]
    assert not any("Traceback" in line for line in said)


def test_the_standin_fails_without_a_passphrase_as_the_cli_does(cli: Cli) -> None:
    """What `run` would meet without its check: the Automation API's own error from the CLI."""
    from pulumi import automation as auto

    with pytest.raises(auto.errors.CommandError) as err:
        auto.create_or_select_stack("gce-b200-ubuntu", work_dir=str(cli.project))
    assert PASSPHRASE_ERROR in str(err.value)


@pytest.mark.parametrize("stack", ["gce-b200-ubuntu", "gke-b200"])
def test_a_missing_passphrase_is_refused_with_the_one_line_fix(cli: Cli, stack: str) -> None:
    rc, said = deepep_run(stack)
    assert rc == rb.EXIT_USAGE
    first = said[0]
    assert first.startswith("error: the backend file://") and PASSPHRASE_ERROR in first
    assert "export PULUMI_CONFIG_PASSPHRASE_FILE=" in first and "\n" not in first
    assert cli.commands() == ["version", "whoami"]  # no stack selected or created, no preview, no up


def test_a_passphrase_file_or_pulumi_cloud_needs_nothing_more(cli: Cli, tmp_path: Path) -> None:
    phrase = tmp_path / "phrase"
    phrase.write_text("s3cret\n")
    url = "gs://bucket/state"
    assert run_preflight.secrets_problem("gce-b200", url, {"PULUMI_CONFIG_PASSPHRASE_FILE": str(phrase)}) is None
    assert run_preflight.secrets_problem("gce-b200", url, {"PULUMI_CONFIG_PASSPHRASE": ""}) is None  # set, empty
    assert run_preflight.secrets_problem("gce-b200", "https://api.pulumi.com", {}) is None
    missing = run_preflight.secrets_problem("gce-b200", url, {"PULUMI_CONFIG_PASSPHRASE_FILE": str(tmp_path / "no")})
    assert missing and "is not a readable file" in missing


def test_a_supported_stack_without_a_store_is_refused_up_front(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "")
    rc, said = deepep_run("gce-b200")
    assert rc == rb.EXIT_USAGE
    assert "`deepep-a4 store build --stack gce-b200`" in said[0]
    assert "`pulumi config set deepep-a4:artifactStoreManifest SHA256 -s gce-b200`" in said[0]
    assert "up" not in cli.commands() and "preview" not in cli.commands()
    assert cli.commands() == ["version", "whoami"]


def test_the_policy_venv_is_made_from_the_projects_own_environment(cli: Cli) -> None:
    pack = run_preflight.POLICY_PACK
    assert not (pack / "venv").exists()
    assert run_preflight.policy_env_problem(pack) is None
    venv = pack / "venv"
    assert venv.is_symlink() and venv.resolve() == Path(sys.prefix).resolve()
    assert (venv / "bin" / "python").exists() and run_preflight.has_policy_engine(venv)
    # What PulumiPolicy.yaml names is what was made.
    import yaml

    assert yaml.safe_load((pack / "PulumiPolicy.yaml").read_text())["runtime"]["options"]["virtualenv"] == "venv"
    assert run_preflight.policy_env_problem(pack) is None  # a second run keeps it


def test_a_broken_policy_venv_is_refused(tmp_path: Path) -> None:
    (tmp_path / "venv").mkdir()
    problem = run_preflight.policy_env_problem(tmp_path)
    assert problem and "not a Python environment" in problem


def test_a_mandatory_violation_in_the_preview_stops_the_run_before_up(
    cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "")
    monkeypatch.setenv("STANDIN_VIOLATION", "a spot VM needs a TTL")
    rc, said = deepep_run("gce-b200-ubuntu", tmp=tmp_path / "report")
    assert rc == rb.EXIT_FAILED
    commands = cli.commands()
    assert "preview" in commands and "up" not in commands and "destroy" not in commands
    preview = next(c for c in cli.calls() if c[0] == "preview")
    assert preview[preview.index("--policy-pack") + 1] == str(run_platforms.POLICY_PACK)
    text = "\n".join(said)
    assert "[mandatory]  spot-has-ttl" in text and "nothing was created: `pulumi up` did not run" in text
    assert not (cli.state / "gce-b200-ubuntu" / "created").exists()


def test_without_the_preview_up_skip_preview_creates_resources_before_the_violation(
    cli: Cli, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Why `run` previews: the Automation API's `up` is `pulumi up --yes --skip-preview` (automation/_stack.py),
    and "during the update, the first policy violation will halt the deployment" (pulumi/pulumi-policy
    README.md), after the resources before it were created."""
    from pulumi import automation as auto

    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "")
    monkeypatch.setenv("STANDIN_VIOLATION", "a spot VM needs a TTL")
    stack = auto.create_or_select_stack("gce-b200-ubuntu", work_dir=str(cli.project))
    with pytest.raises(auto.errors.CommandError):
        stack.up(policy_packs=[str(run_platforms.POLICY_PACK)])
    up = next(c for c in cli.calls() if c[0] == "up")
    assert "--skip-preview" in up
    assert (cli.state / "gce-b200-ubuntu" / "created").exists()


def test_a_clean_preview_is_followed_by_up(cli: Cli, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "")
    rc, said = deepep_run("gce-b200-ubuntu", tmp=tmp_path / "report")
    commands = cli.commands()
    assert "preview" in commands and "up" in commands, (commands, said)
    assert commands.index("preview") < commands.index("up")
    assert commands.index("version") == 0 and commands.index("whoami") < commands.index("stack select")
    assert rc == rb.EXIT_PASS, said


def test_the_pinned_sdk_previews_with_policy_packs_and_the_pack_is_the_one_run_enforces() -> None:
    """pulumi==3.272.0 (pyproject.toml): Stack.preview and Stack.up take `policy_packs`, passed as
    `--policy-pack PATH` (automation/_stack.py _parse_extra_args)."""
    import inspect

    from pulumi import automation as auto

    assert "policy_packs" in inspect.signature(auto.Stack.preview).parameters
    assert "policy_packs" in inspect.signature(auto.Stack.up).parameters
    assert run_preflight.POLICY_PACK == run_platforms.POLICY_PACK == ROOT / "policy"


@pytest.mark.parametrize("store", ["", "gs://my-deepep-store/deepep"])
def test_a_named_store_without_a_manifest_is_left_to_runs_fill(store: str, tmp_path: Path) -> None:
    """No store at all: nothing to fill, refused here. A named store with no manifest: `run` fills it after
    asking, or with --build-store (deepep_a4/store/fill.py; issue 34), so the check leaves it to that step."""
    cfg = rb.stack_cfg("gce-b200", stack_config("gce-b200", artifactStore=store))
    assert cfg.staged and not cfg.installer.store_manifest
    problems = run_preflight.check(
        "gce-b200",
        cfg,
        read=lambda: run_preflight.Cli(version="3.208.0", backend_url="https://api.pulumi.com"),
        env={},
        pack=tmp_path,
    )
    store_lines = [p for p in problems if "artifactStoreManifest" in p]
    assert bool(store_lines) == (not store)

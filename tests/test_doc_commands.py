"""Every `deepep-a4` command in the README's and docs/*.md's code blocks runs as written: each parses with the
CLI's own parser (click: the command path, every option and its type), and each that needs no cloud (`plan`,
`cost`, `store build --dry-run`, `report` of a file) runs and exits 0. The README and docs/deploy.md list the
store steps in the order a new user needs them: the bucket, the build, the pin, then `pulumi up`."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import click
import pytest

from deepep_a4.cli import main as cli
from tests.conftest import ROOT, PlanCommand

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^\s*```")
COMMAND = re.compile(r"^(?:\.venv/bin/)?deepep-a4\s")


def doc_commands() -> list[tuple[str, tuple[str, ...]]]:
    """(document, argv after `deepep-a4`) of every command in a fenced block (indented fences too), split at
    `&&`, comments dropped; each distinct command once."""
    found: dict[tuple[str, ...], str] = {}
    for doc in DOCS:
        inside = False
        for line in doc.read_text().splitlines():
            if FENCE.match(line):
                inside = not inside
                continue
            if not inside:
                continue
            for part in line.split(" #")[0].split("&&"):
                part = part.strip().removeprefix("$ ")
                if COMMAND.match(part):
                    found.setdefault(tuple(shlex.split(part)[1:]), doc.name)
    return [(doc, argv) for argv, doc in found.items()]


COMMANDS = doc_commands()


def parse(argv: tuple[str, ...]) -> tuple[list[str], click.Context]:
    """The command path and the parsed context, as `deepep-a4 ARGV` parses them (no command runs)."""
    group: click.Command = cli
    ctx = group.make_context("deepep-a4", list(argv), resilient_parsing=False)
    path: list[str] = []
    args = list(argv)
    while isinstance(group, click.Group):
        name, sub, rest = group.resolve_command(ctx, args)
        assert sub is not None and name is not None
        path.append(name)
        ctx = sub.make_context(name, list(rest), parent=ctx)
        group, args = sub, list(rest)
    return path, ctx


def test_the_docs_show_the_commands_a_new_user_runs() -> None:
    paths = {tuple(parse(argv)[0]) for _, argv in COMMANDS}
    for needed in [("plan",), ("cost",), ("run",), ("report",), ("store", "build")]:
        assert needed in paths, needed


@pytest.mark.parametrize(("doc", "argv"), COMMANDS, ids=[" ".join(a) for _, a in COMMANDS])
def test_every_command_parses_with_the_cli(doc: str, argv: tuple[str, ...]) -> None:
    try:
        parse(argv)
    except click.ClickException as err:
        pytest.fail(f"{doc}: deepep-a4 {' '.join(argv)}: {err.format_message()}")


def _offline(argv: tuple[str, ...]) -> bool:
    path = parse(argv)[0]
    if path in (["cost"], ["plan"]):
        return True
    if path == ["store", "build"]:
        return "--dry-run" in argv
    if path == ["report"]:  # a recorded log in the checkout (not a stack's cloud source)
        return bool(argv[1:]) and (ROOT / argv[1]).is_file()
    return False


OFFLINE = [(doc, argv) for doc, argv in COMMANDS if _offline(argv)]


def test_the_offline_commands_include_the_store_dry_run() -> None:
    assert ("store", "build", "--stack", "gke-b200", "--dry-run") in [a for _, a in OFFLINE]


@pytest.mark.parametrize(("doc", "argv"), OFFLINE, ids=[" ".join(a) for _, a in OFFLINE])
def test_every_offline_command_runs_as_written(
    doc: str, argv: tuple[str, ...], tmp_path: Path, plan_command: PlanCommand
) -> None:
    if argv[0] == "plan":  # the session's shared run of that command line (its own --out last, in tmp)
        proc, _ = plan_command("deepep_a4.cli", *argv, out=tmp_path / "plan")
    else:
        # HOME in tmp: the store build's work folder (~/.cache/deepep-a4/build/STACK) and any other cache;
        # a report's --out into tmp as well.
        args = list(argv)
        if "--out" in args:
            args[args.index("--out") + 1] = str(tmp_path / "out")
        env = {**os.environ, "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
        proc = subprocess.run(
            [sys.executable, "-m", "deepep_a4.cli", *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    if argv[0] == "report":
        # The report's verdict is its exit status (docs/benchmarks.md: 0 PASS, 1 FAIL or NOT PROVEN, 2 nothing
        # to report); the sample's is FAIL, and the README says so (tests/test_readme.py).
        assert proc.returncode in (0, 1) and (tmp_path / "out" / "report.md").is_file(), proc.stderr[-800:]
        return
    assert proc.returncode == 0, f"{doc}: deepep-a4 {' '.join(argv)} exited {proc.returncode}: {proc.stderr[-800:]}"


def _steps(text: str) -> list[int]:
    """Where the store's bucket, build, pin and `pulumi up` come in the document's code blocks."""
    lines = text.splitlines()

    def first(pattern: str) -> int:
        return next(i for i, line in enumerate(lines) if re.search(pattern, line))

    return [
        first(r"^pulumi -C store up\b"),
        first(r"pulumi config set deepep-a4:artifactStore gs://"),
        first(r"deepep-a4 store build --stack \S+\s"),
        first(r"pulumi config set deepep-a4:artifactStoreManifest SHA256"),
        first(r"^pulumi up\b"),
    ]


@pytest.mark.parametrize("doc", ["README.md", "docs/deploy.md"])
def test_the_store_steps_come_in_order_before_pulumi_up(doc: str) -> None:
    steps = _steps((ROOT / doc).read_text())
    assert steps == sorted(steps), steps


def pulumi_commands(doc: Path) -> list[list[str]]:
    """Every `pulumi ...` line of the document's code blocks, comments dropped."""
    out, inside = [], False
    for line in doc.read_text().splitlines():
        if FENCE.match(line):
            inside = not inside
            continue
        line = line.split(" #")[0].strip()
        if inside and line.startswith("pulumi "):
            out.append(shlex.split(line))
    return out


@pytest.mark.parametrize("doc", ["README.md", "docs/deploy.md", "docs/store.md"])
def test_the_pulumi_commands_name_real_subcommands_stacks_and_keys(doc: str) -> None:
    """The Pulumi CLI cannot run here: its subcommands as `pulumi --help` lists them
    (https://www.pulumi.com/docs/iac/cli/commands/), `-C DIR` its global "run as if started in DIR" flag, and
    each `config set` key one the project (or the store's project) declares."""
    import yaml

    from components.config.keys import KEYS_BY_NAME

    subcommands = {"login", "stack", "config", "up", "preview", "refresh", "destroy", "state"}
    found = pulumi_commands(ROOT / doc)
    assert found or doc == "docs/store.md"
    for words in found:
        project = ROOT
        if words[1] == "-C":
            project, words = ROOT / words[2], [words[0], *words[3:]]
        assert words[1] in subcommands, words
        if words[1:3] == ["config", "set"]:
            key = words[3]
            if project == ROOT:
                assert key.startswith("deepep-a4:") and key.split(":", 1)[1] in KEYS_BY_NAME, key
            else:
                assert key in yaml.safe_load((project / "Pulumi.yaml").read_text())["config"], key

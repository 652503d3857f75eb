"""Every reference document in docs/ names what exists: stack keys, `deepep-a4` subcommands and flags,
repository paths in links, and the anchors those links point at (the README has its own, stricter test)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from components.config.keys import KEYS_BY_NAME
from tests.test_readme import anchors

ROOT = Path(__file__).resolve().parents[2]
DOCS = sorted((ROOT / "docs").glob("*.md"))
# Not keys: the namespace in prose ("deepep-a4:KEY") and the labels the program sets on machines.
NOT_KEYS = {"KEY"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_stack_key_named_exists(doc: Path) -> None:
    named = set(re.findall(r"deepep-a4:([A-Za-z][A-Za-z0-9]*)", doc.read_text())) - NOT_KEYS
    assert named <= set(KEYS_BY_NAME), f"{doc.name}: not stack keys: {sorted(named - set(KEYS_BY_NAME))}"


def deepep_commands(text: str) -> list[list[str]]:
    out, inside = [], False
    for line in text.splitlines():
        if line.startswith("```"):
            inside = not inside
            continue
        if not inside:
            continue
        for part in line.split(" #")[0].split("&&"):
            part = part.strip()
            if part.startswith(".venv/bin/deepep-a4 "):
                out.append(shlex.split(part)[1:])
    return out


def help_of(sub: str) -> str:
    # In this process (click's test runner, 80 columns as in a pipe): a `python -m deepep_a4.cli` per
    # subcommand took 2 s each on the CI machine (issue 37); tests/deepep_a4/test_cli.py runs that form.
    from click.testing import CliRunner

    from deepep_a4 import cli

    result = CliRunner().invoke(cli.main, [*sub.split(), "--help"], terminal_width=80)
    assert result.exit_code == 0, f"deepep-a4 {sub} is not a subcommand"
    return result.output


def test_every_deepep_a4_command_in_the_docs_names_a_real_subcommand_and_flags() -> None:
    seen = 0
    helps: dict[str, str] = {}
    for doc in DOCS:
        for words in deepep_commands(doc.read_text()):
            seen += 1
            if words[0] not in helps:  # one --help per subcommand (setdefault would run it for every command)
                helps[words[0]] = help_of(words[0])
            text = helps[words[0]]
            if "Commands:" in text and len(words) > 1:  # a group (`store`): its command's own help
                sub = f"{words[0]} {words[1]}"
                helps[sub] = helps.get(sub) or help_of(sub)
                text = helps[sub]
            for flag in (w.split("=")[0] for w in words[1:] if w.startswith("--")):
                assert re.search(rf"(?<![\w-]){re.escape(flag)}\b", text), f"{doc.name}: {flag} of deepep-a4 {words[0]}"
    assert seen


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_relative_link_resolves(doc: Path) -> None:
    for link in re.findall(r"\]\(([^)\s]+)\)", doc.read_text()):
        if link.startswith(("http://", "https://", "mailto:")):
            continue
        path, _, anchor = link.partition("#")
        target = (doc.parent / path).resolve() if path else doc
        assert target.exists(), f"{doc.name}: {link}: no such file"
        if anchor and target.suffix == ".md":
            assert anchor in anchors(target), f"{doc.name}: {link}: no such heading"

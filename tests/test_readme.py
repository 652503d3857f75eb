"""What a new user reads first is true: every command in the README's code blocks exists as written (command,
subcommand, flags), the cheap offline ones run as written, the plan output it quotes is what the plan prints,
every link resolves, and the text stands alone (no field-report file names, no figures that go stale)."""

from __future__ import annotations

import functools
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from components.config.keys import KEYS
from tests.conftest import PlanCommand

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text()
DEEPEP = ".venv/bin/deepep-a4"
# The Pulumi CLI cannot run here: its subcommands the README may name, as `pulumi --help` lists them
# (https://www.pulumi.com/docs/iac/cli/commands/).
PULUMI_SUBCOMMANDS = {"login", "stack", "config", "up", "preview", "refresh", "destroy"}
# Commands whose first word is one of these are checked by the tests below; any other first word fails, so a
# new kind of command in the README needs a check here.
KNOWN_TOOLS = {"python3", ".venv/bin/pip", "bash", "pulumi", DEEPEP}


def code_blocks() -> list[tuple[str, str, str]]:
    """(language, body, the line before the fence) of every fenced block."""
    out, lines = [], README.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("```"):
            lang, before, body = lines[i][3:].strip(), lines[i - 1] if i else "", []
            i += 1
            while not lines[i].startswith("```"):
                body.append(lines[i])
                i += 1
            out.append((lang, "\n".join(body), before))
        i += 1
    return out


def commands() -> list[list[str]]:
    """Every command of the bash blocks, split at `&&`, comments dropped."""
    out = []
    for lang, body, _ in code_blocks():
        if lang != "bash":
            continue
        for line in body.splitlines():
            line = line.split(" #")[0].strip()
            if not line or line.startswith("#"):
                continue
            out.extend(shlex.split(part) for part in line.split("&&"))
    return out


def of_tool(tool: str) -> list[list[str]]:
    return [c for c in commands() if c[0] == tool]


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "deepep_a4.cli", *args], capture_output=True, text=True, check=False, cwd=ROOT
    )


@functools.cache
def help_of(*sub: str) -> subprocess.CompletedProcess[str]:
    """`deepep-a4 SUB [SUBSUB] --help`, run once per subcommand however many README commands name it."""
    return run_cli(*sub, "--help")


def test_every_command_is_one_the_tests_know_how_to_check() -> None:
    assert commands(), "the README shows no command"
    assert {c[0] for c in commands()} <= KNOWN_TOOLS


@pytest.mark.parametrize("words", of_tool(DEEPEP), ids=lambda w: " ".join(w))
def test_each_deepep_a4_command_names_a_real_subcommand_and_its_flags(words: list[str]) -> None:
    path = words[1 : next((i for i, w in enumerate(words) if i and w.startswith("-")), len(words))]
    sub = " ".join(path)  # `store build`: a group's command
    proc = help_of(*path)
    assert proc.returncode == 0, f"deepep-a4 {sub} is not a subcommand: {proc.stderr}"
    for flag in (w.split("=")[0] for w in words[2:] if w.startswith("--")):
        assert re.search(rf"(?<![\w-]){re.escape(flag)}\b", proc.stdout), f"{flag} is not a flag of deepep-a4 {sub}"


def test_the_set_up_command_installs_files_that_exist() -> None:
    assert ["python3", "-m", "venv", ".venv"] in commands()
    for words in commands():
        if "-r" in words:
            assert (ROOT / words[words.index("-r") + 1]).is_file()


def test_bash_commands_run_scripts_that_exist_with_gates_they_have() -> None:
    for words in of_tool("bash"):
        script = ROOT / words[1]
        assert script.is_file(), words
        if words[1] == "ci/test.sh" and words[2:]:
            gates = subprocess.run(["bash", str(script), "--list"], capture_output=True, text=True, check=True)
            assert set(words[2:]) <= set(gates.stdout.split()), words


def test_pulumi_commands_use_real_subcommands_and_the_programs_keys() -> None:
    names = {k.name for k in KEYS}
    assert of_tool("pulumi")
    for words in of_tool("pulumi"):
        if words[1] == "-C":  # `pulumi -C DIR`: "run pulumi as if it had been started in DIR" (a global flag)
            project = ROOT / words[2]
            words = [words[0], *words[3:]]
            assert words[1] in PULUMI_SUBCOMMANDS, words
            declared = yaml.safe_load((project / "Pulumi.yaml").read_text())["config"]
            if words[1:3] == ["config", "set"]:
                assert words[3] in declared, f"{words[3]} is not a key of {project.name}/Pulumi.yaml"
            if "-s" in words:
                assert (project / f"Pulumi.{words[words.index('-s') + 1]}.yaml").is_file(), words
            continue
        assert words[1] in PULUMI_SUBCOMMANDS, words
        if words[1:3] == ["config", "set"]:
            key = words[3]
            assert key.startswith("deepep-a4:") and key.split(":", 1)[1] in names, f"{key} is not a stack key"
        if "-s" in words:
            stack = words[words.index("-s") + 1]
            assert (ROOT / "stacks" / f"Pulumi.{stack}.yaml").is_file(), words


def test_command_1_plans_as_written(tmp_path: Path, plan_command: PlanCommand) -> None:
    words = next(c for c in of_tool(DEEPEP) if c[1] == "plan")
    proc, _ = plan_command("deepep_a4.cli", *words[1:], out=tmp_path / "plan")
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "plan" / "plan.json").is_file()


def test_the_cost_command_runs_as_written() -> None:
    words = next(c for c in of_tool(DEEPEP) if c[1] == "cost")
    proc = run_cli(*words[1:])
    assert proc.returncode == 0, proc.stderr
    assert "Bill cap:" in proc.stdout


def test_the_report_of_a_recorded_log_runs_as_written(tmp_path: Path) -> None:
    words = next(c for c in of_tool(DEEPEP) if c[1] == "report" and not c[2].startswith("--"))
    assert (ROOT / words[2]).is_file()
    out = tmp_path / "report"
    args = [w if w != words[words.index("--out") + 1] else str(out) for w in words[1:]]
    proc = run_cli(*args)
    assert (out / "report.md").is_file()
    # The README says why the sample exits 1, and so does the command itself.
    assert proc.returncode == 1, proc.stderr
    said = "exit 1: the verdict is FAIL, not PASS"
    assert said in proc.stderr and f"`{said}`" in README


def plan_printout(stack: str, tmp_path: Path, plan_command: PlanCommand) -> str:
    proc, _ = plan_command("deepep_a4.cli", "plan", "--stack", stack, out=tmp_path / stack)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_quoted_plan_output_is_what_the_plan_prints(tmp_path: Path, plan_command: PlanCommand) -> None:
    quoted = [(b, before) for lang, b, before in code_blocks() if before.startswith("<!-- plan-output:")]
    assert len(quoted) >= 2
    printed: dict[str, list[str]] = {}
    for body, marker in quoted:
        stack = marker.removeprefix("<!-- plan-output:").removesuffix("-->").strip()
        if stack not in printed:
            printed[stack] = plan_printout(stack, tmp_path, plan_command).splitlines()
        for line in body.splitlines():
            assert line in printed[stack], f"the plan of {stack} no longer prints: {line!r}"


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = path.read_text()
    found = {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, re.M)}
    return found | set(re.findall(r'<a id="([^"]+)"></a>', text))


def test_every_link_resolves_to_a_file_and_its_anchor() -> None:
    links = re.findall(r"\]\(([^)]+)\)", README)
    assert links
    for link in links:
        if link.startswith(("http://", "https://")):
            continue
        path, _, anchor = link.partition("#")
        target = ROOT / path if path else ROOT / "README.md"
        assert target.is_file(), f"{link}: no such file"
        if anchor:
            assert anchor in anchors(target), f"{link}: no such heading in {target.name}"


def test_every_reference_document_is_linked() -> None:
    for doc in sorted((ROOT / "docs").glob("*.md")):
        assert f"(docs/{doc.name})" in README, f"docs/{doc.name} is not linked from the README"


def test_it_is_ordered_as_a_new_user_needs_it() -> None:
    headings = re.findall(r"^## (.+)$", README, re.M)
    assert headings == ["What it builds", "What it costs, and the bill cap", "Deploy and tear down", "Reference"]
    two_commands = README.index("bash ci/test.sh")
    assert two_commands < README.index("## What it builds")


def test_it_stands_alone_and_quotes_no_figure_that_ages() -> None:
    assert not re.search(r"\bseeds?\b", README, re.I), "cite docs/troubleshooting.md, not the field-report files"
    assert not re.search(r"\d+ tests\b", README), "a test count goes stale"
    assert not re.search(r"\b\d+(\.\d+)? ?(s|min|seconds|minutes)\b(?! ?[)/])", README), "a timing goes stale"
    # Downloads are pinned by version and git commit; the README must not promise checksums it does not check.
    assert "checksum" not in README.lower()

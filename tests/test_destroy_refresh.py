"""No code path destroys without a refresh, and no documented destroy omits it (docs/troubleshooting.md T26):
once the TTL or a preemption deleted the GCE VMs, the provider's instance delete fails on "not found"."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from deepep_a4.run import platforms as run_platforms

ROOT = Path(__file__).resolve().parents[1]
CODE = [p for top in ("deepep_a4", "components", "scripts", "ci", "store") for p in (ROOT / top).rglob("*.py")]
CODE.append(ROOT / "__main__.py")
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
# A destroy as a command: with flags after it, at the start of a shell line, or after "run".
COMMAND = re.compile(r"(?:^\s*|run `)pulumi destroy(?![\w-])(?! --refresh)|pulumi destroy(?! --refresh)(?= -)", re.M)


def test_the_project_refreshes_on_every_operation() -> None:
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["options"] == {"refresh": "always"}


def test_the_automation_api_destroy_refreshes(monkeypatch: pytest.MonkeyPatch) -> None:
    from pulumi import automation as auto

    calls: list[dict[str, Any]] = []

    class Stack:
        def destroy(self, **kwargs: Any) -> None:
            calls.append(kwargs)

    monkeypatch.setattr(auto, "create_or_select_stack", lambda **_: Stack())
    run_platforms.AutomationStack("gce-b200").destroy(on_output=print)
    assert calls and calls[0]["refresh"] is True


def test_the_installed_sdk_takes_refresh_on_destroy() -> None:
    import inspect

    from pulumi import automation as auto

    assert "refresh" in inspect.signature(auto.Stack.destroy).parameters


def _destroy_calls(path: Path) -> list[tuple[ast.Call, ast.Attribute]]:
    tree = ast.parse(path.read_text())
    return [
        (node, node.func)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "destroy"
    ]


def test_every_destroy_call_refreshes_or_goes_through_the_stack_wrapper() -> None:
    seen = 0
    for path in CODE:
        for call, func in _destroy_calls(path):
            seen += 1
            target = ast.unparse(func.value)
            refresh = {k.arg: ast.unparse(k.value) for k in call.keywords}.get("refresh")
            # self.stack is the StackOps of `deepep-a4 run`: AutomationStack (tested above) or a test's fake.
            assert target == "self.stack" or refresh == "True", f"{path.relative_to(ROOT)}:{call.lineno}"
    assert seen >= 2


@pytest.mark.parametrize("path", CODE + DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_destroy_command_refreshes(path: Path) -> None:
    text = path.read_text()
    found = [text[: m.start()].count("\n") + 1 for m in COMMAND.finditer(text)]
    assert found == [], f"`pulumi destroy` without --refresh at lines {found}"


def test_the_command_pattern_finds_a_destroy_without_refresh() -> None:
    assert COMMAND.search("```bash\npulumi destroy -s gke-b200\n```")
    assert COMMAND.search("then run `pulumi destroy`, then")
    assert COMMAND.search('say(f"pulumi destroy -s {name}")')
    assert not COMMAND.search("pulumi destroy --refresh -s gke-b200")
    assert not COMMAND.search("the bucket stays until `pulumi destroy`.")

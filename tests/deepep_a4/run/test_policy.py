"""`deepep-a4 run` enforces the policy pack: its Automation API `up` names policy/, and --help says so."""

from __future__ import annotations

from typing import Any

from click.testing import CliRunner

from deepep_a4.cli import main as cli
from deepep_a4.run import platforms as run_platforms


class FakeAutoStack:
    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def up(self, **kw: Any) -> None:
        self.calls.append(kw)


def test_run_ups_with_the_policy_pack() -> None:
    stack = run_platforms.AutomationStack.__new__(run_platforms.AutomationStack)
    fake = FakeAutoStack()
    stack._stack = fake  # type: ignore[assignment]
    stack.up(on_output=print)
    [call] = fake.calls
    assert call["policy_packs"] == [str(run_platforms.POLICY_PACK)]
    assert (run_platforms.POLICY_PACK / "PulumiPolicy.yaml").is_file()
    assert (run_platforms.POLICY_PACK / "__main__.py").read_text().count("PolicyPack(") == 1


def test_run_help_names_the_policy_it_enforces() -> None:
    result = CliRunner().invoke(cli, ["run", "--help"])
    assert "policy pack in policy/" in result.output, result.output

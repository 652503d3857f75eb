"""What a newcomer reads in the plan, made true: the bring-up line says what it leaves out and what a run costs,
the mocks' all-zero image digest is labelled a stand-in, a 10-minute TTL reads `10m`, and `plan --quiet` prints
what docs/development.md says it prints."""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from deepep_a4 import cost, stackfile
from deepep_a4.plan import command as plan_tool
from deepep_a4.plan import engine as plan_engine
from tests.conftest import ROOT, stack_config


def printout(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, stack: str, *flags: str, **overrides: str) -> str:
    edited = stack_config(stack, **overrides)
    monkeypatch.setattr(stackfile, "read", lambda name, root=None: dict(edited))
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert plan_tool.main(["--stack", stack, "--out", str(tmp_path / "p"), *flags]) == 0
    return out.getvalue()


def test_the_bringup_line_says_what_it_leaves_out_and_what_a_run_costs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    lines = printout(monkeypatch, tmp_path, "gke-b200").splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("Bring-up per node"))
    below = lines[at + 1]
    for left_out in ("creating the cluster", "the wait for spot capacity", "the benchmarks (at most 3 x 30 min)"):
        assert left_out in below
    m = re.search(r"per run at \$([\d.,]+)/h: \$([\d.,]+)-\$([\d.,]+) to installer ready, at most \$([\d.,]+)", below)
    assert m, below
    hourly, low, high, most = (float(g.replace(",", "")) for g in m.groups())
    assert 0 < low < high < most
    assert f"${hourly:,.2f}" in "\n".join(lines)  # the same hourly total as the cost table's spot column


def test_the_all_zero_image_digest_is_labelled_a_stand_in(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    zeros = "0" * 64
    text = printout(monkeypatch, tmp_path, "gke-b200")
    shown = [line for line in text.splitlines() if zeros in line]
    assert shown and all(plan_engine.STAND_IN in line for line in shown), shown


@pytest.mark.parametrize(("ttl", "shown"), [("10m", "10m"), ("90m", "1h30m"), ("8h", "8h"), ("1d12h", "1d12h")])
def test_a_ttl_is_printed_as_the_ttl_key_writes_it(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ttl: str, shown: str
) -> None:
    text = printout(monkeypatch, tmp_path, "gke-b200", ttl=ttl)
    assert f"per TTL ({shown})" in text and f"Bill cap: ttl {shown} from" in text
    assert not re.search(r"\d\.\d+h\b", text), "no fractional hours"
    assert cost._hours(600 / 3600) == "10m"


def test_plan_quiet_prints_what_development_md_says(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "development.md").read_text()
    claim = next(line for line in doc.splitlines() if "plan --stack gce-b200 --quiet" in line)
    assert "prints only the bill cap, the warnings and the summary line" in claim
    text = printout(monkeypatch, tmp_path, "gce-b200", "--quiet")
    lines = text.strip().splitlines()
    assert lines[0].startswith("Bill cap:")
    assert re.match(r"^\d+ resources, \d+ rendered files -> ", lines[-1])
    for line in lines[1:-1]:
        assert line.startswith(("  source:", "  store build on Cloud Build:", "WARNING:", "UNTESTED:", "STAND-IN:")), (
            line
        )

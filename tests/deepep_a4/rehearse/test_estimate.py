"""The rehearsal's cost and time before anything is made (deepep_a4/rehearse/estimate.py): every cloud line priced
from prices.yaml, the total under a dollar for every example stack, shown by the plan and by --dry-run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from deepep_a4.plan import command as plan
from deepep_a4.rehearse import command, estimate


@pytest.mark.parametrize("stack", ["gke-b200", "gce-b200", "gke-b200-ubuntu", "gce-b200-ubuntu"])
def test_every_line_is_priced_and_the_rehearsal_costs_under_a_dollar(stack: str) -> None:
    _, _, cfg = plan.load_stack(stack)
    est = estimate.estimate(cfg)
    assert all(line.usd is not None for line in est.lines), est.lines
    assert est.usd is not None and 0 < est.usd < estimate.TARGET_USD
    text = "\n".join(est.render({"the rehearsal's offline plan": 1.25}))
    assert "estimate" in text and "prices.yaml" in text and "1.25 s" in text and "measured here" in text


def test_the_plan_shows_the_rehearsal_and_plan_json_keeps_it(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert plan.main(["--stack", "gce-b200", "--out", str(tmp_path / "p")]) == 0
    assert "Rehearse first: deepep-a4 rehearse --stack gce-b200" in capsys.readouterr().out
    doc = json.loads((tmp_path / "p" / "plan.json").read_text())["rehearsal"]
    assert doc["usdEstimate"] < 1 and doc["minutesEstimate"] > 0 and "prices.yaml" in doc["source"]


def test_dry_run_makes_nothing_and_measures_the_offline_parts(tmp_path: Path) -> None:
    said: list[str] = []
    made: list[str] = []
    rc = command.main(["--stack", "gce-b200", "--dry-run"], say=said.append, make_stack=made.append, out_root=tmp_path)
    assert rc == 0 and not made and said[-1] == "--dry-run: nothing was made."
    assert any("offline plan (gce-b200-rehearsal) (measured here, offline)" in line for line in said)
    assert any(line.startswith("Rehearsal cost: $") for line in said)
    assert not (tmp_path / "build").exists()

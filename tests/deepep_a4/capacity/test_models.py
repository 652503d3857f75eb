"""Each provisioning model's price, quota and wait (deepep_a4/capacity/models.py), as the plan prints them."""

from __future__ import annotations

from deepep_a4 import cost
from deepep_a4.capacity import models


def test_prices_come_from_prices_yaml_with_their_date_and_unknown_says_why() -> None:
    rows = {r.model: r for r in models.facts("asia-southeast1")}
    read = cost.load_prices()["machines"]["a4-highgpu-8g"]["read"]
    assert rows["spot"].price == 35.5712 and f"read {read}" in rows["spot"].price_note
    assert rows["on-demand"].price == 64.44
    assert rows["flex-start"].price is None and rows["flex-start"].price_note.startswith(
        "unknown: no public flex_start"
    )
    assert rows["reservation"].price is None
    assert (
        models.facts("mars-north1")[0].price_note
        == "unknown: prices.yaml has no spot price for a4-highgpu-8g in mars-north1"
    )


def test_quota_and_wait_per_model() -> None:
    rows = {r.model: r for r in models.facts("asia-southeast1")}
    assert rows["spot"].quota_metric == rows["flex-start"].quota_metric == "PREEMPTIBLE_NVIDIA_B200_GPUS"
    assert rows["on-demand"].quota_metric == "NVIDIA_B200_GPUS"
    assert models.quota_text(rows["reservation"].quota_metric) == models.RESERVATION_QUOTA
    assert all(r.wait.startswith("unknown: ") for r in rows.values())


def test_the_plan_prints_the_block_and_writes_it_into_plan_json(tmp_path) -> None:
    import json
    import subprocess
    import sys

    out = tmp_path / "plan"
    proc = subprocess.run(
        [sys.executable, "-m", "deepep_a4.cli", "plan", "--stack", "gce-b200", "--out", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert "Capacity per model (asia-southeast1; the stack uses spot; docs/deploy.md#no-capacity):" in proc.stdout
    assert " *spot         price: 35.5712 USD/node-hour" in proc.stdout
    doc = json.loads((out / "plan.json").read_text())
    assert [m["model"] for m in doc["capacityModels"]] == ["spot", "reservation", "flex-start", "on-demand"]

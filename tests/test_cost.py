"""The cost estimate: arithmetic, unknown prices, the price table's provenance, the plan's cost lines."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from deepep_a4 import config
from deepep_a4.tools import cost, plan_engine
from deepep_a4.tools import plan as plan_script
from tests.conftest import stack_config

STACKS = ("gke-b200", "gce-b200")


def cfg_of(stack: str, **overrides: Any) -> config.StackConfig:
    return config.parse(plan_engine.project_keys(stack_config(stack, **overrides)), stack)


TABLE: dict[str, Any] = {
    "machines": {
        "a4-highgpu-8g": {
            "source": "test table",
            "regions": {"asia-southeast1": {"spot": 10.0, "on_demand": 25.0}},
            "flex_start": "unknown",
        },
        "e2-standard-4": {"regions": {"asia-southeast1": {"on_demand": 0.2}}},
    },
    "local_ssd_bundled": "unknown",
    "disks": {"hyperdisk-balanced": {"per_gib_month": 0.073}},
    "gke": {"cluster_fee_per_hour": 0.5, "source": "test"},
}


def test_machines_disks_and_fee_add_up_per_hour_and_per_ttl() -> None:
    est = cost.estimate(cfg_of("gke-b200", nodeCount=3, ttl="2h", bootDiskGb=500), TABLE)
    machines, ssd, disks, fee, system = est.lines
    assert (machines.spot, machines.on_demand) == (30.0, 75.0)
    assert ssd.spot is None and ssd.on_demand is None  # unknown stays unknown, never zero
    assert disks.spot == pytest.approx(0.073 * 500 * 3 / 730, abs=1e-4)
    assert fee.spot == fee.on_demand == 0.5
    assert system.spot == system.on_demand == 0.2  # the system pool is on-demand in both columns
    assert "system pool 1 x e2-standard-4" in system.item
    assert disks.spot is not None and est.spot_hourly is not None
    assert est.spot_hourly == pytest.approx(30.0 + disks.spot + 0.5 + 0.2, abs=1e-3)
    assert est.on_demand_hourly == pytest.approx(75.0 + disks.spot + 0.5 + 0.2, abs=1e-3)
    assert est.per_cap(est.spot_hourly) == pytest.approx(2 * est.spot_hourly, abs=0.01)
    assert est.unknown_items == [ssd.item]


def test_gce_has_no_cluster_fee_and_a_day_without_ttl() -> None:
    est = cost.estimate(cfg_of("gce-b200", provisioning="on-demand", ttl="off"), TABLE)
    assert not any("GKE" in line.item for line in est.lines)
    assert est.ttl_hours is None and est.cap_hours == 24
    text = "\n".join(cost.render(est))
    assert "per day (no TTL)" in text
    assert "this stack (on-demand) pays the on-demand column" in text


def test_unknown_region_has_no_machine_price_and_says_why() -> None:
    est = cost.estimate(cfg_of("gce-b200", region="us-central2", zone="us-central2-b"), TABLE)
    assert est.lines[0].spot is None and est.spot_hourly is None and est.per_cap(None) is None
    assert "no price for us-central2" in est.lines[0].note and "asia-southeast1" in est.lines[0].note
    text = "\n".join(cost.render(est))
    assert re.search(r"total per hour\s+unknown\s+unknown", text)


@pytest.mark.parametrize(
    ("model", "extra"), [("flex-start", {}), ("reservation", {"reservationName": "a4-reservation"})]
)
def test_flex_start_and_reservation_rates_are_unknown_not_guessed(model: str, extra: dict[str, str]) -> None:
    lines = cost.render(cost.estimate(cfg_of("gce-b200", provisioning=model, **extra), TABLE))
    assert any(f"{model}: its rate is unknown" in line for line in lines)


def test_the_repo_price_table_has_a_source_and_date_and_no_bare_numbers() -> None:
    table = cost.load_prices()
    a4 = table["machines"]["a4-highgpu-8g"]
    assert a4["source"].startswith("https://") and re.fullmatch(r"\d{4}-\d{2}-\d{2}", a4["read"])
    assert table["gke"]["source"] and re.fullmatch(r"\d{4}-\d{2}-\d{2}", table["gke"]["read"])
    for region, entry in a4["regions"].items():
        for column in ("spot", "on_demand"):
            value = entry[column]
            assert value == "unknown" or (isinstance(value, float) and value > 0), (region, column, value)
        if isinstance(entry["spot"], float) and isinstance(entry["on_demand"], float):
            assert entry["spot"] < entry["on_demand"], region
    # The stacks' own region must be priced, or the plan's headline number is unknown.
    for stack in STACKS:
        assert cfg_of(stack).region in a4["regions"]


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_costs_nodes_times_the_regional_price(stack: str) -> None:
    cfg = cfg_of(stack)
    table = cost.load_prices()
    regional = table["machines"][cfg.machine_type]["regions"][cfg.region]
    est = cost.estimate(cfg, table)
    assert est.lines[0].spot == pytest.approx(regional["spot"] * cfg.node_count)
    assert est.lines[0].on_demand == pytest.approx(regional["on_demand"] * cfg.node_count)
    assert est.spot_hourly is not None and est.on_demand_hourly is not None
    assert est.spot_hourly < est.on_demand_hourly
    doubled = cost.estimate(cfg_of(stack, nodeCount=2 * cfg.node_count), table)
    assert doubled.lines[0].spot == pytest.approx(2 * regional["spot"] * cfg.node_count)


@pytest.mark.parametrize("stack", STACKS)
def test_the_plan_prints_and_writes_the_estimate(stack: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    assert plan_script.main(["--stack", stack, "--out", str(tmp_path)]) == 0
    printed = capsys.readouterr().out
    doc = json.loads((tmp_path / "plan.json").read_text())
    est = doc["costEstimate"]
    assert est["estimate"] is True and est["currency"] == "USD"
    assert est["spotPerHour"] < est["onDemandPerHour"]
    assert est["spotPerTtl"] == pytest.approx(est["spotPerHour"] * 8, abs=0.01)  # the stacks' ttl: 8h
    assert "Estimated cost (an ESTIMATE" in printed
    assert f"${est['spotPerHour']:,.2f}" in printed and f"${est['onDemandPerHour']:,.2f}" in printed
    assert ("GKE cluster management fee" in printed) == (stack == "gke-b200")

"""The cost estimate: arithmetic, unknown prices, the price table's provenance, the plan's cost lines."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from components import config
from deepep_a4 import cost
from deepep_a4.plan import command as plan_script
from deepep_a4.plan import engine as plan_engine
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
    "local_ssd": {"per_gib_month": {"asia-southeast1": {"spot": 0.0365, "on_demand": 0.073}}},
    "disks": {
        "hyperdisk-balanced": {"per_gib_month": 0.073},
        "pd-balanced": {"per_gib_month": {"asia-southeast1": 0.146}},
    },
    "gke": {"cluster_fee_per_hour": 0.5, "source": "test"},
    "network": {"cloud_nat": {"per_vm_hour": 0.01, "max_billed_vms": 32, "data_per_gib": 0.045}},
    "scheduler": {"per_job_31_days": 0.744, "free_jobs_per_billing_account": 3},
    "storage": {"standard_per_gib_month": {"asia-southeast1": 0.02}},
}


def test_machines_disks_and_fee_add_up_per_hour_and_per_ttl() -> None:
    # 240 internode experts: DeepEP's test_internode.py asserts experts % (3 nodes x 8 ranks) == 0.
    est = cost.estimate(cfg_of("gke-b200", nodeCount=3, internodeExperts=240, ttl="2h", bootDiskGb=500), TABLE)
    machines, ssd, disks, fee, system, scheduler, nat = est.lines
    assert nat.spot == nat.on_demand == pytest.approx(0.01 * (3 + 1))  # 3 A4 nodes and the system node
    assert scheduler.spot == scheduler.on_demand == pytest.approx(0.744 / (31 * 24))
    assert (machines.spot, machines.on_demand) == (30.0, 75.0)
    # 3 nodes x 12,000 GiB of bundled local SSD at the per-GiB-month rate, over Google's 730-hour month.
    assert ssd.spot == pytest.approx(3 * 12_000 * 0.0365 / 730, abs=1e-4)
    assert ssd.on_demand == pytest.approx(3 * 12_000 * 0.073 / 730, abs=1e-4)
    assert disks.spot == disks.on_demand == pytest.approx(0.073 * 500 * 3 / 730, abs=1e-4)
    assert fee.spot == fee.on_demand == 0.5
    # The system pool is on-demand in both columns: the node plus its 50 GB pd-balanced boot disk.
    assert system.spot == system.on_demand == pytest.approx(0.2 + 50 * 0.146 / 730, abs=1e-4)
    assert "system pool 1 x e2-standard-4 + 50 GB pd-balanced" in system.item
    assert None not in (ssd.spot, ssd.on_demand, disks.spot, system.spot)
    parts = [ssd, disks, fee, system, scheduler, nat]
    assert est.spot_hourly == pytest.approx(30.0 + sum(x.spot or 0 for x in parts), abs=1e-3)
    assert est.on_demand_hourly == pytest.approx(75.0 + sum(x.on_demand or 0 for x in parts), abs=1e-3)
    assert est.spot_hourly is not None
    assert est.per_cap(est.spot_hourly) == pytest.approx(2 * est.spot_hourly, abs=0.01)
    assert est.unknown_items == []


def test_an_unknown_rate_stays_unknown_and_out_of_the_totals() -> None:
    table = {
        **TABLE,
        "local_ssd": {"per_gib_month": "unknown"},
        "disks": {"hyperdisk-balanced": {"per_gib_month": "unknown"}},  # and no pd-balanced at all
    }
    est = cost.estimate(cfg_of("gke-b200"), table)
    ssd, disks, system = est.lines[1], est.lines[2], est.lines[4]
    for line in (ssd, disks, system):  # never zero, never guessed
        assert line.spot is None and line.on_demand is None, line
    assert est.unknown_items == [ssd.item, disks.item, system.item]
    known = 0.5 + sum(line.spot or 0 for line in est.lines[5:])  # the fee, the deadline job and the NAT
    assert est.spot_hourly == pytest.approx(est.lines[0].spot + known)  # type: ignore[operator]
    text = "\n".join(cost.render(est))
    assert "not in the totals (price unknown): local SSD" in text


def test_the_bundled_local_ssd_says_what_bundled_means_in_the_printout() -> None:
    lines = cost.render(cost.estimate(cfg_of("gce-b200"), TABLE))
    ssd_row = next(line for line in lines if line.lstrip().startswith("local SSD"))
    mark = re.search(r"\[(\d)\]", ssd_row)
    assert mark, ssd_row
    note = next(line for line in lines if line.strip().startswith(f"[{mark.group(1)}] "))
    assert "bundled: 12,000 GiB comes with every A4" in note and "Local SSD rate" in note
    assert "unknown" not in ssd_row  # no longer "bundled" and "unknown" at once


def test_gce_has_no_cluster_fee_and_a_day_without_ttl() -> None:
    est = cost.estimate(cfg_of("gce-b200", provisioning="on-demand", ttl="off"), TABLE)
    assert not any("GKE" in line.item for line in est.lines)
    assert est.ttl_hours is None and est.cap_hours == 24
    text = "\n".join(cost.render(est))
    assert "per day (no TTL)" in text
    assert "this stack (on-demand) pays the on-demand column" in text


def test_unknown_region_has_no_machine_price_and_says_why() -> None:
    est = cost.estimate(cfg_of("gce-b200", region="us-east4", zone="us-east4-b"), TABLE)
    assert est.lines[0].spot is None and est.spot_hourly is None and est.per_cap(None) is None
    assert "no price for us-east4" in est.lines[0].note and "asia-southeast1" in est.lines[0].note
    text = "\n".join(cost.render(est))
    assert re.search(r"total per hour\s+unknown\s+unknown", text)


@pytest.mark.parametrize(
    ("model", "extra"), [("flex-start", {}), ("reservation", {"reservationName": "a4-reservation"})]
)
def test_flex_start_and_reservation_rates_are_unknown_not_guessed(model: str, extra: dict[str, str]) -> None:
    lines = cost.render(cost.estimate(cfg_of("gce-b200", provisioning=model, **extra), TABLE))
    assert any(f"{model}: its rate is unknown" in line for line in lines)


def _dated_source(entry: dict[str, Any]) -> bool:
    return bool(str(entry.get("source", "")).strip()) and bool(
        re.fullmatch(r"\d{4}-\d{2}-\d{2}", str(entry.get("read")))
    )


def test_the_repo_price_table_has_a_source_and_date_and_no_bare_numbers() -> None:
    table = cost.load_prices()
    a4 = table["machines"]["a4-highgpu-8g"]
    assert a4["source"].startswith("https://")
    priced = [a4, table["machines"]["e2-standard-4"], table["local_ssd"], table["disks"]["pd-balanced"], table["gke"]]
    for entry in priced:
        assert _dated_source(entry), entry
    for region, entry in a4["regions"].items():
        for column in ("spot", "on_demand"):
            value = entry[column]
            assert value == "unknown" or (isinstance(value, float) and value > 0), (region, column, value)
        if isinstance(entry["spot"], float) and isinstance(entry["on_demand"], float):
            assert entry["spot"] < entry["on_demand"], region
    # Wherever the A4 machine has a price, so do its bundled SSD, the system node and its disk: a region is
    # priced whole or its gaps say `unknown`, never missing silently.
    for region in a4["regions"]:
        assert region in table["machines"]["e2-standard-4"]["regions"], region
        assert region in table["local_ssd"]["per_gib_month"], region
        assert region in table["disks"]["pd-balanced"]["per_gib_month"], region
        ssd = table["local_ssd"]["per_gib_month"][region]
        assert 0 < ssd["spot"] < ssd["on_demand"], region
    # No citable Hyperdisk Balanced rate was found: it stays unknown until one is (prices.yaml says where to look).
    assert table["disks"]["hyperdisk-balanced"]["per_gib_month"] == "unknown"
    # The stacks' own region must be priced, or the plan's headline number is unknown.
    for stack in STACKS:
        assert cfg_of(stack).region in a4["regions"]


@pytest.mark.parametrize("stack", STACKS)
def test_the_stacks_region_prices_everything_but_the_boot_disk(stack: str) -> None:
    est = cost.estimate(cfg_of(stack))
    assert est.region == "asia-southeast1"  # the stacks' zone asia-southeast1-b
    assert est.unknown_items == [est.lines[2].item] and "hyperdisk-balanced" in est.lines[2].item
    ssd = est.lines[1]
    assert ssd.spot is not None and ssd.on_demand is not None and 0 < ssd.spot < ssd.on_demand
    if stack == "gke-b200":
        fee, system = est.lines[3], est.lines[4]
        assert fee.spot == 0.10
        # e2-standard-4 on-demand in asia-southeast1 plus 50 GiB of pd-balanced, per hour
        assert system.spot == system.on_demand == pytest.approx(0.16533 + 50 * 0.11 / 730, abs=1e-4)
    assert any("https://cloud.google.com/kubernetes-engine/pricing" in s for s in est.sources) == (stack == "gke-b200")


def _resource(doc: dict[str, Any], type_: str, name: str) -> dict[str, Any]:
    return next(r for r in doc["resources"] if r["type"] == type_ and r["name"] == name)


def test_the_priced_disks_are_the_disks_the_program_creates(tmp_path: Path) -> None:
    """cost.py's disk types and sizes must follow the program: read them back from both plans."""
    assert plan_script.main(["--stack", "gke-b200", "--out", str(tmp_path / "gke"), "--quiet"]) == 0
    gke = json.loads((tmp_path / "gke" / "plan.json").read_text())
    system = _resource(gke, "gcp:container/nodePool:NodePool", "gke-system")["inputs"]
    assert system["nodeCount"] == cost.SYSTEM_NODE_COUNT
    assert system["nodeConfig"]["machineType"] == cost.SYSTEM_MACHINE_TYPE
    assert system["nodeConfig"]["diskType"] == cost.SYSTEM_BOOT_DISK_TYPE
    assert system["nodeConfig"]["diskSizeGb"] == cost.SYSTEM_BOOT_DISK_GB
    assert "spot" not in system["nodeConfig"]  # on-demand, as the estimate prices it
    a4 = _resource(gke, "gcp:container/nodePool:NodePool", "gke-a4")["inputs"]["nodeConfig"]
    assert a4["diskType"] == cost.A4_BOOT_DISK_TYPE
    assert not [k for k in json.dumps(a4).split('"') if "provisioned" in k.lower()]  # no IOPS/throughput bought
    assert plan_script.main(["--stack", "gce-b200", "--out", str(tmp_path / "gce"), "--quiet"]) == 0
    gce = json.loads((tmp_path / "gce" / "plan.json").read_text())
    vms = [r for r in gce["resources"] if r["type"] == "gcp:compute/instance:Instance"]
    assert vms
    for vm in vms:
        params = vm["inputs"]["bootDisk"]["initializeParams"]
        assert params["type"] == cost.A4_BOOT_DISK_TYPE
        assert not [k for k in params if "provisioned" in k.lower()]


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


@pytest.mark.parametrize("stack", STACKS)
def test_nat_scheduler_and_buckets_are_priced_or_not_counted_with_a_reason(stack: str) -> None:
    est = cost.estimate(cfg_of(stack))
    nat = next(line for line in est.lines if line.item.startswith("Cloud NAT gateway"))
    assert nat.spot is not None and nat.spot > 0 and "per VM-hour" in nat.note
    scheduler = [line for line in est.lines if line.item.startswith("Cloud Scheduler job")]
    assert len(scheduler) == (1 if stack.startswith("gke") else 0)
    assert all(line.spot is not None and "per job per 31 days" in line.note for line in scheduler)
    text = "\n".join(cost.render(est))
    assert "not counted: Cloud NAT data processing ($0.045 per GiB): depends on what the nodes download" in text
    assert ("not counted: the results bucket" in text) == (est.stack.startswith("gce"))
    assert ("not counted: the artifact store's bucket" in text) == bool(cfg_of(stack).installer.store_url)
    prices = cost.load_prices()
    for entry in (prices["network"]["cloud_nat"], prices["scheduler"], prices["storage"]):
        assert entry["source"] and entry["read"]


def test_the_boot_disk_says_exactly_why_its_rate_is_unknown() -> None:
    est = cost.estimate(cfg_of("gce-b200"))
    boot = next(line for line in est.lines if line.item.startswith("boot disks"))
    assert boot.spot is None and "Google's disk pricing page fills it in the browser" in boot.note

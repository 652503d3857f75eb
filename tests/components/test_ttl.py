"""The bill cap: the stack's `ttl` becomes the GCE VMs' terminationTime (the deadline, ttl after the first `up`)
and the GKE pool's max_run_duration, and the plan says when it bites."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from components import config
from deepep_a4 import cost
from deepep_a4.plan import command as plan_script
from deepep_a4.plan import engine as plan_engine
from tests.conftest import of_type, plan, stack_config

INSTANCE = "gcp:compute/instance:Instance"
NODE_POOL = "gcp:container/nodePool:NodePool"


def cfg_of(stack: str, **overrides: Any) -> config.StackConfig:
    return config.parse(plan_engine.project_keys(stack_config(stack, **overrides)), stack)


def a4_pools(stack: str = "gke-b200", **overrides: Any) -> list[dict[str, Any]]:
    pools = [
        p
        for p in of_type(plan(stack, **overrides), NODE_POOL)
        if str(p["inputs"].get("nodeConfig", {}).get("machineType", "")).startswith("a4-")
    ]
    assert pools, "the GKE stack registers no A4 node pool"
    return pools


@pytest.mark.parametrize(("ttl", "seconds"), [("8h", 28800), ("2h30m", 9000), ("1d", 86400)])
def test_gce_vms_end_at_the_deadline_ttl_from_now_with_delete(ttl: str, seconds: int) -> None:
    before = dt.datetime.now(dt.UTC)
    vms = of_type(plan("gce-b200", ttl=ttl), INSTANCE)
    assert len(vms) == 2
    for vm in vms:
        sched = vm["inputs"]["scheduling"]
        at = dt.datetime.strptime(sched["terminationTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
        # The deadline is the plan's now + ttl, rounded up to the minute (components/deadline.py).
        assert dt.timedelta(seconds=seconds) <= at - before.replace(second=0, microsecond=0)
        assert at - before <= dt.timedelta(seconds=seconds + 180)
        assert "maxRunDuration" not in sched  # one limit only (tests/components/gce/test_gcloud_scheduling.py)
        assert sched["instanceTerminationAction"] == "DELETE"
        assert sched["provisioningModel"] == "SPOT"


def test_gce_stop_action_is_what_the_ttl_does() -> None:
    vms = of_type(plan("gce-b200", terminationAction="STOP"), INSTANCE)
    assert len(vms) == 2
    for vm in vms:
        assert vm["inputs"]["scheduling"]["instanceTerminationAction"] == "STOP"


def test_gce_on_demand_without_ttl_has_no_cap() -> None:
    vms = of_type(plan("gce-b200", provisioning="on-demand", ttl="off"), INSTANCE)
    assert len(vms) == 2
    for vm in vms:
        assert "maxRunDuration" not in vm["inputs"]["scheduling"]
        assert "terminationTime" not in vm["inputs"]["scheduling"]


@pytest.mark.parametrize(("ttl", "text"), [("8h", "28800s"), ("90m", "5400s")])
def test_gke_a4_pool_carries_the_ttl_as_a_seconds_string(ttl: str, text: str) -> None:
    for pool in a4_pools(ttl=ttl):
        node_config = pool["inputs"]["nodeConfig"]
        assert node_config["maxRunDuration"] == text
        assert node_config.get("spot") is True


def test_spot_without_ttl_is_refused_before_anything_exists() -> None:
    with pytest.raises(config.ConfigError) as err:
        cfg_of("gke-b200", ttl="off")
    assert any(p.key == "ttl" for p in err.value.problems)


def test_bill_cap_line_names_the_ttl_the_action_and_the_deadline() -> None:
    now = dt.datetime(2026, 1, 2, 3, 4, tzinfo=dt.UTC)
    gce = cost.bill_cap(cfg_of("gce-b200", ttl="90m", terminationAction="STOP"), now)
    assert gce.deadline == now + dt.timedelta(minutes=90)
    assert "ttl 1h30m from the first `pulumi up`" in gce.line and "2026-01-02 04:34 UTC" in gce.line
    assert "terminationTime at the deadline: Compute Engine stops it" in gce.line
    gke = cost.bill_cap(cfg_of("gke-b200"), now)
    assert "a Cloud Scheduler job deletes the A4 node pool, so no node comes back" in gke.line
    assert "refused after it" in gke.line and gke.as_dict()["sources"] == list(cost.BILL_CAP_SOURCES["gke"])
    assert "2026-01-02 11:04 UTC" in gke.line and "cluster (and its fee)" in gke.line
    off = cost.bill_cap(cfg_of("gce-b200", provisioning="on-demand", ttl="off"), now)
    assert off.deadline is None and "Bill cap: off" in off.line
    assert off.as_dict()["ifCreatedNowDiesAt"] is None


@pytest.mark.parametrize("stack", ["gke-b200", "gce-b200"])
def test_plan_prints_and_records_when_capacity_dies(stack: str, tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    before = dt.datetime.now(dt.UTC).replace(microsecond=0)
    assert plan_script.main(["--stack", stack, "--out", str(tmp_path), "--quiet"]) == 0
    printed = capsys.readouterr().out
    cap = json.loads((tmp_path / "plan.json").read_text())["billCap"]
    assert cap["ttlSeconds"] == 8 * 3600 and cap["line"] in printed  # printed even with --quiet
    dies = dt.datetime.strptime(cap["ifCreatedNowDiesAt"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    assert dt.timedelta(hours=8) <= dies - before <= dt.timedelta(hours=8, minutes=1)

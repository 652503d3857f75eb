"""`deepep-a4 run`'s capacity fallback (deepep_a4/capacity/fallback.py): try by try, through the real Automation
API against the stand-in CLI (tests/fixtures/pulumi_standin.py, its capacity block) failing with recorded
stockout and quota errors (tests/fixtures/capacity/pulumi_up_errors.json)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import config
from deepep_a4 import stackfile
from deepep_a4.capacity import fallback
from deepep_a4.run import command as rb
from deepep_a4.run import platforms as run_platforms
from tests.conftest import ROOT, stack_config
from tests.deepep_a4.run.test_preflight import Cli, deepep_run
from tests.deepep_a4.run.test_preflight import cli as cli  # the stand-in CLI fixture


def parsed(stack: str, **overrides: Any) -> config.StackConfig:
    return config.parse(stackfile.project_keys(stack_config(stack, **overrides)), stack)


ERRORS = json.loads((ROOT / "tests" / "fixtures" / "capacity" / "pulumi_up_errors.json").read_text())
ZONE = "asia-southeast1-b"


@pytest.mark.parametrize(
    ("error", "kind"),
    [
        ("gce-stockout", "stockout"),
        ("gce-stockout-code", "stockout"),
        ("gke-stockout", "stockout"),
        ("gce-quota", "quota"),
        ("gke-quota", "quota"),
        ("bad-request", ""),
    ],
)
def test_each_recorded_error_is_classified(error: str, kind: str) -> None:
    assert fallback.classify("error: " + ERRORS[error]["text"])[0] == kind


def test_the_config_takes_tries_of_the_stacks_region_only() -> None:
    with pytest.raises(config.ConfigError, match="another region means other subnets"):
        parsed("gce-b200-ubuntu", capacity=[f"{ZONE}/spot", "us-central1-b/spot"])
    with pytest.raises(config.ConfigError, match="a reservation does not stock out"):
        parsed("gce-b200-ubuntu", capacity=[f"{ZONE}/spot", f"{ZONE}/reservation"])
    with pytest.raises(config.ConfigError, match="must list the stack's own zone/provisioning"):
        parsed("gce-b200-ubuntu", capacity=[f"{ZONE}/flex-start"])
    cfg = parsed("gce-b200-ubuntu", capacity=[f"{ZONE}/spot", f"{ZONE}/flex-start"])
    assert cfg.capacity == ((ZONE, "spot"), (ZONE, "flex-start"))


def test_each_trys_whole_config_is_checked_before_the_first_try() -> None:
    # flex-start ends with DELETE only (components/config/provisioning.py): a STOP stack cannot fall back to it.
    with pytest.raises(config.ConfigError, match=r"asia-southeast1-b/flex-start.*this try's config is refused"):
        parsed("gce-b200-ubuntu", terminationAction="STOP", capacity=[f"{ZONE}/spot", f"{ZONE}/flex-start"])


@pytest.fixture
def project(cli: Cli, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The stand-in's copy of the project (the `cli` fixture's) with one more stack file whose `capacity` lists
    three tries: the stand-in writes `config set` into it as the CLI does, so the checkout's stacks/ stay
    untouched."""
    root = cli.project
    doc = yaml.safe_load((ROOT / "stacks" / "Pulumi.gce-b200-ubuntu.yaml").read_text())
    doc["config"]["deepep-a4:capacity"] = [f"{ZONE}/spot", f"{ZONE}/flex-start", f"{ZONE}/on-demand"]
    (root / "stacks" / "Pulumi.cap.yaml").write_text(yaml.safe_dump(doc, sort_keys=False))
    monkeypatch.setattr(rb, "ROOT", root)
    monkeypatch.setattr(run_platforms, "ROOT", root)
    monkeypatch.setenv("PULUMI_CONFIG_PASSPHRASE", "")
    return root


def stack_zone_model(root: Path) -> tuple[str, str]:
    cfg = yaml.safe_load((root / "stacks" / "Pulumi.cap.yaml").read_text())["config"]
    return cfg["deepep-a4:zone"], cfg["deepep-a4:provisioning"]


def test_a_stockout_then_a_quota_error_move_on_and_destroy_between_tries(
    cli: Cli, project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STANDIN_CAPACITY_FAIL", f"{ZONE}/spot=gce-stockout,{ZONE}/flex-start=gce-quota")
    rc, said = deepep_run("cap", tmp=tmp_path / "report")
    text = "\n".join(said)
    assert rc == rb.EXIT_PASS, text
    tries = [line for line in said if line.startswith("capacity try")]
    assert len(tries) == 3, text
    assert tries[0].startswith(f"capacity try 1/3 {ZONE}/spot: stockout: Error waiting for instance to create")
    assert "does not have enough resources available" in tries[0] and "cost so far at most" in tries[0]
    assert tries[1].startswith(f"capacity try 2/3 {ZONE}/flex-start: quota: ")
    assert "Quota 'PREEMPTIBLE_NVIDIA_B200_GPUS' exceeded" in tries[1]
    assert "cost so far unknown: no flex-start price" in tries[1]
    assert tries[2].startswith(f"capacity try 3/3 {ZONE}/on-demand: up (")
    assert f"capacity: {ZONE}/on-demand worked" in text
    calls = cli.calls()
    ups = [i for i, c in enumerate(calls) if c[0] == "up"]
    targeted = [i for i, c in enumerate(calls) if c[0] == "destroy" and "--target" in c]
    assert len(ups) == 3 and len(targeted) == 2
    assert ups[0] < targeted[0] < ups[1] < targeted[1] < ups[2]  # a destroy between every two tries
    for i in targeted:
        c = calls[i]
        gone = {c[j + 1].rsplit("::", 1)[-1] for j, a in enumerate(c) if a == "--target"}
        assert gone == {"deepep-cap-vm-0"}, c  # same zone: the RDMA VPC stays; nothing regional goes
        assert "--target-dependents" in c and "--refresh" in c
    sets = [c for c in calls if c[:2] == ["config", "set"]]
    assert [(c[2], c[-1]) for c in sets] == [
        ("deepep-a4:zone", ZONE),
        ("deepep-a4:provisioning", "flex-start"),
        ("deepep-a4:zone", ZONE),
        ("deepep-a4:provisioning", "on-demand"),
    ]
    assert stack_zone_model(project) == (ZONE, "on-demand")


def test_another_error_stops_at_once(cli: Cli, project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("STANDIN_CAPACITY_FAIL", f"{ZONE}/spot=bad-request")
    rc, said = deepep_run("cap", tmp=tmp_path / "report")
    text = "\n".join(said)
    assert rc == rb.EXIT_FAILED
    assert [c[0] for c in cli.calls()].count("up") == 1
    assert not [c for c in cli.calls() if c[:2] == ["config", "set"]]
    assert f"capacity try 1/3 {ZONE}/spot: FAILED: CommandError (not a stockout or quota error" in text
    assert "Too many network interfaces" in text  # the run's own failure line names it


def test_when_every_try_fails_the_run_lists_every_error(
    cli: Cli, project: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    fails = f"{ZONE}/spot=gce-stockout,{ZONE}/flex-start=gce-stockout-code,{ZONE}/on-demand=gce-quota"
    monkeypatch.setenv("STANDIN_CAPACITY_FAIL", fails)
    rc, said = deepep_run("cap", tmp=tmp_path / "report")
    text = "\n".join(said)
    assert rc == rb.EXIT_FAILED
    assert "no capacity: every entry of `capacity` was tried; each try:" in text
    assert f"{ZONE}/spot: stockout:" in text and f"{ZONE}/flex-start: stockout:" in text
    assert f"{ZONE}/on-demand: quota:" in text
    assert [c[0] for c in cli.calls()].count("up") == 3


class FakeStack:
    """A stack in memory: `up` fails with the recorded text per zone/model; records every call."""

    def __init__(self, fails: dict[tuple[str, str], str], clock: list[float], up_seconds: float = 600):
        self.fails, self.clock, self.up_seconds = fails, clock, up_seconds
        self.config = {"deepep-a4:zone": "asia-southeast1-b", "deepep-a4:provisioning": "spot"}
        self.calls: list[Any] = []
        self.name = "fake"

    def set_config(self, key: str, value: str) -> None:
        self.config[key] = value

    def outputs(self) -> dict[str, Any]:
        return {}

    def up(self, on_output: Any) -> None:
        zone, model = self.config["deepep-a4:zone"], self.config["deepep-a4:provisioning"]
        self.calls.append(("up", zone, model))
        self.clock[0] += self.up_seconds
        if (zone, model) in self.fails:
            raise RuntimeError("error: " + ERRORS[self.fails[(zone, model)]]["text"].replace("{zone}", zone))

    def resources(self) -> list[dict[str, Any]]:
        zone = self.config["deepep-a4:zone"]
        a4, system = {"nodeConfig": {"machineType": "a4-highgpu-8g"}}, {"nodeConfig": {"machineType": "e2-standard-4"}}
        return [
            {"urn": "urn::host", "type": fallback.NETWORK, "inputs": {}},
            {"urn": "urn::rdma", "type": fallback.NETWORK, "inputs": {"networkProfile": f"p/{zone}-vpc-roce"}},
            {"urn": "urn::pool", "type": fallback.NODE_POOL, "inputs": a4},
            {"urn": "urn::system", "type": fallback.NODE_POOL, "inputs": system},
        ]

    def destroy_targets(self, urns: list[str], on_output: Any) -> None:
        self.calls.append(("destroy", tuple(urns)))


def fallback_stack(entries: list[tuple[str, str]], fake: FakeStack, timeout_s: float = 3600) -> fallback.FallbackStack:
    cfg = replace(parsed("gke-b200"), capacity=tuple(entries))
    said: list[str] = []
    stack = fallback.FallbackStack(fake, cfg, say=said.append, clock=lambda: fake.clock[0], timeout_s=timeout_s)
    stack.said = said  # type: ignore[attr-defined]
    return stack


def test_a_zone_change_destroys_the_a4_pool_and_the_rdma_vpc_and_nothing_regional() -> None:
    # Google's table lists one A4 zone per region today (components/config/versions.py): the config refuses a
    # second zone, so a zone change is tried here with the entries given directly.
    fake = FakeStack({("asia-southeast1-b", "spot"): "gke-stockout"}, [0.0])
    entries = [("asia-southeast1-b", "spot"), ("asia-southeast1-c", "spot")]
    fallback_stack(entries, fake).up(on_output=print)
    assert fake.calls == [
        ("up", "asia-southeast1-b", "spot"),
        ("destroy", ("urn::rdma", "urn::pool")),
        ("up", "asia-southeast1-c", "spot"),
    ]


def test_the_tries_are_bounded_in_time() -> None:
    fake = FakeStack({("asia-southeast1-b", "spot"): "gke-stockout"}, [0.0], up_seconds=3601)
    entries = [("asia-southeast1-b", "spot"), ("asia-southeast1-b", "flex-start")]
    stack = fallback_stack(entries, fake, timeout_s=3600)
    with pytest.raises(fallback.CapacityExhaustedError, match=r"time bound \(60 min\) ran out before"):
        stack.up(on_output=print)
    assert [c for c in fake.calls if c[0] == "up"] == [("up", "asia-southeast1-b", "spot")]

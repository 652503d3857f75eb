"""What a rehearsal costs and how long it takes, before anything is made (`deepep-a4 rehearse --dry-run`, the plan).

Cloud parts are ESTIMATES: each line names its price (deepep_a4/prices.yaml, which cites its source and date) and
the minutes it is billed for; the minutes of each phase are our estimate, marked as such, until a real rehearsal's
checklist records its wall time. Offline parts (loading the config, the rehearsal's plan) are measured by the
command itself and printed as measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components import rehearsal
from components.config import StackConfig
from deepep_a4 import cost
from scripts.names import SYSTEM_MACHINE_TYPE, SYSTEM_NODE_COUNT

TARGET_USD = 1.0
TARGET_MINUTES = 20.0

# Minutes of each phase: our estimate, no published figure (Google documents no creation time for a GKE cluster
# or a node pool). Where the rehearsal runs, its checklist records what each took: replace these with those.
PHASES: dict[str, tuple[tuple[str, float], ...]] = {
    "gke": (
        ("preview under the policy pack", 1.0),
        ("network, NAT, RoCE VPC, cluster with Dataplane V2 (creation dominates)", 9.0),
        ("system pool and the rehearsal pool (e2 spot)", 3.0),
        ("multi-network objects, staging probe DaemonSet, internode probe Job", 1.5),
        ("deadline: the scheduler job's force-run, the pool deleted", 2.0),
        ("store builder probe (Cloud Build, concurrent with the above)", 0.0),
        ("destroy --refresh (the cluster's delete dominates)", 5.0),
    ),
    "gce": (
        ("preview under the policy pack", 1.0),
        ("network, NAT, RoCE VPC, account, results bucket, VMs (e2 spot)", 2.0),
        ("VM boot and the startup script's probe; store builder probe (Cloud Build) meanwhile", 3.0),
        ("deadline: the VMs end at their terminationTime (the rehearsal's TTL, 12 min after `up`)", 7.0),
        ("destroy --refresh", 2.0),
    ),
}


@dataclass(frozen=True)
class Line:
    what: str
    usd: float | None
    basis: str


@dataclass(frozen=True)
class RehearsalEstimate:
    minutes: float
    phases: tuple[tuple[str, float], ...]
    lines: tuple[Line, ...]

    @property
    def usd(self) -> float | None:
        values = [line.usd for line in self.lines]
        return None if any(v is None for v in values) else round(sum(v for v in values if v is not None), 4)

    def render(self, measured: dict[str, float] | None = None) -> list[str]:
        out = [f"Rehearsal time: about {self.minutes:.0f} min (estimate; target under {TARGET_MINUTES:.0f} min):"]
        out += [f"  {m:4.1f} min  {what}" for what, m in self.phases if m]
        for what, seconds in (measured or {}).items():
            out.append(f"  {seconds:5.2f} s  {what} (measured here, offline)")
        total = "unknown (a price is unknown)" if self.usd is None else f"${self.usd:.2f}"
        out.append(f"Rehearsal cost: {total} (estimate from deepep_a4/prices.yaml; target under ${TARGET_USD:.2f}):")
        out += [f"  {'unknown' if x.usd is None else f'${x.usd:.3f}':>8}  {x.what} ({x.basis})" for x in self.lines]
        if self.usd is not None and (self.usd >= TARGET_USD or self.minutes >= TARGET_MINUTES):
            out.append("  over the target: see docs/rehearsal.md, Cost and time")
        return out


def _rate(prices: dict[str, Any], machine: str, region: str, column: str) -> float | None:
    row = ((prices.get("machines") or {}).get(machine) or {}).get("regions") or {}
    return cost._price((row.get(region) or {}).get(column))


def estimate(cfg: StackConfig, prices: dict[str, Any] | None = None) -> RehearsalEstimate:
    """The rehearsal of `cfg` (the real stack's config): its machines for the minutes they live, at list prices."""
    prices = cost.load_prices() if prices is None else prices
    phases = PHASES[cfg.platform]
    minutes = sum(m for _, m in phases)
    # The machines live from their creation to the destroy: all but the preview and the network's first minutes.
    hours = max(minutes - phases[0][1], 0.0) / 60
    n, region = cfg.node_count, cfg.region
    spot = _rate(prices, rehearsal.MACHINE_TYPE, region, "spot")
    src = f"{rehearsal.MACHINE_TYPE} spot in {region}, prices.yaml machines"
    lines = [Line(f"{n} x {rehearsal.MACHINE_TYPE} spot, {hours * 60:.0f} min", _mul(spot, n * hours), src)]
    pd = cost._rate(((prices.get("disks") or {}).get(rehearsal.BOOT_DISK_TYPE) or {}).get("per_gib_month"), region)
    disk = None if pd is None else pd / cost.HOURS_PER_MONTH * cfg.boot_disk_gb * n * hours
    lines.append(Line(f"{n} x {cfg.boot_disk_gb} GB {rehearsal.BOOT_DISK_TYPE}", disk, "prices.yaml disks"))
    nat = cost._price(((prices.get("network") or {}).get("cloud_nat") or {}).get("per_vm_hour"))
    vms = n + (SYSTEM_NODE_COUNT if cfg.platform == "gke" else 0)
    lines.append(Line(f"Cloud NAT, {vms} VMs", _mul(nat, vms * hours), "prices.yaml network.cloud_nat"))
    if cfg.platform == "gke":
        fee = cost._price((prices.get("gke") or {}).get("cluster_fee_per_hour"))
        lines.append(Line("GKE cluster management fee", _mul(fee, hours), "prices.yaml gke"))
        system = _rate(prices, SYSTEM_MACHINE_TYPE, region, "on_demand")
        lines.append(Line(f"system pool {SYSTEM_NODE_COUNT} x {SYSTEM_MACHINE_TYPE}", _mul(system, hours), "on-demand"))
    build = cost._price(((prices.get("cloud_build") or {}).get("per_build_minute") or {}).get("e2-highcpu-8"))
    lines.append(Line("store builder probe, 2 build-minutes", _mul(build, 2), "prices.yaml cloud_build"))
    return RehearsalEstimate(minutes, phases, tuple(lines))


def _mul(rate: float | None, factor: float) -> float | None:
    return None if rate is None else round(rate * factor, 4)


def summary(cfg: StackConfig) -> dict[str, Any]:
    """plan.json's `rehearsal`: what `deepep-a4 rehearse` costs and takes, both estimates."""
    est = estimate(cfg)
    return {
        "command": f"deepep-a4 rehearse --stack {cfg.stack}",
        "usdEstimate": est.usd,
        "minutesEstimate": est.minutes,
        "machine": f"{rehearsal.MACHINE_TYPE} spot",
        "source": "deepep_a4/prices.yaml (prices); deepep_a4/rehearse/estimate.py PHASES (minutes, our estimate)",
    }


def plan_line(cfg: StackConfig) -> str:
    est = estimate(cfg)
    usd = "an unknown sum" if est.usd is None else f"about ${est.usd:.2f}"
    return (
        f"Rehearse first: deepep-a4 rehearse --stack {cfg.stack}: every seam on {rehearsal.MACHINE_TYPE} spot, "
        f"{usd} and {est.minutes:.0f} min (estimates; --dry-run itemises them)"
    )

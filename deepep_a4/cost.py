"""What a stack costs and when its capacity dies: the offline plan's estimate and bill-cap lines.

The numbers come from `deepep_a4/prices.yaml`, a small table with a source and a date per entry; a
price nobody could source is `unknown` there, and it stays unknown here: it is listed, never counted
as zero and never guessed. Spot and on-demand are shown side by side; the column the stack actually
uses is marked. Everything is an estimate and says so.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.config import StackConfig, provisioning
from components.deadline import deadline_after, parse_time
from scripts.names import SYSTEM_MACHINE_TYPE, SYSTEM_NODE_COUNT

PRICES_FILE = Path(__file__).resolve().parent / "prices.yaml"
UNKNOWN = "unknown"
# The price column each provisioning model pays, in prices.yaml's machine entries.
MODEL_COLUMN = {m.name: m.price_column for m in provisioning.MODELS.values()}
# A4's bundled local SSD: 32 disks of 375 GiB (12,000 GiB), the disks GKE's localSsdCount uses.
A4_LOCAL_SSDS = 32
A4_LOCAL_SSD_GIB = A4_LOCAL_SSDS * 375
# The disks the program creates (components/gce/fleet.py and gke_nodepool.py; tests/deepep_a4/test_cost.py checks them).
A4_BOOT_DISK_TYPE = "hyperdisk-balanced"
SYSTEM_BOOT_DISK_TYPE = "pd-balanced"
SYSTEM_BOOT_DISK_GB = 50
# Google's disk and local SSD rates are per GiB-month of 730 hours.
HOURS_PER_MONTH = 730


def load_prices(path: Path = PRICES_FILE) -> dict[str, Any]:
    import yaml

    # CSafeLoader: SafeLoader's rules with libyaml's parser, 7x faster (issue 37: every plan reads the prices).
    return yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}  # noqa: S506


def _price(value: Any) -> float | None:
    """A number from the table, or None for `unknown` (or anything that is not a number)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


@dataclass(frozen=True)
class Line:
    """One item of the estimate; None where the price is unknown."""

    item: str
    spot: float | None
    on_demand: float | None
    note: str = ""


@dataclass(frozen=True)
class Estimate:
    stack: str
    region: str
    provisioning: str
    node_count: int
    machine_type: str
    ttl_hours: float | None
    lines: tuple[Line, ...]
    sources: tuple[str, ...] = field(default=())
    not_counted: tuple[str, ...] = field(default=())  # billed parts with no hourly figure, each with why

    @property
    def spot_hourly(self) -> float | None:
        """Sum of the known spot prices; None when the machines themselves have no price."""
        return self._total("spot")

    @property
    def on_demand_hourly(self) -> float | None:
        return self._total("on_demand")

    def _total(self, column: str) -> float | None:
        if getattr(self.lines[0], column) is None:
            return None
        return round(sum(getattr(line, column) or 0.0 for line in self.lines), 4)

    @property
    def unknown_items(self) -> list[str]:
        return [line.item for line in self.lines if line.spot is None or line.on_demand is None]

    @property
    def cap_hours(self) -> float:
        """Hours the per-TTL figure covers: the TTL, or a day when there is none."""
        return self.ttl_hours if self.ttl_hours is not None else 24.0

    def per_cap(self, hourly: float | None) -> float | None:
        return None if hourly is None else round(hourly * self.cap_hours, 2)

    def as_dict(self) -> dict[str, Any]:
        return {
            "estimate": True,
            "currency": "USD",
            "region": self.region,
            "provisioning": self.provisioning,
            "lines": [
                {"item": x.item, "spotPerHour": x.spot, "onDemandPerHour": x.on_demand, "note": x.note}
                for x in self.lines
            ],
            "spotPerHour": self.spot_hourly,
            "onDemandPerHour": self.on_demand_hourly,
            "hoursCapped": self.cap_hours,
            "ttlHours": self.ttl_hours,
            "spotPerTtl": self.per_cap(self.spot_hourly),
            "onDemandPerTtl": self.per_cap(self.on_demand_hourly),
            "unknown": self.unknown_items,
            "notCounted": list(self.not_counted),
            "sources": list(self.sources),
        }


def _regional(entry: Any, region: str) -> dict[str, Any]:
    """One region's row of a table entry keyed by region ({} when the entry or the region is missing)."""
    row = entry.get(region) if isinstance(entry, dict) else None
    return row if isinstance(row, dict) else {}


def _rate(entry: Any, region: str) -> float | None:
    """A rate that is either one number (or `unknown`) for every region, or a mapping region -> number."""
    return _price(entry.get(region) if isinstance(entry, dict) else entry)


def estimate(cfg: StackConfig, prices: dict[str, Any] | None = None) -> Estimate:
    """The hourly cost of the stack's billable parts, per the price table."""
    prices = load_prices() if prices is None else prices
    n, region = cfg.node_count, cfg.region
    machines = prices.get("machines") or {}
    machine = machines.get(cfg.machine_type) or {}
    regional = _regional(machine.get("regions"), region)
    spot_each, od_each = _price(regional.get("spot")), _price(regional.get("on_demand"))
    if regional:
        note = machine.get("on_demand_note", "")
    else:
        known = ", ".join(sorted(machine.get("regions") or {})) or "none"
        note = f"no price for {region} in deepep_a4/prices.yaml (known: {known})"
    lines = [Line(f"{n} x {cfg.machine_type}", _times(spot_each, n), _times(od_each, n), note)]
    lines.append(_local_ssd_line(prices, region, n))
    disks = prices.get("disks") or {}
    boot_rate = _rate((disks.get(A4_BOOT_DISK_TYPE) or {}).get("per_gib_month"), region)
    boot = _times(_hourly(boot_rate), cfg.boot_disk_gb * n)
    why = (disks.get(A4_BOOT_DISK_TYPE) or {}).get("why_unknown") if boot is None else None
    lines.append(
        Line(
            f"boot disks {n} x {cfg.boot_disk_gb} GB {A4_BOOT_DISK_TYPE}",
            boot,
            boot,
            (f"unknown: {why} (prices.yaml); " if why else "")
            + "no IOPS or throughput provisioned: Google's defaults apply, billed above 3,000 IOPS and 140 MiB/s",
        )
    )
    sources = [machine.get("source"), (prices.get("local_ssd") or {}).get("source")]
    sources.append(((prices.get("network") or {}).get("cloud_nat") or {}).get("source"))
    if cfg.platform == "gke":
        gke = prices.get("gke") or {}
        fee = _price(gke.get("cluster_fee_per_hour"))
        lines.append(Line("GKE cluster management fee", fee, fee, "regional cluster: no free-tier credit"))
        lines.append(_system_pool_line(prices, region))
        if cfg.ttl_seconds is not None:
            lines.append(_scheduler_line(prices))
            sources.append((prices.get("scheduler") or {}).get("source"))
        system_machine = machines.get(SYSTEM_MACHINE_TYPE) or {}
        sources += [
            gke.get("source"),
            system_machine.get("source"),
            (disks.get(SYSTEM_BOOT_DISK_TYPE) or {}).get("source"),
        ]
    lines.append(_nat_line(prices, cfg))
    return Estimate(
        stack=cfg.stack,
        region=region,
        provisioning=cfg.provisioning,
        node_count=n,
        machine_type=cfg.machine_type,
        ttl_hours=None if cfg.ttl_seconds is None else cfg.ttl_seconds / 3600,
        lines=tuple(lines),
        sources=tuple(dict.fromkeys(str(s).strip() for s in sources if s and str(s).strip())),
        not_counted=_not_counted(prices, cfg),
    )


def _nat_line(prices: dict[str, Any], cfg: StackConfig) -> Line:
    """The Cloud NAT gateway, billed per VM that uses it (the A4 nodes, and GKE's system node)."""
    nat = (prices.get("network") or {}).get("cloud_nat") or {}
    vms = cfg.node_count + (SYSTEM_NODE_COUNT if cfg.platform == "gke" else 0)
    each, cap = _price(nat.get("per_vm_hour")), int(nat.get("max_billed_vms") or vms)
    cost = _times(each, min(vms, cap))
    note = f"{_usd(each)} per VM-hour, at most {cap} VMs billed; the data it processes is not counted (below)"
    return Line(f"Cloud NAT gateway, {vms} VMs", cost, cost, note)


def _scheduler_line(prices: dict[str, Any]) -> Line:
    """GKE's deadline: one Cloud Scheduler job, billed per day."""
    sched = prices.get("scheduler") or {}
    per_31_days = _price(sched.get("per_job_31_days"))
    cost = None if per_31_days is None else round(per_31_days / (31 * 24), 6)
    free = sched.get("free_jobs_per_billing_account")
    note = f"{_usd(per_31_days)} per job per 31 days" + (
        f"; the first {free} jobs of a billing account are free" if free else ""
    )
    return Line("Cloud Scheduler job (the deadline)", cost, cost, note)


def _not_counted(prices: dict[str, Any], cfg: StackConfig) -> tuple[str, ...]:
    """What the stack is billed for without an hourly figure, each with its rate and why it is left out."""
    nat = (prices.get("network") or {}).get("cloud_nat") or {}
    standard = _price(((prices.get("storage") or {}).get("standard_per_gib_month") or {}).get(cfg.region))
    storage = f"{_usd(standard)}/GiB-month Standard storage in {cfg.region}"
    out = [
        f"Cloud NAT data processing ({_usd(_price(nat.get('data_per_gib')))} per GiB): depends on what the "
        "nodes download (apt packages, pip wheels, container images), not known before the run"
    ]
    if cfg.platform == "gce":
        out.append(f"the results bucket ({storage}): a run writes logs and JSON of a few MB, under a cent a month")
    if cfg.installer.store_url:
        out.append(
            f"the artifact store's bucket ({storage}): the bill of the store/ project, paid whether this stack "
            "exists or not"
        )
    return tuple(out)


def _times(each: float | None, count: float) -> float | None:
    return None if each is None else round(each * count, 4)


def _hourly(per_gib_month: float | None) -> float | None:
    """A per-GiB-month rate as per GiB-hour (Google's month: 730 hours)."""
    return None if per_gib_month is None else per_gib_month / HOURS_PER_MONTH


def _local_ssd_line(prices: dict[str, Any], region: str, n: int) -> Line:
    """A4's bundled local SSD at the region's Local SSD rate (prices.yaml says why it is counted)."""
    rates = _regional((prices.get("local_ssd") or {}).get("per_gib_month"), region)
    gib = n * A4_LOCAL_SSD_GIB
    spot = _times(_hourly(_price(rates.get("spot"))), gib)
    on_demand = _times(_hourly(_price(rates.get("on_demand"))), gib)
    note = (
        f"bundled: {A4_LOCAL_SSD_GIB:,} GiB comes with every A4 and is billed with it; whether the machine price "
        "already covers it is not published, so it is counted at the Local SSD rate (too much if it does)"
    )
    return Line(f"local SSD {n} x {A4_LOCAL_SSDS} x 375 GiB (bundled)", spot, on_demand, note)


def _system_pool_line(prices: dict[str, Any], region: str) -> Line:
    """GKE's system node and its boot disk, on-demand in both columns; unknown if either price is."""
    system = (prices.get("machines") or {}).get(SYSTEM_MACHINE_TYPE) or {}
    node = _price(_regional(system.get("regions"), region).get("on_demand"))
    disk = _hourly(_rate(((prices.get("disks") or {}).get(SYSTEM_BOOT_DISK_TYPE) or {}).get("per_gib_month"), region))
    each = None if node is None or disk is None else node + disk * SYSTEM_BOOT_DISK_GB
    cost = _times(each, SYSTEM_NODE_COUNT)
    return Line(
        f"system pool {SYSTEM_NODE_COUNT} x {SYSTEM_MACHINE_TYPE} + {SYSTEM_BOOT_DISK_GB} GB {SYSTEM_BOOT_DISK_TYPE}",
        cost,
        cost,
        "on-demand; kube-dns and GKE's add-ons; the TTL does not stop it, `pulumi destroy` does",
    )


def _usd(value: float | None) -> str:
    """A rate as written in prices.yaml: every digit it has, at least cents."""
    if value is None:
        return UNKNOWN
    text = f"{value:.4f}".rstrip("0")
    return "$" + (text if len(text.split(".")[1]) >= 2 else f"{value:.2f}")


def _money(value: float | None) -> str:
    if value is None:
        return UNKNOWN
    return f"${value:.4f}" if 0 < value < 0.01 else f"${value:,.2f}"


def _hours(hours: float) -> str:
    """A duration as the ttl key writes it: 8h, 10m, 1h30m, 2d (never 0.166667h)."""
    seconds = round(hours * 3600)
    days, rest = divmod(seconds, 86400)
    parts = [(days, "d"), (rest // 3600, "h"), (rest % 3600 // 60, "m"), (rest % 60, "s")]
    return "".join(f"{n}{unit}" for n, unit in parts if n) or "0m"


def render(est: Estimate) -> list[str]:
    """The plan's cost lines: spot and on-demand side by side, the stack's own model marked."""
    uses = MODEL_COLUMN.get(est.provisioning, est.provisioning)
    # A line with a note is marked [n] and its note printed under the table: what a price covers is part of it.
    notes = [line.note for line in est.lines if line.note]
    items = [f"{line.item} [{notes.index(line.note) + 1}]" if line.note else line.item for line in est.lines]
    width = max(len(item) for item in items) + 2
    out = [
        f"Estimated cost (an ESTIMATE in USD from deepep_a4/prices.yaml, {est.region}; "
        "spot prices change, check before you budget):",
        f"  {'':<{width}}{'spot/h':>12}{'on-demand/h':>14}",
    ]
    for item, line in zip(items, est.lines, strict=True):
        out.append(f"  {item:<{width}}{_money(line.spot):>12}{_money(line.on_demand):>14}")
    out.append(f"  {'total per hour':<{width}}{_money(est.spot_hourly):>12}{_money(est.on_demand_hourly):>14}")
    cap = f"per TTL ({_hours(est.cap_hours)})" if est.ttl_hours is not None else "per day (no TTL)"
    out.append(
        f"  {cap:<{width}}{_money(est.per_cap(est.spot_hourly)):>12}{_money(est.per_cap(est.on_demand_hourly)):>14}"
    )
    if uses in ("spot", "on_demand"):
        out.append(f"  this stack ({est.provisioning}) pays the {uses.replace('_', '-')} column")
    else:
        out.append(f"  this stack uses {est.provisioning}: its rate is unknown here (both columns for reference)")
    if est.unknown_items:
        out.append("  not in the totals (price unknown): " + "; ".join(est.unknown_items))
    out.extend(f"  not counted: {item}" for item in est.not_counted)
    out.extend(f"  [{i}] {note}" for i, note in enumerate(notes, 1))
    return out


# Where the bill cap's mechanism is documented (the plan prints them with its line).
BILL_CAP_SOURCES = {
    "gce": ("https://cloud.google.com/compute/docs/instances/limit-vm-runtime",),
    "gke": (
        "https://cloud.google.com/compute/docs/instance-groups/limit-vm-runtime-in-migs",
        "https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools/delete",
    ),
}


@dataclass(frozen=True)
class BillCap:
    """When the cloud deletes the stack's A4 capacity by itself, and how (components/deadline.py)."""

    ttl_seconds: int | None
    platform: str
    action: str
    deadline: dt.datetime | None

    @property
    def mechanism(self) -> str:
        if self.ttl_seconds is None:
            return ""
        hours = _hours(self.ttl_seconds / 3600)
        later = "`pulumi up` keeps the deadline and is refused after it (destroy, then up, for a new one)"
        if self.platform == "gce":
            verb = "stops" if self.action == "STOP" else "deletes"
            return (
                f"each VM has terminationTime at the deadline: Compute Engine {verb} it then, and a VM recreated "
                f"before it keeps it; {later}"
            )
        return (
            "a Cloud Scheduler job deletes the A4 node pool, so no node comes back; each node also has "
            f"max_run_duration {hours} (alone not a cap: the pool recreates a preempted spot node with a fresh "
            f"clock); {later}"
        )

    @property
    def line(self) -> str:
        if self.ttl_seconds is None:
            return (
                "Bill cap: off (ttl: off): the A4 capacity runs until `pulumi destroy`; "
                "set `ttl` (e.g. 8h) to let the cloud delete it"
            )
        hours = _hours(self.ttl_seconds / 3600)
        when = self.deadline.strftime("%Y-%m-%d %H:%M UTC") if self.deadline else "?"
        rest = {
            "gce": "the network and the bucket stay until `pulumi destroy`",
            "gke": "the cluster (and its fee), the network and the workloads stay until `pulumi destroy`",
        }[self.platform]
        return f"Bill cap: ttl {hours} from the first `pulumi up` (if created now: {when}): {self.mechanism}; {rest}"

    @property
    def lines(self) -> list[str]:
        """The line and, under it, where its mechanism is documented."""
        sources = BILL_CAP_SOURCES[self.platform] if self.ttl_seconds else ()
        return [self.line, *(f"  source: {url}" for url in sources)]

    def as_dict(self) -> dict[str, Any]:
        return {
            "ttlSeconds": self.ttl_seconds,
            "platform": self.platform,
            "action": self.action if self.ttl_seconds else None,
            "ifCreatedNowDiesAt": self.deadline.strftime("%Y-%m-%dT%H:%M:%SZ") if self.deadline else None,
            "mechanism": self.mechanism or None,
            "sources": list(BILL_CAP_SOURCES[self.platform]) if self.ttl_seconds else [],
            "line": self.line,
        }


def bill_cap(cfg: StackConfig, now: dt.datetime | None = None) -> BillCap:
    now = now or dt.datetime.now(dt.UTC)
    # The same arithmetic as the program's deadline (whole minutes, rounded up).
    deadline = None if cfg.ttl_seconds is None else parse_time(deadline_after(now, cfg.ttl_seconds))
    action = cfg.gce.termination_action if cfg.platform == "gce" else "DELETE"
    return BillCap(cfg.ttl_seconds, cfg.platform, action, deadline)


def per_run_line(est: Estimate, cfg: StackConfig, bringup: tuple[float, float]) -> str:
    """What one run costs at the stack's hourly total: the bring-up alone, and with the benchmarks at their
    timeouts; and the steps the bring-up figure leaves out."""
    hourly = est.spot_hourly if MODEL_COLUMN.get(cfg.provisioning) == "spot" else est.on_demand_hourly
    left_out = ["creating the cluster" if cfg.platform == "gke" else "creating the network"]
    if cfg.provisioning in ("spot", "flex-start"):
        left_out.append(f"the wait for {cfg.provisioning} capacity")
    tests = len(cfg.benchmarks.tests)
    bench_s = tests * cfg.benchmarks.test_budget_seconds
    minutes = cfg.benchmarks.test_budget_seconds // 60
    left_out.append(f"the benchmarks (at most {tests} x {minutes} min)" if tests else "the benchmarks (none listed)")
    cost = "price unknown"
    if hourly is not None:
        low, high, most = (round(hourly * s / 3600, 2) for s in (*bringup, bringup[1] + bench_s))
        cost = f"{_money(low)}-{_money(high)} to installer ready, at most {_money(most)} with the benchmarks' timeouts"
    return f"  leaves out {', '.join(left_out)}; per run at {_money(hourly)}/h: {cost}"

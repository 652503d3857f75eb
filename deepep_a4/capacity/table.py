"""What `deepep-a4 capacity` reads and prints: per zone of the stack's region, whether it offers the machine
type, its RoCE network profile and the project's reservations there; per provisioning model, the regional quota
it draws on, the price and the expected wait. Every read is a GET or LIST (deepep_a4/cloud/capacity_reads.py):
nothing is created or bought. A read that fails (an API not enabled, a missing permission) is printed in its
place and the others still run: the table says what it could not see.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from deepep_a4.capacity import models
from deepep_a4.cloud import capacity_reads as reads

T = TypeVar("T")


@dataclass
class Clients:
    """The Compute clients the reads use: None = google-cloud-compute's, created on first use (tests pass
    recorded ones)."""

    machine_types: Any = None
    regions: Any = None
    reservations: Any = None
    reservation_blocks: Any = None
    network_profiles: Any = None


@dataclass
class Snapshot:
    project: str
    region: str
    machine_type: str
    zones_offering: list[str] | None = None
    region_zones: list[str] = field(default_factory=list)
    quotas: dict[str, tuple[float, float]] | None = None
    reservations: list[reads.Reservation] | None = None
    roce_zones: set[str] | None = None
    errors: dict[str, str] = field(default_factory=dict)


def _read(snap: Snapshot, what: str, fn: Callable[[], T]) -> T | None:
    try:
        return fn()
    except Exception as err:  # PermissionDenied, an API not enabled, no credentials: printed in place
        snap.errors[what] = (
            f"{type(err).__name__}: {str(err).strip().splitlines()[0][:300] if str(err).strip() else ''}"
        )
        return None


def read(project: str, region: str, machine_type: str, clients: Clients) -> Snapshot:
    snap = Snapshot(project, region, machine_type)
    snap.zones_offering = _read(
        snap,
        "machineTypes.aggregatedList",
        lambda: reads.zones_offering(project, machine_type, client=clients.machine_types),
    )
    region_msg = _read(snap, "regions.get", lambda: _region(project, region, clients.regions))
    if region_msg is not None:
        snap.quotas = {q.metric: (float(q.limit), float(q.usage)) for q in region_msg.quotas}
        snap.region_zones = sorted(z.rstrip("/").rsplit("/", 1)[-1] for z in region_msg.zones)
    snap.reservations = _read(
        snap,
        "reservations.aggregatedList",
        lambda: reads.reservations(
            project, machine_type, client=clients.reservations, blocks_client=clients.reservation_blocks
        ),
    )
    snap.roce_zones = _read(
        snap, "networkProfiles.list", lambda: reads.roce_zones(project, client=clients.network_profiles)
    )
    return snap


def _region(project: str, region: str, client: Any) -> Any:
    """regions.get as a message: the quotas (capacity_reads.region_quotas reads the same) and the zone list."""
    client = client or reads.compute().RegionsClient()
    return client.get(project=project, region=region)


def _yes_no(value: bool | None) -> str:
    return "unread" if value is None else ("yes" if value else "no")


def render(
    snap: Snapshot, stack: str, stack_zone: str, node_count: int, gpus_per_node: int, extra_zones: tuple[str, ...] = ()
) -> list[str]:
    lines = [
        f"Capacity for stack {stack}: project {snap.project}, region {snap.region}, {snap.machine_type} "
        f"x {node_count} (read-only: nothing was created or bought)",
        "",
    ]
    zones = sorted(set(snap.region_zones) | {stack_zone} | {z for z in extra_zones if z.startswith(snap.region + "-")})
    for zone in zones:
        offered = None if snap.zones_offering is None else zone in snap.zones_offering
        roce = None if snap.roce_zones is None else zone in snap.roce_zones
        marks = [m for m, on in (("the stack's zone", zone == stack_zone), ("in capacity", zone in extra_zones)) if on]
        lines.append(f"zone {zone}" + (f" ({', '.join(marks)})" if marks else ""))
        lines.append(f"  {snap.machine_type} offered: {_yes_no(offered)}")
        lines.append(f"  RoCE network profile {zone}{reads.ROCE_SUFFIX}: {_yes_no(roce)}")
        lines.extend("  " + line for line in _reservation_lines(snap, zone))
        if offered is False:
            lines.append("")
            continue
        for row in models.facts(snap.region, snap.machine_type):
            lines.append(f"  {row.model:<12} quota: {_quota_text(snap, row.quota_metric, node_count * gpus_per_node)}")
            lines.append(f"  {'':<12} price: {models.price_text(row)}")
        lines.append("")
    if snap.zones_offering is not None:
        elsewhere = [z for z in snap.zones_offering if not z.startswith(snap.region + "-")]
        if elsewhere:
            lines.append(
                f"{snap.machine_type} elsewhere: {', '.join(elsewhere)} (another region is another stack: its own "
                "subnets, cluster, store location and prices; docs/deploy.md#no-capacity)"
            )
    lines.append(f"expected wait, every model: {models.WAIT_UNKNOWN}")
    lines.append("quota is per region and does not guarantee capacity: a zone can still be out of A4s")
    for what, err in snap.errors.items():
        lines.append(f"not read: {what}: {err}")
    return lines


def _quota_text(snap: Snapshot, metric: str, need: int) -> str:
    if not metric:
        return models.RESERVATION_QUOTA
    if snap.quotas is None:
        return f"{metric}: unread"
    if metric not in snap.quotas:
        return (
            f"{metric}: not listed by regions.get (seen for B200: dstack PR #3100); check the console's Quotas "
            f"page or Cloud Quotas; {need} GPUs needed"
        )
    limit, usage = snap.quotas[metric]
    free = limit - usage
    verdict = "enough" if free >= need else "TOO LOW"
    return f"{metric}: {free:g} free of {limit:g}, {need} needed: {verdict}"


def _reservation_lines(snap: Snapshot, zone: str) -> list[str]:
    if snap.reservations is None:
        return ["reservations: unread"]
    here = [r for r in snap.reservations if r.zone == zone]
    if not here:
        return ["reservations: none of this machine type"]
    lines = []
    for r in here:
        how = "only for VMs that name it (reservationName)" if r.specific_required else "used automatically"
        lines.append(
            f"reservation {r.name}: {r.free} of {r.count} free, {r.status}, "
            f"{r.deployment_type or 'no deployment type'}, {how}"
        )
        lines.extend(f"  block {b.name}: {max(b.count - b.in_use, 0)} of {b.count} free, {b.status}" for b in r.blocks)
    return lines

"""What the user's project can get in A4 capacity: read-only calls of the Compute Engine API (google-cloud-compute).

Shared by `deepep-a4 capacity` (deepep_a4/capacity/) and `deepep-a4 rehearse`. Every call reads; none creates,
changes or buys anything. The client library is imported inside the functions (it takes seconds to load): the
plan never pays for it. Each function takes an optional `client` so the tests hand in one that answers with
recorded responses parsed into the library's own message types.

The calls and the response fields they read (Compute Engine API v1 reference, read 2026-12-02):
- machineTypes.get / machineTypes.aggregatedList
  (https://cloud.google.com/compute/docs/reference/rest/v1/machineTypes/aggregatedList): `items` maps a scope
  ("zones/ZONE") to `{machineTypes: [...]}` or to a `warning` (NO_RESULTS_ON_PAGE) when the zone has none;
- regions.get (https://cloud.google.com/compute/docs/reference/rest/v1/regions/get): `quotas[]` of
  `{metric, limit, usage, owner}`;
- reservations.aggregatedList (https://cloud.google.com/compute/docs/reference/rest/v1/reservations/aggregatedList):
  `items["zones/ZONE"].reservations[]`, each with `specificReservation {count, inUseCount, instanceProperties
  {machineType}}`, `status`, `deploymentType`, `specificReservationRequired`;
- reservationBlocks.list (https://cloud.google.com/compute/docs/reference/rest/v1/reservationBlocks/list):
  `items[]` of `{name, count, inUseCount, status}` for a dense reservation;
- networkProfiles.list (https://cloud.google.com/compute/docs/reference/rest/v1/networkProfiles/list): the
  RoCE profile of a zone is named `ZONE-vpc-roce` (components/network.py roce_network_profile; Google's A4 RDMA
  VPC guide, https://cloud.google.com/vpc/docs/rdma-network-profiles).
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

A4 = "a4-highgpu-8g"
ROCE_SUFFIX = "-vpc-roce"

# The regional GPU quota each provisioning model draws on. Google's consumption options page
# (https://cloud.google.com/ai-hypercomputer/docs/consumption-models, read 2026-11-24, quoted in docs/deploy.md
# "A4 quota"): spot and flex-start charge the preemptible quota ("Preemptible quota is charged"); a reservation
# needs no quota request ("quota is automatically increased before capacity is delivered"); on-demand takes the
# standard GPU quota. The metric names are the Compute Engine quota metrics A4 users report
# (dstackai/dstack PR #3100: PREEMPTIBLE_NVIDIA_B200_GPUS, NVIDIA_B200_GPUS); google-cloud-compute 1.48.0's
# Quota.Metric enum lists no B200 metric, and dstack found regions.get not listing them at all, so a missing
# metric reads as "not listed", never as zero.
QUOTA_METRICS: dict[str, str] = {
    "spot": "PREEMPTIBLE_NVIDIA_B200_GPUS",
    "flex-start": "PREEMPTIBLE_NVIDIA_B200_GPUS",
    "on-demand": "NVIDIA_B200_GPUS",
    "reservation": "",
}


def compute() -> Any:
    """google.cloud.compute_v1, imported on first use, without google.api_core's FutureWarning about Python 3.11's
    end of life (the project supports 3.11: pyproject.toml)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        from google.cloud import compute_v1

    return compute_v1


def gpu_quota_metric(provisioning: str) -> str:
    """The regional quota metric `provisioning` draws on; "" for a reservation (its quota comes with it)."""
    if provisioning not in QUOTA_METRICS:
        raise ValueError(f"provisioning {provisioning!r}: one of {', '.join(QUOTA_METRICS)}")
    return QUOTA_METRICS[provisioning]


def machine_type_offered(project: str, zone: str, machine_type: str, *, client: Any = None) -> bool:
    """machineTypes.get: True when the zone offers the machine type to the project, False on 404."""
    from google.api_core import exceptions

    client = client or compute().MachineTypesClient()
    try:
        client.get(project=project, zone=zone, machine_type=machine_type)
    except exceptions.NotFound:
        return False
    return True


def region_quotas(project: str, region: str, *, client: Any = None) -> dict[str, tuple[float, float]]:
    """regions.get: every quota of the region, metric -> (limit, usage)."""
    client = client or compute().RegionsClient()
    region_msg = client.get(project=project, region=region)
    return {q.metric: (float(q.limit), float(q.usage)) for q in region_msg.quotas}


def zones_offering(project: str, machine_type: str = A4, *, client: Any = None) -> list[str]:
    """machineTypes.aggregatedList filtered to the machine type: the zones that offer it, sorted."""
    compute_v1 = compute()
    client = client or compute_v1.MachineTypesClient()
    request = compute_v1.AggregatedListMachineTypesRequest(
        project=project, filter=f'name = "{machine_type}"', return_partial_success=True
    )
    zones = {
        scope.removeprefix("zones/")
        for scope, scoped in client.aggregated_list(request=request)
        for mt in scoped.machine_types
        if mt.name == machine_type
    }
    return sorted(zones)


@dataclass(frozen=True)
class Block:
    name: str
    count: int
    in_use: int
    status: str


@dataclass
class Reservation:
    name: str
    zone: str
    count: int
    in_use: int
    status: str
    # Only VMs that name it may use it (specificReservationRequired): a stack must set reservationName.
    specific_required: bool
    deployment_type: str
    blocks: list[Block] = field(default_factory=list)

    @property
    def free(self) -> int:
        return max(self.count - self.in_use, 0)


def _basename(url_or_name: str) -> str:
    return url_or_name.rstrip("/").rsplit("/", 1)[-1]


def reservations(
    project: str, machine_type: str = A4, *, client: Any = None, blocks_client: Any = None
) -> list[Reservation]:
    """reservations.aggregatedList: the project's reservations of the machine type, with the blocks of each dense
    one (reservationBlocks.list): A4 reservations are dense blocks (components/config/provisioning.py)."""
    compute_v1 = compute()
    client = client or compute_v1.ReservationsClient()
    request = compute_v1.AggregatedListReservationsRequest(project=project, return_partial_success=True)
    found: list[Reservation] = []
    for scope, scoped in client.aggregated_list(request=request):
        for r in scoped.reservations:
            sku = r.specific_reservation
            if _basename(sku.instance_properties.machine_type) != machine_type:
                continue
            found.append(
                Reservation(
                    name=r.name,
                    zone=_basename(r.zone) or scope.removeprefix("zones/"),
                    count=int(sku.count),
                    in_use=int(sku.in_use_count),
                    status=r.status,
                    specific_required=bool(r.specific_reservation_required),
                    deployment_type=r.deployment_type,
                )
            )
    for res in found:
        if res.deployment_type == "DENSE":
            res.blocks = reservation_blocks(project, res.zone, res.name, client=blocks_client)
    return sorted(found, key=lambda r: (r.zone, r.name))


def reservation_blocks(project: str, zone: str, reservation: str, *, client: Any = None) -> list[Block]:
    """reservationBlocks.list of one reservation."""
    compute_v1 = compute()
    client = client or compute_v1.ReservationBlocksClient()
    request = compute_v1.ListReservationBlocksRequest(project=project, zone=zone, reservation=reservation)
    return [Block(b.name, int(b.count), int(b.in_use_count), b.status) for b in client.list(request=request)]


def roce_zones(project: str, *, client: Any = None) -> set[str]:
    """networkProfiles.list: the zones whose RoCE profile (`ZONE-vpc-roce`) the project sees."""
    compute_v1 = compute()
    client = client or compute_v1.NetworkProfilesClient()
    request = compute_v1.ListNetworkProfilesRequest(project=project)
    return _roce_zones(p.name for p in client.list(request=request))


def _roce_zones(names: Iterable[str]) -> set[str]:
    return {n.removesuffix(ROCE_SUFFIX) for n in names if n.endswith(ROCE_SUFFIX)}

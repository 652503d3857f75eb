"""Compute clients that answer with recorded responses (tests/fixtures/capacity/*.json), parsed strictly into
google-cloud-compute's own message types and handed back through the library's own pagers, so the code under
test reads real messages: a field the API reference does not document fails the parse.

Each fixture is a response body as the Compute Engine API v1 reference documents it (read 2026-12-02):
machineTypes/aggregatedList, regions/get (Quota: metric, limit, usage), reservations/aggregatedList,
reservationBlocks/list, networkProfiles/list under https://cloud.google.com/compute/docs/reference/rest/v1/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from deepep_a4.cloud.capacity_reads import compute

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "capacity"


def message(name: str, type_name: str) -> Any:
    return getattr(compute(), type_name).from_json((FIXTURES / f"{name}.json").read_text(), ignore_unknown_fields=False)


def _never(*_: Any, **__: Any) -> Any:
    raise AssertionError("a recorded response has no next page")


class MachineTypes:
    def __init__(self) -> None:
        self.calls: list[Any] = []
        self.response = message("machineTypes_aggregatedList", "MachineTypeAggregatedList")

    def aggregated_list(self, request: Any) -> Any:
        from google.cloud.compute_v1.services.machine_types import pagers

        self.calls.append(request)
        return pagers.AggregatedListPager(method=_never, request=request, response=self.response)

    def get(self, project: str, zone: str, machine_type: str) -> Any:
        """machineTypes.get answers from the aggregated list: 404 (NotFound) where the zone does not offer it."""
        from google.api_core import exceptions

        self.calls.append((project, zone, machine_type))
        for mt in self.response.items.get(f"zones/{zone}", compute().MachineTypesScopedList()).machine_types:
            if mt.name == machine_type:
                return mt
        path = f"projects/{project}/zones/{zone}/machineTypes/{machine_type}"
        raise exceptions.NotFound(f"The resource '{path}' was not found")


class Regions:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    def get(self, project: str, region: str) -> Any:
        self.calls.append((project, region))
        return message(f"regions_get_{region}", "Region")


class Reservations:
    def aggregated_list(self, request: Any) -> Any:
        from google.cloud.compute_v1.services.reservations import pagers

        response = message("reservations_aggregatedList", "ReservationAggregatedList")
        return pagers.AggregatedListPager(method=_never, request=request, response=response)


class ReservationBlocks:
    def __init__(self) -> None:
        self.calls: list[Any] = []

    def list(self, request: Any) -> Any:
        from google.cloud.compute_v1.services.reservation_blocks import pagers

        self.calls.append((request.zone, request.reservation))
        response = message(f"reservationBlocks_list_{request.reservation}", "ReservationBlocksListResponse")
        return pagers.ListPager(method=_never, request=request, response=response)


class NetworkProfiles:
    def list(self, request: Any) -> Any:
        from google.cloud.compute_v1.services.network_profiles import pagers

        response = message("networkProfiles_list", "NetworkProfilesListResponse")
        return pagers.ListPager(method=_never, request=request, response=response)

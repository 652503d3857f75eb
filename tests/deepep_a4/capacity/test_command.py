"""`deepep-a4 capacity` prints its table from recorded Compute API responses (tests/deepep_a4/cloud/recorded.py)."""

from __future__ import annotations

from click.testing import CliRunner

from deepep_a4.capacity import table
from deepep_a4.cli import main
from tests.deepep_a4.cloud import recorded


def recorded_clients() -> table.Clients:
    return table.Clients(
        machine_types=recorded.MachineTypes(),
        regions=recorded.Regions(),
        reservations=recorded.Reservations(),
        reservation_blocks=recorded.ReservationBlocks(),
        network_profiles=recorded.NetworkProfiles(),
    )


def run(clients: table.Clients, stack: str = "gke-b200") -> tuple[int, list[str]]:
    result = CliRunner().invoke(main, ["capacity", "--stack", stack], obj=clients)
    return result.exit_code, result.output.splitlines()


def block(lines: list[str], zone: str) -> list[str]:
    start = next(i for i, line in enumerate(lines) if line.startswith(f"zone {zone}"))
    end = next(i for i in range(start + 1, len(lines)) if not lines[i].startswith("  "))
    return lines[start:end]


def test_the_table_per_zone_from_recorded_responses():
    rc, lines = run(recorded_clients())
    assert rc == 0, lines
    assert "nothing was created or bought" in lines[0]
    b = block(lines, "asia-southeast1-b")
    assert b[0] == "zone asia-southeast1-b (the stack's zone)"
    assert "  a4-highgpu-8g offered: yes" in b
    assert "  RoCE network profile asia-southeast1-b-vpc-roce: yes" in b
    assert any("reservation a4-team-block: 2 of 4 free, READY, DENSE, only for VMs that name it" in x for x in b)
    assert any("block a4-team-block-block-0001: 2 of 4 free, READY" in x for x in b)
    assert "  spot         quota: PREEMPTIBLE_NVIDIA_B200_GPUS: 16 free of 16, 16 needed: enough" in b
    assert any(x.strip().startswith("price: 35.5712 USD/node-hour (prices.yaml a4-highgpu-8g spot, read") for x in b)
    on_demand = b.index(next(x for x in b if x.strip().startswith("on-demand")))
    assert "NVIDIA_B200_GPUS: not listed by regions.get" in b[on_demand]
    assert "price: 64.44 USD/node-hour" in b[on_demand + 1]
    flex = b.index(next(x for x in b if x.strip().startswith("flex-start")))
    assert "price: unknown: no public flex_start price" in b[flex + 1]
    assert "quota: none: quota comes with the reservation" in next(
        x for x in b if x.strip().startswith("reservation  ")
    )

    c = block(lines, "asia-southeast1-c")
    assert c[1:] == [
        "  a4-highgpu-8g offered: no",
        "  RoCE network profile asia-southeast1-c-vpc-roce: no",
        "  reservations: none of this machine type",
    ]
    assert any(x.startswith("a4-highgpu-8g elsewhere: us-central1-b (another region is another stack") for x in lines)
    assert any(x.startswith("expected wait, every model: unknown") for x in lines)


class Denied:
    def list(self, request):
        from google.api_core import exceptions

        raise exceptions.PermissionDenied("Required 'compute.networkProfiles.list' permission for 'projects/x'")


def test_a_failed_read_is_printed_in_place_and_the_rest_still_read():
    clients = recorded_clients()
    clients.network_profiles = Denied()
    rc, lines = run(clients)
    assert rc == 1
    assert "  RoCE network profile asia-southeast1-b-vpc-roce: unread" in block(lines, "asia-southeast1-b")
    assert any(
        x.startswith("not read: networkProfiles.list: PermissionDenied: 403 Required 'compute.networkProfiles.list'")
        for x in lines
    )
    assert "  a4-highgpu-8g offered: yes" in block(lines, "asia-southeast1-b")


def test_a_bad_stack_is_a_usage_error():
    rc, lines = run(recorded_clients(), stack="no-such-stack")
    assert rc == 2 and lines[0].startswith("error:")

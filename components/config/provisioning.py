"""How A4 capacity is obtained: one table of the four provisioning models, read by every part that cares.

The config (allowed values, which models need a bill cap), the GCE scheduling and reservation affinity,
the GKE node pool's capacity flags, the cost estimate's price column and the policy pack's capacity rule
all read their model's row here, so a model is described once.
"""

from __future__ import annotations

from dataclasses import dataclass

# GCE's limit on a flex-start VM's max run duration.
FLEX_START_MAX_SECONDS = 7 * 24 * 3600


@dataclass(frozen=True)
class CapacityModel:
    name: str
    # GCE: scheduling.provisioningModel, and whether the VM restarts after a host event.
    gce_model: str
    gce_automatic_restart: bool
    # Reservation affinity on both platforms: SPECIFIC_RESERVATION, NO_RESERVATION, or "" (the default).
    reservation_affinity: str
    # GKE node pool: the node_config flag that selects the model ("spot", "flex_start") or "".
    gke_flag: str
    # A machine of this model without a bill cap would bill until someone deletes it.
    needs_ttl: bool
    # The only termination action the model allows ("" when the stack chooses).
    termination_action: str
    max_ttl_seconds: int | None
    price_column: str
    # A4 capacity is sold this way (on-demand A4 needs a quota grant: the policy pack warns).
    a4_capacity: bool
    # GKE node pool reservation affinity when it differs from `reservation_affinity`: Google's gke-node-pool
    # module refuses spot pools unless they say NO_RESERVATION (cluster-toolkit modules/compute/gke-node-pool).
    gke_reservation_affinity: str = ""
    # The capacity comes placed: an A4 reservation is a dense block, and Google's gke-a4 blueprint sets no
    # placement policy on a reserved pool (cluster-toolkit examples/gke-a4), so `placement` adds none.
    placed_by_capacity: bool = False


MODELS: dict[str, CapacityModel] = {
    m.name: m
    for m in (
        CapacityModel("spot", "SPOT", False, "", "spot", True, "", None, "spot", True, "NO_RESERVATION"),
        # A4 is reserved through future reservations, whose VMs use the reservation-bound model.
        CapacityModel(
            "reservation",
            "RESERVATION_BOUND",
            True,
            "SPECIFIC_RESERVATION",
            "",
            False,
            "",
            None,
            "reservation",
            True,
            placed_by_capacity=True,
        ),
        # Flex-start (Dynamic Workload Scheduler) hands a VM out once: deleted at its end, never a reservation.
        CapacityModel(
            "flex-start",
            "FLEX_START",
            False,
            "NO_RESERVATION",
            "flex_start",
            True,
            "DELETE",
            FLEX_START_MAX_SECONDS,
            "flex_start",
            True,
        ),
        CapacityModel("on-demand", "STANDARD", True, "", "", False, "", None, "on_demand", False),
    )
}
NAMES = tuple(MODELS)
# What the policy pack accepts on an A4 VM or node pool.
A4_GCE_MODELS = tuple(m.gce_model for m in MODELS.values() if m.a4_capacity)

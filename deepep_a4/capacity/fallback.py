"""`deepep-a4 run`'s capacity fallback: `up` tried at each `capacity` entry (ZONE/MODEL) in order, moving on only
when Google is out of A4s or the project is out of quota (docs/deploy.md#no-capacity).

How a try is undone, and why so: the zone and the provisioning model reach three kinds of resource. The A4 node
pool (GKE) or VMs (GCE) carry both; the RDMA VPC carries the zone through its network profile (`ZONE-vpc-roce`,
components/network.py), so it cannot move; everything else (host and gVNIC VPCs, NAT, cluster, service accounts,
store grants) is regional and stays. Between two tries `run`:
1. reads the stack's state (`pulumi stack export`) and picks the A4 node pool or VMs, plus the RDMA VPC when the
   next try is in another zone (zonal_targets);
2. `pulumi destroy --refresh --target URN... --target-dependents`: those and whatever depends on them (the RDMA
   subnets, the GKE network objects, the benchmark workloads), nothing else;
3. `pulumi config set zone/provisioning` to the next entry, then `pulumi up` again: Pulumi creates the A4 pool or
   VMs and the RDMA VPC in the new zone and updates the rest in place (the cluster's node locations).
A try that worked leaves the stack file at its entry (the rules keep that one of the entries).

What counts as "no capacity" (CAPACITY_SIGNS): the codes and texts Compute Engine and GKE return, as they come
back through pulumi-gcp (the Terraform provider's text in Pulumi's error). Anything else stops the run at once:
a bad argument does not get better in another zone.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from components.config import StackConfig
from deepep_a4 import cost

# Each sign, with where its text was seen. Compute Engine's resource-availability errors
# (https://cloud.google.com/compute/docs/troubleshooting/troubleshooting-vm-creation#resource_availability):
CAPACITY_SIGNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    # gcloud / API error code (kubernetes/k8s.io#9834, 2026-08-12: "code: ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS";
    # skypilot-org/skypilot#831: both codes mean a stockout).
    ("stockout", re.compile(r"ZONE_RESOURCE_POOL_EXHAUSTED(?:_WITH_DETAILS)?")),
    # GKE node pool creation: "Current errors: [GCE_STOCKOUT]: Instance '...' creation failed: The zone '...' does
    # not have enough resources available to fulfill the request." (hashicorp/terraform-provider-google#10121;
    # GoogleCloudPlatform/cluster-toolkit#6278, 2026-09-07).
    ("stockout", re.compile(r"\bGCE_STOCKOUT\b")),
    # The Terraform provider's instance create, without a code: "Error waiting for instance to create: The zone
    # 'projects/P/zones/Z' does not have enough resources available to fulfill the request." (forseti-security/
    # terraform-google-forseti#631).
    ("stockout", re.compile(r"does not have enough resources available to fulfill the request")),
    # Quota: "code: QUOTA_EXCEEDED" (GoogleCloudPlatform/ai-on-gke#849), GKE's "[GCE_QUOTA_EXCEEDED]"
    # (kubernetes-sigs/sig-storage-local-static-provisioner#526), and the provider's "Quota 'N2_CPUS' exceeded.
    # Limit: 8.0 in region R." (GoogleCloudPlatform/pubsec-declarative-toolkit#625).
    ("quota", re.compile(r"\b(?:GCE_)?QUOTA_EXCEEDED\b")),
    ("quota", re.compile(r"Quota '[A-Z0-9_-]+' exceeded")),
)
TIMEOUT_S = 2 * 3600  # all tries together; `run --capacity-timeout` changes it
NODE_POOL = "gcp:container/nodePool:NodePool"
INSTANCE = "gcp:compute/instance:Instance"
NETWORK = "gcp:compute/network:Network"


def classify(text: str) -> tuple[str, str]:
    """("stockout" | "quota" | "", the line that says so)."""
    for kind, pattern in CAPACITY_SIGNS:
        m = pattern.search(text)
        if m:
            start = text.rfind("\n", 0, m.start()) + 1
            end = text.find("\n", m.end())
            line = text[start : end if end >= 0 else len(text)].strip()
            # CommandError's text frames the CLI's streams ("stderr: error: ..."): the provider's words stay.
            return kind, re.sub(r"^(?:std(?:out|err):\s*)?(?:error:\s*)?", "", line)[:400]
    return "", ""


def _field(resource: dict[str, Any], *path: str) -> Any:
    for source in ("outputs", "inputs"):
        value: Any = resource.get(source) or {}
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if value:
            return value
    return None


def zonal_targets(resources: list[dict[str, Any]], machine_type: str, include_rdma_vpc: bool) -> list[str]:
    """The URNs a failed try leaves that the next try must not inherit (the module's docstring says why)."""
    urns = []
    for r in resources:
        kind = r.get("type")
        a4 = (kind == NODE_POOL and _field(r, "nodeConfig", "machineType") == machine_type) or (
            kind == INSTANCE and str(_field(r, "machineType") or "").rsplit("/", 1)[-1] == machine_type
        )
        if a4 or (include_rdma_vpc and kind == NETWORK and _field(r, "networkProfile")):
            urns.append(str(r["urn"]))
    return urns


class CapacityExhaustedError(Exception):
    """Every try met a stockout or quota error, or the time bound ran out; the message lists every try."""


@dataclass
class Try:
    zone: str
    model: str
    seconds: float = 0.0
    kind: str = ""  # stockout, quota, "" (worked, or another error)
    error: str = ""

    def line(self, n: int, total: int, cost_so_far: str) -> str:
        outcome = f"{self.kind}: {self.error}" if self.kind else (f"FAILED: {self.error}" if self.error else "up")
        took = f"{self.seconds / 60:.1f} min"
        return f"capacity try {n}/{total} {self.zone}/{self.model}: {outcome} ({took}; {cost_so_far})"


def hourly(cfg: StackConfig, zone: str, model: str) -> float | None:
    """The stack's hourly estimate at the try's zone and model (deepep_a4/cost.py), None when unknown."""
    est = cost.estimate(replace(cfg, zone=zone, provisioning=model))
    return getattr(est, f"{cost.MODEL_COLUMN[model]}_hourly", None)


class FallbackStack:
    """The run's stack (StackOps) whose `up` walks the `capacity` entries; every other call goes straight through."""

    def __init__(
        self,
        stack: Any,
        cfg: StackConfig,
        *,
        say: Callable[[str], None] = print,
        clock: Callable[[], float] = time.monotonic,
        timeout_s: float = TIMEOUT_S,
        price: Callable[[StackConfig, str, str], float | None] = hourly,
    ):
        self.stack, self.cfg, self.say, self.clock = stack, cfg, say, clock
        self.timeout_s, self.price = timeout_s, price
        self.tries: list[Try] = []

    def __getattr__(self, name: str) -> Any:  # preview, outputs, destroy, resources, raw_config, name
        return getattr(self.stack, name)

    def _cost_so_far(self) -> str:
        total = 0.0
        for t in self.tries:
            rate = self.price(self.cfg, t.zone, t.model)
            if rate is None:
                return f"cost so far unknown: no {t.model} price (prices.yaml)"
            total += rate * t.seconds / 3600
        return f"cost so far at most {total:.2f} USD"

    def _start(self) -> int:
        """A stack that already holds a try keeps it: starting over would move a pool that is up."""
        entries = list(self.cfg.capacity)
        own = (self.cfg.zone, self.cfg.provisioning)
        deployed = bool(self.stack.outputs()) if hasattr(self.stack, "outputs") else False
        return entries.index(own) if deployed and own in entries else 0

    def up(self, on_output: Callable[[str], Any]) -> None:
        entries = list(self.cfg.capacity)
        deadline = self.clock() + self.timeout_s
        current = (self.cfg.zone, self.cfg.provisioning)
        for i in range(self._start(), len(entries)):
            zone, model = entries[i]
            if self.tries and self.clock() >= deadline:
                self._give_up(f"the capacity time bound ({self.timeout_s / 60:.0f} min) ran out before {zone}/{model}")
            if (zone, model) != current:
                self.stack.set_config("deepep-a4:zone", zone)
                self.stack.set_config("deepep-a4:provisioning", model)
                current = (zone, model)
            t = Try(zone, model)
            self.tries.append(t)
            started = self.clock()
            try:
                self.stack.up(on_output=on_output)
            except Exception as err:
                t.seconds = self.clock() - started
                t.kind, t.error = classify(str(err))
                if not t.kind:  # not capacity: stop at once, the run's own handler reports it
                    t.error = f"{type(err).__name__} (not a stockout or quota error: no further try)"
                    self.say(t.line(len(self.tries), len(entries), self._cost_so_far()))
                    raise
                self.say(t.line(len(self.tries), len(entries), self._cost_so_far()))
                if i + 1 < len(entries):
                    self._undo(zone, entries[i + 1][0], on_output)
                continue
            t.seconds = self.clock() - started
            self.say(t.line(len(self.tries), len(entries), self._cost_so_far()))
            self.say(f"capacity: {zone}/{model} worked; the stack file now says zone {zone}, provisioning {model}")
            return
        self._give_up("every entry of `capacity` was tried")

    def _undo(self, zone: str, next_zone: str, on_output: Callable[[str], Any]) -> None:
        urns = zonal_targets(self.stack.resources(), self.cfg.machine_type, include_rdma_vpc=next_zone != zone)
        if not urns:
            self.say("capacity: the failed try left no A4 machines or RDMA VPC in the state: nothing to destroy")
            return
        self.say(f"capacity: destroying what the try made in {zone}: " + ", ".join(u.rsplit("::", 1)[-1] for u in urns))
        self.stack.destroy_targets(urns, on_output=on_output)

    def _give_up(self, why: str) -> None:
        lines = [f"no capacity: {why}; each try:"]
        lines += [f"  {t.zone}/{t.model}: {t.kind or 'error'}: {t.error}" for t in self.tries]
        raise CapacityExhaustedError("\n".join(lines))


def wrap(stack: Any, cfg: StackConfig, **kwargs: Any) -> Any:
    """The stack itself when `capacity` names at most one try, else a FallbackStack around it."""
    return FallbackStack(stack, cfg, **kwargs) if len(cfg.capacity) > 1 else stack

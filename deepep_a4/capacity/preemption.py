"""A preempted internode run restarts as a whole, from `deepep-a4 run`'s benchmark wait.

Choice: a watchdog in `run` (this module), not JobSet's failure policy. JobSet would restart the GKE group
(`failurePolicy.maxRestarts` recreates every child Job when one fails: kubernetes-sigs/jobset
api/jobset/v1alpha2/jobset_types.go), but it is one more controller with its CRDs and a privileged manager to
pin and install in every cluster, and it does nothing on GCE, where the VMs run the test without Kubernetes. The
watchdog uses what both platforms already give: the run's own poll, the Kubernetes API, the Compute API and
`pulumi up --refresh`. Between two polls:

- it finds the internode ranks that were lost (lost_ranks): GKE, an internode pod with the `DisruptionTarget`
  condition (the kubelet's or the scheduler's preemption, the taint manager or PodGC after the node went:
  https://kubernetes.io/docs/concepts/workloads/pods/disruptions/#pod-disruption-conditions); GCE, an A4 VM
  gone from the zone (a preempted spot VM is deleted, `terminationAction: DELETE`);
- it ends every rank of the group, so none waits for a dead peer until the test's timeout, and starts the group
  again (restart_group): GKE, each internode pod is evicted (the Eviction API marks it `DisruptionTarget`, which
  the Job's podFailurePolicy ignores, so the Indexed Job recreates every index without spending its
  backoffLimit); GCE, `pulumi up --refresh` recreates the deleted VM and the survivors are reset, so every VM's
  startup runs the internode test again by itself;
- it stops restarting after `max_restarts`, or when the stack's deadline leaves less than one test's budget.

Each restart, with its cause, is printed, and written into the report folder as restarts.json (RESTARTS_FILE).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

RESTARTS_FILE = "restarts.json"
MAX_RESTARTS = 2


@dataclass(frozen=True)
class Lost:
    rank: str  # pod name (GKE) or VM name (GCE)
    cause: str


class GroupOps(Protocol):
    """What a platform does for the watchdog (GkeGroup, GceGroup; fakes in tests)."""

    def lost_ranks(self, outputs: dict[str, Any]) -> list[Lost]: ...

    def restart_group(self, outputs: dict[str, Any], lost: list[Lost]) -> str: ...


@dataclass
class Restart:
    n: int
    at: str
    causes: list[str]
    action: str


@dataclass
class Watchdog:
    ops: GroupOps
    test_budget_s: float
    max_restarts: int = MAX_RESTARTS
    say: Callable[[str], None] = print
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    restarts: list[Restart] = field(default_factory=list)
    gave_up: str = ""

    def check(self, outputs: dict[str, Any]) -> None:
        lost = self.ops.lost_ranks(outputs)
        if not lost or self.gave_up:
            return
        causes = [f"{x.rank}: {x.cause}" for x in lost]
        if len(self.restarts) >= self.max_restarts:
            self.gave_up = f"{len(self.restarts)} restarts already (the bound); lost again: " + "; ".join(causes)
            self.say(f"internode: not restarted: {self.gave_up}")
            return
        deadline = outputs.get("deadline")
        if deadline:
            left = (dt.datetime.fromisoformat(str(deadline).replace("Z", "+00:00")) - self.now()).total_seconds()
            if left < self.test_budget_s:
                self.gave_up = f"the stack's deadline {deadline} leaves {left / 60:.0f} min, less than one test"
                self.say(f"internode: not restarted: {self.gave_up}")
                return
        action = self.ops.restart_group(outputs, lost)
        restart = Restart(len(self.restarts) + 1, self.now().isoformat(timespec="seconds"), causes, action)
        self.restarts.append(restart)
        self.say(f"internode restart {restart.n}/{self.max_restarts}: {'; '.join(causes)} -> {action}")

    def write(self, out: Path) -> Path:
        out.mkdir(parents=True, exist_ok=True)
        path = out / RESTARTS_FILE
        doc = {"restarts": [asdict(r) for r in self.restarts], "maxRestarts": self.max_restarts}
        if self.gave_up:
            doc["notRestarted"] = self.gave_up
        path.write_text(json.dumps(doc, indent=2) + "\n")
        return path


class WatchedProbe:
    """The run's probe with the watchdog in its benchmark wait; collect also writes restarts.json."""

    def __init__(self, probe: Any, watchdog: Watchdog):
        self.probe, self.watchdog = probe, watchdog

    def __getattr__(self, name: str) -> Any:  # installed, timeline
        return getattr(self.probe, name)

    def benchmarks(self, outputs: dict[str, Any]) -> Any:
        self.watchdog.check(outputs)
        return self.probe.benchmarks(outputs)

    def collect(self, outputs: dict[str, Any], out: Path) -> int:
        # First, so that the report written by the collect lists them (report/writers.py restarts_section).
        if self.watchdog.restarts or self.watchdog.gave_up:
            self.watchdog.say(f"internode restarts written to {self.watchdog.write(out)}")
        return self.probe.collect(outputs, out)


# -- GKE -----------------------------------------------------------------------------------------------------


class GkeGroup:
    """The internode Indexed Job's pods through the kubernetes client (CoreV1Api)."""

    def __init__(self, core: Callable[[dict[str, Any]], Any], namespace: str):
        self.core, self.namespace = core, namespace

    def _pods(self, outputs: dict[str, Any]) -> list[Any]:
        from scripts.names import TEST_LABEL

        pods = self.core(outputs).list_namespaced_pod(self.namespace, label_selector=f"{TEST_LABEL}=internode")
        return list(pods.items)

    def lost_ranks(self, outputs: dict[str, Any]) -> list[Lost]:
        lost = []
        for pod in self._pods(outputs):
            if pod.metadata.deletion_timestamp is not None:
                continue  # already going: the restart in progress
            for c in pod.status.conditions or []:
                if c.type == "DisruptionTarget" and c.status == "True":
                    node = getattr(pod.spec, "node_name", None) or "no node"
                    lost.append(Lost(pod.metadata.name, f"{c.reason} on {node}: {c.message or ''}".strip()))
        return lost

    def restart_group(self, outputs: dict[str, Any], lost: list[Lost]) -> str:
        from kubernetes import client

        core = self.core(outputs)
        names = [p.metadata.name for p in self._pods(outputs) if p.metadata.deletion_timestamp is None]
        for name in names:
            body = client.V1Eviction(metadata=client.V1ObjectMeta(name=name, namespace=self.namespace))
            core.create_namespaced_pod_eviction(name, self.namespace, body)
        return f"evicted every internode pod ({', '.join(names)}); the Indexed Job recreates each index"


# -- GCE -----------------------------------------------------------------------------------------------------


class GceGroup:
    """The A4 VMs (the stack's `instanceNames` and `zone` outputs) through the Compute API; a deleted VM comes back
    with `pulumi up --refresh`."""

    def __init__(self, project: str, stack: Any, instances: Any = None):
        self.project, self.stack = project, stack
        self._instances = instances

    def instances(self) -> Any:
        if self._instances is None:
            from deepep_a4.cloud.capacity_reads import compute

            self._instances = compute().InstancesClient()
        return self._instances

    def lost_ranks(self, outputs: dict[str, Any]) -> list[Lost]:
        from google.api_core import exceptions

        lost = []
        for name in outputs.get("instanceNames") or []:
            try:
                self.instances().get(project=self.project, zone=outputs["zone"], instance=name)
            except exceptions.NotFound:
                lost.append(Lost(name, "VM deleted (spot preemption, terminationAction DELETE)"))
        return lost

    def restart_group(self, outputs: dict[str, Any], lost: list[Lost]) -> str:
        self.stack.refresh_up(on_output=lambda _: None)  # recreates the deleted VMs; their startup runs the tests
        gone = {x.rank for x in lost}
        survivors = [n for n in outputs.get("instanceNames") or [] if n not in gone]
        for name in survivors:
            self.instances().reset(project=self.project, zone=outputs["zone"], instance=name)
        return f"pulumi up --refresh recreated {', '.join(sorted(gone))}; reset {', '.join(survivors) or 'none'}"


def watch(probe: Any, cfg: Any, stack: Any, say: Callable[[str], None]) -> Any:
    """The run's probe, watched when the stack runs the internode test on more than one node."""
    from deepep_a4.run.platforms import GceProbe, GkeProbe
    from scripts.names import NAMESPACE

    if "internode" not in cfg.benchmarks.tests or cfg.node_count < 2:
        return probe
    if isinstance(probe, GkeProbe):
        ops: GroupOps = GkeGroup(probe._core_v1, NAMESPACE)
    elif isinstance(probe, GceProbe):
        ops = GceGroup(cfg.project, stack)
    else:
        return probe
    return WatchedProbe(probe, Watchdog(ops, cfg.benchmarks.test_budget_seconds, say=say))

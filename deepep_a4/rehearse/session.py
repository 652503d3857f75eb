"""One rehearsal, start to teardown: the stack `<stack>-rehearsal` previewed and brought up under the policy pack
(as `deepep-a4 run` does), the seams Google answers read, the probes' lines collected, the deadline fired, then
destroyed with refresh. The destroy runs in `finally`: after a FAIL, an error, Ctrl-C or SIGTERM alike; if the
workstation itself dies, the rehearsal's short TTL bounds it (components/rehearsal.py).
"""

from __future__ import annotations

import io
import signal
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from components import rehearsal
from components.config import StackConfig
from components.gke.objects import BENCH_CONTAINER, INSTALLER_NAME, TEST_LABEL
from components.gke.rehearsal import OUTSIDER_JOB
from deepep_a4.rehearse import build, google
from deepep_a4.rehearse.checklist import Checklist, Seam, parse, seam

PROBE_WAIT_S = 10 * 60  # the probes' lines, once `up` returned
POOL_GONE_S = 6 * 60  # the deadline job's delete of the pool


@dataclass
class Clients:
    """What the session talks to besides the Pulumi CLI: Google and the cluster (fakes in tests)."""

    reads: Any = None  # the capacity_reads module
    scheduler: Any = None
    container: Any = None
    logging_post: Any = None
    compute: Any = None
    pods: Callable[[str, str], Any] | None = None  # (kubeconfig, namespace) -> google.Pods
    build: Any = None  # cloudbuild_v1.CloudBuildClient
    build_logs: Any = None  # post(url, body) of Cloud Logging's entries.list


@dataclass
class Session:
    stack: Any  # run_benchmark.StackOps of `<stack>-rehearsal`, plus remove()
    cfg: StackConfig  # the rehearsal's config (rehearsal=True)
    checklist: Checklist
    clients: Clients = field(default_factory=Clients)
    say: Callable[[str], None] = print
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    poll_s: float = 10.0

    def run(self) -> Checklist:
        started, touched = self.clock(), False
        try:
            with _sigterm_as_interrupt():
                self.step("preview", f"pulumi preview --policy-pack policy -s {self.stack.name}")
                t0, text = self.clock(), io.StringIO()
                try:
                    self.stack.preview(on_output=lambda line: (text.write(line + "\n"), self._echo(line)))
                except Exception as err:  # a mandatory violation, a refusal of the program: nothing exists yet
                    self.checklist.add([seam("policy-pack", False, _tail(f"{err}"), self.clock() - t0, "preview")])
                    return self.checklist
                self.checklist.add([seam("policy-pack", True, _policy_evidence(text.getvalue()), self.clock() - t0)])
                self.step("google", "the seams Google answers: A4 quota, machineTypes.get")
                self.checklist.add(google.google_reads(self.cfg, self.clients.reads))
                self.step("build", f"the store builder probe: a minimal Cloud Build in {self.cfg.region}")
                run_id = f"{self.cfg.stack_label}-{int(time.time())}"
                self.checklist.add(
                    build.probe(self.cfg, run_id, self.clients.build, self.clients.build_logs, self.sleep)
                )
                self.step(
                    "up", f"pulumi up -s {self.stack.name} (e2 spot, TTL {(self.cfg.ttl_seconds or 0) // 60} min)"
                )
                touched = True
                self.stack.up(on_output=self._echo)
                outputs = self.stack.outputs()
                self.step("probes", "collecting the probes' REHEARSAL lines")
                probes = self.gke_probes if self.cfg.platform == "gke" else self.gce_probes
                self.checklist.add(probes(outputs))
        except KeyboardInterrupt:
            self.say("")
            self.checklist.notes.append("interrupted (Ctrl-C or SIGTERM): torn down, seams after it not proven")
            self.checklist.add([seam("rehearsal-complete", False, "interrupted", self.clock() - started)])
        except Exception as err:  # the Automation API's CommandError, a client's error: same way out
            self.checklist.add([seam("rehearsal-complete", False, _tail(f"{type(err).__name__}: {err}"), 0.0)])
        finally:
            if touched:
                self.checklist.teardown = self.teardown()
            self.checklist.wall_seconds = round(self.clock() - started, 1)
        return self.checklist

    def teardown(self) -> str:
        """destroy --refresh, then the stack is removed; Ctrl-C during it is refused once (half a destroy costs)."""
        self.step("destroy", f"pulumi destroy --refresh -s {self.stack.name}")
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN) if _main_thread() else None
        try:
            self.stack.destroy(on_output=self._echo)
            remove = getattr(self.stack, "remove", None)
            if remove is not None:
                remove()
            return "destroyed (pulumi destroy --refresh), stack removed"
        except Exception as err:
            self.say(f"destroy FAILED: {_tail(str(err))}")
            return (
                f"DESTROY FAILED ({_tail(str(err), 300)}): run `pulumi destroy --refresh -s {self.stack.name}`; "
                f"the rehearsal's TTL ({(self.cfg.ttl_seconds or 0) // 60} min) bounds its machines meanwhile"
            )
        finally:
            if previous is not None:
                signal.signal(signal.SIGINT, previous)

    # -- GKE ---------------------------------------------------------------------------------------------

    def gke_probes(self, outputs: dict[str, Any]) -> list[Seam]:
        ns = str(outputs.get("benchNamespace") or "")
        if not outputs.get("kubeconfig") or not ns:
            raise RuntimeError("the stack has no kubeconfig or benchNamespace output: nothing to read the probes from")
        pods = (self.clients.pods or google.Pods)(str(outputs["kubeconfig"]), ns)
        found: list[Seam] = []
        # The staging probe ran in the DaemonSet's init container: `up` waited for every pod to be Ready.
        found += self._lines(pods.logs(f"app.kubernetes.io/name={INSTALLER_NAME}", "install"), "stage-probe")
        if "internode" in self.cfg.benchmarks.tests:
            peers = f"{TEST_LABEL}=internode"
            google.wait_for(
                lambda: any("internode-rendezvous" in t for t in pods.logs(peers, BENCH_CONTAINER).values()),
                PROBE_WAIT_S,
                self.poll_s,
                self.clock,
                self.sleep,
            )
            pods.resume(OUTSIDER_JOB)  # rank 0 listens now (its linger bounds how long)
            outsider = f"job-name={OUTSIDER_JOB}"
            google.wait_for(
                lambda: any("REHEARSAL" in t for t in pods.logs(outsider, BENCH_CONTAINER).values()),
                PROBE_WAIT_S,
                self.poll_s,
                self.clock,
                self.sleep,
            )
            found += self._lines(pods.logs(peers, BENCH_CONTAINER), "internode-probe")
            found += self._lines(pods.logs(outsider, BENCH_CONTAINER), "outsider-probe")
        found += self.gke_deadline(outputs)
        return found

    def gke_deadline(self, outputs: dict[str, Any]) -> list[Seam]:
        from deepep_a4.rehearse.stack import deadline_account

        t0 = self.clock()
        try:
            said = google.fire_deadline(self.cfg, self.clients.scheduler)
        except Exception as err:
            return [seam("deadline-pool", False, _tail(f"jobs.run: {type(err).__name__}: {err}"), self.clock() - t0)]
        self.say(f"    {said}")
        watch = google.PoolWatch(
            self.cfg,
            str(outputs.get("clusterName")),
            str(outputs.get("nodePool")),
            self.clients.container,
            self.clients.logging_post,
        )
        probe_deadline = _probe_module("probe_deadline")
        out = io.StringIO()
        probe_deadline.check_pool_gone(
            watch,
            account=deadline_account(self.cfg),
            fired_at=time.time(),
            within_s=POOL_GONE_S,
            poll_s=self.poll_s,
            sleep=self.sleep,
            out=out,
        )
        return parse(out.getvalue(), "workstation")

    # -- GCE ---------------------------------------------------------------------------------------------

    def gce_probes(self, outputs: dict[str, Any]) -> list[Seam]:
        names = [str(n) for n in outputs.get("instanceNames") or []]
        if not names:
            raise RuntimeError("the stack has no instanceNames output: nothing to read the probes from")
        watches = {n: google.VmWatch(self.cfg, n, self.clients.compute) for n in names}
        texts: dict[str, str] = {}

        def all_done() -> bool:
            for name, watch in watches.items():
                texts[name] = watch.serial()
            return all("gce-results" in t for t in texts.values())

        google.wait_for(all_done, PROBE_WAIT_S, self.poll_s, self.clock, self.sleep)
        found = self._lines(texts, "gce-probe")
        probe_gce_vm = _probe_module("probe_gce_vm")
        for name, watch in watches.items():
            found += self._check(
                "gce-scheduling",
                lambda w=watch: probe_gce_vm.check_scheduling(_rest(w.resource()), _want(self.cfg)),
                name,
            )
        at = str(outputs.get("deadline") or "")
        if at:
            probe_deadline = _probe_module("probe_deadline")
            out = io.StringIO()
            probe_deadline.check_vm_ended(
                watches[names[0]], termination_time=at, poll_s=self.poll_s, sleep=self.sleep, out=out
            )
            found += parse(out.getvalue(), names[0])
        return found

    # -- helpers -----------------------------------------------------------------------------------------

    def _lines(self, logs: dict[str, str], probe: str) -> list[Seam]:
        """Every REHEARSAL line of each pod or VM; one with none is a FAIL of its own (the log's tail as evidence)."""
        found: list[Seam] = []
        if not logs:
            return [seam(probe, False, "no pod or VM of this probe was found", 0.0)]
        for where, text in sorted(logs.items()):
            lines = parse(text, where)
            found += lines or [seam(probe, False, "no REHEARSAL line; log tail: " + _tail(text, 400), 0.0, where)]
        return found

    def _check(self, seam_id: str, check: Callable[[], str], where: str) -> list[Seam]:
        common = _probe_module("common")
        out = io.StringIO()
        common.run_seam(seam_id, check, out)
        return parse(out.getvalue(), where)

    def step(self, phase: str, text: str) -> None:
        self.say(f"rehearse {phase}: {text}")

    def _echo(self, line: str) -> None:
        if line.strip():
            self.say(f"    {line.rstrip()}")


def _probe_module(name: str) -> Any:
    """scripts/rehearse/<name>.py, the probes' side of a check the command runs."""
    import importlib

    return importlib.import_module(f"scripts.rehearse.{name}")


def _rest(instance: Any) -> dict[str, Any]:
    """A compute_v1.Instance as the REST API's JSON (camelCase field names, as check_scheduling reads them)."""
    import json

    return json.loads(type(instance).to_json(instance)) if hasattr(type(instance), "to_json") else dict(instance)


def _want(cfg: StackConfig) -> dict[str, Any]:
    """The scheduling block the plan asks for (components/gce/fleet.py scheduling), in REST names."""
    return {
        "provisioningModel": "SPOT",
        "instanceTerminationAction": cfg.gce.termination_action,
        "maxRunDuration": {"seconds": str(cfg.ttl_seconds)},
    }


def _policy_evidence(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    policies = [line for line in lines if "Policies" in line or "deepep-a4@" in line]
    return "pulumi preview --policy-pack policy: no mandatory violation" + (
        f" ({'; '.join(policies[:3])})" if policies else ""
    )


def _tail(text: str, limit: int = 900) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else "... " + text[-limit:]


def _main_thread() -> bool:
    import threading

    return threading.current_thread() is threading.main_thread()


@contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM (a closed terminal, a CI cancel) tears down like Ctrl-C."""
    if not _main_thread():
        yield
        return

    def interrupt(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


MISSING_PROBES_FIX = "the probes (scripts/rehearse/) are not in this checkout"


def missing_probes() -> list[str]:
    """The probe files the rendered pods and startup script run, where this checkout lacks them."""
    have = rehearsal.probe_files()
    need = (rehearsal.PROBE_STAGE, rehearsal.PROBE_INTERNODE, rehearsal.PROBE_GCE_VM, "common.py", "seams.py")
    return [n for n in need if n not in have]

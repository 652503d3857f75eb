"""What `deepep-a4 run` drives: the stack through Pulumi's Automation API, and a probe per platform that
says how many nodes are installed and when the benchmarks are done."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components import config
from deepep_a4.paths import project_root
from deepep_a4.timeline import NodeTimeline, gce_nodes, gke_nodes, instances_from_state
from scripts import names

ROOT = project_root()
# The policy pack every `deepep-a4 run` enforces on its `up` (deepep_a4/policy; docs/security.md): a
# mandatory violation stops the update before anything is created, as `pulumi up --policy-pack policy` does.
POLICY_PACK = ROOT / "policy"
# GCE status.json states (the VM's benchmark stage): a VM writes one only once its install finished.
GCE_INSTALLED = names.GCE_INSTALLED_STATES
GCE_FINISHED = names.GCE_FINISHED_STATES
# The A4 nodes (components/gke/nodepool.py labels them) and the installer DaemonSet's pods
# (components/gke/objects.py INSTALLER_LABELS; a test keeps both equal).
A4_NODE_SELECTOR = f"{names.NODE_POOL_LABEL_KEY}={names.NODE_POOL_LABEL_VALUE}"
INSTALLER_SELECTOR = f"app.kubernetes.io/name={names.INSTALLER_NAME}"
# The head of a benchmark pod's log that holds its first line (limitBytes of the pod log API).
LOG_HEAD_BYTES = 4096


class NoStackError(Exception):
    """The backend has no stack of that name: there is nothing to destroy."""


class RunFailedError(Exception):
    """A phase failed or timed out; the message says which and why."""


@dataclass
class Progress:
    """One observation of a wait: `done` of `total`, and what failed (names with a reason)."""

    done: int
    total: int
    failed: list[str] = field(default_factory=list)
    detail: str = ""

    @property
    def complete(self) -> bool:
        return self.total > 0 and self.done >= self.total


# -- the real stack (Automation API) -------------------------------------------------------------------


class AutomationStack:
    """The stack as `pulumi` in this folder sees it: Pulumi.yaml, stacks/Pulumi.<name>.yaml."""

    def __init__(self, name: str, create: bool = True):
        """`create=False` selects the stack only (`pulumi stack select`): `create_or_select_stack` would make a
        missing one, which writes an encryptionsalt into its tracked stack file (issue 41); a missing stack
        raises NoStackError."""
        from pulumi import automation as auto

        self.name = name
        if create:
            self._stack = auto.create_or_select_stack(stack_name=name, work_dir=str(ROOT))
            return
        try:
            self._stack = auto.select_stack(stack_name=name, work_dir=str(ROOT))
        except auto.StackNotFoundError:
            # automation/errors.py: the CLI's "no stack named 'NAME' found" (backenderr.StackNotFoundError).
            raise NoStackError(name) from None

    @classmethod
    def existing(cls, name: str) -> AutomationStack:
        return cls(name, create=False)

    def raw_config(self) -> dict[str, Any]:
        values = self._stack.get_all_config()
        return {k: v.value for k, v in values.items()}

    def preview(self, on_output: Callable[[str], Any]) -> None:
        """`pulumi preview --policy-pack policy`: every rule on every resource, nothing created. The Automation
        API's `up` runs `pulumi up --yes --skip-preview` (automation/_stack.py), where a violation stops the
        update only at the resource that violates it, after the ones before it exist."""
        self._stack.preview(on_output=on_output, color="never", policy_packs=[str(POLICY_PACK)])

    def set_config(self, key: str, value: str) -> None:
        """`pulumi config set KEY VALUE -s NAME`: written into stacks/Pulumi.NAME.yaml (stackConfigDir)."""
        from pulumi import automation as auto

        self._stack.set_config(key, auto.ConfigValue(value=value))

    def up(self, on_output: Callable[[str], Any]) -> None:
        self._stack.up(on_output=on_output, color="never", policy_packs=[str(POLICY_PACK)])

    def outputs(self) -> dict[str, Any]:
        return {k: v.value for k, v in self._stack.outputs().items()}

    def resources(self) -> list[dict[str, Any]]:
        """The resources in the stack's state (`pulumi stack export`): type, urn, the provider's outputs."""
        deployment = self._stack.export_stack().deployment or {}
        return [dict(r) for r in deployment.get("resources") or []]

    def destroy(self, on_output: Callable[[str], Any]) -> None:
        # Refresh first: the TTL or a spot preemption may have deleted the VMs, and the provider's instance
        # delete does not accept "not found" (docs/troubleshooting.md).
        self._stack.destroy(on_output=on_output, color="never", refresh=True)

    def refresh_up(self, on_output: Callable[[str], Any]) -> None:
        """`pulumi up --refresh`: a VM the cloud deleted is created again (deepep_a4/capacity/preemption.py)."""
        self._stack.up(on_output=on_output, color="never", refresh=True, policy_packs=[str(POLICY_PACK)])

    def destroy_targets(self, urns: list[str], on_output: Callable[[str], Any]) -> None:
        """`pulumi destroy --refresh --target URN... --target-dependents`: what a failed capacity try made, and what
        depends on it (deepep_a4/capacity/fallback.py)."""
        self._stack.destroy(on_output=on_output, color="never", refresh=True, target=urns, target_dependents=True)


# -- platform probes -----------------------------------------------------------------------------------


def collect_report(
    spec: str, gate: float, out: Path, kubeconfig: str | None = None, namespace: str | None = None
) -> int:
    """The report's analysis on one source; returns its exit status (0 gate passed, 1 failed, 2 none)."""
    from deepep_a4 import report as results

    args = results.SourceArgs(kubeconfig=kubeconfig, namespace=namespace)
    source = results.make_source(spec, args)
    report = results.analyze(list(source.items()), gate, [source.describe()])
    if not report.runs:
        return 2
    print(f"report: {results.write_report(report, out)}")
    return 0 if report.passed else 1


Runner = Callable[[list[str]], tuple[int, str]]


def run_command(cmd: list[str]) -> tuple[int, str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout


class GceProbe:
    """Reads each VM's status.json from the results bucket with the user's gcloud."""

    def __init__(
        self, cfg: config.StackConfig, runner: Runner = run_command, collect: Callable[..., int] = collect_report
    ):
        self.cfg, self.runner, self._collect = cfg, runner, collect

    def docs(self, outputs: dict[str, Any]) -> list[dict[str, Any] | None]:
        """Each VM's status.json in the bucket, by rank (None where there is none yet)."""
        url = str(outputs["resultsUrl"]).rstrip("/")
        out: list[dict[str, Any] | None] = []
        for rank in range(self.cfg.node_count):
            rc, text = self.runner(["gcloud", "storage", "cat", f"{url}/node-{rank}/status.json"])
            try:
                doc = json.loads(text) if rc == 0 else None
            except json.JSONDecodeError:
                doc = None
            out.append(doc if isinstance(doc, dict) else None)
        return out

    def states(self, outputs: dict[str, Any]) -> list[str | None]:
        return [doc.get("state") if doc else None for doc in self.docs(outputs)]

    def timeline(self, outputs: dict[str, Any], resources: list[dict[str, Any]]) -> list[NodeTimeline]:
        """Created from the instances in the stack's state; installer ready and first line from the VMs' status."""
        docs = dict(enumerate(self.docs(outputs)))
        return gce_nodes(instances_from_state(resources), docs)

    def installed(self, outputs: dict[str, Any]) -> Progress:
        states = self.states(outputs)
        failed = [
            f"vm-{r}: install failed (see node-{r}/startup-script.out)"
            for r, s in enumerate(states)
            if s == "install-failed"
        ]
        return Progress(sum(s in GCE_INSTALLED for s in states), len(states), failed, _tally(states))

    def benchmarks(self, outputs: dict[str, Any]) -> Progress:
        states = self.states(outputs)
        # A failed test is recorded in the report; only a VM that never ran them stops the run.
        failed = [f"vm-{r}: install failed" for r, s in enumerate(states) if s == "install-failed"]
        return Progress(sum(s in GCE_FINISHED for s in states), len(states), failed, _tally(states))

    def collect(self, outputs: dict[str, Any], out: Path) -> int:
        return self._collect(str(outputs["resultsUrl"]), self.cfg.benchmarks.gate_ratio, out)


def _tally(states: list[str | None]) -> str:
    counts: dict[str, int] = {}
    for s in states:
        counts[s or "no status yet"] = counts.get(s or "no status yet", 0) + 1
    return ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))


class GkeProbe:
    """Reads the installer DaemonSet and the benchmark Jobs with the kubernetes client and the stack's kubeconfig."""

    def __init__(
        self, cfg: config.StackConfig, apis: Any = None, collect: Callable[..., int] = collect_report, core: Any = None
    ):
        self.cfg, self._apis, self._collect, self._core = cfg, apis, collect, core
        self._kubeconfig: str | None = None
        self._client: Any = None

    def _kube(self, outputs: dict[str, Any]) -> Any:
        """(AppsV1Api, BatchV1Api) for the cluster; built once from the `kubeconfig` output."""
        if self._apis is None:
            import tempfile

            try:
                from kubernetes import client
                from kubernetes import config as kube_config
            except ImportError as err:
                raise RunFailedError("waiting on GKE needs the kubernetes client: pip install kubernetes") from err
            path = Path(tempfile.mkdtemp(prefix="deepep-kube-")) / "kubeconfig"
            path.write_text(str(outputs["kubeconfig"]))
            path.chmod(0o600)
            self._kubeconfig = str(path)
            self._client = api = kube_config.new_client_from_config(config_file=self._kubeconfig)
            self._apis = (client.AppsV1Api(api), client.BatchV1Api(api))
        return self._apis

    def _core_v1(self, outputs: dict[str, Any]) -> Any:
        if self._core is None:
            from kubernetes import client

            self._kube(outputs)
            self._core = client.CoreV1Api(self._client)
        return self._core

    def installed(self, outputs: dict[str, Any]) -> Progress:
        from scripts.names import INSTALLER_NAME, NAMESPACE

        apps, _ = self._kube(outputs)
        ds = apps.read_namespaced_daemon_set(INSTALLER_NAME, outputs.get("benchNamespace") or NAMESPACE)
        ready = int(getattr(ds.status, "number_ready", 0) or 0)
        scheduled = int(getattr(ds.status, "desired_number_scheduled", 0) or 0)
        return Progress(ready, self.cfg.node_count, [], f"{scheduled} scheduled")

    def benchmarks(self, outputs: dict[str, Any]) -> Progress:
        from scripts.names import NAMESPACE

        _, batch = self._kube(outputs)
        jobs = dict(outputs.get("benchJobs") or {})
        done, failed = 0, []
        for name in jobs.values():
            job = batch.read_namespaced_job(name, outputs.get("benchNamespace") or NAMESPACE)
            conditions = {c.type: c.status for c in (getattr(job.status, "conditions", None) or [])}
            if conditions.get("Complete") == "True" or conditions.get("Failed") == "True":
                done += 1  # a failed Job's logs still go into the report, which fails its gate
        return Progress(done, len(jobs), failed)

    def collect(self, outputs: dict[str, Any], out: Path) -> int:
        from scripts.names import NAMESPACE

        ns = outputs.get("benchNamespace") or NAMESPACE
        self._kube(outputs)
        return self._collect(
            f"k8s:{ns}", self.cfg.benchmarks.gate_ratio, out, kubeconfig=self._kubeconfig, namespace=ns
        )

    def timeline(self, outputs: dict[str, Any], resources: list[dict[str, Any]]) -> list[NodeTimeline]:
        """The A4 Nodes, the installer pods and the head of each benchmark pod's log, with the kubelet's times."""
        from scripts.names import BENCH_CONTAINER, BENCH_SELECTOR, NAMESPACE

        ns = outputs.get("benchNamespace") or NAMESPACE
        core = self._core_v1(outputs)
        nodes = core.list_node(label_selector=A4_NODE_SELECTOR).items
        installers = core.list_namespaced_pod(ns, label_selector=INSTALLER_SELECTOR).items
        bench = [_plain(p) for p in core.list_namespaced_pod(ns, label_selector=BENCH_SELECTOR).items]
        heads: dict[str, str | None] = {}
        for pod in bench:
            name = str((pod.get("metadata") or {}).get("name"))
            try:
                heads[name] = core.read_namespaced_pod_log(
                    name, ns, container=BENCH_CONTAINER, timestamps=True, limit_bytes=LOG_HEAD_BYTES
                )
            except Exception:  # a pod that never started has no log: "not recorded" for its node
                heads[name] = None
        return gke_nodes([_plain(n) for n in nodes], [_plain(p) for p in installers], bench, heads)


def _plain(obj: Any) -> dict[str, Any]:
    """A kubernetes client model as its to_dict() (snake_case); a dict as it is."""
    return obj.to_dict() if hasattr(obj, "to_dict") else dict(obj)

"""Where logs come from: files and folders, a namespace's pods, a bucket; and the stack's outputs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from deepep_a4 import stackfile
from deepep_a4.paths import project_root
from deepep_a4.report.records import check_runner_doc, skip_text
from scripts.names import NAMESPACE

ROOT = project_root()

DEFAULT_GATE_RATIO = 0.5  # components/config's default of benchGateRatio (a test keeps them equal)

# -- sources ---------------------------------------------------------------------------------------------


@dataclass
class LogItem:
    """One log (or runner JSON document) and where it came from."""

    origin: str  # pod name, file name, object name
    text: str = ""
    doc: dict[str, Any] | None = None  # a runner <test>.json instead of a log
    meta: dict[str, str] = field(default_factory=dict)


class Source(Protocol):
    """Anything that yields benchmark logs."""

    def describe(self) -> str: ...

    def items(self) -> Iterator[LogItem]: ...


@dataclass
class SourceArgs:
    """What a source factory may read of the command line: the cluster to ask for `k8s:` sources."""

    kubeconfig: str | None = None
    namespace: str | None = None
    kubeconfig_label: str | None = None  # how errors name the kubeconfig (a stack's output, not a temp path)


SourceFactory = Callable[[str, SourceArgs], Source]
_SOURCES: dict[str, SourceFactory] = {}


class SourceError(Exception):
    """A source that cannot be read at all (no such path, no kubeconfig, unknown scheme): exit 2."""


def warn(text: str) -> None:
    print(f"warning: {text}", file=sys.stderr)


def register_source(scheme: str, factory: SourceFactory) -> None:
    """Makes `scheme:...` (or `scheme://...`) a source: factory(spec, args) -> Source."""
    _SOURCES[scheme] = factory


class PathSource:
    """A log file, a runner JSON file, or a folder of them (searched recursively)."""

    def __init__(self, path: str):
        self.path = Path(path)

    def describe(self) -> str:
        return str(self.path)

    def items(self) -> Iterator[LogItem]:
        files = sorted(self.path.rglob("*")) if self.path.is_dir() else [self.path]
        logs = {f.stem for f in files if f.suffix in (".log", ".txt")}
        for f in files:
            if not f.is_file():
                continue
            origin = str(f.relative_to(self.path)) if self.path.is_dir() else f.name
            if f.suffix in (".log", ".txt"):
                try:
                    text = f.read_text(encoding="utf-8", errors="replace")
                except OSError as err:
                    warn(f"skipping {f}: cannot read it: {err.strerror or err}")
                    continue
                yield LogItem(origin, text=text)
            elif f.suffix == ".json" and f.stem not in logs:
                try:
                    doc = json.loads(f.read_text(encoding="utf-8"))
                except OSError as err:
                    warn(f"skipping {f}: cannot read it: {err.strerror or err}")
                    continue
                except (UnicodeDecodeError, json.JSONDecodeError) as err:
                    warn(skip_text(str(f), f"not valid JSON ({err})"))
                    continue
                if isinstance(doc, dict) and "records" in doc and "test" in doc:
                    try:
                        doc = check_runner_doc(doc)
                    except ValueError as err:
                        warn(skip_text(str(f), str(err)))
                        continue
                    yield LogItem(origin, doc=doc)


class KubernetesSource:
    """The logs of the benchmark pods in a namespace, through the kubernetes client.

    `core_v1` may be passed in (tests); otherwise one is built from the kubeconfig.
    """

    def __init__(
        self,
        namespace: str,
        kubeconfig: str | None = None,
        selector: str | None = None,
        container: str | None = None,
        core_v1: Any = None,
        kubeconfig_label: str | None = None,
    ):
        from scripts.names import BENCH_CONTAINER, BENCH_SELECTOR

        self.namespace = namespace
        self.kubeconfig = kubeconfig
        # What to call the kubeconfig in messages (the stack's output is read into a temporary file).
        self.kubeconfig_label = kubeconfig_label or f"kubeconfig {kubeconfig or '~/.kube/config (the default)'}"
        self.selector = selector or BENCH_SELECTOR
        self.container = container or BENCH_CONTAINER
        self._core_v1 = core_v1

    def describe(self) -> str:
        return f"pods {self.selector!r} in namespace {self.namespace}"

    def _api(self) -> Any:
        if self._core_v1 is None:
            try:
                from kubernetes import client
                from kubernetes import config as kube_config
            except ImportError as err:
                raise SourceError(
                    "reading Job logs needs the kubernetes client: .venv/bin/pip install kubernetes"
                ) from err
            import yaml

            try:
                api_client = kube_config.new_client_from_config(config_file=self.kubeconfig)
            except (kube_config.ConfigException, yaml.YAMLError, OSError) as err:
                reason = " ".join(str(err).split())
                if self.kubeconfig and os.pathsep not in self.kubeconfig and not Path(self.kubeconfig).exists():
                    reason = "no such file"
                raise SourceError(
                    f"cannot load {self.kubeconfig_label}: {reason}. Get one with the stack's getCredentials "
                    "command (`pulumi stack output getCredentials -s STACK`: `gcloud container clusters "
                    "get-credentials CLUSTER --location REGION --project PROJECT`), or use --stack STACK"
                ) from err
            self._core_v1 = client.CoreV1Api(api_client)
        return self._core_v1

    def _image_id(self, pod: Any) -> str:
        """The benchmark container's image as the kubelet pulled it (imageID: name@sha256:digest), else ""."""
        for status in getattr(pod.status, "container_statuses", None) or []:
            if getattr(status, "name", "") == self.container:
                return str(getattr(status, "image_id", "") or "")
        return ""

    def items(self) -> Iterator[LogItem]:
        api = self._api()
        try:
            pods = api.list_namespaced_pod(self.namespace, label_selector=self.selector).items
        except Exception as err:  # ApiException, urllib3's connection errors: the cluster is not reachable
            reason = " ".join(str(err).split())[:300]
            raise SourceError(
                f"cannot list the benchmark pods in namespace {self.namespace} with {self.kubeconfig_label}: "
                f"{reason} (is the cluster up, and the kubeconfig current? see the stack's getCredentials output)"
            ) from err
        for pod in sorted(pods, key=lambda p: p.metadata.name):
            labels = pod.metadata.labels or {}
            annotations = pod.metadata.annotations or {}
            meta = {
                "job": labels.get("job-name", ""),
                "index": annotations.get("batch.kubernetes.io/job-completion-index", ""),
                "node": getattr(pod.spec, "node_name", "") or "",
                "phase": getattr(pod.status, "phase", "") or "",
                "image": self._image_id(pod),
            }
            try:
                text = api.read_namespaced_pod_log(pod.metadata.name, self.namespace, container=self.container)
            except Exception as err:  # a pod that never started has no log: report it, go on
                text = f"[runner] error cannot read the log of pod {pod.metadata.name}: {err}"
            yield LogItem(pod.metadata.name, text=text, meta=meta)


def _k8s_factory(spec: str, args: SourceArgs) -> Source:
    # The command line fills args.namespace for every k8s: source; a caller without one gets the runner's.
    namespace = spec.split(":", 1)[1].lstrip("/") or args.namespace or NAMESPACE
    return KubernetesSource(namespace, kubeconfig=args.kubeconfig, kubeconfig_label=args.kubeconfig_label)


register_source("k8s", _k8s_factory)

# gs://BUCKET/PREFIX: the GCE VMs' results in the stack's bucket, copied with `gcloud storage cp -r`.
from deepep_a4.store.gcs import make_gs_factory  # noqa: E402  (registers after PathSource exists)

register_source("gs", make_gs_factory(PathSource))


def make_source(spec: str, args: SourceArgs) -> Source:
    """The source of `spec`; SourceError for an unknown scheme or a path that does not exist."""
    m = re.match(r"^([a-z][a-z0-9+.-]*):(?!\\)", spec)
    if m and m[1] in _SOURCES:
        return _SOURCES[m[1]](spec, args)
    if m and len(m[1]) > 1 and not Path(spec).exists():
        raise SourceError(
            f"unknown source scheme {m[1]!r} in {spec}; known: {', '.join(sorted(_SOURCES))}, or a file or folder"
        )
    if not Path(spec).exists():
        raise SourceError(f"no such file or folder: {spec}")
    return PathSource(spec)


# -- the stack ------------------------------------------------------------------------------------------


def unknown_stack(stack: str) -> str | None:
    """Why `stack` is not a stack of this project, or None."""
    try:
        stackfile.resolve(stack, ROOT)
    except stackfile.StackFileError as err:
        return str(err)
    return None


def stack_output(stack: str, name: str, secret: bool = False) -> str | None:
    cmd = ["pulumi", "stack", "output", name, "--stack", stack] + (["--show-secrets"] if secret else [])
    try:
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=ROOT).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return out or None


def _stack_benchmarks(stack: str, what: str) -> Any:
    from components import config

    try:
        cfg = stackfile.parse_stack(stack, ROOT)
    except (stackfile.StackFileError, config.ConfigError) as err:
        raise SourceError(f"stack {stack}: cannot read its {what}: {err}") from None
    return cfg.benchmarks


def stack_gate_ratio(stack: str) -> float:
    """The stack's benchGateRatio, read from its stack file as Pulumi reads it (the config model's default
    when the file does not set it); SourceError when the stack's config is not valid."""
    return _stack_benchmarks(stack, "benchGateRatio").gate_ratio


def stack_tests(stack: str) -> tuple[str, ...]:
    """The DeepEP tests the stack runs (its `benchmarks`): a report of the stack expects a result of each."""
    return tuple(_stack_benchmarks(stack, "benchmarks").tests)

"""Runs the real Pulumi program under Pulumi's mock engine: no cloud, no credentials, no CLI.

Shared by the offline plan (deepep-a4 plan) and the tests. The mocks answer like the providers
would for the few computed outputs the program reads (self links, emails, cluster endpoint...).
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import json
import runpy
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi
from pulumi.runtime import mocks as pulumi_mocks

from components import artifacts, config
from components.node import pins
from deepep_a4 import stackfile
from deepep_a4.paths import project_root
from deepep_a4.plan import provider_imports

ROOT = project_root()

MOCK_CA_CERT = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCm1vY2sKLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="
MOCK_PROJECT_NUMBER = "123456789012"

# A MOCK of GKE's server config (gcp.container.get_engine_versions), not a fact: a plausible answer for late
# 2026 (1.33 left support in mid 2026), so that the offline plan shows what a deploy would choose. A real
# `pulumi up` asks GKE; the plan's Kubernetes schema gate follows this mocked choice (ci/gates/k8s_schemas.py).
MOCK_ENGINE_VERSIONS: dict[str, Any] = {
    "defaultClusterVersion": "1.36.4-gke.1221000",
    "latestMasterVersion": "1.37.3-gke.1078000",
    "latestNodeVersion": "1.37.3-gke.1078000",
    "releaseChannelDefaultVersion": {
        "RAPID": "1.37.2-gke.1139000",
        "REGULAR": "1.36.4-gke.1221000",
        "STABLE": "1.35.8-gke.1180000",
    },
    "releaseChannelLatestVersion": {
        "RAPID": "1.37.3-gke.1078000",
        "REGULAR": "1.37.2-gke.1139000",
        "STABLE": "1.36.4-gke.1221000",
    },
    "validMasterVersions": [
        "1.37.3-gke.1078000",
        "1.37.2-gke.1139000",
        "1.36.4-gke.1221000",
        "1.35.8-gke.1180000",
        "1.34.12-gke.1095000",
    ],
}


# A MOCK of GCE's image families (gcp.compute.get_image), not a fact: the newest image of a family is looked
# up when a gce stack is first deployed. The names are real images of these families (the accelerator one is
# what GoogleCloudPlatform/cluster-toolkit's a4high-slurm-blueprint.yaml builds on); a family not listed
# answers with an invented name.
MOCK_IMAGES: dict[str, str] = {
    "ubuntu-2404-lts-amd64": "ubuntu-2404-noble-amd64-v20260517",
    "ubuntu-accelerator-2404-amd64-with-nvidia-580": "ubuntu-accelerator-2404-amd64-with-nvidia-580-v20260522",
}


INVENTED_IMAGE_SUFFIX = "-v20260101"  # the image of a family MOCK_IMAGES does not list
MOCK_ENDPOINT, MOCK_ADDRESS = "203.0.113.10", "10.0.0.100"
STAND_IN = "stand-in, resolved at the first `pulumi up`"


def _strings(value: Any) -> list[str]:
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return [value] if isinstance(value, str) else []


# What only the mocks invent: a value of the plan that contains one of these is a stand-in, not a fact.
STAND_IN_MARKERS = (
    *sorted(set(_strings(MOCK_ENGINE_VERSIONS)), key=len, reverse=True),
    *MOCK_IMAGES.values(),
    INVENTED_IMAGE_SUFFIX,
    MOCK_PROJECT_NUMBER,
    MOCK_ENDPOINT,
    MOCK_ADDRESS,
    "0" * 64,  # MOCK_IMAGE_DIGEST's hex: an image digest Artifact Registry answers at the first deploy
)


def is_stand_in(value: Any) -> bool:
    """Whether a value the plan shows was made up by the mocks (GKE's version, an image, an address)."""
    return any(marker in text for text in _strings(value) for marker in STAND_IN_MARKERS)


# A STAND-IN for an image digest that Artifact Registry answers at the first deploy
# (gcp.artifactregistry.get_docker_image): all zeros, so that no one mistakes it for a real one.
MOCK_IMAGE_DIGEST = "sha256:" + "0" * 64


def _mock_docker_image(args: dict[str, Any]) -> dict[str, Any]:
    location, project, repo = args.get("location"), args.get("project"), args.get("repositoryId")
    name = str(args.get("imageName") or "").split(":")[0].split("@")[0]
    link = f"{location}-docker.pkg.dev/{project}/{repo}/{name}@{MOCK_IMAGE_DIGEST}"
    return {"imageName": args.get("imageName"), "location": location, "repositoryId": repo, "selfLink": link}


def _mock_image(args: dict[str, Any]) -> dict[str, Any]:
    project, family = args.get("project"), args.get("family")
    name = args.get("name") or MOCK_IMAGES.get(family or "", f"{family}{INVENTED_IMAGE_SUFFIX}")
    link = f"https://www.googleapis.com/compute/v1/projects/{project}/global/images/{name}"
    return {"name": name, "family": family or "", "project": project, "selfLink": link, "status": "READY"}


def _computed_outputs(type_: str, name: str, inputs: dict[str, Any], project: str) -> dict[str, Any]:
    """Values a real provider computes and the program reads back (keys camelCase)."""
    res_name = inputs.get("name") or name
    out: dict[str, Any] = {"name": res_name}
    if type_.startswith("gcp:compute/"):
        kind = type_.split(":")[-1].lower()
        scope = (
            f"regions/{inputs['region']}"
            if "region" in inputs
            else (f"zones/{inputs['zone']}" if "zone" in inputs else "global")
        )
        out["selfLink"] = f"https://www.googleapis.com/compute/v1/projects/{project}/{scope}/{kind}s/{res_name}"
    if type_ == "gcp:container/cluster:Cluster":
        location = inputs.get("location")
        endpoints = dict(inputs.get("controlPlaneEndpointsConfig") or {})
        # GKE's DNS-based endpoint: gke-<32 hex>-<project number>.<location>.gke.goog
        digest = hashlib.sha256(f"{project}/{location}/{res_name}".encode()).hexdigest()[:32]
        dns = {
            **(endpoints.get("dnsEndpointConfig") or {}),
            "endpoint": f"gke-{digest}-{MOCK_PROJECT_NUMBER}.{location}.gke.goog",
        }
        out.update(
            endpoint=MOCK_ENDPOINT,
            masterAuth={"clusterCaCertificate": MOCK_CA_CERT},
            # GKE creates the control plane at min_master_version.
            masterVersion=inputs.get("minMasterVersion"),
            controlPlaneEndpointsConfig={**endpoints, "dnsEndpointConfig": dns},
            location=location,
            selfLink=f"https://container.googleapis.com/v1/projects/{project}/locations/{location}/clusters/{res_name}",
        )
    if type_ == "gcp:serviceaccount/account:Account":
        out["email"] = f"{inputs.get('accountId')}@{project}.iam.gserviceaccount.com"
        out["member"] = f"serviceAccount:{out['email']}"
    if type_ == "gcp:projects/iAMCustomRole:IAMCustomRole":  # the provider's id of a project's custom role
        out["name"] = f"projects/{inputs.get('project') or project}/roles/{inputs.get('roleId')}"
    if type_ == "pulumi:index:Stash":  # the builtin keeps its first input as `output`
        out["output"] = inputs.get("input")
    if type_ == "gcp:storage/bucket:Bucket":
        out["url"] = f"gs://{res_name}"
    if type_ == "gcp:compute/address:Address" and "address" not in inputs:
        out["address"] = MOCK_ADDRESS
    if type_.startswith("kubernetes:") and not type_.startswith("kubernetes:kubernetes:"):
        out["metadata"] = _k8s_metadata(name, inputs.get("metadata"))
    return out


def _k8s_metadata(name: str, metadata: Any) -> dict[str, Any]:
    """pulumi-kubernetes auto-names an object without metadata.name `<resource name>-<8 random chars>`;
    the plan uses a stable suffix so that references to the name (a RoleBinding's roleRef) are filled in."""
    meta = dict(metadata) if isinstance(metadata, dict) else {}
    if not meta.get("name"):
        meta["name"] = f"{name}-{hashlib.sha256(name.encode()).hexdigest()[:8]}"
    return meta


class PlanMocks(pulumi.runtime.Mocks):
    """Echoes inputs, adds the provider-computed outputs, and records what was registered."""

    # What the mock bucket answers for uniform bucket-level access; tests set False to see the refusal.
    store_ubla: bool = True

    def __init__(self, project: str):
        self.project = project
        self.created: list[pulumi.runtime.MockResourceArgs] = []

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        self.created.append(args)
        state = dict(args.inputs)
        computed = _computed_outputs(args.typ, args.name, args.inputs, self.project)
        for k, val in computed.items():
            state.setdefault(k, val)
        for merged in ("metadata", "controlPlaneEndpointsConfig"):  # inputs plus what the provider adds
            if merged in computed:
                state[merged] = computed[merged]
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict, list]:
        invoke = args.token
        if invoke == "gcp:organizations/getProject:getProject":
            return {"projectId": self.project, "number": MOCK_PROJECT_NUMBER, "name": self.project}, []
        if invoke == "gcp:container/getEngineVersions:getEngineVersions":
            return {**MOCK_ENGINE_VERSIONS, "location": args.args.get("location"), "project": self.project}, []
        if invoke == "gcp:artifactregistry/getDockerImage:getDockerImage":
            return _mock_docker_image(dict(args.args)), []
        if invoke == "gcp:compute/getImage:getImage":
            return _mock_image(dict(args.args)), []
        if invoke == "gcp:organizations/getClientConfig:getClientConfig":
            return {"project": self.project, "region": "", "zone": ""}, []
        if invoke == "gcp:storage/getBucket:getBucket":
            return self.bucket(str(args.args.get("name")))
        if invoke == "gcp:storage/getBucketIamPolicy:getBucketIamPolicy":
            bucket = str(args.args.get("bucket"))
            return {"bucket": f"b/{bucket}", "etag": "CAE=", "policyData": '{"bindings":[]}', "id": f"b/{bucket}"}, []
        return {}, []

    def bucket(self, name: str) -> tuple[dict[str, Any], list[tuple[str, str]]]:
        """A MOCK of Cloud Storage's answer for the artifact store's bucket, not a fact: a bucket of the
        stack's project. The offline plan cannot see the real one; `pulumi up` reads it
        (components/node/store_grants.py).
        Tests replace this method to answer as Cloud Storage does for a missing or a foreign bucket."""
        return {
            "name": name,
            "project": self.project,
            "projectNumber": int(MOCK_PROJECT_NUMBER),
            "url": f"gs://{name}",
            "selfLink": f"https://www.googleapis.com/storage/v1/b/{name}",
            "uniformBucketLevelAccess": self.store_ubla,
        }, []


@dataclass
class Registration:
    type: str
    name: str
    urn: str
    parent_urn: str
    provider: str
    custom: bool
    dependencies: list[str] = field(default_factory=list)
    ignore_changes: list[str] = field(default_factory=list)
    replace_on_changes: list[str] = field(default_factory=list)


class RecordingMonitor(pulumi_mocks.MockMonitor):
    """The stock mock monitor drops each resource's parent and provider: keep them for the plan."""

    def __init__(self, mocks: pulumi.runtime.Mocks):
        super().__init__(mocks)
        self.registrations: list[Registration] = []

    def RegisterResource(self, request):  # noqa: N802 (gRPC method name)
        response = super().RegisterResource(request)
        self.registrations.append(
            Registration(
                request.type,
                request.name,
                response.urn,
                request.parent,
                request.provider,
                request.custom,
                list(request.dependencies),
                list(request.ignoreChanges),
                list(request.replaceOnChanges),
            )
        )
        return response


@dataclass
class PlanResult:
    stack: str
    project: str
    resources: list[dict[str, Any]]
    outputs: dict[str, Any]
    files: dict[str, str] = field(default_factory=dict)


def stack_file(stack: str) -> Path:
    return stackfile.stack_file(stack, ROOT)


def available_stacks() -> list[str]:
    return stackfile.available_stacks(ROOT)


def read_stack_config(stack: str) -> dict[str, Any]:
    """The stack file's `config:` mapping as Pulumi hands it over: namespaced keys, string values."""
    return dict(stackfile.read(stack, ROOT))


def project_keys(stack_cfg: dict[str, Any]) -> dict[str, Any]:
    return stackfile.project_keys(stack_cfg)


def as_engine_config(stack_cfg: dict[str, Any]) -> dict[str, str]:
    """Config values as the engine passes them to a program: strings, objects and lists as JSON."""
    out = {}
    for k, v in stack_cfg.items():
        if isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif isinstance(v, (list, dict)):
            out[k] = json.dumps(v)
        else:
            out[k] = str(v)
    return out


@contextlib.contextmanager
def collector_off(freeze_after: bool = False) -> Iterator[None]:
    """No garbage collector passes inside: a plan is one burst of allocation that mostly lives to its end (the
    provider modules' classes, the resources), and the passes over it took a quarter of its CPU time for a
    little garbage, with no lower peak (issue 37). Back on afterwards, as it was. `freeze_after`: what was
    made is left out of later passes (gc.freeze), or the first one walks all of it again, a quarter of a
    second, for little; for a process that ends with the plan (the CLI)."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            if freeze_after:
                gc.freeze()
            gc.enable()


@contextlib.contextmanager
def no_source_positions() -> Iterator[None]:
    """pulumi walks the Python stack of every resource it registers for the source position it sends the
    engine (pulumi/runtime/resource.py, _get_stack_trace): a third of a program run's time here (issue 37),
    for a field the mock monitor drops and the plan never shows. Empty while the program runs."""
    from pulumi.runtime import resource as pulumi_resource
    from pulumi.runtime.proto import source_pb2

    real = getattr(pulumi_resource, "_get_stack_trace", None)
    if real is None:  # another pulumi: nothing to skip
        yield
        return
    pulumi_resource._get_stack_trace = source_pb2.StackTrace  # type: ignore[attr-defined]
    try:
        yield
    finally:
        pulumi_resource._get_stack_trace = real  # type: ignore[attr-defined]


def run_program(
    stack: str,
    stack_cfg: dict[str, Any],
    program: Callable[[], None] | None = None,
    download: pins.Download | None = None,
) -> tuple[PlanResult, PlanMocks]:
    """Runs __main__.py (or `program`) under mocks with the given namespaced config. Without `download` it
    is the offline plan (first-up digests are stand-ins, components/node/pins.py); with it, a first `pulumi up`
    whose downloads `download` digests (tests)."""
    provider_imports.install()  # the provider classes the program uses, not whole packages (issue 37)
    raw = project_keys(stack_cfg)
    gcp_project = str(raw.get("project", ""))
    mocks = PlanMocks(gcp_project)
    monitor = RecordingMonitor(mocks)
    # The engine merges Pulumi.yaml's defaults into the config the program receives (engine/config_pipeline.py).
    pulumi.runtime.set_all_config(stackfile.merged(as_engine_config(stack_cfg), ROOT))
    pulumi.runtime.set_mocks(mocks, project=config.PROJECT_NAME, stack=stack, preview=False, monitor=monitor)
    artifacts.reset()

    exports: dict[str, Any] = {}
    real_export = pulumi.export
    resolved: dict[str, Any] = {}

    def capture(name: str, value: Any) -> None:
        exports[name] = value

    def run() -> Any:
        if program is not None:
            program()
        else:
            runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")
        return _resolve_exports(exports, resolved)

    pulumi.export = capture  # type: ignore[assignment]
    try:
        with collector_off(), no_source_positions(), pins.downloading(download) if download else pins.offline():
            pulumi.runtime.test(run)()
    finally:
        pulumi.export = real_export  # type: ignore[assignment]

    by_urn = {r.urn: r for r in monitor.registrations}
    inputs_of: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for args in mocks.created:
        inputs_of.setdefault((args.typ, args.name), []).append(args.inputs)
    resources = []
    for reg in monitor.registrations:
        if reg.type == "pulumi:pulumi:Stack":
            continue
        # Components are not custom resources: the mocks never see their (empty) inputs.
        queue = inputs_of.get((reg.type, reg.name)) or [{}]
        inputs = queue.pop(0) if reg.custom and queue else {}
        entry: dict[str, Any] = {
            "type": reg.type,
            "name": reg.name,
            "parent": _parent_name(reg.parent_urn, by_urn),
            "provider": _provider_name(reg.provider),
            "inputs": _jsonable(inputs),
        }
        # What destroy order and later `pulumi up`s depend on: explicit dependencies, properties chosen once.
        depends = sorted({by_urn[u].name for u in reg.dependencies if u in by_urn})
        if depends:
            entry["dependsOn"] = depends
        if reg.ignore_changes:
            entry["ignoreChanges"] = sorted(reg.ignore_changes)
        if reg.replace_on_changes:
            entry["replaceOnChanges"] = sorted(reg.replace_on_changes)
        resources.append(entry)
    result = PlanResult(stack, config.PROJECT_NAME, resources, _jsonable(resolved), artifacts.published())
    return result, mocks


def _parent_name(urn: str, by_urn: dict[str, Registration]) -> str | None:
    parent = by_urn.get(urn)
    if parent is None or parent.type == "pulumi:pulumi:Stack":
        return None
    return parent.name


def _provider_name(ref: str) -> str | None:
    """A provider reference is '<urn>::<id>'; the plan shows the provider's resource name."""
    if not ref:
        return None
    return ref.rsplit("::", 1)[0].split("::")[-1]


def _resolve_exports(exports: dict[str, Any], into: dict[str, Any]) -> Any:
    """Waits for every export; secret ones are shown as [secret], as `pulumi stack output` does."""
    pending = []
    for name, value in exports.items():
        out = pulumi.Output.from_input(value)

        def store(pair: list[Any], name: str = name) -> None:
            val, secret = pair
            into[name] = "[secret]" if secret else val

        pending.append(pulumi.Output.all(out, out.is_secret()).apply(store))
    return pulumi.Output.all(*pending) if pending else None


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))

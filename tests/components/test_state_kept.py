"""State that stays right (issue 33): GCE VMs end at the kept deadline itself, every Stash keeps its first
value without a diff, a later `up` needs no download, the Kubernetes provider lets a stack whose cluster is
gone be refreshed and destroyed, and a real `up` of a supported stack without a store manifest is refused
before any resource.

Each check is written from the receiving system's documented behaviour, cited where it is used."""

from __future__ import annotations

import ast
import pickle
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pulumi
import pytest

from components.node import manifest_gate as store_gate
from components.node import pins
from deepep_a4.plan import engine as plan_engine
from tests.components.node.test_pins import NVSHMEM, NVSHMEM_URL, Downloads, cfg_of, digest_of
from tests.conftest import ROOT, of_type, plan, stack_config

STASH = "pulumi:index:Stash"
INSTANCE = "gcp:compute/instance:Instance"
K8S_PROVIDER = "pulumi:providers:kubernetes"
RFC3339_UTC = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ")


@pytest.fixture(autouse=True)
def digest_cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "cache" / "digests.json"
    monkeypatch.setenv(pins.CACHE_ENV, str(path))
    return path


# -- GCE: terminationTime ------------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["gce-b200", "gce-b200-ubuntu"])
def test_every_gce_vm_ends_at_the_kept_deadline_alone(stack: str) -> None:
    """https://cloud.google.com/compute/docs/instances/limit-vm-runtime: a VM's time limit is a duration
    (maxRunDuration) or a time (terminationTime, RFC 3339); either needs instanceTerminationAction (STOP or
    DELETE). maxRunDuration restarts with a recreated VM; terminationTime does not move. gcloud takes one of
    the two, never both (tests/components/gce/test_gcloud_scheduling.py)."""
    result = plan(stack)
    deadline = [r for r in of_type(result, STASH) if r["name"] == "stack-deadline"]
    assert len(deadline) == 1
    at = deadline[0]["inputs"]["input"]["at"]
    vms = of_type(result, INSTANCE)
    assert vms
    for vm in vms:
        sched = vm["inputs"]["scheduling"]
        assert sched["terminationTime"] == at and RFC3339_UTC.fullmatch(at), sched
        assert "maxRunDuration" not in sched
        assert sched["instanceTerminationAction"] in ("STOP", "DELETE")


def test_the_installed_provider_takes_termination_time() -> None:
    import inspect

    import pulumi_gcp as gcp

    assert "termination_time" in inspect.signature(gcp.compute.InstanceSchedulingArgs.__init__).parameters


# -- Stashes keep their first value without a diff -----------------------------------------------------


def _parse(path: Path) -> ast.Module:
    try:
        return ast.parse(path.read_text())
    except SystemError:  # CPython 3.11.7 under xdist: "AST constructor recursion depth mismatch": parse afresh
        code = "import ast,sys,pickle; sys.stdout.buffer.write(pickle.dumps(ast.parse(open(sys.argv[1]).read())))"
        out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, check=True).stdout
        return pickle.loads(out)


def _stash_calls() -> list[tuple[str, ast.Call]]:
    found = []
    for path in [*(ROOT / "components").rglob("*.py"), ROOT / "__main__.py"]:
        for node in ast.walk(_parse(path)):
            if isinstance(node, ast.Call) and ast.unparse(node.func) in ("pulumi.Stash", "Stash"):
                found.append((f"{path.relative_to(ROOT)}:{node.lineno}", node))
    return found


def test_every_stash_in_the_source_ignores_changes_to_its_input() -> None:
    """pulumi's Stash keeps `output` (the value saved at creation); `input` is "the most recent value passed"
    (pulumi sdk/python/lib/pulumi/stash.py). A lookup whose answer moves, or is unknown in a preview, shows
    `~ update` on every preview unless the input's changes are ignored."""
    calls = _stash_calls()
    assert len(calls) >= 4, calls  # deadline, pins, the gIB image, the GCE boot image
    for where, call in calls:
        opts = next((k.value for k in call.keywords if k.arg == "opts"), None)
        assert opts is not None, where
        assert "ignore_changes=['input']" in ast.unparse(opts), f"{where}: {ast.unparse(opts)}"


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [("gke-b200", {}), ("gce-b200", {}), ("gce-b200-ubuntu", {}), ("gke-b200-ubuntu", {"ncclGib": "true"})],
)
def test_every_stash_in_the_plan_ignores_its_input(stack: str, overrides: dict[str, Any]) -> None:
    stashes = of_type(plan(stack, **overrides), STASH)
    assert stashes
    for stash in stashes:
        assert stash.get("ignoreChanges") == ["input"], stash["name"]


# -- digests kept from the first up --------------------------------------------------------------------


class _Kept(plan_engine.PlanMocks):
    """The engine's answer for a Stash that exists: its output is what it held at creation."""

    def __init__(self, project: str, kept: dict[str, str]):
        super().__init__(project)
        self.kept, self.inputs = kept, {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        name, state = super().new_resource(args)
        if args.typ == STASH and args.name.startswith("pin-"):
            self.inputs[args.name] = args.inputs["input"]
            for key, value in self.kept.items():
                if key in args.name:
                    state["output"] = value
        return name, state


def _later_up(kept: dict[str, str], download: pins.Download) -> tuple[dict[str, str], dict[str, Any]]:
    captured: dict[str, str] = {}
    mocks = _Kept("p", kept)

    @pulumi.runtime.test
    def later_up() -> pulumi.Output[Any]:
        found = pins.resolved(cfg_of())
        assert found is not None
        return found.apply(lambda d: captured.update(d))

    pulumi.runtime.set_mocks(mocks, preview=False)
    with pins.downloading(download):
        later_up()
    return captured, mocks.inputs


def test_a_later_up_with_the_url_down_keeps_the_first_digest() -> None:
    first = digest_of(NVSHMEM_URL)
    kept = {"nvshmem": first, "google-cloud": "a" * 64, "google-artifact": "b" * 64}
    down = Downloads(fail="https://")  # every URL fails, as with no network
    captured, inputs = _later_up(kept, down)
    assert captured[NVSHMEM] == first
    assert captured["google-cloud-packages"] == "a" * 64
    # What the failed download gave is an input nobody reads: the Stash's output is the first digest.
    assert all(str(v).startswith(pins.UNRESOLVED) for v in inputs.values())


def test_a_first_up_with_the_url_down_stops_with_the_download_error_and_the_way_out() -> None:
    with pytest.raises(Exception, match=re.escape(NVSHMEM_URL)) as err:
        _later_up({}, Downloads(fail="nvshmem"))
    text = str(err.value)
    assert "404" in text and "pulumi state delete 'urn:pulumi:" in text and "versionOverrides" in text


# -- the Kubernetes provider ---------------------------------------------------------------------------


@pytest.mark.parametrize("stack", ["gke-b200", "gke-b200-ubuntu"])
def test_the_kubernetes_provider_deletes_unreachable_objects_from_the_state(stack: str) -> None:
    """pulumi-kubernetes Provider `deleteUnreachable`: "the provider will delete resources associated with an
    unreachable Kubernetes cluster from Pulumi state" (pulumi_kubernetes/provider.py). Without it, a stack
    whose cluster is gone (the deadline deleted it, or a user did) fails `pulumi refresh` and `destroy`."""
    providers = of_type(plan(stack), K8S_PROVIDER)
    assert providers
    for provider in providers:
        assert provider["inputs"].get("deleteUnreachable") in (True, "true"), provider["inputs"]


# -- no paid machine without a store -------------------------------------------------------------------


def _created(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    created: list[str] = []
    real_new = plan_engine.PlanMocks.new_resource

    def record(self: plan_engine.PlanMocks, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        created.append(args.typ)
        return real_new(self, args)

    monkeypatch.setattr(plan_engine.PlanMocks, "new_resource", record)
    return created


@pytest.mark.parametrize("stack", ["gke-b200", "gce-b200"])
def test_a_real_up_of_a_supported_stack_without_a_manifest_is_refused_before_any_resource(
    stack: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    created = _created(monkeypatch)
    with pytest.raises(Exception) as err:
        plan_engine.run_program(stack, stack_config(stack), download=Downloads())
    text = str(err.value)
    assert f"`deepep-a4 store build --stack {stack}`" in text
    assert f"`pulumi config set deepep-a4:artifactStoreManifest SHA256 -s {stack}`" in text
    assert "set deepep-a4:artifactStore gs://BUCKET/PREFIX" in text  # the example stacks name no bucket
    assert created == []


def test_a_preview_and_the_offline_plan_only_warn(monkeypatch: pytest.MonkeyPatch) -> None:
    """pulumi.runtime.is_dry_run(): "Returns whether or not we are currently doing a preview" (pulumi
    sdk/python/lib/pulumi/runtime/settings.py): true for `pulumi preview` and an interactive up's preview."""
    assert plan("gke-b200").resources  # the offline plan
    monkeypatch.setattr(pulumi.runtime, "is_dry_run", lambda: True)
    result, _ = plan_engine.run_program("gke-b200", stack_config("gke-b200"), download=Downloads())
    assert result.resources


def test_a_supported_stack_with_a_pinned_manifest_goes_ahead() -> None:
    pinned = {"artifactStore": "gs://my-store/deepep-a4", "artifactStoreManifest": "ab" * 32}
    cfg = cfg_of("gke-b200", **pinned)
    assert store_gate.unpinned_store(cfg) is None
    assert store_gate.unpinned_store(cfg_of("gke-b200-ubuntu")) is None  # host-install builds on the node
    with_store = store_gate.unpinned_store(cfg_of("gke-b200", artifactStore="gs://my-store/deepep-a4"))
    assert with_store and "artifactStore gs://" not in with_store  # the bucket is there: build and pin

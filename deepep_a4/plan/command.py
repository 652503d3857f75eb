#!/usr/bin/env python3
"""Offline plan of a stack: what `pulumi up` would create, with no cloud, credentials or Pulumi CLI.

    .venv/bin/deepep-a4 plan --stack gke-b200 [--out DIR]

Validates the stack file, runs the real program under Pulumi's mock engine, prints a readable tree
and writes DIR/plan.json plus the rendered files (installer, Kubernetes manifests) under DIR/files/.
Exit codes: 0 plan written, 2 bad stack or config (nothing written), 1 the program failed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import click
import pulumi

from components import config
from components.gke import gib as gke_gib
from components.node import installer, pins, staging
from components.node import store_grants as store
from deepep_a4 import cost, options
from deepep_a4.capacity import models as capacity_models
from deepep_a4.expected_times import expected_bringup
from deepep_a4.plan import engine as plan_engine
from deepep_a4.rehearse import estimate as rehearsal_estimate
from deepep_a4.stackfile import STACK_HELP, UsageError, load_stack
from deepep_a4.store.estimate import store_warnings

# The inputs worth a glance in the tree, per resource type (the full inputs are in plan.json).
SUMMARY_KEYS: dict[str, tuple[str, ...]] = {
    "gcp:compute/network:Network": ("mtu", "networkProfile"),
    "gcp:compute/subnetwork:Subnetwork": ("ipCidrRange", "region"),
    "gcp:compute/firewall:Firewall": ("sourceRanges",),
    "gcp:compute/routerNat:RouterNat": ("router",),
    "gcp:compute/instance:Instance": ("machineType", "zone"),
    "gcp:container/cluster:Cluster": ("location", "datapathProvider", "enableMultiNetworking"),
    "gcp:container/nodePool:NodePool": ("nodeCount", "nodeLocations"),
    "pulumi:providers:gcp": ("project", "region", "zone"),
}


def summarize(resource: dict[str, Any]) -> str:
    inputs = resource["inputs"]
    parts = []
    for key in SUMMARY_KEYS.get(resource["type"], ()):
        if inputs.get(key) not in (None, "", []):
            parts.append(f"{key}={_short(inputs[key])}")
    return "  ".join(parts)


def _short(value: Any, items: int = 3) -> str:
    """A value for the printout: strings whole (a cut name misleads), long lists cut between items."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, list) and len(value) > items:
        shown = ", ".join(json.dumps(v) for v in value[:items])
        return f"[{shown}, ... (+{len(value) - items} more)]"
    return value if isinstance(value, str) else json.dumps(value)


def render_tree(resources: list[dict[str, Any]]) -> list[str]:
    children: dict[str | None, list[dict[str, Any]]] = {}
    for r in sorted(resources, key=_tree_order):
        children.setdefault(r["parent"], []).append(r)
    lines: list[str] = []

    def walk(parent: str | None, depth: int) -> None:
        for r in children.get(parent, []):
            summary = summarize(r)
            lines.append(f"{'  ' * depth}+ {r['type']}  {r['name']}" + (f"  [{summary}]" if summary else ""))
            if r["name"] != parent:
                walk(r["name"], depth + 1)

    walk(None, 0)
    return lines


def _tree_order(resource: dict[str, Any]) -> tuple:
    """Components first, then by type and by name with numbers in numeric order (rdma-2 < rdma-10)."""
    name_key = tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", resource["name"]))
    return (not resource["type"].startswith("deepep-a4:"), resource["type"], name_key)


def _json_numbers(value: Any) -> Any:
    """Resource inputs travel as protobuf Structs, where every number is a double: 30 arrives as 30.0.
    The provider sends JSON numbers, so whole numbers go back to ints (the scanners compare them as such)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _json_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_json_numbers(v) for v in value]
    return value


# The order `kubectl apply -f files/k8s/` needs: what others live in or refer to comes first.
APPLY_ORDER = (
    "Namespace",
    "ResourceQuota",
    "ServiceAccount",
    "ClusterRole",
    "ClusterRoleBinding",
    "Role",
    "RoleBinding",
    # Before the DaemonSet whose requests it admits.
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "ConfigMap",
    "Secret",
    "NetworkPolicy",
    "GKENetworkParamSet",
    "Network",
    "Service",
    "DaemonSet",
    "Job",
    # Queued provisioning (components/gke/queued.py): the request names its PodTemplate.
    "PodTemplate",
    "ProvisioningRequest",
)


def _apply_rank(resource: dict[str, Any]) -> tuple[int, str]:
    kind = str(resource["inputs"].get("kind", ""))
    rank = APPLY_ORDER.index(kind) if kind in APPLY_ORDER else len(APPLY_ORDER)
    return rank, resource["name"]


def kubernetes_manifests(resources: list[dict[str, Any]]) -> dict[str, str]:
    """Each Kubernetes object as the manifest the provider would apply, numbered in apply order."""
    import yaml

    # libyaml's emitter where PyYAML was built with it, ten times faster than yaml.safe_dump: the same documents,
    # long quoted strings folded differently (tests/deepep_a4/plan/test_provider_imports.py compares them).
    dumper = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
    files: dict[str, str] = {}
    k8s = [r for r in resources if r["type"].startswith("kubernetes:") and "apiVersion" in r["inputs"]]
    k8s.sort(key=_apply_rank)
    for i, r in enumerate(k8s, start=1):
        body = {
            k: _json_numbers(v)
            for k, v in r["inputs"].items()
            if k
            in (
                "apiVersion",
                "kind",
                "metadata",
                "spec",
                "template",  # a PodTemplate's
                "data",
                "rules",
                "roleRef",
                "subjects",
                "stringData",
                "type",
            )
        }
        kind = str(body.get("kind", "object")).lower()
        files[f"k8s/{i:02d}-{kind}-{r['name']}.yaml"] = yaml.dump(body, Dumper=dumper, sort_keys=False)
    return files


def write_plan(result: plan_engine.PlanResult, out_dir: Path, extra: dict[str, Any] | None = None) -> int:
    """Writes into a temporary folder first, so a failed plan never leaves half a plan behind; returns
    how many files it wrote under files/.

    `extra` adds top-level keys to plan.json (the Google Cloud project, the install list, cost, bill cap).
    """
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".plan-", dir=out_dir.parent))
    try:
        doc = {
            "stack": result.stack,
            "project": result.project,
            "resources": result.resources,
            "outputs": result.outputs,
            **(extra or {}),
        }
        (tmp / "plan.json").write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
        files = {**result.files, **kubernetes_manifests(result.resources)}
        for rel, text in files.items():
            path = tmp / "files" / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            if rel.endswith(".sh"):
                path.chmod(0o755)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        tmp.rename(out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return len(files)


PLAN_ENTRIES = frozenset({"plan.json", "files"})


def out_dir_refusal(out_dir: Path) -> str | None:
    """Why the plan must not be written to `out_dir` (it replaces the folder), or None.

    Only a folder that does not exist, is empty, or holds nothing but an earlier plan may be replaced.
    """
    if out_dir.exists() and not out_dir.is_dir():
        return "is not a folder"
    foreign = sorted(p.name for p in out_dir.iterdir() if p.name not in PLAN_ENTRIES) if out_dir.is_dir() else []
    if foreign:
        return (
            f"holds {', '.join(foreign[:3])}{' ...' if len(foreign) > 3 else ''}, which is not a plan, and a plan "
            "replaces its whole folder: pick a new or empty one"
        )
    parent = out_dir.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"{parent} is not a folder"
    return None


def _writable_refusal(out_dir: Path) -> str | None:
    """Checked before the plan runs, so a bad --out costs no time: the nearest existing folder must be writable."""
    folder = out_dir if out_dir.is_dir() else out_dir.parent
    while not folder.exists():
        folder = folder.parent
    if not os.access(folder, os.W_OK | os.X_OK):
        return f"{folder} is not writable"
    # Permission bits do not tell everything (root, read-only mounts, /proc): try what write_plan will do.
    try:
        Path(tempfile.mkdtemp(prefix=".plan-probe-", dir=folder)).rmdir()
    except OSError as err:
        return f"cannot create a folder in {folder} ({err.strerror or err})"
    return None


def run(stack_arg: str, out: Path | None, quiet: bool) -> int:
    started = time.monotonic()
    try:
        stack, stack_cfg, cfg = load_stack(stack_arg, plan_engine.ROOT)
        out_dir = out if out is not None else plan_engine.ROOT / "build" / "plan" / stack
        refusal = out_dir_refusal(out_dir) or _writable_refusal(out_dir)
        if refusal:
            raise UsageError([f"--out {out_dir}: {refusal}; nothing was written"])
    except UsageError as err:
        print("error: " + "\n".join(err.lines), file=sys.stderr)
        return 2
    try:
        result, _ = plan_engine.run_program(stack, stack_cfg)
    except pulumi.RunError as err:  # a component refused the stack (a limit only known while building)
        print(f"error: stack '{stack}': {err}; nothing was written", file=sys.stderr)
        return 2
    estimate = cost.estimate(cfg)
    cap = cost.bill_cap(cfg)
    installs = install_list(cfg)
    placeholder = cfg.project == config.PLACEHOLDER_PROJECT
    stand_ins = stand_in_outputs(result.outputs)
    bringup = expected_bringup(cfg.platform, cfg.node_profile)
    extra = {
        "pulumiProject": result.project,
        "gcpProject": cfg.project,
        "gcpProjectIsPlaceholder": placeholder,
        "installs": dict(installs),
        # Versions beyond the project's tables (versionOverrides): installed as named, never run here.
        "untested": [asdict(o) for o in cfg.versions.overrides],
        "costEstimate": estimate.as_dict(),
        "billCap": cap.as_dict(),
        "standIns": {key: result.outputs[key] for key in stand_ins},
        # sha256 of downloads with no pin of ours, resolved at the first `pulumi up` (components/node/pins.py).
        "firstUpPins": {n: pins.download_urls(cfg)[n] for n in installer.first_up_names(cfg)},
        "bringUpSeconds": {"profile": bringup.profile, "measuredOrCited": bringup.known, "total": bringup.total},
        "capacityModels": capacity_models.as_dict(cfg),
        "rehearsal": rehearsal_estimate.summary(cfg),  # `deepep-a4 rehearse` first: its cost and time (estimates)
    }
    try:
        written = write_plan(result, out_dir, extra)
    except OSError as err:  # the disk filled or the folder changed under the plan: no half plan is left
        print(f"error: --out {out_dir}: cannot write the plan ({err}); nothing was written", file=sys.stderr)
        return 2

    if not quiet:
        print(
            f"Plan of stack '{stack}' ({cfg.platform}, {cfg.node_count} x {cfg.machine_type}, "
            f"{cfg.provisioning}, zone {cfg.zone}):"
        )
        for line in render_tree(result.resources):
            print(line)
        print("Outputs:")
        for key, value in result.outputs.items():
            print(f"  {key}: {_short(value)}" + (f"  ({stand_ins[key]})" if key in stand_ins else ""))
        print("Staged on every node (nodeProfile supported):" if cfg.staged else "Installed on every node:")
        for what, version in installs:
            print(f"  {what:<10} {version}")
        for line in cost.render(estimate):
            print(line)
        print(bringup.line)
        print(cost.per_run_line(estimate, cfg, bringup.total))
        for line in capacity_models.plan_lines(cfg):  # each provisioning model's price, quota, wait (issue 45)
            print(line)
        print(deadline_line(cap))
        print(rehearsal_estimate.plan_line(cfg))
    # The bill cap is printed even with --quiet: it says when the capacity dies.
    print("\n".join(cap.lines))
    if cfg.untested:
        print(
            f"UNTESTED: {', '.join(cfg.untested)} from versionOverrides: the project has not run these versions; "
            "the installer downloads the named URL and checks its sha256"
        )
    if placeholder:
        print(
            f"WARNING: project {cfg.project} is the stack files' placeholder: set yours before `pulumi up` "
            f"(pulumi config set {config.PROJECT_NAME}:project YOUR-PROJECT -s {stack})"
        )
    if warning := store.store_name_warning(cfg):
        print(warning)
    for line in store_warnings(cfg, stack):
        print(line)
    custom = [r for r in result.resources if r["inputs"] or not r["type"].startswith("deepep-a4:")]
    print(f"{len(custom)} resources, {written} rendered files -> {out_dir} ({time.monotonic() - started:.1f}s)")
    return 0


def stand_in_outputs(outputs: dict[str, Any]) -> dict[str, str]:
    """Each output the mocks made up (or the clock gave), with the label the plan prints beside it."""
    found = {key: plan_engine.STAND_IN for key, value in outputs.items() if plan_engine.is_stand_in(value)}
    if outputs.get("deadline"):
        found["deadline"] = f"{plan_engine.STAND_IN}: the ttl counts from then"
    return found


def deadline_line(cap: cost.BillCap) -> str:
    if cap.deadline is None:
        return "Deadline: none (ttl: off): nothing deletes the A4 capacity but `pulumi destroy --refresh`"
    when = cap.deadline.strftime("%Y-%m-%d %H:%M UTC")
    return f"Deadline: {when} if the first `pulumi up` ran now ({plan_engine.STAND_IN}; then kept by every `up`)"


def staged_list(cfg: config.StackConfig) -> list[tuple[str, str]]:
    """nodeProfile=supported: what the node image brings and what is staged from the store."""
    v = cfg.versions
    if cfg.platform == "gke":
        image, driver = "COS_CONTAINERD (GKE)", f"GKE's {cfg.gke.gpu_driver} (GKE's driver installer)"
        if cfg.gke.cos_driver_version:  # gkeGpuDriver cos-installer (components/gke/cos_driver.py)
            driver = f"NVIDIA {cfg.gke.cos_driver_version} (Google's COS driver installer DaemonSet; GKE's disabled)"
        stager = cfg.gke.installer_image + (
            "" if "@sha256:" in cfg.gke.installer_image else " (unpinned tag: pin a digest)"
        )
    else:
        ref = cfg.gce.image_ref
        image, driver = ref.family or ref.name, f"the image's NVIDIA {ref.driver_branch} (recorded by verify-staged)"
        stager = "the VM's startup script"
    gib = (
        f"{gke_gib.GIB_IMAGE} (DaemonSet; by the digest looked up at the first deploy)"
        if cfg.platform == "gke"
        else f"nccl-gib {installer.NCCL_GIB_VERSION} (apt, held)"
    )
    return [
        ("node image", image),
        ("driver", driver),
        ("RDMA", "the kernel's mlx5 driver; rdma-core staged (no DOCA-OFED, no PeerMappingOverride, no reboot)"),
        ("staged by", stager),
        ("staged", f"Python {staging.PYTHON_ABI}, PyTorch {v.torch}, rdma-core {staging.RDMA_CORE_VERSION}"),
        ("NVSHMEM", f"{v.nvshmem} ({'built from source' if v.nvshmem_source == 'source' else 'pip wheel'}, IBGDA)"),
        ("DeepEP", v.deepep_ref + (" + PR #466" if v.deepep_pr466 else " (no PR #466)")),
        ("gIB NCCL", gib if cfg.installer.nccl_gib else "no (ncclGib=false: NCCL's own IB transport)"),
    ]


def install_list(cfg: config.StackConfig) -> list[tuple[str, str]]:
    """What the installer puts on every node, as the plan shows it before anything is paid for."""
    if cfg.staged:
        return staged_list(cfg)
    v = cfg.versions
    image_branch = cfg.gce.image_ref.driver_branch if cfg.platform == "gce" else ""
    if image_branch:
        driver = f"the image's NVIDIA {image_branch} (checked: branch, open module; held)"
    elif cfg.platform == "gce" or cfg.gke.gpu_driver == "installer":
        driver = f"NVIDIA open {v.nvidia_driver}"
    else:
        driver = f"GKE's {cfg.gke.gpu_driver}"
    if not cfg.installer.nccl_gib:
        gib = "no (ncclGib=false: NCCL's own IB transport)"
    elif cfg.platform == "gce":
        gib = f"nccl-gib {installer.NCCL_GIB_VERSION} (apt, held)"
    else:
        gib = f"{gke_gib.GIB_IMAGE} (DaemonSet; by the digest looked up at the first deploy)"
    return [
        ("driver", driver),
        ("DOCA-OFED", v.doca_ofed if cfg.installer.use_doca_ofed else "no (inbox rdma-core)"),
        ("CUDA", v.cuda),
        ("GDRCopy", v.gdrcopy + (" (+ gdrdrv module)" if cfg.installer.gdrcopy_kernel_module else " (library)")),
        ("NVSHMEM", f"{v.nvshmem} ({'built from source' if v.nvshmem_source == 'source' else 'pip wheel'}, IBGDA)"),
        ("PyTorch", v.torch),
        ("DeepEP", v.deepep_ref + (" + PR #466" if v.deepep_pr466 else " (no PR #466)")),
        ("gIB NCCL", gib),
    ]


@click.command("plan", help=(__doc__ or "").split("\n\n")[0])
@click.option("--stack", required=True, help=STACK_HELP)
@click.option("--out", type=click.Path(path_type=Path), help="output folder (default build/plan/<stack>)")
@click.option("--quiet", is_flag=True, help="print only the bill cap, the warnings and the summary line")
def command(stack: str, out: Path | None, quiet: bool) -> None:
    with plan_engine.collector_off(freeze_after=True):  # the whole plan, not only the program
        code = run(stack, out, quiet)
    raise SystemExit(code)


def main(argv: list[str] | None = None) -> int:
    """`python -m deepep_a4.plan.command ...`: the same command, its exit status returned."""
    return options.exit_status(command, argv, "deepep-a4 plan")


if __name__ == "__main__":
    sys.exit(main())

"""The declared bill of powers: one reviewed lock per stack shape, made by the program's own plan.

`policy/powers/<shape>.lock` (JSON, sorted) lists every resource the shape makes (type and logical name), the
property paths of each type, each resource's power values (bill.py) and every IAM grant with its permissions
resolved (predefined roles from policy/roles.json, a pinned copy of Google's role definitions; custom roles
from the stack's own definition). The pack refuses whatever a stack adds to its shape's lock.

A deliberate change regenerates the locks in the same commit:

    .venv/bin/python -m deepep_a4.policy.lock --write

and `--check` (the test suite runs it: tests/deepep_a4/policy/test_lock.py) fails when one is stale. A shape is
platform x node profile x provisioning model, plus the rehearsal's and the store project's: adding a shape is
one line in SHAPES. Each shape's lock is the union of its plans under VARIANTS, the settings that change what
a stack grants or opens (a store, hostNetwork pods, a public endpoint with authorized networks), so a user's
allowed choice is never a new power.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from deepep_a4.policy import bill, grants
from deepep_a4.policy.bill import Bill, Context

ROOT = Path(__file__).resolve().parents[2]
LOCK_DIR = ROOT / "policy" / "powers"
REGENERATE = ".venv/bin/python -m deepep_a4.policy.lock --write"
STORE_SHAPE = "store"

# The example stack of each platform and node profile; each provisioning model's settings.
BASE_STACKS = {
    ("gke", "supported"): "gke-b200",
    ("gke", "host-install"): "gke-b200-ubuntu",
    ("gce", "supported"): "gce-b200",
    ("gce", "host-install"): "gce-b200-ubuntu",
}
MODELS: dict[str, dict[str, Any]] = {
    "spot": {"provisioning": "spot"},
    "flex-start": {"provisioning": "flex-start"},
    "reservation": {"provisioning": "reservation", "reservationName": "deepep-a4-reservation"},
    "on-demand": {"provisioning": "on-demand"},
}
# shape -> (example stack, config overrides). One line adds a shape.
SHAPES: dict[str, tuple[str, dict[str, Any]]] = {
    f"{platform}-{profile}-{model}": (stack, overrides)
    for (platform, profile), stack in BASE_STACKS.items()
    for model, overrides in MODELS.items()
}
# The rehearsal of each shape (`deepep-a4 rehearse`, components/rehearsal.py): its stack's config plus
# `rehearsal: true` (deepep_a4/rehearse/stack.py), which shape_of() names `<shape>-rehearsal`.
SHAPES.update({f"{shape}-rehearsal": (stack, {**o, "rehearsal": True}) for shape, (stack, o) in list(SHAPES.items())})
SHAPES[STORE_SHAPE] = ("demo", {"project": "deepep-a4-demo"})
# Settings whose allowed values change what a stack grants or opens: each shape's lock holds them all.
STORE_URL = "gs://deepep-a4-demo-artifacts/deepep-a4"
# Several settings share a plan where they go together (fewer plans: the test makes every lock afresh).
VARIANTS: dict[str, list[dict[str, Any]]] = {
    "gke": [
        {},
        {
            "artifactStore": STORE_URL,
            "podNetworking": "hostNetwork",
            "gkePublicEndpoint": True,
            "gkeAuthorizedNetworks": ["8.8.8.0/28"],
            "gkeDnsEndpoint": False,
        },
        {"artifactStore": STORE_URL, "podNetworking": "multiNetwork"},
        # Publishing is refused where nothing publishes (the supported profile, components/config/): its own
        # plan, so the refusal drops it alone and not the settings above with it.
        {"artifactStore": STORE_URL, "artifactStorePublish": True},
        # Google's COS driver installer DaemonSet (components/gke/cos_driver.py), supported profile only.
        {"gkeGpuDriver": "cos-installer", "gkeCosDriverVersion": "570.172.08"},
    ],
    "gce": [
        {},
        {"artifactStore": STORE_URL, "artifactStorePublish": True, "sshViaIap": False},
        {"terminationAction": "STOP"},
    ],
    STORE_SHAPE: [{}, {"prefix": "team/deepep"}],
}


def shape_variants(shape: str) -> list[dict[str, Any]]:
    return VARIANTS[STORE_SHAPE if shape == STORE_SHAPE else shape.split("-", 1)[0]]


# -- making a lock -------------------------------------------------------------------------------------------


def plan_bills(shape: str) -> tuple[list[Bill], list[dict[str, Any]]]:
    """The bills and IAM grants of every resource of every variant's plan of the shape."""
    import pulumi

    from deepep_a4.plan import engine as plan_engine  # the workstation's plan: never imported by the pack at run time

    stack, overrides = SHAPES[shape]
    bills: list[Bill] = []
    found: list[dict[str, Any]] = []
    for variant in shape_variants(shape):
        if shape == STORE_SHAPE:
            import runpy

            cfg = {f"deepep-a4-store:{k}": v for k, v in {**overrides, **variant}.items()}

            def store_program() -> None:
                runpy.run_path(str(ROOT / "store/__main__.py"), run_name="__main__")

            result, _ = plan_engine.run_program(stack, cfg, program=store_program)
            ctx = Context(stack, overrides["project"])
        else:
            cfg = plan_engine.read_stack_config(stack)
            cfg.update({f"deepep-a4:{k}": v for k, v in {**overrides, **variant}.items()})
            try:
                result, _ = plan_engine.run_program(stack, cfg)
            except pulumi.RunError as err:
                # A setting the shape's config refuses (flex-start ends with DELETE, not STOP) cannot be
                # deployed, so it declares nothing; the shape's own plan must always run.
                if not variant or "invalid stack config" not in str(err):
                    raise
                continue
            ctx = Context(stack, str(cfg.get("deepep-a4:project") or ""))
        resources = [(r["type"], r["name"], r["inputs"]) for r in result.resources]
        bills += [bill.bill_of(t, n, p, ctx) for t, n, p in resources]
        found += grants.resolved(resources, ctx)
    return bills, found


def make_lock(shape: str) -> dict[str, Any]:
    bills, found = plan_bills(shape)
    types: dict[str, set[str]] = {}
    resources: dict[str, set[str]] = {}
    for b in bills:
        types.setdefault(b.key.split(" ", 1)[0], set()).update(b.paths)
        resources.setdefault(b.key, set()).update(b.powers)
    stack, overrides = SHAPES[shape]
    unique = {json.dumps(g, sort_keys=True) for g in found}
    return {
        "shape": shape,
        "madeFrom": {"stack": stack, "overrides": overrides, "variants": shape_variants(shape)},
        "regenerate": REGENERATE,
        "roleDefinitions": grants.ROLES_SOURCE,
        "grants": [json.loads(g) for g in sorted(unique)],
        "resources": {k: sorted(v) for k, v in sorted(resources.items())},
        "types": {k: sorted(v) for k, v in sorted(types.items())},
    }


def lock_text(lock: Mapping[str, Any]) -> str:
    return json.dumps(lock, indent=1, sort_keys=True) + "\n"


def lock_path(shape: str) -> Path:
    return LOCK_DIR / f"{shape}.lock"


# -- reading the locks (the pack) -------------------------------------------------------------------------


@functools.cache
def locks() -> dict[str, dict[str, Any]]:
    """Every committed lock by shape (read once per process: a policy pack lives for one update)."""
    return {p.name.removesuffix(".lock"): json.loads(p.read_text()) for p in sorted(LOCK_DIR.glob("*.lock"))}


def env_context() -> tuple[Context, str | None]:
    """The stack, project and shape the Pulumi CLI hands a policy pack: PULUMI_STACK and the stack's config as
    PULUMI_CONFIG (pulumi/pulumi pkg/resource/plugin/analyzer_plugin.go constructEnv)."""
    try:
        config = json.loads(os.environ.get("PULUMI_CONFIG") or "{}")
    except ValueError:
        config = {}
    stack = os.environ.get("PULUMI_STACK") or None
    if os.environ.get("PULUMI_PROJECT") == "deepep-a4-store" or any(k.startswith("deepep-a4-store:") for k in config):
        return Context(stack, config.get("deepep-a4-store:project")), STORE_SHAPE
    if not config:
        return Context(stack, None), None
    return Context(stack, config.get("deepep-a4:project"), config.get("deepep-a4:namePrefix")), shape_of(config)


def shape_of(config: Mapping[str, Any]) -> str:
    """The shape a stack's config (namespaced keys, values as the CLI stores them: strings) selects."""
    from components.config import keys

    def get(key: str) -> str:
        value = config.get(f"deepep-a4:{key}")
        return str(keys.KEYS_BY_NAME[key].default if value is None else value)

    name = f"{get('platform')}-{get('nodeProfile')}-{get('provisioning')}"
    rehearsal = str(config.get("deepep-a4:rehearsal", "false")).lower() in ("true", "1", "yes")
    return name + ("-rehearsal" if rehearsal else "")


def _allowed(power: str, declared: Iterable[str], exact: bool) -> bool:
    if exact:
        return power in declared
    return any(bill.pattern(d).fullmatch(power) for d in declared)


def check(type_: str, name: str | None, props: Mapping[str, Any], ctx: Context, shape: str | None) -> list[str]:
    """What the resource adds to its shape's lock (to every lock's union when the shape is not known; by type
    alone when its name is not known): one line each."""
    mine = bill.bill_of(type_, name or "", props, ctx)
    return check_bill(mine, type_, name, ctx, shape)


@dataclass(frozen=True)
class _Index:
    """A lock (or every lock's union) as sets: paths by type, powers by resource and by type."""

    paths: dict[str, frozenset[str]]
    powers: dict[str, frozenset[str]]
    by_type: dict[str, frozenset[str]]


@functools.cache
def _index(shape: str | None) -> _Index:
    pool = locks()
    chosen = [pool[shape]] if shape else list(pool.values())
    paths: dict[str, set[str]] = {}
    powers: dict[str, set[str]] = {}
    by_type: dict[str, set[str]] = {}
    for lk in chosen:
        for type_, found in lk["types"].items():
            paths.setdefault(type_, set()).update(found)
        for key, found in lk["resources"].items():
            powers.setdefault(key, set()).update(found)
            by_type.setdefault(key.split(" ", 1)[0], set()).update(found)
    freeze = lambda d: {k: frozenset(v) for k, v in d.items()}  # noqa: E731
    return _Index(freeze(paths), freeze(powers), freeze(by_type))


def check_key(key: str, type_: str, shape: str | None) -> list[str]:
    """Only whether the resource (`<type> <logical name>`) is in the shape's lock: the stack rule's check."""
    if shape is not None and shape not in locks():
        return [f"stack shape {shape} has no lock (policy/powers/{shape}.lock): declare it in deepep_a4/policy/lock.py"]
    where = f"policy/powers/{shape}.lock" if shape else "any policy/powers/*.lock"
    if key in _index(shape).powers:
        return []
    if type_ not in _index(shape).by_type:
        return [f"adds a {key}: a resource type not in {where}"]
    return [f"adds {key}: a resource not in {where}"]


def check_bill(mine: Bill, type_: str, name: str | None, ctx: Context, shape: str | None) -> list[str]:
    """check() on a bill already made."""
    if shape is not None and shape not in locks():
        return [f"stack shape {shape} has no lock (policy/powers/{shape}.lock): declare it in deepep_a4/policy/lock.py"]
    index = _index(shape)
    where = f"policy/powers/{shape}.lock" if shape else "any policy/powers/*.lock"
    if type_ not in index.by_type:
        return [f"adds a {type_} ({name or '?'}): a resource type not in {where}"]
    if name is not None:
        if mine.key not in index.powers:
            return [f"adds {mine.key}: a resource not in {where}"]
        declared = index.powers[mine.key]
    else:
        declared = index.by_type[type_]
    paths = index.paths.get(type_, frozenset())
    exact = ctx.stack is not None and ctx.project is not None
    label = f"{type_} {name or ''}".strip()
    problems = [
        f"{label} adds property {p}: not in {where}"
        for p in sorted(mine.paths - paths)
        if exact or not _allowed(p, paths, exact)
    ]
    problems += [
        f"{label} adds power {p}: not in {where}"
        for p in sorted(mine.powers - declared)
        if not _allowed(p, declared, exact)
    ]
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m deepep_a4.policy.lock", description=(__doc__ or "").splitlines()[0]
    )
    parser.add_argument("--write", action="store_true", help="regenerate every lock")
    parser.add_argument("--shape", action="append", help="only this shape (repeatable)")
    args = parser.parse_args(argv)
    stale = []
    for shape in args.shape or list(SHAPES):
        text = lock_text(make_lock(shape))
        path = lock_path(shape)
        if path.exists() and path.read_text() == text:
            continue
        if args.write:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            print(f"wrote {path.relative_to(ROOT)}")
        else:
            stale.append(shape)
    for shape in stale:
        print(f"policy/powers/{shape}.lock is stale: {REGENERATE}", file=sys.stderr)
    return 1 if stale else 0


if __name__ == "__main__":
    sys.exit(main())

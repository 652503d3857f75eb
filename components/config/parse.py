"""Parsing a stack's raw config (strings, as Pulumi hands them) into a validated StackConfig."""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from components.config import model
from components.config.keys import KEYS, KEYS_BY_NAME, MACHINE_SHAPES, PROJECT_NAME, ConfigError, Key, Problem
from components.config.rules import capacity as rules_capacity
from components.config.rules import (
    check_benchmarks,
    check_capacity,
    check_explicit,
    check_gce,
    check_identity,
    check_installer_image,
    check_network,
    check_node_profile,
    check_runtime,
    check_store,
    parse_ttl,
    profile_defaults,
)
from components.config.rules.bench import check_bench_shapes
from components.config.rules.deepep import check_deepep_api, deepep_defaults
from components.config.rules.driver import check_cos_driver
from components.config.rules.inputs import (
    check_endpoint,
    check_gce_image_os,
    check_range_sizes,
    check_traffic_class,
    check_ttl_bringup,
)
from components.config.rules.version_forms import check_versions, parse_overrides
from components.config.versions import NODE_IMAGE_TYPES


def _coerce(key: Key, value: Any, problems: list[Problem]) -> Any:
    """Turns a raw config value (a string from Pulumi, or a native YAML value) into the key's type."""
    try:
        if key.kind is bool:
            if isinstance(value, bool):
                return value
            if str(value).lower() in ("true", "false"):
                return str(value).lower() == "true"
            raise ValueError
        if key.kind is int:
            if isinstance(value, bool):
                raise ValueError
            return int(str(value).strip())
        if key.kind is list:
            if isinstance(value, str):
                value = json.loads(value) if value.strip() else []
            if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
                raise ValueError
            return tuple(value)
        if isinstance(value, (dict, list)):
            raise ValueError
        return str(value)
    except (ValueError, json.JSONDecodeError):
        kinds = {bool: "true or false", int: "a whole number", list: "a list of strings", str: "a string"}
        problems.append(Problem(key.name, value, f"must be {kinds[key.kind]}"))
        return key.default if key.kind is not list else tuple(key.default)


# Each group of the model and the keys of its fields, in field order (the model's dataclasses declare them).
GROUPS: dict[type, tuple[str, ...]] = {
    model.NetworkConfig: ("hostCidr", "podsCidr", "servicesCidr", "gvnicCidr", "rdmaCidr", "masterCidr", "sshViaIap"),
    model.NvshmemRuntime: ("nicHandler", "hcaPrefix", "gidIndex", "nvshmemTrafficClass"),
    model.InstallerOptions: (
        "useDocaOfed",
        "gdrcopyKernelModule",
        "allowReboot",
        "artifactStore",
        "artifactStorePublish",
        "artifactStoreOnly",
        "artifactStoreManifest",
        "ncclGib",
        "artifactStoreBuildRegion",
    ),
    model.GkeOptions: (
        "gkeVersion",
        "gkeReleaseChannel",
        "gkeDnsEndpoint",
        "gkePublicEndpoint",
        "gkeAuthorizedNetworks",
        "gkeDeletionProtection",
        "gkeGpuDriver",
        "gkeCosDriverVersion",
        "podNetworking",
        "containerImage",
        "allowUnpinnedImages",
        "installerImage",
    ),
    model.GceOptions: ("gceImage", "terminationAction"),
}
VERSION_KEYS = (
    "docaOfedVersion",
    "nvidiaDriverVersion",
    "cudaVersion",
    "gdrcopyVersion",
    "nvshmemVersion",
    "nvshmemSource",
    "torchVersion",
    "deepepRef",
    "deepepPr466",
    "deepepApi",
    "ncclVersion",
)


def _group(cls: type, v: dict[str, Any]) -> Any:
    return cls(*(v[key] for key in GROUPS[cls]))


# GKE's GPUDriverVersion values (https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/NodeConfig
# #gpudriverversion: GPU_DRIVER_VERSION_UNSPECIFIED, INSTALLATION_DISABLED, DEFAULT, LATEST): gkeGpuDriver takes
# DEFAULT and LATEST as GKE writes them, and `installer` for INSTALLATION_DISABLED (our installer brings it).
_GKE_DRIVER_HINT = (
    "GKE takes DEFAULT or LATEST (its own driver, no version number) or INSTALLATION_DISABLED, which is "
    "`installer` here (nodeProfile host-install)"
)


def _near(value: Any, key: Key) -> str:
    """'; did you mean gke?' for GKE, host_install, latest: the allowed value written another way."""
    text = str(value).strip().lower().replace("_", "-")
    near = [c for c in key.choices if c.lower().replace("_", "-") == text]
    if near:
        return f"; did you mean {near[0]}?"
    return f" ({_GKE_DRIVER_HINT})" if key.name == "gkeGpuDriver" else ""


def _unknown_keys(raw: Mapping[str, Any], problems: list[Problem]) -> None:
    for unknown in sorted(set(raw) - set(KEYS_BY_NAME)):
        near = [k for k in KEYS_BY_NAME if k.lower() == unknown.lower()]
        near = near or difflib.get_close_matches(unknown, list(KEYS_BY_NAME), n=1, cutoff=0.75)
        hint = f"did you mean {near[0]}? " if near else ""
        problems.append(Problem(unknown, raw[unknown], f"unknown key; {hint}see docs/settings.md for the allowed keys"))


def parse(raw: Mapping[str, Any], stack: str, written: set[str] | None = None) -> model.StackConfig:
    """Builds the validated config of `stack` from raw key/value pairs (keys without namespace).

    `written`: the keys the user wrote, when `raw` holds more (the engine's map, Pulumi.yaml's defaults merged
    in: the rules on what a stack writes must not count those); all of `raw` when not given.
    Raises ConfigError listing every problem found.
    """
    given = set(raw) if written is None else set(written) & set(raw)
    problems: list[Problem] = []
    _unknown_keys(raw, problems)

    v: dict[str, Any] = {}
    unknown: set[str] = set()  # keys whose value is none of their choices
    for key in KEYS:
        value = _coerce(key, raw[key.name], problems) if key.name in raw else key.default
        if key.kind is list and isinstance(value, list):
            value = tuple(value)
        # An empty default means "the node profile's own" (rules.profile_defaults), never a choice to make.
        if key.choices and value not in key.choices and not (value == "" == key.default):
            problems.append(Problem(key.name, value, f"must be one of: {', '.join(key.choices)}{_near(value, key)}"))
            unknown.add(key.name)
        v[key.name] = value
    if "nodeProfile" in unknown:
        # The profile picks the defaults and most rules (nodeProfile host_install): read as another profile, the
        # rules below would advise on a profile the stack does not have; the user fixes it first.
        raise ConfigError(problems)
    profile_defaults(v, given)
    deepep_defaults(v, given)
    v["_gkeImageType"] = NODE_IMAGE_TYPES[v["nodeProfile"]]
    gke = replace(_group(model.GkeOptions, v), image_type=v["_gkeImageType"])

    if "platform" not in unknown:  # `platform: GKE` must not call the gke keys the stack has wrong
        check_explicit(v, given, problems)
    check_node_profile(v, given, problems)
    check_cos_driver(v, problems)
    check_identity(v, problems)
    check_capacity(v, problems)
    check_network(v, problems)
    overrides = parse_overrides(v, problems)
    check_versions(v, problems, overrides)
    check_deepep_api(v, problems)
    check_runtime(v, problems)
    check_gce(v, problems)
    check_store(v, problems)
    check_benchmarks(v, problems)
    check_installer_image(v, given, problems)
    check_range_sizes(v, problems)
    check_endpoint(v, problems)
    check_gce_image_os(v, problems)
    if v["machineType"] in MACHINE_SHAPES:
        check_bench_shapes(v, MACHINE_SHAPES[v["machineType"]].gpus, problems)
    check_traffic_class(v, problems)
    # Each try is parsed with what this stack wrote (plus the try's keys), not with Pulumi.yaml's merged defaults.
    capacity = rules_capacity.check_capacity_fallback(
        v, problems, lambda over: parse({**raw, **over}, stack, given | set(over))
    )

    ttl_seconds: int | None = None
    try:
        ttl_seconds = parse_ttl(v["ttl"])
    except ValueError:
        pass  # reported by check_capacity
    else:
        if not any(p.key == "ttl" for p in problems):
            check_ttl_bringup(v, ttl_seconds, problems)

    if problems:
        raise ConfigError(problems)
    v["artifactStore"] = v["artifactStore"].rstrip("/")
    v["artifactStoreManifest"] = v["artifactStoreManifest"].lower()

    cfg = model.StackConfig(
        stack=stack,
        platform=v["platform"],
        project=v["project"],
        region=v["region"],
        zone=v["zone"],
        name_prefix=v["namePrefix"] or _default_prefix(stack),
        machine_type=v["machineType"],
        node_count=v["nodeCount"],
        provisioning=v["provisioning"],
        reservation_name=v["reservationName"],
        placement=v["placement"],
        ttl_seconds=ttl_seconds,
        boot_disk_gb=v["bootDiskGb"],
        local_ssd_count=v["localSsdCount"],
        network=_group(model.NetworkConfig, v),
        versions=model.Versions(
            *(v[key] for key in VERSION_KEYS),
            overrides=tuple(model.VersionOverride(c, **o) for c, o in sorted(overrides.items())),
        ),
        nvshmem=_group(model.NvshmemRuntime, v),
        installer=_group(model.InstallerOptions, v),
        gke=gke,
        gce=_group(model.GceOptions, v),
        benchmarks=model.BenchmarkOptions(
            tests=tuple(v["benchmarks"]),
            hidden=v["benchHidden"],
            topk=v["benchTopk"],
            processes=v["benchProcesses"],
            intranode=model.BenchCase(v["intranodeTokens"], v["intranodeExperts"]),
            low_latency=model.BenchCase(v["lowLatencyTokens"], v["lowLatencyExperts"]),
            internode=model.BenchCase(v["internodeTokens"], v["internodeExperts"]),
            timeout_minutes=v["benchTimeoutMinutes"],
            gate_ratio=float(v["benchGateRatio"]),
            repeats=v["benchRepeats"],
        ),
        node_profile=v["nodeProfile"],
        capacity=capacity,
    )
    if v["rehearsal"]:
        from components import rehearsal  # `deepep-a4 rehearse`: what the rehearsal changes, in one place

        return rehearsal.rehearsed(cfg)
    return cfg


def _default_prefix(stack: str) -> str:
    cleaned = re.sub(r"[^a-z0-9-]", "-", stack.lower()).strip("-")
    return f"deepep-{cleaned}"[:30].rstrip("-")


# -- loading from Pulumi ---------------------------------------------------------------------------


def raw_from_pulumi() -> dict[str, Any]:
    """Every key of our namespace that the engine hands the program, without the namespace prefix."""
    from pulumi.runtime import config as runtime_config

    merged: dict[str, Any] = dict(runtime_config.get_config_env())
    merged.update(runtime_config.CONFIG.get())
    prefix = f"{PROJECT_NAME}:"
    return {k[len(prefix) :]: val for k, val in merged.items() if k.startswith(prefix)}


def default_text(key: Key) -> str:
    """A key's Pulumi.yaml default as the engine merges it (pulumi/pulumi pkg/workspace/config.go
    createConfigValue at 1b5949891b3cefcb9974752b24a5ecef0acc86c8: string, int, bool as fmt "%v"; a list as
    Go's compact JSON)."""
    if isinstance(key.default, bool):
        return "true" if key.default else "false"
    if isinstance(key.default, (list, tuple)):
        return json.dumps(list(key.default), separators=(",", ":"))
    return str(key.default)


def written_keys(raw: Mapping[str, Any], in_stack_file: set[str] | None) -> set[str]:
    """The keys of `raw` (the engine's merged map) the user wrote: those in the stack file, and any whose
    value is not Pulumi.yaml's default (a value from an ESC environment or an Automation API caller that set
    config without writing the file). A default merged in by the engine is not written (docs/settings.md)."""
    differ = {k for k, v in raw.items() if k not in KEYS_BY_NAME or str(v) != default_text(KEYS_BY_NAME[k])}
    return (set(in_stack_file or ()) & set(raw)) | differ


def load(in_stack_file: set[str] | None = None) -> model.StackConfig:
    """The validated config of the running stack; raises ConfigError before any resource exists.
    `in_stack_file`: the keys (without namespace) the stack's file writes, read by __main__.py."""
    import pulumi

    raw = raw_from_pulumi()
    return parse(raw, pulumi.get_stack(), written=written_keys(raw, in_stack_file))

"""Parsing a stack's raw config (strings, as Pulumi hands them) into a validated StackConfig."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from components.config import model
from components.config.keys import KEYS, KEYS_BY_NAME, PROJECT_NAME, ConfigError, Key, Problem
from components.config.rules import (
    check_benchmarks,
    check_capacity,
    check_gce,
    check_identity,
    check_network,
    check_node_profile,
    check_runtime,
    check_store,
    parse_ttl,
    profile_defaults,
)
from components.config.rules_versions import check_versions


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


def parse(raw: Mapping[str, Any], stack: str) -> model.StackConfig:
    """Builds the validated config of `stack` from raw key/value pairs (keys without namespace).

    Raises ConfigError listing every problem found.
    """
    problems: list[Problem] = []
    for unknown in sorted(set(raw) - set(KEYS_BY_NAME)):
        near = [k for k in KEYS_BY_NAME if k.lower() == unknown.lower()]
        hint = f"did you mean '{near[0]}'? " if near else ""
        problems.append(Problem(unknown, raw[unknown], f"unknown key; {hint}see Pulumi.yaml for the allowed keys"))

    v: dict[str, Any] = {}
    for key in KEYS:
        value = _coerce(key, raw[key.name], problems) if key.name in raw else key.default
        if key.kind is list and isinstance(value, list):
            value = tuple(value)
        # An empty default means "the node profile's own" (rules.profile_defaults), never a choice to make.
        if key.choices and value not in key.choices and not (value == "" == key.default):
            problems.append(Problem(key.name, value, f"must be one of: {', '.join(key.choices)}"))
        v[key.name] = value

    profile_defaults(v, set(raw))
    check_node_profile(v, set(raw), problems)
    check_identity(v, problems)
    check_capacity(v, problems)
    check_network(v, problems)
    check_versions(v, problems)
    check_runtime(v, problems)
    check_gce(v, problems)
    check_store(v, problems)
    check_benchmarks(v, problems)

    ttl_seconds: int | None = None
    try:
        ttl_seconds = parse_ttl(v["ttl"])
    except ValueError:
        pass  # reported by check_capacity

    if problems:
        raise ConfigError(problems)

    return model.StackConfig(
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
        network=model.NetworkConfig(
            host_cidr=v["hostCidr"],
            pods_cidr=v["podsCidr"],
            services_cidr=v["servicesCidr"],
            gvnic_cidr=v["gvnicCidr"],
            rdma_cidr=v["rdmaCidr"],
            master_cidr=v["masterCidr"],
            ssh_via_iap=v["sshViaIap"],
        ),
        versions=model.Versions(
            doca_ofed=v["docaOfedVersion"],
            nvidia_driver=v["nvidiaDriverVersion"],
            cuda=v["cudaVersion"],
            gdrcopy=v["gdrcopyVersion"],
            nvshmem=v["nvshmemVersion"],
            nvshmem_source=v["nvshmemSource"],
            torch=v["torchVersion"],
            deepep_ref=v["deepepRef"],
            deepep_pr466=v["deepepPr466"],
        ),
        nvshmem=model.NvshmemRuntime(
            nic_handler=v["nicHandler"],
            hca_prefix=v["hcaPrefix"],
            gid_index=v["gidIndex"],
            traffic_class=v["nvshmemTrafficClass"],
        ),
        installer=model.InstallerOptions(
            use_doca_ofed=v["useDocaOfed"],
            gdrcopy_kernel_module=v["gdrcopyKernelModule"],
            allow_reboot=v["allowReboot"],
            store_url=v["artifactStore"].rstrip("/"),
            store_publish=v["artifactStorePublish"],
            store_only=v["artifactStoreOnly"],
            nccl_gib=v["ncclGib"],
        ),
        gke=model.GkeOptions(
            version=v["gkeVersion"],
            release_channel=v["gkeReleaseChannel"],
            dns_endpoint=v["gkeDnsEndpoint"],
            public_endpoint=v["gkePublicEndpoint"],
            authorized_networks=tuple(v["gkeAuthorizedNetworks"]),
            deletion_protection=v["gkeDeletionProtection"],
            gpu_driver=v["gkeGpuDriver"],
            pod_networking=v["podNetworking"],
            container_image=v["containerImage"],
            installer_image=v["installerImage"],
        ),
        gce=model.GceOptions(image=v["gceImage"], termination_action=v["terminationAction"]),
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
    )


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


def load() -> model.StackConfig:
    """The validated config of the running stack; raises ConfigError before any resource exists."""
    import pulumi

    return parse(raw_from_pulumi(), pulumi.get_stack())

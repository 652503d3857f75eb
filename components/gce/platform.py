"""GCE platform: A4 VMs with ten NICs, compact placement, the installer and benchmarks on boot, results bucket."""

from __future__ import annotations

import json
from typing import Any

import pulumi

from components import artifacts
from components.config import StackConfig
from components.deadline import StackDeadline
from components.gce import bench as gce_bench
from components.gce import rehearsal as gce_rehearsal
from components.gce.fleet import (
    GceA4Fleet,
    GceA4FleetArgs,
    host_ips,
    instance_name,
    vm_service_account,
)
from components.gce.results import GceResultsBucket, GceResultsBucketArgs, bucket_name
from components.network import A4Network
from components.node import pins
from components.node.store_grants import store_access

STARTUP_SCRIPT_ARTIFACT = "gce/startup-script.sh"


def _fits(script: str) -> str:
    if len(script.encode()) > gce_bench.METADATA_VALUE_LIMIT:
        raise pulumi.RunError(
            f"the rendered startup script is {len(script.encode())} bytes; GCE allows "
            f"{gce_bench.METADATA_VALUE_LIMIT} per metadata value"
        )
    return script


def build_gce_platform(
    cfg: StackConfig, network: A4Network, gcp_opts: pulumi.ResourceOptions, deadline: StackDeadline | None = None
) -> dict[str, Any]:
    """Creates the GCE side of the stack and returns the stack outputs it adds (`deadline`: every VM's
    terminationTime)."""
    try:
        ips = host_ips(cfg)
    except ValueError as err:
        raise pulumi.RunError(str(err)) from None

    sa = vm_service_account("gce-vms", cfg.name_prefix, gcp_opts)
    bucket = bucket_name(cfg.name_prefix, cfg.project)
    results = GceResultsBucket("gce-results", GceResultsBucketArgs(cfg, sa), gcp_opts)
    store_grants = store_access(cfg, sa.member, gcp_opts)

    # The rehearsal: the VM probe in the installer's and the benchmarks' place (components/gce/rehearsal.py).
    render = gce_rehearsal.render_startup_script if cfg.rehearsal else gce_bench.render_startup_script
    script = _fits(artifacts.publish(STARTUP_SCRIPT_ARTIFACT, render(cfg)))
    # With first-up downloads the VMs get the digests kept at the first `up` where the plan shows stand-ins.
    found = None if cfg.rehearsal else pins.resolved(cfg)
    node_script = script
    if found is not None:
        node_script = found.apply(lambda d: _fits(gce_bench.render_startup_script(cfg, pins.digests(d))))

    names = [instance_name(cfg.name_prefix, i) for i in range(cfg.node_count)]
    peers = [{"rank": i, "name": name, "ip": ip} for i, (name, ip) in enumerate(zip(names, ips, strict=True))]
    run_id = gce_bench.run_id(cfg)
    common = {
        "deepep-bucket": bucket,
        "deepep-run-id": run_id,
        "deepep-master-port": str(gce_bench.MASTER_PORT),
        "deepep-bench": json.dumps(gce_bench.bench_settings(cfg, peers), separators=(",", ":")),
    }
    fleet = GceA4Fleet(
        "gce",
        GceA4FleetArgs(cfg, network, node_script, sa, common, deadline.at if deadline else None),
        # The VMs write results from their first boot and use the store: the grants come first.
        pulumi.ResourceOptions.merge(gcp_opts, pulumi.ResourceOptions(depends_on=[results.grant, *store_grants])),
    )

    zone_project = f"--zone {cfg.zone} --project {cfg.project}"
    results_url = f"gs://{bucket}/runs/{run_id}"
    local = f"build/results/{cfg.stack}"
    return {
        "instanceNames": [vm.name for vm in fleet.instances],
        "hostIps": [a.address for a in fleet.addresses],
        "masterAddress": ips[0],
        # The image every VM boots: the family's newest when the stack was first deployed, kept since.
        "gceImage": fleet.image,
        "rdmaIps": fleet.rdma_ips,
        # All ten addresses in NIC order: the last eight are nic2-nic9, the RDMA NICs.
        "rdmaIpsCommand": (
            f"gcloud compute instances list --project {cfg.project} "
            f"--filter='labels.deepep-a4-stack={cfg.stack_label}' "
            "--format='table(name,networkInterfaces[].networkIP.list())'"
        ),
        "iapSshCommands": [f"gcloud compute ssh {name} {zone_project} --tunnel-through-iap" for name in names],
        "serviceAccount": sa.email,
        "bucketUrl": results.bucket.url,
        "runId": run_id,
        "resultsUrl": results_url,
        "progressCommand": f"gcloud storage cat '{results_url}/node-*/status.json'",
        # `deepep-a4 report` copies the run with `gcloud storage cp -r` (deepep_a4/store/gcs.py), then writes it.
        "reportCommand": f".venv/bin/deepep-a4 report {results_url} --stack {cfg.stack}",
        "downloadCommand": f"mkdir -p {local} && gcloud storage cp -r {results_url} {local}/",
    }

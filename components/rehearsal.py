"""The rehearsal of a stack (`deepep-a4 rehearse`, docs/rehearsal.md): the stack itself, with three differences.

`rehearsal: true` (set only by the rehearse command, in the stack `<stack>-rehearsal`) makes the program build the
real plan with:

1. the A4 machines replaced by cheap CPU machines (MACHINE_TYPE spot, no GPU);
2. a short TTL (TTL_SECONDS);
3. the probes (scripts/rehearse/) in place of the installer's GPU phases and the benchmarks.

And only what follows from those: no accelerator or driver block, no GPU taints or selectors, no RDMA NIC
attachments or RDMA resource requests (an e2 machine cannot join the RoCE VPC: its network profile takes MRDMA
NICs only, https://cloud.google.com/vpc/docs/rdma-network-profiles), no local SSD, no hyperdisk and no compact
placement (E2 supports none of them: https://cloud.google.com/compute/docs/general-purpose-machines#e2_limitations),
spot capacity whatever the stack's provisioning (an A4 reservation or flex-start cannot hold an e2 VM). Everything
else is the real plan; tests/components/rehearsal/test_plan_diff.py lists every difference and fails on any other.

Each component asks this module at the one place where the rehearsal differs, so a reader finds every
difference from here (grep `rehearsal.`).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from components.config.model import StackConfig

# The rehearsal's stack is its own Pulumi stack, destroyed at the end (deepep_a4/rehearse/).
STACK_SUFFIX = "-rehearsal"
# The cheapest machine the rest of the plan accepts unchanged: 4 vCPUs (GCE allows one vNIC per vCPU up to 8, so
# nic0 and the second gVNIC fit: https://cloud.google.com/vpc/docs/create-use-multiple-interfaces#max-interfaces),
# COS and gVNIC supported, spot. Priced in deepep_a4/prices.yaml (machines: e2-standard-4).
MACHINE_TYPE = "e2-standard-4"
MAX_NICS = 4
# E2 takes persistent disks only (no Hyperdisk): the boot disk's type is the one machine-bound field of the disk.
BOOT_DISK_TYPE = "pd-balanced"
# Short, per platform. GKE: longer than the rehearsal itself (cluster creation about 10 minutes, the probes a few),
# the bill cap if the workstation dies (the deadline job deletes the pool; the rehearsal fires that job itself
# rather than wait). GCE: the VMs' own terminationTime is the deadline seam, so it comes minutes after the probes
# (VM boot and the startup script's probe take about 3): the rehearsal watches the VMs end at it.
TTL_SECONDS = {"gke": 45 * 60, "gce": 12 * 60}
# The probes are stdlib-only Python 3 (scripts/rehearse/); the staging and benchmark images have no Python.
# Docker Hub's python:3.12-slim as an OCI index pinned by digest, as public Dockerfiles pin it ("Digest verified
# against the canonical index", found with a code search for `python:3.12-slim@sha256:` on 2026-12-02); the
# rehearsal pulls it by this digest, so a moved tag cannot change what runs.
PROBE_IMAGE = "python:3.12-slim@sha256:78387bc3881b8273120a12ebe6c1ab22b018ccc2c9adf565ae1ac9b536e184ea"
# Where the probes live in the repository and where the pods mount them.
PROBE_SOURCE = Path(__file__).resolve().parent.parent / "scripts" / "rehearse"
PROBE_MOUNT = "/rehearse"
# The probes of each role (w43b's scripts/rehearse/ docstrings name their inputs).
PROBE_STAGE = "probe_stage.py"
PROBE_INTERNODE = "probe_internode.py"
PROBE_GCE_VM = "probe_gce_vm.py"
# One address the staging pod's egress must refuse: Cloud Storage's name on plain HTTP (the policy opens 443 only;
# components/gke/staging_access.py).
DENIED_TARGET = "storage.googleapis.com:80"
# The benchmark the rehearsal keeps, as its probe: the internode pair (the Indexed Job's shape, its Service and
# policies). The single-node GPU tests have nothing to prove on a CPU machine.
KEPT_TESTS = ("internode",)
# The pod outside the internode selector: a benchmark pod of another test, which the peers' ingress must refuse.
OUTSIDER_TEST = "intranode"


def rehearsed(cfg: StackConfig) -> StackConfig:
    """The stack's validated config as the rehearsal builds it: the TTL, and the capacity fields an e2 machine
    takes (spot, no reservation, no compact placement, no local SSD). The machine type itself stays the A4's
    in the config (its shape sizes the benchmark settings); the components ask machine_type()."""
    return replace(
        cfg,
        rehearsal=True,
        ttl_seconds=TTL_SECONDS[cfg.platform],
        provisioning="spot",
        reservation_name="",
        placement="none",
        local_ssd_count=0,
    )


def machine_type(cfg: StackConfig) -> str:
    return MACHINE_TYPE if cfg.rehearsal else cfg.machine_type


def boot_disk_type(cfg: StackConfig, real: str) -> str:
    return BOOT_DISK_TYPE if cfg.rehearsal else real


def nic_networks(cfg: StackConfig, additional: list[Any]) -> list[Any]:
    """The additional NICs of a node: the rehearsal keeps the second gVNIC and leaves out the eight RDMA NICs."""
    return list(additional[: MAX_NICS - 1][:1]) if cfg.rehearsal else list(additional)


def probe_files() -> dict[str, str]:
    """{file name: text} of every probe and its helpers (scripts/rehearse/*.py), the ConfigMap and the startup
    script carry them. Empty where the probes are not in this checkout (the rehearse command refuses to start)."""
    if not PROBE_SOURCE.is_dir():
        return {}
    return {p.name: p.read_text() for p in sorted(PROBE_SOURCE.glob("*.py")) if p.name != "__init__.py"}


def name_prefix(real_prefix: str) -> str:
    """The rehearsal's resource names: the real stack's prefix and `-r`, so both can live in one project
    (namePrefix is at most 30 characters: components/config/rules/__init__.py)."""
    return real_prefix[:27].rstrip("-") + "-rh"

"""B200 reference figures from the field reports (docs/troubleshooting.md), each with where it comes from.

A baseline applies to one test, metric and dtype, at one shape (processes per node, nodes): a run of
another shape has no baseline (a 2-GPU intranode run is not compared with an 8-GPU one). Where a field report
gives a range, the low end is the baseline, so the gate never fails a run the field report called good.

`primary` baselines drive the ratio and the pass/fail gate of the report; the others are shown as
further references (e.g. field report R2's internode run, which predates the GPU-to-NIC mapping fix).
"""

from __future__ import annotations

from dataclasses import dataclass

SEED_SKILL = "field report R1 (deepep-installer skill, B200, DOCA-OFED 3.2.1, NVSHMEM 3.5.19 IBGDA, PR #466)"
SEED_REPORT = "field report R0 (install and test report, B200, 2026-01-31)"
SEED_GKE = "field report R2 (GKE B200 guide, sample output)"


@dataclass(frozen=True)
class Baseline:
    test: str  # intranode | low-latency | internode
    metric: str  # "dispatch", "combine", "dispatch+combine" (low-latency per rank)
    dtype: str | None  # FP8 | BF16 | None
    field: str  # nvl_bw | rdma_bw | bw
    value: float  # GB/s
    processes: int  # processes (GPUs) per node
    nodes: int
    source: str
    note: str = ""
    primary: bool = True

    @property
    def key(self) -> tuple[str, str, str | None, str]:
        return (self.test, self.metric, self.dtype, self.field)


BASELINES: tuple[Baseline, ...] = (
    # -- intranode, 8 x B200 (NVLink) -----------------------------------------------------------
    Baseline("intranode", "dispatch", "FP8", "nvl_bw", 300.0, 8, 1, SEED_SKILL, "300-320 GB/s, ~250 us"),
    Baseline("intranode", "dispatch", "BF16", "nvl_bw", 440.0, 8, 1, SEED_SKILL, "440-450 GB/s, ~350 us"),
    Baseline("intranode", "combine", "BF16", "nvl_bw", 350.0, 8, 1, SEED_SKILL, "350-360 GB/s, ~450 us"),
    # -- intranode, 2 x B200 (`test_intranode.py --num-processes 2`) ------------------------------
    Baseline("intranode", "dispatch", "FP8", "nvl_bw", 215.10, 2, 1, SEED_REPORT, "SMs 24, NVL chunk 32"),
    Baseline("intranode", "dispatch", "BF16", "nvl_bw", 334.79, 2, 1, SEED_REPORT, "SMs 24, NVL chunk 32"),
    Baseline("intranode", "combine", "BF16", "nvl_bw", 285.19, 2, 1, SEED_REPORT, "SMs 24, NVL chunk 16"),
    # -- low-latency, 8 x B200 (one node) -----------------------------------------------------------
    Baseline("low-latency", "dispatch+combine", None, "bw", 256.0, 8, 1, SEED_GKE, "~256 GB/s per rank"),
    Baseline("low-latency", "dispatch", None, "bw", 236.0, 8, 1, SEED_GKE, "~236 GB/s per rank"),
    Baseline("low-latency", "combine", None, "bw", 356.0, 8, 1, SEED_GKE, "~356 GB/s per rank"),
    # -- internode, 2 nodes x 8 B200 over RoCE ------------------------------------------------------
    Baseline("internode", "dispatch", "FP8", "rdma_bw", 70.0, 8, 2, SEED_SKILL, "70-71 GB/s RDMA"),
    Baseline("internode", "dispatch", "FP8", "nvl_bw", 231.0, 8, 2, SEED_SKILL, "231-235 GB/s NVL"),
    Baseline("internode", "dispatch", "BF16", "rdma_bw", 81.0, 8, 2, SEED_SKILL, "81 GB/s RDMA"),
    Baseline("internode", "dispatch", "BF16", "nvl_bw", 265.0, 8, 2, SEED_SKILL, "265-271 GB/s NVL"),
    Baseline("internode", "combine", "BF16", "rdma_bw", 75.0, 8, 2, SEED_SKILL, "75 GB/s RDMA"),
    Baseline("internode", "combine", "BF16", "nvl_bw", 245.0, 8, 2, SEED_SKILL, "245-253 GB/s NVL"),
    Baseline("internode", "dispatch", "FP8", "rdma_bw", 43.36, 8, 2, SEED_GKE, "GKE sample", primary=False),
    Baseline("internode", "dispatch", "FP8", "nvl_bw", 141.61, 8, 2, SEED_GKE, "GKE sample", primary=False),
    Baseline("internode", "dispatch", "BF16", "rdma_bw", 44.89, 8, 2, SEED_GKE, "GKE sample", primary=False),
    Baseline("internode", "dispatch", "BF16", "nvl_bw", 146.59, 8, 2, SEED_GKE, "GKE sample", primary=False),
    Baseline("internode", "combine", "BF16", "rdma_bw", 43.63, 8, 2, SEED_GKE, "GKE sample", primary=False),
    Baseline("internode", "combine", "BF16", "nvl_bw", 142.49, 8, 2, SEED_GKE, "GKE sample", primary=False),
)

# The failure the gate exists for: every GPU on one NIC (PR #466 missing), troubleshooting T10.
SINGLE_NIC_TRAP_RDMA_GBPS = 6.5


def find(
    test: str, metric: str, dtype: str | None, field: str, processes: int | None, nodes: int | None
) -> list[Baseline]:
    """Baselines of this measurement at this shape, primary first. Unknown shape: the defaults (8 GPUs).

    Internode figures per GPU hardly depend on the node count, so the 2-node baselines serve any
    internode run (the report names the baseline's shape).
    """
    procs = processes or 8
    found = [b for b in BASELINES if b.key == (test, metric, dtype, field) and b.processes == procs]
    del nodes  # part of the signature so a later, node-specific baseline needs no caller change
    return sorted(found, key=lambda b: not b.primary)


def primary(
    test: str, metric: str, dtype: str | None, field: str, processes: int | None, nodes: int | None
) -> Baseline | None:
    found = [b for b in find(test, metric, dtype, field, processes, nodes) if b.primary]
    return found[0] if found else None

"""B200 reference figures from the field reports (docs/troubleshooting.md), each with where it comes from.

A baseline applies to one test, metric and dtype, at one shape (processes per node, nodes): a run of
another shape has no baseline (a 2-GPU intranode run is not compared with an 8-GPU one). Where a field report
gives a range, the low end is the baseline, so the gate never fails a run the field report called good.

`primary` baselines drive the ratio and the pass/fail gate of the report; the others are shown as
further references (e.g. field report R2's internode run, which predates the GPU-to-NIC mapping fix).
`OUTSIDE` holds DeepEP's published H800 figures, shown beside them for orientation and never gated
(docs/benchmarks.md).
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


# -- outside references: published figures of other hardware, shown beside the A4 baselines, never gated --

DEEPEP_README = (
    "DeepEP README, v1.2.1, Performance (https://github.com/deepseek-ai/DeepEP/blob/v1.2.1/README.md#performance; "
    "docs/legacy.md on main): H800 (~160 GB/s NVLink), CX7 InfiniBand 400 Gb/s (~50 GB/s) per GPU"
)


@dataclass(frozen=True)
class Reference:
    """A published figure of other hardware for one measurement at one EP size (GPUs in all)."""

    test: str
    metric: str
    dtype: str | None
    field: str
    value: float
    ep: int  # expert-parallel size: processes per node x nodes
    source: str
    note: str

    @property
    def key(self) -> tuple[str, str, str | None, str]:
        return (self.test, self.metric, self.dtype, self.field)


def _band(test: str, metric: str, dtype: str | None, field: str, note: str, by_ep: dict[int, float]) -> list[Reference]:
    return [Reference(test, metric, dtype, field, v, ep, DEEPEP_README, note) for ep, v in by_ep.items()]


# DeepEP's own setting: 4096 tokens (128 low-latency), hidden 7168, top-8, FP8 dispatch, BF16 combine; its
# tables give dispatch in FP8 and combine in BF16, so only those rows get a reference.
OUTSIDE: tuple[Reference, ...] = (
    *_band("intranode", "dispatch", "FP8", "nvl_bw", "H800 NVLink, bottleneck bandwidth", {8: 153.0}),
    *_band("intranode", "combine", "BF16", "nvl_bw", "H800 NVLink, bottleneck bandwidth", {8: 158.0}),
    *_band("internode", "dispatch", "FP8", "rdma_bw", "H800 + CX7 IB", {16: 43.0, 32: 58.0, 64: 51.0}),
    *_band("internode", "combine", "BF16", "rdma_bw", "H800 + CX7 IB", {16: 43.0, 32: 57.0, 64: 50.0}),
    # Pure RDMA: DeepEP's low-latency table is for NVLink off; a one-node run with NVLink on is not comparable.
    *_band(
        "low-latency",
        "dispatch",
        None,
        "bw",
        "H800 + CX7 IB, pure RDMA (NVLink off), 77 us",
        {8: 98.0, 16: 63.0, 32: 48.0, 64: 43.0, 128: 39.0, 256: 39.0},
    ),
    *_band(
        "low-latency",
        "combine",
        None,
        "bw",
        "H800 + CX7 IB, pure RDMA (NVLink off), 114 us",
        {8: 127.0, 16: 74.0, 32: 53.0, 64: 46.0, 128: 39.0, 256: 40.0},
    ),
)


# DeepEP V2's own table (deepseek-ai/DeepEP README.md at dd758caf4518, "Performance"): SM100 (B200), 8K tokens,
# hidden 7168, top-8, FP8 dispatch, BF16 combine, logical bandwidth. EP 8 over NVLink with 64 SMs (max perf); EP 8 x 2
# over CX7 RDMA with 12 SMs. The elastic test's SU (scale-up) figure is NVLink, SO (scale-out) RDMA.
DEEPEP_V2_README = (
    "DeepEP README at dd758caf4518 (V2), Performance: SM100 (B200), 8K tokens, FP8 dispatch, BF16 combine "
    "(https://github.com/deepseek-ai/DeepEP/blob/dd758caf451848bd150e1046af3d0a73e5fff38d/README.md#performance)"
)
OUTSIDE += (
    Reference("elastic", "dispatch", "FP8", "su_bw", 726.0, 8, DEEPEP_V2_README, "B200 NVLink, 64 SMs"),
    Reference("elastic", "combine", "BF16", "su_bw", 740.0, 8, DEEPEP_V2_README, "B200 NVLink, 64 SMs"),
    Reference("elastic", "dispatch", "FP8", "so_bw", 90.0, 16, DEEPEP_V2_README, "B200 + CX7 RDMA, EP 8 x 2, 12 SMs"),
    Reference("elastic", "combine", "BF16", "so_bw", 91.0, 16, DEEPEP_V2_README, "B200 + CX7 RDMA, EP 8 x 2, 12 SMs"),
)


def outside(
    test: str, metric: str, dtype: str | None, field: str, processes: int | None, nodes: int | None
) -> tuple[Reference | None, list[Reference]]:
    """(the outside reference at this EP size or None, every published one of this measurement).

    Unknown shape: 8 GPUs per node, and 2 nodes for internode (the A4 baselines' shape)."""
    refs = [r for r in OUTSIDE if r.key == (test, metric, dtype, field)]
    ep = (processes or 8) * (nodes or (2 if test == "internode" else 1))
    return next((r for r in refs if r.ep == ep), None), refs

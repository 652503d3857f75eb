"""The checks of the verdict besides each run's own: figures against the A4 baselines, a result from every
internode node, a result of every test the stack runs. A check without evidence is "not run"."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from deepep_a4.report.runs import Row, Run
from scripts.bench import parse as bp

FIELD_LABEL = {"nvl_bw": "NVL", "rdma_bw": "RDMA", "bw": "per rank", "busbw": "bus bw", "algbw": "alg bw"}
FIELD_LABEL.update(su_bw="SU (NVLink)", so_bw="SO (RDMA)")  # DeepEP V2's elastic test: scale-up, scale-out


@dataclass
class Check:
    """One check of the verdict, with its evidence (or why it has none)."""

    test: str
    origin: str  # a run's origin, or "all" for a check across runs
    name: str
    status: str  # pass | FAIL | not run | n/a
    detail: str
    repeat: int | None = None


def run_checks(runs: list[Run]) -> list[Check]:
    """Each run's own checks (the parser's), in run order."""
    return [
        Check(run.test, run.origin, c.get("check", "?"), c.get("status", bp.NOT_RUN), c.get("detail", ""), run.repeat)
        for run in runs
        for c in run.checks
    ]


def figure_checks(runs: list[Run], rows: list[Row], ratio: float) -> list[Check]:
    """Per DeepEP test and node: its figures reach the A4 baselines; no baseline for its shape is not run."""
    out = []
    seen: set[tuple[str, str]] = set()
    for run in runs:
        if run.test not in bp.DEEPEP_TESTS or (run.test, run.node) in seen:
            continue
        seen.add((run.test, run.node))
        mine = [r for r in rows if (r.test, r.node) == (run.test, run.node)]
        gated = [r for r in mine if r.baseline is not None]
        shape = f"{run.processes or '?'} GPUs per node x {run.nodes or '?'} node(s)"
        if not mine:
            status, detail = bp.NOT_RUN, "the test printed no figure"
        elif not gated:
            status, detail = bp.NOT_RUN, f"no A4 baseline for this shape ({shape}): its figures are shown, not judged"
        elif failed := [r for r in gated if r.gate == "FAIL"]:
            worst = min(failed, key=lambda r: r.ratio or 0)
            status = bp.FAIL
            detail = (
                f"{len(failed)} of {len(gated)} figures under {ratio:.0%} of the baseline; the lowest: "
                f"{worst.metric} {worst.dtype or ''} {FIELD_LABEL.get(worst.field, worst.field)} {worst.value:.2f} "
                f"GB/s, {worst.ratio or 0:.0%} of {worst.baseline.value if worst.baseline else ''}"
            )
        else:
            low = min(gated, key=lambda r: r.ratio or 0)
            status = bp.PASS
            detail = (
                f"{len(gated)} figure(s) at {ratio:.0%} of their baseline or above (the lowest {low.ratio or 0:.0%})"
            )
        out.append(Check(run.test, run.node, "figures", status, detail))
    return out


def node_checks(runs: list[Run]) -> list[Check]:
    """Internode: a result from every node, so every node's NICs are judged, not only node 0's."""
    inter = [r for r in runs if r.test == "internode"]
    if not inter:
        return []
    nodes = max((r.nodes or 0 for r in inter), default=0)
    ranks = {r.node_rank for r in inter if r.node_rank is not None}
    unplaced = [r.origin for r in inter if r.node_rank is None]
    if not nodes:
        status, detail = bp.NOT_RUN, "the log does not say how many nodes ran (no runner begin record)"
    elif unplaced:
        status = bp.NOT_RUN
        detail = f"{', '.join(unplaced)}: the log does not say which node ran it (no node rank in the runner's record)"
    elif missing := sorted(set(range(nodes)) - ranks):
        status = bp.NOT_RUN
        detail = (
            f"no result from node(s) {', '.join(map(str, missing))} of {nodes}: every node's NICs must show "
            "traffic (read every pod's log, or every node's folder)"
        )
    else:
        status, detail = bp.PASS, f"results from all {nodes} nodes"
    return [Check("internode", "all", "nodes", status, detail)]


def expected_checks(runs: list[Run], expected: Iterable[str]) -> list[Check]:
    have = {r.test for r in runs}
    return [
        Check(t, "all", "ran", bp.NOT_RUN, "the stack runs this test, and no result of it is in the sources")
        for t in expected
        if t not in have
    ]

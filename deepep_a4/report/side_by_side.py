"""DeepEP V1 and V2 side by side: the intranode test of V1 (deep_ep.Buffer) and V2's elastic test (ElasticBuffer)
on the same machines, the headline figures of each next to each other.

Comparable, not equal: V1's intranode figure is the best of its SM/chunk sweep (`[tuning] Best ...`, NVL
bandwidth); V2's is the mean over ranks of the scale-up (NVLink) bandwidth at the SM count V2 derives itself
(tests/elastic/test_ep.py `get_theoretical_num_sms`). Both run FP8 dispatch and BF16 combine at the stack's tokens,
hidden size and experts (V2's elastic test takes intranode's). Only rows of one shape (GPUs per node x nodes) and
one machine are put side by side: a run on another machine is another table row.
"""

from __future__ import annotations

from deepep_a4.report.runs import Row

PAIRS = (  # (V1 test, metric, dtype, field) -> (V2 test, metric, dtype, field)
    (("intranode", "dispatch", "FP8", "nvl_bw"), ("elastic", "dispatch", "FP8", "su_bw")),
    (("intranode", "dispatch", "BF16", "nvl_bw"), ("elastic", "dispatch", "BF16", "su_bw")),
    (("intranode", "combine", "BF16", "nvl_bw"), ("elastic", "combine", "BF16", "su_bw")),
)


def _key(row: Row) -> tuple[str, str, str | None, str]:
    return (row.test, row.metric, row.dtype, row.field)


def side_by_side(rows: list[Row]) -> list[str]:
    """Markdown lines of the V1/V2 table, or none when the rows lack one of the two."""
    by_place: dict[tuple[str, int | None, int | None], dict[tuple[str, str, str | None, str], Row]] = {}
    for r in rows:
        by_place.setdefault((r.node or r.origin, r.processes, r.nodes), {})[_key(r)] = r
    table = []
    for (node, procs, nodes), found in sorted(by_place.items(), key=lambda kv: str(kv[0])):
        for v1_key, v2_key in PAIRS:
            v1, v2 = found.get(v1_key), found.get(v2_key)
            if v1 is None or v2 is None:
                continue
            ratio = f"{v2.value / v1.value:.2f}" if v1.value else ""
            table.append(
                f"| {node} | {procs or '?'} x {nodes or '?'} | {v1.metric} | {v1.dtype or ''} | {v1.value:.2f} "
                f"({v1.config}) | {v2.value:.2f} ({v2.config}) | {ratio} |"
            )
    if not table:
        return []
    return [
        "## DeepEP V1 and V2 side by side",
        "",
        "V1: test_intranode.py, best of its sweep (NVL). V2: tests/elastic/test_ep.py, mean over ranks of the scale-up "
        "(NVLink) bandwidth. Same machine, same shape; docs/benchmarks.md, 'DeepEP V2'.",
        "",
        "| machine | GPUs x nodes | metric | dtype | V1 (GB/s) | V2 (GB/s) | V2 / V1 |",
        "|---|---|---|---|---:|---:|---:|",
        *table,
        "",
    ]

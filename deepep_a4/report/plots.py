"""The report's sweep plots (matplotlib, drawn without a display) and the sweep records they use."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from deepep_a4.report.analysis import Report, Run


def sweeps_of(run: Run) -> dict[tuple[str, str | None], list[dict[str, Any]]]:
    out: dict[tuple[str, str | None], list[dict[str, Any]]] = {}
    for r in run.records:
        if r["kind"] == "sweep":
            out.setdefault((r["name"] or "unlabelled", r["dtype"]), []).append(r)
    return out


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-").lower()


def write_plots(report: Report, out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for run in report.runs:
        for (op, dtype), recs in sweeps_of(run).items():
            title = f"{run.test} {op}" + (f" {dtype}" if dtype else "")
            fname = f"sweep-{_slug(run.origin)}-{_slug(title)}.png"
            fig, ax = plt.subplots(figsize=(7, 4))
            if run.test == "internode":
                # 2-D sweep: RDMA bandwidth against RDMA chunk, one line per NVL chunk.
                by_nvl: dict[int, list[tuple[int, float]]] = {}
                for r in recs:
                    by_nvl.setdefault(r["params"]["nvl_chunk"], []).append(
                        (r["params"]["rdma_chunk"], r["values"]["rdma_bw"])
                    )
                for nvl, pts in sorted(by_nvl.items()):
                    pts.sort()
                    ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", ms=3, label=f"NVL chunk {nvl}")
                ax.set_xlabel("RDMA chunk size (tokens)")
                ax.set_ylabel("RDMA bandwidth (GB/s)")
                if len(by_nvl) > 1:
                    ax.legend(fontsize="x-small", ncol=2)
            else:
                pts = sorted(
                    (r["params"]["nvl_chunk"], r["values"]["nvl_bw"]) for r in recs if r["params"].get("nvl_chunk")
                )
                ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label="NVL chunk")
                default = [r["values"]["nvl_bw"] for r in recs if r["params"].get("nvl_chunk") is None]
                if default:
                    ax.axhline(default[0], ls="--", color="grey", label=f"default config ({default[0]:.1f})")
                ax.set_xlabel("NVL chunk size (tokens)")
                ax.set_ylabel("NVLink bandwidth (GB/s)")
                ax.legend(fontsize="small")
            best = [
                r
                for r in run.records
                if r["kind"] == "best" and r["name"] == op and (r["dtype"] == dtype or op == "combine")
            ]
            f = "rdma_bw" if run.test == "internode" else "nvl_bw"
            if best and f in best[0]["values"]:
                ax.set_title(f"{title} ({run.origin}): best {best[0]['values'][f]:.2f} GB/s")
            else:
                ax.set_title(f"{title} ({run.origin})")
            ax.grid(True, alpha=0.3)
            fig.tight_layout()
            fig.savefig(out / fname, dpi=110)
            plt.close(fig)
            report.plots.append((run, title, fname))


# -- writers ----------------------------------------------------------------------------------------

"""`deepep-a4 bringup COLD WARM`: seconds per installer phase, cold store against warm, from status.json.

    .venv/bin/deepep-a4 bringup tests/fixtures/install/hw/hwtest-3.5.1-cold.status.json \\
                                tests/fixtures/install/hw/hwtest-3.5.1-warm.status.json

Both files are the installer's `R/state/status.json` (scripts/install/run.sh writes the seconds and a note per
phase; the store's note says whether the phase's artifact was built or restored). Phases a run left out
(the hardware test) are listed with their reason and, for a full A4 install, the estimate we have and its
source: those phases cannot run on a machine that is not an A4.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import click

# Target of docs/store.md: a phase the store serves is at least this much faster warm than cold.
STORE_SPEEDUP_TARGET = 10.0
STORE_PHASES = ("gdrcopy", "nvshmem", "deepep")


@dataclass(frozen=True)
class Estimate:
    low_s: int
    high_s: int
    source: str


# Phases of a full A4 install that no store serves (apt packages, the kernel module, the reboot). Not
# measured by us: the ranges a field report observed on A4 (docs/troubleshooting.md, "Field reports").
ESTIMATES: dict[str, Estimate] = {
    "doca-ofed": Estimate(180, 300, "field report R2 (GKE A4): DOCA-OFED install 3-5 min"),
    "nvidia-driver": Estimate(300, 480, "field report R2 (GKE A4): driver 575 + CUDA 12.9 install 5-8 min"),
    "cuda": Estimate(0, 0, "counted in nvidia-driver's range (field report R2 gives them together)"),
    "peermapping": Estimate(0, 5, "writes one modprobe.d line; takes effect with the reboot"),
    "reboot": Estimate(60, 180, "not measured on A4: a range to replace with a measured boot"),
    # An A4 node pip-installs PyTorch on a store miss; a store hit restores it in 11-12 s (docs/store.md).
    "pytorch (pip on A4)": Estimate(60, 300, "field report R2 (GKE A4): PyTorch install + DeepEP build 3-5 min"),
}
# Five minutes from start to ready for the phases the installer runs itself on a warm store.
WARM_TARGET_S = 300


def load(path: Path) -> dict:
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise click.ClickException(f"{path}: not a readable status.json ({err})") from None


def rows(cold: dict, warm: dict) -> list[tuple[str, float | None, float | None, str]]:
    """(phase, cold seconds, warm seconds, warm note) in the installer's phase order."""
    out = []
    for phase, c in cold.get("phases", {}).items():
        w = warm.get("phases", {}).get(phase, {})
        out.append((phase, c.get("seconds"), w.get("seconds"), w.get("note", "")))
    return out


def speedup(cold_s: float | None, warm_s: float | None) -> float | None:
    if cold_s is None or warm_s is None:
        return None
    return cold_s / max(warm_s, 0.01)


def table(cold: dict, warm: dict) -> list[str]:
    lines = ["| phase | cold s | warm s | cold/warm | warm run |", "|---|---:|---:|---:|---|"]
    total_c = total_w = 0.0
    for phase, c, w, note in rows(cold, warm):
        ratio = speedup(c, w)
        total_c += c or 0
        total_w += w or 0
        r = f"{ratio:.0f}x" if ratio is not None else "-"
        lines.append(f"| {phase} | {c if c is not None else '-'} | {w if w is not None else '-'} | {r} | {note} |")
    lines.append(f"| **installer total** | {total_c:.1f} | {total_w:.1f} | {speedup(total_c, total_w) or 0:.0f}x | |")
    left = {**cold.get("leftOut", {}), **warm.get("leftOut", {})}
    if left:
        lines += ["", "| left out here | A4 estimate | source |", "|---|---:|---|"]
        extra = [*left, "reboot", "pytorch (pip on A4)"]
        for phase in extra:
            est = ESTIMATES.get(phase)
            span = f"{est.low_s}-{est.high_s} s" if est else "unknown"
            lines.append(f"| {phase} | {span} | {est.source if est else left.get(phase, '')} |")
        low = sum(ESTIMATES[p].low_s for p in extra if p in ESTIMATES)
        high = sum(ESTIMATES[p].high_s for p in extra if p in ESTIMATES)
        verdict = "within" if total_w <= WARM_TARGET_S else "over"
        lines += [
            "",
            f"Measured phases on a warm store: {total_w:.0f} s ({verdict} the {WARM_TARGET_S // 60} min target).",
            f"Plus, on an A4, the phases above (estimates, not measured): {low / 60:.1f}-{high / 60:.1f} min.",
        ]
    return lines


def store_misses(cold: dict, warm: dict) -> list[str]:
    """Store phases that are not at least STORE_SPEEDUP_TARGET times faster warm."""
    bad = []
    for phase, c, w, _ in rows(cold, warm):
        ratio = speedup(c, w)
        if phase in STORE_PHASES and (ratio is None or ratio < STORE_SPEEDUP_TARGET):
            bad.append(f"{phase}: {c} s cold, {w} s warm")
    return bad


@click.command()
@click.argument("cold", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.argument("warm", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def command(cold: Path, warm: Path) -> None:
    """Per-phase seconds, cold store against warm, from two status.json files."""
    c, w = load(cold), load(warm)
    for line in table(c, w):
        click.echo(line)
    misses = store_misses(c, w)
    if misses:
        raise click.ClickException(f"under {STORE_SPEEDUP_TARGET:.0f}x warm: " + "; ".join(misses))

"""The bring-up table (expected_times.yaml): how long a node takes to become ready, and how sure we are.

    .venv/bin/python -m deepep_a4.expected_times     # the table as docs/installer.md shows it

`expected_bringup(platform, profile)` sums the steps twice: the measured and cited rows alone (what is
known), and every row (the estimate a user should plan with).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

TABLE = Path(__file__).with_name("expected_times.yaml")
PLATFORMS = ("gke", "gce")
TAGS = ("measured", "cited", "estimated")
KNOWN = ("measured", "cited")


@dataclass(frozen=True)
class Step:
    platform: str
    profile: str
    step: str
    low: float
    high: float
    tag: str
    source: str


@dataclass(frozen=True)
class Expected:
    """Seconds from node creation to installer ready: (low, high) of the known rows, and of all rows."""

    platform: str
    profile: str
    known: tuple[float, float]
    total: tuple[float, float]
    estimated_steps: int

    @property
    def line(self) -> str:
        known = f"{_span(*self.known)} of it measured or cited" if self.known[1] else "none of it measured yet"
        rest = f", the other {self.estimated_steps} steps estimated" if self.estimated_steps else ""
        return (
            f"Bring-up per node ({self.profile}): {_span(*self.total)} from node creation to installer ready; "
            f"{known}{rest} (docs/installer.md#bring-up-time)"
        )


class TableError(ValueError):
    """A row of expected_times.yaml that breaks the format its header documents."""


def _step(i: int, row: Any) -> Step:
    if not isinstance(row, dict) or set(row) != {"platform", "profile", "step", "seconds", "tag", "source"}:
        raise TableError(f"row {i}: needs exactly platform, profile, step, seconds, tag, source")
    seconds = row["seconds"]
    ok = isinstance(seconds, list) and len(seconds) == 2 and all(isinstance(s, int | float) for s in seconds)
    if not ok or not 0 <= seconds[0] <= seconds[1]:
        raise TableError(f"row {i}: seconds must be [low, high] with 0 <= low <= high, not {seconds!r}")
    if row["platform"] not in PLATFORMS or row["tag"] not in TAGS:
        raise TableError(f"row {i}: platform one of {PLATFORMS}, tag one of {TAGS}")
    if not str(row["source"]).strip():
        raise TableError(f"row {i}: every row names its source (a log, a URL, or why it is estimated)")
    return Step(
        row["platform"], row["profile"], row["step"], float(seconds[0]), float(seconds[1]), row["tag"], row["source"]
    )


def load(path: Path = TABLE) -> list[Step]:
    # CSafeLoader: SafeLoader's rules with libyaml's parser, 7x faster (issue 37: the plan reads this table).
    doc = yaml.load(path.read_text(), Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))  # noqa: S506
    rows = doc.get("rows") if isinstance(doc, dict) else None
    if not isinstance(rows, list) or not rows:
        raise TableError(f"{path.name}: needs `rows:`, a list")
    return [_step(i, row) for i, row in enumerate(rows, 1)]


def expected_bringup(platform: str, profile: str, steps: list[Step] | None = None) -> Expected:
    mine = [s for s in (steps if steps is not None else load()) if (s.platform, s.profile) == (platform, profile)]
    if not mine:
        raise TableError(f"no bring-up rows for platform {platform}, profile {profile}")
    known = [s for s in mine if s.tag in KNOWN]
    return Expected(
        platform,
        profile,
        known=(sum(s.low for s in known), sum(s.high for s in known)),
        total=(sum(s.low for s in mine), sum(s.high for s in mine)),
        estimated_steps=len(mine) - len(known),
    )


def _span(low: float, high: float) -> str:
    if high < 120:
        return f"{low:.0f}-{high:.0f} s"
    return f"{low / 60:.0f}-{high / 60:.0f} min"


def _seconds(value: float) -> str:
    return f"{value:g}"


def markdown(steps: list[Step] | None = None) -> str:
    """The table as docs/installer.md shows it, one total per platform and profile under its steps."""
    steps = steps if steps is not None else load()
    lines = ["| platform | profile | step | seconds | tag | source |", "|---|---|---|---|---|---|"]
    groups = list(dict.fromkeys((s.platform, s.profile) for s in steps))
    for platform, profile in groups:
        for s in steps:
            if (s.platform, s.profile) == (platform, profile):
                seconds = f"{_seconds(s.low)}-{_seconds(s.high)}"
                lines.append(f"| {s.platform} | {s.profile} | {s.step} | {seconds} | {s.tag} | {s.source} |")
        e = expected_bringup(platform, profile, steps)
        lines.append(
            f"| {platform} | {profile} | **total** | **{_seconds(e.total[0])}-{_seconds(e.total[1])}** "
            f"({_span(*e.total)}) | | measured or cited: {_seconds(e.known[0])}-{_seconds(e.known[1])} |"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    print(markdown())

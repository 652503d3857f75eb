"""A test's result (Run) and one measured figure (Row): what the analysis makes and the checks read."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from deepep_a4.report import baselines as bl


@dataclass
class Run:
    """One test's result from one source (a pod, a file)."""

    origin: str
    test: str
    status: str  # passed | failed | skipped
    problems: list[str]
    records: list[dict[str, Any]]
    processes: int | None
    nodes: int | None
    meta: dict[str, str] = field(default_factory=dict)
    checks: list[dict[str, str]] = field(default_factory=list)  # the parser's evidence checks
    repeat: int = 1
    node_rank: int | None = None
    host: str = ""
    ran: dict[str, str] = field(default_factory=dict)  # what ran on the node (what_ran.what_ran)

    @property
    def node(self) -> str:
        """Which machine: the runner's host name, else where the log came from."""
        return self.host or self.origin


@dataclass
class Row:
    origin: str
    test: str
    metric: str
    dtype: str | None
    field: str
    value: float
    unit: str
    config: str
    processes: int | None
    nodes: int | None
    extra: str = ""
    baseline: bl.Baseline | None = None
    references: list[bl.Baseline] = dataclasses.field(default_factory=list)  # `field` is a column here
    ratio: float | None = None
    gate: str = "n/a"  # pass | FAIL | n/a
    samples: list[float] = dataclasses.field(default_factory=list)  # one per start; value is their median
    node: str = ""
    outside: bl.Reference | None = None  # the published figure of other hardware at this EP size
    outside_band: list[bl.Reference] = dataclasses.field(default_factory=list)  # every EP size published

    @property
    def starts(self) -> int:
        return len(self.samples) or 1

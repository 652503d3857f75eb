"""The rehearsal's checklist: one row per seam (PASS/FAIL, evidence, the troubleshooting entry of a FAIL, seconds),
with the cost and the wall time, in build/rehearsal/<stack>/checklist.md and .json, kept under a hash of the
stack's settings (by-hash/<hash>.json) so `deepep-a4 run` knows whether these settings passed one.

The probes print `REHEARSAL {json}` lines (scripts/rehearse/common.py); a console or serial port may put a prefix
in front (`startup-script: REHEARSAL ...`), so the line is found anywhere in a line of text.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from components.config import model
from components.config.keys import KEYS, PROJECT_NAME
from components.config.parse import GROUPS, VERSION_KEYS
from deepep_a4.paths import project_root

ROOT = project_root()
LINE = re.compile(r"REHEARSAL (\{.*?)\s*$")
PASS, FAIL = "PASS", "FAIL"

# What the rehearsal does not prove per value, so a change of it needs no new rehearsal: the zone within the
# region (the capacity fallback moves it; the RoCE profile and quota are read per zone at each run), what the
# rehearsal replaces (machine, capacity, TTL), what only the GPU phases and the benchmarks read (versions,
# NVSHMEM's runtime, gIB, the benchmarks' sizes). Every other key is in the hash: the network, the identities,
# the store and its manifest, the cluster's settings, the images, the node count, the platform and profile.
# The benchmarks' sizes and limits are named for them: bench* and each test's tokens and experts (keys.py);
# `benchmarks` itself stays in the hash (with internode the rehearsal proves the rendezvous, without it not).
_BENCH_PREFIXES = ("bench", "intranode", "lowLatency", "internode")
NOT_PROVEN = frozenset(
    {
        *("zone", "ttl", "rehearsal", "versionOverrides", "ncclGib", "gkeGpuDriver", "gkeCosDriverVersion"),
        *("machineType", "provisioning", "reservationName", "placement", "localSsdCount", "bootDiskGb", "capacity"),
        *VERSION_KEYS,
        *GROUPS[model.NvshmemRuntime],
        *(k.name for k in KEYS if k.name.startswith(_BENCH_PREFIXES) and k.name != "benchmarks"),
    }
)


def settings_hash(raw: Mapping[str, Any]) -> str:
    """sha256 (16 hex) of the stack's settings that the rehearsal proves: every key but NOT_PROVEN, with its default
    where the stack leaves it out (writing a default out changes nothing), as text (Pulumi's config is strings)."""
    prefix = f"{PROJECT_NAME}:"
    given = {k.removeprefix(prefix): v for k, v in raw.items()}
    values = {}
    for key in KEYS:
        if key.name in NOT_PROVEN:
            continue
        value = given.get(key.name, key.default)
        values[key.name] = value if isinstance(value, str) else json.dumps(value)
    text = json.dumps(values, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


@dataclass(frozen=True)
class Seam:
    seam: str
    status: str  # PASS or FAIL
    evidence: str
    seconds: float
    title: str = ""
    troubleshooting: str = ""  # docs/troubleshooting.md entry of a FAIL, e.g. T28
    where: str = ""  # the pod, VM or call that printed it

    @property
    def passed(self) -> bool:
        return self.status == PASS


def seam_table() -> dict[str, dict[str, str]]:
    """scripts/rehearse/seams.py's SEAMS (title, troubleshooting entry), {} where this checkout has none."""
    try:
        from scripts.rehearse import seams  # type: ignore[attr-defined]
    except ImportError:
        return {}
    return dict(getattr(seams, "SEAMS", {}))


def seam(seam_id: str, ok: bool, evidence: str, seconds: float, where: str = "") -> Seam:
    """A seam the command proves itself (the Google reads, the policy pack, the deadline's force-run)."""
    info = seam_table().get(seam_id, {})
    return Seam(
        seam_id,
        PASS if ok else FAIL,
        evidence,
        round(seconds, 3),
        info.get("title", ""),
        "" if ok else info.get("troubleshooting", ""),
        where,
    )


def parse(text: str, where: str = "") -> list[Seam]:
    """Every REHEARSAL line of a log; a line that is not the probes' JSON is a FAIL of its own (never dropped)."""
    table = seam_table()
    out: list[Seam] = []
    for line in text.splitlines():
        m = LINE.search(line)
        if not m:
            continue
        try:
            doc = json.loads(m[1])
            sid, status = str(doc["seam"]), str(doc["status"])
            if status not in (PASS, FAIL):
                raise ValueError(status)
        except (ValueError, KeyError, TypeError):
            out.append(Seam("unreadable-line", FAIL, line.strip()[:300], 0.0, "a REHEARSAL line that does not parse"))
            continue
        info = table.get(sid, {})
        out.append(
            Seam(
                sid,
                status,
                str(doc.get("evidence", "")),
                float(doc.get("seconds") or 0.0),
                info.get("title", ""),
                info.get("troubleshooting", "") if status == FAIL else "",
                where,
            )
        )
    return out


@dataclass
class Checklist:
    stack: str
    settings_hash: str
    platform: str
    seams: list[Seam] = field(default_factory=list)
    wall_seconds: float = 0.0
    cost_estimate_usd: float | None = None
    cost_basis: str = ""
    started: str = field(default_factory=lambda: dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"))
    teardown: str = ""  # "destroyed", or what is left and how to remove it
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.seams) and all(s.passed for s in self.seams)

    def add(self, seams: Iterable[Seam]) -> None:
        self.seams.extend(seams)

    def as_dict(self) -> dict[str, Any]:
        doc = asdict(self)
        doc["passed"] = self.passed
        doc["notProven"] = sorted(NOT_PROVEN - {"rehearsal"})
        return doc

    def markdown(self) -> str:
        head = [
            f"# Rehearsal of stack {self.stack}: {'PASSED' if self.passed else 'FAILED'}",
            "",
            f"Settings hash {self.settings_hash} (every key but those the rehearsal does not prove: "
            f"docs/rehearsal.md). Started {self.started}, wall time {self.wall_seconds:.0f} s, cost "
            + (f"about ${self.cost_estimate_usd:.2f} ({self.cost_basis})" if self.cost_estimate_usd else "unknown")
            + f"; teardown: {self.teardown or 'not reached'}.",
            "",
            "| seam | result | seconds | evidence | if it failed |",
            "|---|---|---|---|---|",
        ]
        rows = [
            f"| {s.seam}{': ' + s.title if s.title else ''} | {s.status} | {s.seconds:.1f} | "
            f"{_cell(s.evidence)}{' (' + s.where + ')' if s.where else ''} | "
            f"{'docs/troubleshooting.md ' + s.troubleshooting if s.troubleshooting else ''} |"
            for s in self.seams
        ]
        return "\n".join([*head, *rows, *([""] + [f"- {n}" for n in self.notes] if self.notes else []), ""])


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")[:400]


def folder(stack: str, root: Path = ROOT) -> Path:
    return root / "build" / "rehearsal" / stack


def write(checklist: Checklist, root: Path = ROOT) -> Path:
    """checklist.md and .json, and a copy under by-hash/ (a later change back to these settings finds it)."""
    out = folder(checklist.stack, root)
    (out / "by-hash").mkdir(parents=True, exist_ok=True)
    text = json.dumps(checklist.as_dict(), indent=2) + "\n"
    (out / "checklist.json").write_text(text)
    (out / "by-hash" / f"{checklist.settings_hash}.json").write_text(text)
    (out / "checklist.md").write_text(checklist.markdown())
    return out / "checklist.md"


def passed(stack: str, raw: Mapping[str, Any], root: Path = ROOT) -> bool:
    """Whether these settings of the stack passed a rehearsal (the checklist kept under their hash)."""
    path = folder(stack, root) / "by-hash" / f"{settings_hash(raw)}.json"
    try:
        return bool(json.loads(path.read_text()).get("passed"))
    except (OSError, ValueError):
        return False

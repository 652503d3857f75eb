"""The bring-up table: its format, its measured rows against the committed status files, and docs/installer.md."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from deepep_a4.tools import bringup_table as bt

ROOT = Path(__file__).resolve().parents[2]


def test_every_row_loads_and_today_s_profile_exists_on_both_platforms() -> None:
    steps = bt.load()
    for platform in bt.PLATFORMS:
        e = bt.expected_bringup(platform, "host-install", steps)
        assert 0 < e.known[0] <= e.known[1] < e.total[1] and e.total[0] <= e.total[1]


def test_measured_rows_name_committed_files_whose_seconds_they_quote() -> None:
    for step in (s for s in bt.load() if s.tag == "measured"):
        # "FILE" sums every phase of the status file, "FILE (phases a, b)" only those phases.
        quoted = re.findall(r"(tests/fixtures/\S+\.json)(?: \(phases ([a-z, -]+)\))?", step.source)
        assert quoted, f"{step.step}: a measured row names its committed status file"
        totals = []
        for path, only in quoted:
            assert (ROOT / path).is_file(), path
            phases = json.loads((ROOT / path).read_text())["phases"]
            names = [n.strip() for n in only.split(",")] if only else list(phases)
            totals.append(round(sum(phases[n]["seconds"] for n in names), 2))
        assert (step.low, step.high) == (min(totals), max(totals)), step


def test_cited_rows_name_a_source_and_estimated_rows_say_why() -> None:
    for step in bt.load():
        if step.tag == "cited":
            assert re.search(r"https://|docs/", step.source), step
        assert len(step.source.split()) >= 3, step


def test_totals_count_only_measured_and_cited_rows_as_known() -> None:
    steps = [
        bt.Step("gke", "p", "a", 10, 20, "measured", "tests/fixtures/x.json"),
        bt.Step("gke", "p", "b", 100, 200, "estimated", "no log yet"),
        bt.Step("gke", "p", "c", 1, 2, "cited", "https://example.com"),
        bt.Step("gce", "p", "d", 1000, 2000, "measured", "tests/fixtures/y.json"),
    ]
    e = bt.expected_bringup("gke", "p", steps)
    assert e.known == (11, 22) and e.total == (111, 222) and e.estimated_steps == 1
    with pytest.raises(bt.TableError, match="no bring-up rows"):
        bt.expected_bringup("gke", "supported", steps)


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ("{platform: gke, profile: p, step: s, seconds: [5, 1], tag: measured, source: a b c}", "low <= high"),
        ("{platform: tpu, profile: p, step: s, seconds: [1, 5], tag: measured, source: a b c}", "platform one of"),
        ("{platform: gke, profile: p, step: s, seconds: [1, 5], tag: guessed, source: a b c}", "tag one of"),
        ("{platform: gke, profile: p, step: s, seconds: [1, 5], tag: cited}", "needs exactly"),
    ],
)
def test_a_row_that_breaks_the_format_is_refused(tmp_path: Path, row: str, says: str) -> None:
    (tmp_path / "t.yaml").write_text(f"rows:\n  - {row}\n")
    with pytest.raises(bt.TableError, match=re.escape(says)):
        bt.load(tmp_path / "t.yaml")


def test_the_docs_table_is_the_yaml() -> None:
    text = (ROOT / "docs" / "installer.md").read_text()
    section = text.split("## Bring-up time\n", 1)[1].split("\n## ", 1)[0]
    table = "\n".join(line for line in section.splitlines() if line.startswith("|"))
    assert table == bt.markdown(), "paste `.venv/bin/python -m deepep_a4.tools.bringup_table` into docs/installer.md"


@pytest.mark.parametrize("profile", ["host-install", "supported"])
def test_both_profiles_have_rows_on_both_platforms(profile: str) -> None:
    for platform in ("gke", "gce"):
        line = bt.expected_bringup(platform, profile).line
        assert line.startswith(f"Bring-up per node ({profile}): ") and "measured or cited" in line

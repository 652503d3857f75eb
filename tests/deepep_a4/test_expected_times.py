"""The bring-up table: its format, its measured rows against the committed status files, and docs/installer.md."""

from __future__ import annotations

import datetime as dt
import json
import re
from pathlib import Path

import pytest

from deepep_a4 import expected_times as bt
from deepep_a4 import timeline

T0 = dt.datetime(2026, 11, 25, 18, 0, tzinfo=dt.UTC)

ROOT = Path(__file__).resolve().parents[2]


def test_every_row_loads_and_today_s_profile_exists_on_both_platforms() -> None:
    steps = bt.load()
    for platform in bt.PLATFORMS:
        e = bt.expected_bringup(platform, "host-install", steps)
        assert 0 < e.known[0] <= e.known[1] < e.total[1] and e.total[0] <= e.total[1]


def quoted_seconds(source: str, root: Path = ROOT) -> list[float]:
    """The seconds a measured row's committed files say. An installer status file: "FILE" sums every phase,
    "FILE (phases a, b)" only those (one value per file). A run's timeline.json (`deepep-a4 run`,
    deepep_a4/timeline.py): "FILE (seconds createdToReady)" is that duration of every node that
    recorded it, "(seconds a, b)" their sum (one value per node)."""
    values: list[float] = []
    for path, what, only in re.findall(r"(tests/fixtures/\S+\.json)(?: \((phases|seconds) ([A-Za-z, -]+)\))?", source):
        assert (root / path).is_file(), path
        doc = json.loads((root / path).read_text())
        names = [n.strip() for n in only.split(",")] if only else []
        if doc.get("kind") == timeline.KIND:
            assert what == "seconds" and names, f"{path}: name the durations, e.g. (seconds createdToReady)"
            for node in doc["nodes"]:
                if all(node["seconds"][n] is not None for n in names):
                    values.append(round(sum(node["seconds"][n] for n in names), 3))
        else:
            phases = doc["phases"]
            values.append(round(sum(phases[n]["seconds"] for n in names or list(phases)), 2))
    return values


def test_measured_rows_name_committed_files_whose_seconds_they_quote() -> None:
    for step in (s for s in bt.load() if s.tag == "measured"):
        totals = quoted_seconds(step.source)
        assert totals, f"{step.step}: a measured row names its committed status or timeline file"
        assert (step.low, step.high) == (min(totals), max(totals)), step


def test_a_runs_timeline_json_is_a_measured_rows_source(tmp_path: Path) -> None:
    """docs/installer.md#bring-up-time: the first real run's timeline.json, committed, replaces estimates."""
    nodes = [
        timeline.NodeTimeline(
            "a", created=T0, ready=T0 + dt.timedelta(seconds=95.5), first_line=T0 + dt.timedelta(seconds=250)
        ),
        timeline.NodeTimeline("b", created=T0, ready=T0 + dt.timedelta(seconds=101.25)),
    ]
    doc = timeline.document(nodes, "gke-b200", "gke", "supported", None, now=T0)
    path = tmp_path / "tests/fixtures/bringup/gke-b200.timeline.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(doc))
    name = "tests/fixtures/bringup/gke-b200.timeline.json"
    assert quoted_seconds(f"{name} (seconds createdToReady)", tmp_path) == [95.5, 101.25]
    assert doc["totals"]["createdToReady"] == [95.5, 101.25]  # what the row's seconds copy
    assert quoted_seconds(f"{name} (seconds readyToFirstLine)", tmp_path) == [154.5]
    assert quoted_seconds(f"{name} (seconds createdToReady, readyToFirstLine)", tmp_path) == [250]
    with pytest.raises(AssertionError, match="name the durations"):
        quoted_seconds(name, tmp_path)


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
    assert table == bt.markdown(), "paste `.venv/bin/python -m deepep_a4.expected_times` into docs/installer.md"


@pytest.mark.parametrize("profile", ["host-install", "supported"])
def test_both_profiles_have_rows_on_both_platforms(profile: str) -> None:
    for platform in ("gke", "gce"):
        line = bt.expected_bringup(platform, profile).line
        assert line.startswith(f"Bring-up per node ({profile}): ") and "measured or cited" in line

"""The report with DeepEP V2's elastic test: its own section, the V2 README's B200 figures as outside references
(never gated), and V1's intranode and V2's elastic figures of the same machine side by side.

The V1 figures are the real 2 x H200 run (tests/fixtures/bench/h200x2_run.log); the V2 figures are the lines
tests/elastic/test_ep.py prints (tests/fixtures/bench/v2_elastic_synth.log, synthesized from its f-strings: see
tests/scripts/bench/test_parse_elastic.py). A real V2 log replaces it once a run gives one.
"""

from __future__ import annotations

from pathlib import Path

from deepep_a4 import report
from deepep_a4.report import baselines as bl
from tests.conftest import ROOT

BENCH = ROOT / "tests/fixtures/bench"


def _combined(tmp_path: Path) -> Path:
    lines = (BENCH / "v2_elastic_synth.log").read_text().splitlines(True)
    v2 = "".join(line for line in lines if not line.startswith("#"))
    begin = (
        '[runner] begin {"argv": ["python3", "tests/elastic/test_ep.py"], "nodes": 1, "processes": 2, '
        '"test": "elastic"}\n'
    )
    end = '[runner] end {"test": "elastic", "rc": 0, "timed_out": false, "timeout_s": 1800, "seconds": 60.0}\n'
    log = tmp_path / "node0.log"
    log.write_text((BENCH / "h200x2_run.log").read_text() + begin + v2 + end)
    return log


def test_v1_and_v2_of_one_machine_stand_side_by_side(tmp_path: Path) -> None:
    out = tmp_path / "report"
    report.main([str(_combined(tmp_path)), "--out", str(out)])
    text = next(out.glob("*.md")).read_text()
    assert "## Elastic, DeepEP V2 (tests/elastic/test_ep.py)" in text
    table = text.split("## DeepEP V1 and V2 side by side", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in table.splitlines() if line.startswith("| node0.log")]
    assert len(rows) == 3, table
    fp8 = next(r for r in rows if "| dispatch | FP8 |" in r)
    cells = [c.strip() for c in fp8.strip("|").split("|")]
    assert (
        cells[1] == "2 x 1" and cells[4].startswith("233.30") and cells[5].startswith("309.00") and cells[6] == "1.32"
    )


def test_the_v2_readme_figures_are_outside_references_of_b200() -> None:
    ref, band = bl.outside("elastic", "dispatch", "FP8", "su_bw", 8, 1)
    assert ref is not None and ref.value == 726.0 and "dd758caf4518" in ref.source
    ref, _ = bl.outside("elastic", "combine", "BF16", "so_bw", 8, 2)
    assert ref is not None and ref.value == 91.0
    assert not bl.find("elastic", "dispatch", "FP8", "su_bw", 8, 1)  # no A4 baseline: shown, never gated
    assert band

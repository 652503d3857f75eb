"""The supported profile's bring-up table: every row tagged and sourced; the fast path fits five minutes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

TABLE = Path(__file__).resolve().parents[3] / "deepep_a4" / "expected_times.yaml"
TAGS = ("measured", "cited", "estimated")
FIVE_MINUTES = 300


def rows() -> list[dict]:
    found = [r for r in yaml.safe_load(TABLE.read_text())["rows"] if r["profile"] == "supported"]
    return [{**r, "low": r["seconds"][0], "high": r["seconds"][1]} for r in found]


def test_every_row_is_tagged_sourced_and_ordered() -> None:
    for row in rows():
        assert row["profile"] == "supported" and row["platform"] in ("gke", "gce"), row
        assert row["tag"] in TAGS and row["source"], row
        assert 0 <= row["low"] <= row["high"], row
        if row["tag"] == "measured":  # a GPU machine's committed log (test_bringup_table checks its seconds)
            fixtures = re.findall(r"tests/fixtures/\S+\.json", row["source"])
            assert fixtures and all((TABLE.parents[1] / f).is_file() for f in fixtures), row


@pytest.mark.parametrize("platform", ["gke", "gce"])
def test_the_fast_path_fits_five_minutes_on_measured_and_cited_rows(platform: str) -> None:
    counted = [r for r in rows() if r["platform"] == platform and r["tag"] in ("measured", "cited")]
    assert counted and sum(r["high"] for r in counted) <= FIVE_MINUTES

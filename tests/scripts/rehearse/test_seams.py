"""The seams table agrees with the probes and the docs: every seam a probe can print is in SEAMS, each points at a
troubleshooting entry that exists, docs/rehearsal.md's Probes section lists each, and the probes stay small and
stdlib-only."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from scripts.rehearse.seams import SEAMS

ROOT = Path(__file__).resolve().parents[3]
PROBES = ROOT / "scripts" / "rehearse"


def printed_seams() -> set[str]:
    """Every seam id a probe passes to run_seam (the first argument, a string literal)."""
    found = set()
    for path in PROBES.glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "run_seam":
                first = node.args[0]
                assert isinstance(first, ast.Constant), f"{path.name}: run_seam's seam must be a literal"
                found.add(str(first.value))
    return found


def test_every_printed_seam_is_in_the_table_and_every_entry_is_printed() -> None:
    assert printed_seams() == set(SEAMS)


def test_each_seam_points_at_a_troubleshooting_entry_that_exists() -> None:
    doc = (ROOT / "docs" / "troubleshooting.md").read_text()
    for seam, entry in SEAMS.items():
        assert set(entry) == {"title", "troubleshooting"} and entry["title"], seam
        ref = entry["troubleshooting"]
        assert ref == "" or re.fullmatch(r"T\d\d", ref), seam
        if ref:
            assert f'<a id="{ref.lower()}"></a>' in doc and f"\n## {ref} " in doc, f"{seam}: {ref} is not in the doc"
            assert f"| [{ref}](#{ref.lower()}) |" in doc, f"{ref} is not in the table of entries"


def test_the_rehearsal_doc_lists_every_seam_under_probes() -> None:
    doc = (ROOT / "docs" / "rehearsal.md").read_text()
    section = doc.split("\n## Probes\n", 1)[1].split("\n## ", 1)[0]
    missing = [seam for seam in SEAMS if f"`{seam}`" not in section]
    assert not missing


def test_the_probes_are_small_and_use_the_standard_library_only() -> None:
    ours = {"common", "gcp", "scripts"}
    for path in PROBES.glob("*.py"):
        assert len(path.read_text().splitlines()) < 300, path.name
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name.split(".")[0] for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module.split(".")[0]]
            for name in names:
                assert name in sys.stdlib_module_names or name in ours or name == "__future__", (path.name, name)


def test_each_probe_ships_with_exactly_the_modules_it_imports() -> None:
    from scripts.rehearse.seams import PROBE_FILES

    def ours(path: Path) -> set[str]:
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                found |= {a.name for a in node.names if (PROBES / f"{a.name}.py").exists()}
        return found

    for probe, files in PROBE_FILES.items():
        want, seen = {probe}, set()
        while want - seen:  # the imports' imports too
            name = sorted(want - seen)[0]
            seen.add(name)
            want |= {f"{m}.py" for m in ours(PROBES / name)}
        assert set(files) == want, probe

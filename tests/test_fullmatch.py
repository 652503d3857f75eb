"""Validators match whole values: `re.match` with a pattern ending in `$` accepts a trailing newline (Python's
`$` matches "at the end of the string or just before the newline at the end of the string": docs.python.org/3/
library/re.html, "$"), so `gs://bucket\\n/x` or an image reference with "\\n" passed (issue 44). Every such
pattern in the program's code is gone: validators use `fullmatch` (or `\\Z` with search)."""

from __future__ import annotations

import re

from tests.conftest import ROOT

# A match/search/compile whose pattern literal ends in `$` (not `\$`).
DOLLAR = re.compile(r"""(?:re\.(?:match|search|compile)|\.(?:match|search))\(\s*r?f?(["'])(?:(?!\1).)*(?<!\\)\$\1""")
# Line parsers, not validators: each reads one line of text that has no newline in it, or uses re.MULTILINE.
NOT_VALIDATORS = {
    "deepep_a4/plan/provider_imports.py",  # re.MULTILINE over a module's text
    "deepep_a4/timeline.py",  # a VM's name from the API, numbered suffix
    "deepep_a4/rehearse/checklist.py",  # a probe's REHEARSAL line in a pod log, read line by line
}


def test_no_validator_anchors_with_dollar() -> None:
    found = []
    for top in ("components", "deepep_a4", "store", "scripts"):
        for path in sorted((ROOT / top).rglob("*.py")):
            rel = path.relative_to(ROOT).as_posix()
            if rel.startswith("scripts/bench/") or rel in NOT_VALIDATORS:
                continue  # the benchmark log parsers read lines split without their newline
            for n, line in enumerate(path.read_text().splitlines(), 1):
                if DOLLAR.search(line):
                    found.append(f"{rel}:{n}: {line.strip()}")
    assert not found, "use fullmatch (a `$` accepts a trailing newline):\\n" + "\\n".join(found)


def test_dollar_does_accept_a_trailing_newline() -> None:
    """The reason, checked on this Python."""
    assert re.match(r"^[a-z]+$", "bucket\n") and not re.fullmatch(r"[a-z]+", "bucket\n")

"""Compares two offline plans (`deepep-a4 plan --out A`, `--out B`) after normalising what may differ
without any resource changing: the clock-dependent deadline, the repository paths that rendered files
carry in comments ("Rendered by ...", shellcheck `source=`), and the content hashes derived from those
files (heredoc delimiters, INSTALLER_HASH, checksum annotations). Everything else must be equal.

    .venv/bin/python ci/plan_diff.py build/plan-before/gke-b200 build/plan/gke-b200

Prints one unified diff per differing file and exits 1, or prints "same: N files" and exits 0.
"""

from __future__ import annotations

import base64
import difflib
import gzip
import io
import json
import re
import sys
import tarfile
from pathlib import Path
from typing import Any

import yaml

# In order, each pattern and what replaces it. First old repository paths and module names -> today's (the
# layout moves of the project's history), in comments and in the package-import fallback of the shipped
# Python files; then the masks: content hashes derived from those files, and the deadline ("now + ttl" at
# plan time, in RFC 3339 or as a cron schedule).
# One rewrite a line: PATTERN => REPLACEMENT (the replacement may be empty of spaces only).
_REWRITES = r"""
deepep_a4/config/(stackfile|schema)\.py => deepep_a4/\1.py
deepep_a4/(upstream|provisioning)\.py => components/config/\1.py
deepep_a4/config/ => components/config/
(deepep_a4/)?\bprogram/ => components/
(deepep_a4/)?(?<!components/)\bnode/(?=install|bench|gce|gke|names|payload) => scripts/
deepep_a4\.node\. => scripts.
from deepep_a4\.node import => from scripts import
components/gke_(\w+)\.py => components/gke/\1.py
components/gce_(\w+)\.py => components/gce/\1.py
components/gce\.py => components/gce/fleet.py
components/(installer|pins|staging|store|store_gate|torch_lock)\.py => components/node/\1.py
deepep_a4/tools/ => deepep_a4/
(EOF_)[0-9A-F]{12} => \1<hash>
(INSTALLER_HASH=)[0-9a-f]{16} => \1<hash>
\b[0-9a-f]{64}\b => <sha256>
\b[0-9a-f]{16}\b => <hash16>
\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d)?(\.\d+)?(Z| UTC) => <time>
\b\d{1,2} \d{1,2} \d{1,2} \d{1,2} \* => <cron>
(_deadline_)[0-9a-f]{8} => \1<hash8>
"""
REWRITES = tuple((re.compile(a), b) for a, b in (line.split(" => ") for line in _REWRITES.strip().splitlines()))


# The GCE startup script carries its files as the base64 of a gzip'd tar (components/gce/bench.py): compared as
# the files it holds, each normalised like any other text, not as the bytes of one archive.
_PACKED = re.compile(r"(<<'DEEPEP_A4_PACKED'[^\n]*\n)([A-Za-z0-9+/=\n]+?)(\nDEEPEP_A4_PACKED)")


def _unpacked(m: re.Match[str]) -> str:
    with tarfile.open(fileobj=io.BytesIO(gzip.decompress(base64.b64decode(m[2])))) as tar:
        members = sorted((t for t in tar.getmembers() if t.isfile()), key=lambda t: t.name)
        listing = "".join(
            f"== {t.name}\n{tar.extractfile(t).read().decode(errors='replace')}"  # type: ignore[union-attr]
            for t in members
        )
    return m[1] + listing + m[3]


def normalise(text: str) -> str:
    text = _PACKED.sub(_unpacked, text)
    for pattern, repl in REWRITES:
        text = pattern.sub(repl, text)
    return text


def _walk(value: Any) -> Any:
    """Strings normalised (a multi-line one as its lines, so a diff shows the line); lists of resources
    sorted, since the mock engine registers them in no fixed order."""
    if isinstance(value, str):
        text = normalise(value)
        return text.splitlines() if "\n" in text else text
    if isinstance(value, dict):
        return {_walk(k): _walk(v) for k, v in value.items()}
    if isinstance(value, list):
        items = [_walk(v) for v in value]
        if all(isinstance(v, dict) and {"type", "name"} <= v.keys() for v in items):
            items.sort(key=lambda v: json.dumps(v, sort_keys=True))
        return items
    return value


def canonical(path: Path) -> str:
    """The file as text to compare: YAML and JSON parsed and dumped again with every string normalised
    (YAML folds long strings wherever their length puts the break), other files normalised as text."""
    text = path.read_text()
    if path.suffix in (".yaml", ".yml"):
        docs = [_walk(d) for d in yaml.safe_load_all(text)]
        return "".join(json.dumps(d, indent=1, sort_keys=True) + "\n" for d in docs)
    if path.suffix == ".json":
        return json.dumps(_walk(json.loads(text)), indent=1, sort_keys=True) + "\n"
    return normalise(text)


def files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): canonical(p) for p in sorted(root.rglob("*")) if p.is_file()}


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print((__doc__ or "").strip(), file=sys.stderr)
        return 2
    a, b = files(Path(argv[0])), files(Path(argv[1]))
    differ = 0
    for rel in sorted(set(a) | set(b)):
        left, right = a.get(rel, ""), b.get(rel, "")
        if rel not in a or rel not in b:
            print(f"only in {'B' if rel not in a else 'A'}: {rel}")
            differ += 1
        elif left != right:
            differ += 1
            print("".join(difflib.unified_diff(left.splitlines(True), right.splitlines(True), rel, rel, n=1)), end="")
    if differ:
        print(f"differ: {differ} of {len(set(a) | set(b))} files")
        return 1
    print(f"same: {len(a)} files")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

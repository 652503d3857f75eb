"""Every curl the GKE pods' scripts run ends on its own: curl has no overall timeout unless `--max-time` (`-m`)
gives one ("Maximum time in seconds that you allow each transfer to take", https://curl.se/docs/manpage.html#-m),
and `--retry` retries a transfer that hangs only once it has timed out. A hung API call would hold the
init container (and the node's install) until the DaemonSet's own timeout."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = sorted((ROOT / "scripts/gke").glob("*.sh"))


def curl_commands(text: str) -> list[list[str]]:
    """The argument lists of every curl command in a shell script (continuation lines joined, comments dropped)."""
    joined = re.sub(r"\\\n\s*", " ", text)
    out = []
    for line in joined.splitlines():
        if line.lstrip().startswith("#"):
            continue
        for part in re.split(r"\|\||&&|\||;", line):
            try:
                words = shlex.split(part, comments=True)
            except ValueError:
                continue
            if "curl" in words:
                out.append(words[words.index("curl") :])
    return out


def test_every_curl_in_the_gke_scripts_has_a_max_time() -> None:
    found = {p.name: curl_commands(p.read_text()) for p in SCRIPTS}
    assert sum(len(c) for c in found.values()) >= 2  # installer-init.sh and stage-init.sh label the node
    for name, commands in found.items():
        for words in commands:
            has = "--max-time" in words or "-m" in words or any(w.startswith("--max-time=") for w in words)
            assert has, f"{name}: curl without --max-time: {' '.join(words)}"
            if "--max-time" in words:
                assert int(words[words.index("--max-time") + 1]) > 0


def test_the_check_sees_a_curl_without_a_max_time() -> None:
    text = 'printf x |\n  curl -sS --fail --retry 5 \\\n    -X PATCH "https://host/api" >/dev/null\n'
    [words] = curl_commands(text)
    assert "--max-time" not in words and "https://host/api" in words

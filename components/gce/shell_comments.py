"""The GCE startup script's room: the installer's two largest libraries travel without their comment lines.

GCE allows 256 KiB per metadata value and the startup script keeps to half of it (components/gce/bench.py).
The host-install stack ships every phase, and after the runner and the stage grew it no longer fitted, even
gzip'd. `lib.sh` and `store.sh` are a third of the installer's text and half of that is comments, so on GCE
they ship with every comment line emptied:

- only these two files: no phase script is touched, because a phase's sha256 is part of its marker key
  (run.sh `phase_key`) and of its store artifact key (store.sh `artifact_key`), which must be the same on a
  GCE VM, a GKE node and the store builder; run.sh keeps its header, which `--help` prints;
- a comment line becomes an empty line, so every line keeps its number (bash's error messages and `set -x`
  point at the repo's lines);
- heredoc bodies are kept as they are (lib.sh writes `# ...` lines into the env file through one);
- tests/components/gce/test_shell_comments.py proves each file still parses to the same commands
  (`bash --pretty-print`, which prints the parsed script without comments).

The repo's sources and the plan's files/install/gce/ keep their comments; files/gce/startup-script.sh is what a VM runs.
"""

from __future__ import annotations

import re

# Files of the installer folder that ship to GCE without their comment lines (see above for why only these).
UNCOMMENTED = ("lib.sh", "store.sh")

_COMMENT = re.compile(r"[ \t]*#")
# `<<WORD`, `<<-WORD`, `<<'WORD'`, `<<"WORD"` (not the here-string `<<<`). A `<<` that is no heredoc (an
# arithmetic shift) only makes this keep more comments, never drop a line that is not one.
_HEREDOC = re.compile(r"(?<!<)<<(?!<)(-?)[ \t]*(['\"]?)([A-Za-z_][A-Za-z0-9_]*)\2")


def without_comment_lines(text: str) -> str:
    """`text` with every comment line outside heredocs emptied; a `#!` first line is kept."""
    out: list[str] = []
    pending: list[tuple[bool, str]] = []  # heredocs opened on the line before, in order: (strip tabs, word)
    for n, line in enumerate(text.splitlines(keepends=True)):
        if pending:  # inside a heredoc body: kept byte for byte until its delimiter line
            tabs, word = pending[0]
            body = line.rstrip("\n")
            if (body.lstrip("\t") if tabs else body) == word:
                pending.pop(0)
            out.append(line)
            continue
        continued = bool(out) and out[-1].endswith("\\\n")  # a `#` after a line continuation starts a word
        shebang = n == 0 and line.startswith("#!")
        if not shebang and not continued and _COMMENT.match(line):
            out.append("\n" if line.endswith("\n") else "")
            continue
        out.append(line)
        pending += [(m[1] == "-", m[3]) for m in _HEREDOC.finditer(line)]
    return "".join(out)


def for_gce(files: dict[str, str]) -> dict[str, str]:
    """The installer's files as they ship inside the GCE startup script."""
    return {rel: without_comment_lines(text) if rel in UNCOMMENTED else text for rel, text in files.items()}

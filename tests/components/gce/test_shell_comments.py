"""lib.sh and store.sh ship to GCE without comment lines (components/gce/shell_comments.py): bash parses each
to the same commands, every line keeps its number, and nothing else the VM gets changes."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from components.gce import bench as gce_bench
from components.gce import shell_comments
from components.node import installer
from tests.components.gce.test_startup import gce_cfg, packed_files

ROOT = Path(__file__).resolve().parents[3]


def parsed(text: str, tmp_path: Path) -> str:
    """What bash parsed, printed back without comments (`bash --pretty-print`, bash >= 5.1)."""
    path = tmp_path / "script.sh"
    path.write_text(text)
    proc = subprocess.run(["bash", "--pretty-print", str(path)], capture_output=True, text=True, check=False)
    if proc.returncode != 0 and "invalid option" in proc.stderr:  # pragma: no cover - bash < 5.1
        pytest.skip("this bash has no --pretty-print")
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


@pytest.mark.parametrize("name", shell_comments.UNCOMMENTED)
def test_each_file_parses_to_the_same_commands_on_the_same_lines(name: str, tmp_path: Path) -> None:
    text = (ROOT / "scripts/install" / name).read_text()
    slim = shell_comments.without_comment_lines(text)
    assert parsed(slim, tmp_path) == parsed(text, tmp_path)
    assert slim.count("\n") == text.count("\n")
    assert len(slim) < 0.8 * len(text), (len(slim), len(text))
    assert not re.search(r"(?m)^[ \t]*#", slim.partition("\n")[2].split("<<", 1)[0])


def test_the_check_sees_a_heredocs_lines_dropped(tmp_path: Path) -> None:
    """lib.sh writes `# ...` lines into the env file through a heredoc: dropping them changes the script."""
    text = (ROOT / "scripts/install/lib.sh").read_text()
    naive = "".join(line for line in text.splitlines(True) if not re.match(r"[ \t]*#", line))
    assert parsed(naive, tmp_path) != parsed(text, tmp_path)


def test_heredoc_bodies_continuations_and_the_shebang_stay() -> None:
    text = (
        "#!/bin/bash\n"
        "# gone\n"
        "  # gone too\n"
        "cat <<'EOF' >a\n# kept\nEOF\n"
        "cat <<-END >b\n\t# kept\n\tEND\n"
        'x="${y#z}" # the line stays\n'
        "echo a \\\n# a word after the continuation\n"
        "(( x << y ))\n# kept: the shift looks like a heredoc, and that only keeps more\n"
    )
    assert shell_comments.without_comment_lines(text) == text.replace("# gone\n", "\n").replace("  # gone too\n", "\n")


def test_only_the_two_libraries_change_on_gce() -> None:
    """Phase scripts keep their bytes (their sha256 keys the markers and the store's artifacts)."""
    cfg = gce_cfg("gce-b200-ubuntu")
    install = packed_files(gce_bench.render_startup_script(cfg))["install.sh"][0].decode()
    shipped = dict(re.findall(r"(?ms)^cat > \"\$new/([^\"]+)\" <<'(?:\w+)'\n(.*?)^DEEPEP_INSTALL_EOF_\w+$", install))
    rendered = installer.rendered(cfg, "gce")
    assert set(shipped) == set(rendered) and any(rel.startswith("phases/") for rel in shipped)
    for rel, text in rendered.items():
        want = shell_comments.without_comment_lines(text) if rel in shell_comments.UNCOMMENTED else text
        assert shipped[rel] == want, rel
    assert shipped["lib.sh"] != rendered["lib.sh"] and shipped["store.sh"] != rendered["store.sh"]

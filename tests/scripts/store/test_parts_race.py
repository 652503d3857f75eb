"""The parallel unpack of an artifact's parts into one folder (scripts/install/store.sh, _restore_parts).

A part holds files and links only (_publish_parts packs `find -type f -o -type l` with --no-recursion), so
a part's tar has to make the parent folders of its members. GNU tar makes a missing parent itself when it
cannot open a member (src/extract.c: maybe_recoverable -> make_directories) and then retries once; if the
folders it needs are being made by another part's tar at that moment, the retry fails and tar reports
"Cannot open: No such file or directory" and exits 2 (seen on the 2-core CI machine under load, issue 37:
tests/scripts/test_pytorch_store.py; 68 of 320 part unpacks failed in a loop like the one below with plain
parallel `tar -xf`). The restore now makes each part's folders with `mkdir -p` before its tar runs, and
`mkdir -p` takes a folder that another process made meanwhile as made.
"""

from __future__ import annotations

import time
from pathlib import Path

from tests.deepep_a4.store.test_sources import sh

PARTS = 16


def _store_with_parts(tmp: Path) -> tuple[Path, list[str]]:
    """A tree of many folders with a few files each, split into PARTS parts the way _publish_parts splits
    (files only, spread over every part, so every part needs most folders), in a folder store."""
    src = tmp / "src"
    for a in range(4):
        for b in range(4):
            for c in range(3):
                d = src / f"a{a}" / f"b{b}" / f"c{c}"
                d.mkdir(parents=True)
                for f in range(PARTS):
                    (d / f"f{f}").write_text(f"{a}{b}{c}{f}\n")
    (src / "top").write_text("no parent folder\n")
    (src / "a0" / "link").symlink_to("b0")
    out = sh(
        tmp,
        """
cd "$T/src" && find . \\( -type f -o -type l \\) -printf '%P\\n' | sort >"$T/all"
mkdir -p "$T/lists"
i=0
while IFS= read -r f; do printf '%s\\n' "$f" >>"$T/lists/$(printf %02d $((i % PARTS)))"; i=$((i + 1)); done <"$T/all"
for l in "$T"/lists/*; do
  n="$(basename "$l")"
  tar -cf "$T/$n.tar" -C "$T/src" --no-recursion -T "$l"
  store_put "artifacts/t/key/b1/$n.tar" "$T/$n.tar" >/dev/null
done
""",
        DEEPEP_STORE_URL=str(tmp / "store"),
        PARTS=str(PARTS),
    )
    assert out.returncode == 0, out.stderr
    return src, [f"b1/{i:02d}.tar" for i in range(PARTS)]


RESTORE = """
STORE_TRUST_PUBLISHED=1 PHASE=t
_PART_BASE=artifacts/t/key
for round in $(seq "$ROUNDS"); do
  _PART_DIR="$T/root-$round"
  rm -rf "$_PART_DIR" && mkdir -p "$_PART_DIR"
  # As _restore_parts does: fetch every part, check their members together, then unpack them side by side.
  _parallel _fetch_part $NAMES || { echo "round $round failed to fetch"; exit 1; }
  _check_part_members /dev/null $NAMES  # no size list here: test_store_archives.py checks the bound
  _parallel _unpack_part $NAMES || { echo "round $round failed"; exit 1; }
  echo "round $round ok"
  ((SECONDS < BOUND_S)) || break
done
"""


def test_every_folder_a_part_needs_exists_before_its_tar_runs(tmp_path: Path) -> None:
    """Deterministic: a `tar -x` that finds a member's parent folder missing fails here, so the restore must
    have made them first; then nothing is left for concurrent tars to race on."""
    _, names = _store_with_parts(tmp_path)
    guard = """
tar() {
  if [[ $1 == -xf ]]; then
    local m
    while IFS= read -r m; do
      [[ $m != */* || -d $4/${m%/*} ]] || { echo "tar -x would make ${m%/*} itself" >&2; return 2; }
    done < <(command tar -tf "$2" --quoting-style=literal)
  fi
  command tar "$@"
}
"""
    out = sh(
        tmp_path,
        guard + RESTORE,
        DEEPEP_STORE_URL=str(tmp_path / "store"),
        NAMES=" ".join(names),
        ROUNDS="1",
        BOUND_S="60",
    )
    assert out.returncode == 0 and "round 1 ok" in out.stdout, out.stdout + out.stderr


def test_sixteen_parts_unpacked_at_once_into_one_folder_never_collide(tmp_path: Path) -> None:
    """The race itself, as often as 20 s allow (at most 12 rounds of 16 tars at once): every round restores
    the whole tree, links included, with no "Cannot open"."""
    src, names = _store_with_parts(tmp_path)
    started = time.monotonic()
    out = sh(
        tmp_path,
        RESTORE,
        DEEPEP_STORE_URL=str(tmp_path / "store"),
        NAMES=" ".join(names),
        ROUNDS="12",
        BOUND_S="20",
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "Cannot open" not in out.stderr
    rounds = out.stdout.count(" ok")
    assert rounds >= 1
    want = sorted(str(p.relative_to(src)) for p in src.rglob("*"))
    for r in range(1, rounds + 1):
        root = tmp_path / f"root-{r}"
        assert sorted(str(p.relative_to(root)) for p in root.rglob("*")) == want
        assert (root / "a0" / "link").readlink() == Path("b0")
    assert time.monotonic() - started < 60

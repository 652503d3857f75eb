"""Every archive the store hands a node is checked before it is unpacked (scripts/install/store.sh store_untar,
_check_part_members, _check_members) and unpacked with `--no-same-owner --no-same-permissions` (issue 44):
member names with control characters are refused, a part's folders come from the checked listing, devices,
fifos and hard links out are refused in single archives too, no setuid bit or foreign owner survives, and a
part may not unpack to more than the bytes its list (KEY.parts, pinned by the manifest) records.

As root (these tests run as root in CI's container) GNU tar keeps owners and modes by default (GNU tar manual,
"Options Controlling the Extraction": --same-owner and --same-permissions are the superuser's defaults)."""

from __future__ import annotations

import io
import os
import stat
import tarfile
from pathlib import Path

import pytest

from tests.deepep_a4.store.test_sources import sh

AS_ROOT = os.geteuid() == 0


def tar_of(path: Path, members: list[tuple[tarfile.TarInfo, bytes]], gz: bool = False) -> Path:
    with tarfile.open(path, "w:gz" if gz else "w", format=tarfile.GNU_FORMAT) as tar:
        for info, data in members:
            info.size = len(data) if info.type == tarfile.REGTYPE else 0
            tar.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
    return path


def member(
    name: str, kind: bytes = tarfile.REGTYPE, mode: int = 0o644, uid: int = 0, link: str = ""
) -> tarfile.TarInfo:
    info = tarfile.TarInfo(name)
    info.type, info.mode, info.uid, info.gid, info.linkname = kind, mode, uid, uid, link
    return info


SINGLE = """
STORE_TRUST_PUBLISHED=1 PHASE=t ARTIFACT_PARTS=0
store_put artifacts/t/key.tar.gz "$T/a.tar.gz" >/dev/null
_restore artifacts/t/key.tar.gz "$CACHE/t.tar.gz" "$T/out" && echo restored
"""

PARTS = """
STORE_TRUST_PUBLISHED=1 PHASE=t
store_put artifacts/t/key/b1/00.tar "$T/00.tar" >/dev/null
echo "b1/00.tar ${BYTES:-$(stat -c %s "$T/00.tar")}" >"$T/list"
store_put artifacts/t/key.parts "$T/list" >/dev/null
_restore_parts artifacts/t/key.parts "$T/out" "" && echo restored
"""


def test_a_part_member_named_with_a_newline_makes_no_folder_outside_the_root(tmp_path: Path) -> None:
    """`tar -tf --quoting-style=literal` printed `ok\\n/ABS/outside/made/f` as two lines; the second one's folder
    went to `mkdir -p` as an absolute path."""
    outside = tmp_path / "outside"
    tar_of(tmp_path / "00.tar", [(member(f"ok\n{outside}/made/f"), b"x")])
    out = sh(tmp_path, PARTS, DEEPEP_STORE_URL=str(tmp_path / "store"))
    assert out.returncode != 0 and "control character" in out.stderr, out.stdout + out.stderr
    assert not outside.exists()


@pytest.mark.parametrize(
    ("bad", "why"),
    [
        ([member("dev/null2", tarfile.CHRTYPE)], "of type c"),
        ([member("run/fifo", tarfile.FIFOTYPE)], "of type p"),
        # GNU tar strips a hard link target's leading ../ and / itself (it says so); through a symlink it would
        # reach out: refused
        (
            [member("lib", tarfile.SYMTYPE, link="/etc"), member("x", tarfile.LNKTYPE, link="lib/passwd")],
            "below the link",
        ),
        ([member("../escape")], "with .."),
        ([member("tab\there")], "control character"),
    ],
)
def test_a_single_archive_gets_the_member_check(tmp_path: Path, bad: list[tarfile.TarInfo], why: str) -> None:
    tar_of(tmp_path / "a.tar.gz", [(member("bin/ok"), b"ok\n"), *((b, b"x") for b in bad)], gz=True)
    out = sh(tmp_path, SINGLE, DEEPEP_STORE_URL=str(tmp_path / "store"))
    assert out.returncode != 0 and "refused" in out.stderr and why in out.stderr, out.stdout + out.stderr
    assert not (tmp_path / "out" / "bin" / "ok").exists()  # nothing unpacked


@pytest.mark.skipif(not AS_ROOT, reason="only root's tar keeps owners and setuid bits by default")
def test_no_setuid_bit_or_foreign_owner_survives_the_unpack(tmp_path: Path) -> None:
    tar_of(tmp_path / "a.tar.gz", [(member("bin/tool", mode=0o4755, uid=4321), b"#!/bin/sh\n")], gz=True)
    out = sh(tmp_path, SINGLE, DEEPEP_STORE_URL=str(tmp_path / "store"))
    assert out.returncode == 0, out.stderr
    st = (tmp_path / "out" / "bin" / "tool").stat()
    assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID) and st.st_uid == 0
    assert st.st_mode & stat.S_IXUSR  # still a program


@pytest.mark.skipif(not AS_ROOT, reason="only root's tar keeps owners and setuid bits by default")
def test_parts_unpack_without_setuid_bits_or_foreign_owners(tmp_path: Path) -> None:
    tar_of(tmp_path / "00.tar", [(member("venv/bin/tool", mode=0o6755, uid=4321), b"#!/bin/sh\n")])
    out = sh(tmp_path, PARTS, DEEPEP_STORE_URL=str(tmp_path / "store"))
    assert out.returncode == 0, out.stderr
    st = (tmp_path / "out" / "venv" / "bin" / "tool").stat()
    assert not st.st_mode & (stat.S_ISUID | stat.S_ISGID) and st.st_uid == 0


def test_a_part_that_unpacks_beyond_the_bytes_its_list_records_is_refused(tmp_path: Path) -> None:
    """A sparse member: a 10 KB part that unpacks to 300 MB. Its list (pinned by the manifest) records the
    part's bytes; an uncompressed tar's members never hold more."""
    out = sh(
        tmp_path,
        'mkdir -p "$T/src" && truncate -s 300M "$T/src/big" && tar --sparse -cf "$T/00.tar" -C "$T/src" big\n' + PARTS,
        DEEPEP_STORE_URL=str(tmp_path / "store"),
    )
    assert out.returncode != 0 and "314572800 bytes, more than the" in out.stderr, out.stdout + out.stderr
    assert not (tmp_path / "out" / "big").exists()


def test_a_part_within_its_recorded_bytes_unpacks(tmp_path: Path) -> None:
    tar_of(tmp_path / "00.tar", [(member("venv/lib/a.so"), b"a" * 5000), (member("venv/top"), b"t")])
    out = sh(tmp_path, PARTS, DEEPEP_STORE_URL=str(tmp_path / "store"))
    assert out.returncode == 0 and "restored" in out.stdout, out.stderr
    assert (tmp_path / "out" / "venv" / "lib" / "a.so").read_bytes() == b"a" * 5000
    other = tmp_path / "x"
    other.mkdir()
    (other / "00.tar").write_bytes((tmp_path / "00.tar").read_bytes())
    again = sh(other, PARTS, BYTES="100", DEEPEP_STORE_URL=str(other / "store"))
    assert again.returncode != 0 and "more than the 100 its list records" in again.stderr  # 5001 bytes


PINNED = """
STORE_TRUST_PUBLISHED=0 PHASE=t ARTIFACT_PARTS=0
store_put artifacts/t/key.tar.gz "$T/a.tar.gz" >/dev/null
printf '%s  %s  %s\\n' "$(sha256_of "$T/a.tar.gz")" artifacts/t/key.tar.gz "$BYTES" >"$T/manifest"
STORE_MANIFEST="$(sha256_of "$T/manifest")"
store_put "manifests/$STORE_MANIFEST.txt" "$T/manifest" >/dev/null
_restore artifacts/t/key.tar.gz "$CACHE/t.tar.gz" "$T/out" && echo restored
"""


@pytest.mark.parametrize(("recorded", "ok"), [("1048576", True), ("1000", False)])
def test_a_single_archive_unpacks_no_more_than_the_manifest_records(tmp_path: Path, recorded: str, ok: bool) -> None:
    """A 1 KB tar.gz of zeros unpacks to 1 MB: the manifest the stack pins records each archive's unpacked bytes
    (deepep_a4/store/command.py manifest_text, the publish step alike), and the node refuses more."""
    tar_of(tmp_path / "a.tar.gz", [(member("zeros"), bytes(1 << 20))], gz=True)
    assert (tmp_path / "a.tar.gz").stat().st_size < 4096
    out = sh(tmp_path, PINNED, BYTES=recorded, DEEPEP_STORE_URL=str(tmp_path / "store"))
    if ok:
        assert out.returncode == 0 and "restored" in out.stdout, out.stderr
    else:
        assert out.returncode != 0 and "1048576 bytes, more than the 1000 its list records" in out.stderr, out.stderr
        assert not (tmp_path / "out" / "zeros").exists()

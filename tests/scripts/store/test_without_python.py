"""scripts/install/store.sh with no python3 on PATH, as the supported profile's staging container runs it.

The staging image (buildpack-deps:noble-curl, components/config/keys.py STAGING_IMAGE) brings bash, curl,
coreutils, sed, grep and tar, and no Python: store.sh URL-encodes object names and reads the metadata
server's token and an object's sha256 out of their JSON with bash and sed alone. Every test runs store.sh
with a PATH whose folder holds links to those tools only, and checks first that python3 is not among them.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import threading
import urllib.parse
from collections.abc import Iterator
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.deepep_a4.store.test_sources import FakeGcs, sh

# What store.sh and test_store's prelude call, and nothing else (the image's tools, python3 not among them).
TOOLS = "bash curl sed grep tr head cut cat sha256sum mktemp mkdir rm mv cp chmod dirname date tar gzip".split()
STORE = "gs://bucket/team/deepep"
PRETTY_TOKEN = '{\n  "token_type" : "Bearer",\n\t"expires_in":\n    3599 ,\n  "access_token"  :  "ya29.c.b0-A_x"\n}\n'


@pytest.fixture
def bin_dir(tmp_path: Path) -> Path:
    d = tmp_path / "bin"
    d.mkdir()
    for name in TOOLS:
        real = shutil.which(name)
        assert real, f"{name} is needed for this test"
        (d / name).symlink_to(real)
    assert shutil.which("python3", path=str(d)) is None and shutil.which("python", path=str(d)) is None
    return d


def run(tmp: Path, bin_dir: Path, script: str, **env: str) -> Any:
    out = sh(tmp, script, PATH=str(bin_dir), **env)
    assert "python3" not in out.stderr, out.stderr  # "python3: command not found" would say it was called
    return out


# -- URL encoding ------------------------------------------------------------------------------------

NAMES = [
    "team/deepep/sources/a b+c.tar.gz",
    "team/deepep/artifacts/nvshmem/0123abcd.parts",
    "x~y_z-1.2/%25?#&=;:@!$'()*,[]",
    "unicode/ünï cödé",
]


@pytest.mark.parametrize("name", NAMES)
def test_an_object_name_is_percent_encoded_byte_by_byte_slash_included(
    tmp_path: Path, bin_dir: Path, name: str
) -> None:
    out = run(tmp_path, bin_dir, '_urlenc "$NAME"', NAME=name, LC_ALL="C.UTF-8")
    assert out.returncode == 0, out.stderr
    # urllib's quote with safe="": every byte outside A-Za-z0-9._~- as %XX, as the JSON API's object path wants.
    assert out.stdout == urllib.parse.quote(name, safe="") + "\n"


def test_slash_plus_and_space_are_encoded_and_the_unreserved_characters_are_not(tmp_path: Path, bin_dir: Path) -> None:
    out = run(tmp_path, bin_dir, '_urlenc "a/b+c d~e_f-g.h"')
    assert out.stdout == "a%2Fb%2Bc%20d~e_f-g.h\n"


# -- the metadata server's token ---------------------------------------------------------------------

# A curl that answers the metadata server's token request with $TOKEN_BODY (the shebang names bash by path).
FAKE_CURL = '#!{bash}\n[[ "$*" == *service-accounts/default/token* ]] || exit 7\nprintf "%s" "$TOKEN_BODY"\n'


def fake_curl_bin(tmp: Path, bin_dir: Path) -> Path:
    (bin_dir / "curl").unlink()
    (bin_dir / "curl").write_text(FAKE_CURL.format(bash=shutil.which("bash")))
    (bin_dir / "curl").chmod(0o755)
    return bin_dir


TOKEN_SCRIPT = '_gcs_token >/dev/null; echo "$_GCS_TOKEN $((_GCS_TOKEN_UNTIL - SECONDS))"'


@pytest.mark.parametrize(
    "body",
    [
        json.dumps({"access_token": "ya29.c.b0-A_x", "expires_in": 3599, "token_type": "Bearer"}),
        json.dumps({"access_token": "ya29.c.b0-A_x", "expires_in": 3599}, separators=(",", ":")),
        PRETTY_TOKEN,
        PRETTY_TOKEN.replace("\n", "\r\n"),
    ],
)
def test_the_token_and_its_lifetime_are_read_from_the_metadata_servers_json(
    tmp_path: Path, bin_dir: Path, body: str
) -> None:
    out = run(tmp_path, fake_curl_bin(tmp_path, bin_dir), TOKEN_SCRIPT, DEEPEP_STORE_URL=STORE, TOKEN_BODY=body)
    assert out.returncode == 0, out.stderr
    token, left = out.stdout.split()
    assert token == "ya29.c.b0-A_x"
    assert 3599 - 60 - 2 <= int(left) <= 3599 - 60  # cached until a minute before it expires


def test_an_answer_without_a_lifetime_is_cached_five_minutes(tmp_path: Path, bin_dir: Path) -> None:
    body = '{"access_token": "tok"}'
    out = run(tmp_path, fake_curl_bin(tmp_path, bin_dir), TOKEN_SCRIPT, DEEPEP_STORE_URL=STORE, TOKEN_BODY=body)
    assert out.stdout.split()[0] == "tok" and 238 <= int(out.stdout.split()[1]) <= 240


@pytest.mark.parametrize("body", ['{"error": "no service account"}', '{"access_token": "a\\"b"}', "<html>"])
def test_an_answer_without_a_plain_access_token_ends_the_store(tmp_path: Path, bin_dir: Path, body: str) -> None:
    out = run(tmp_path, fake_curl_bin(tmp_path, bin_dir), TOKEN_SCRIPT, DEEPEP_STORE_URL=STORE, TOKEN_BODY=body)
    assert out.returncode == 1 and "answered no access_token" in out.stderr
    assert body not in out.stderr  # the answer itself is not logged: it might hold a token


# -- the object's sha256 in Cloud Storage's metadata ---------------------------------------------------


class PrettyGcs(FakeGcs):
    """test_store's fake Cloud Storage, answering as the JSON API does: indented, more fields than read."""

    def _send(self, code: int, body: bytes = b"", headers: dict[str, str] | None = None) -> None:
        try:
            doc = json.loads(body)
        except ValueError:
            doc = None
        if isinstance(doc, dict) and "metadata" in doc:
            doc = {"kind": "storage#object", "id": "bucket/x/1", "md5Hash": "zz==", **doc, "crc32c": "AAAAAA=="}
        if isinstance(doc, dict):
            body = json.dumps(doc, indent=2, separators=(",", " : ")).encode()
        super()._send(code, body, headers)


@pytest.fixture
def gcs() -> Iterator[str]:
    FakeGcs.objects, FakeGcs.sessions, FakeGcs.seen_auth = {}, {}, set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), PrettyGcs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def gcs_env(url: str) -> dict[str, str]:
    return {"DEEPEP_STORE_URL": STORE, "DEEPEP_GCS_API": url, "DEEPEP_METADATA_URL": url}


REL = "sources/a b+c.tar.gz"
OBJECT = "team/deepep/" + REL


def test_an_object_round_trips_through_cloud_storage_by_its_encoded_name(
    tmp_path: Path, bin_dir: Path, gcs: str
) -> None:
    out = run(
        tmp_path,
        bin_dir,
        'echo one >"$T/a"; store_put "$REL" "$T/a" && store_get "$REL" "$T/got" && cat "$T/got"',
        REL=REL,
        **gcs_env(gcs),
    )
    assert out.returncode == 0 and out.stdout.strip().endswith("one"), out.stderr
    assert FakeGcs.seen_auth == {"Bearer tok"}
    data, meta = FakeGcs.objects[OBJECT]
    assert data == b"one\n" and meta == {"sha256": hashlib.sha256(b"one\n").hexdigest()}


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"note": 'a } with "sha256": "0000" { in it', "owner": "team"},  # braces and quotes inside other values
    ],
)
def test_the_digest_is_read_from_the_objects_metadata(
    tmp_path: Path, bin_dir: Path, gcs: str, extra: dict[str, str]
) -> None:
    digest = hashlib.sha256(b"one\n").hexdigest()
    FakeGcs.objects[OBJECT] = (b"one\n", {**extra, "sha256": digest, "z": "last"})
    out = run(tmp_path, bin_dir, 'store_get "$REL" "$T/got" && cat "$T/got"', REL=REL, **gcs_env(gcs))
    assert out.returncode == 0 and out.stdout == "one\n", out.stderr


@pytest.mark.parametrize(
    ("meta", "said"),
    [
        (
            {"sha256": hashlib.sha256(b"two\n").hexdigest()},
            "published digest is '" + hashlib.sha256(b"two\n").hexdigest(),
        ),
        ({}, "published digest is 'missing'"),
        ({"sha256x": hashlib.sha256(b"one\n").hexdigest()}, "published digest is 'missing'"),
    ],
)
def test_an_object_whose_metadata_digest_is_wrong_or_missing_is_refused(
    tmp_path: Path, bin_dir: Path, gcs: str, meta: dict[str, str], said: str
) -> None:
    FakeGcs.objects[OBJECT] = (b"one\n", meta)
    out = run(tmp_path, bin_dir, 'store_get "$REL" "$T/got"', REL=REL, **gcs_env(gcs))
    assert out.returncode == 1 and "a corrupt or tampered object" in out.stderr and said in out.stderr
    assert not (tmp_path / "got").exists() and not (tmp_path / "got.part").exists()


def test_a_top_level_sha256_is_not_the_objects_digest(tmp_path: Path, bin_dir: Path) -> None:
    digest = hashlib.sha256(b"one\n").hexdigest()
    script = 'printf \'{"sha256": "%s", "metadata": {"other": "x"}}\' "$D" | _gcs_meta_sha256; echo "[$?]"'
    out = run(tmp_path, bin_dir, script, D=digest)
    assert out.stdout == "[0]\n"

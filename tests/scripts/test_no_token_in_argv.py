"""No token in a process's argv: store.sh and the installer hand curl the Authorization header on stdin.

A node's process list (ps, /proc/PID/cmdline) is readable by every user and every host-PID container, so a
token on curl's command line is a token anyone on the node can take.
"""

from __future__ import annotations

import re
import shutil
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path

import pytest

from deepep_a4.plan import engine as plan_engine
from tests.conftest import ROOT, plan
from tests.deepep_a4.store.test_sources import FakeGcs, sh

# A curl that writes its argv (one argument a line) to $ARGV_LOG, then runs the real one.
FAKE_CURL = """#!/bin/bash
printf '%s\\n' "$@" >>"$ARGV_LOG"
printf -- '--\\n' >>"$ARGV_LOG"
exec {real} "$@"
"""
BEARER_ON_ARGV = re.compile(r"curl[^\n|]*-H\s+[\"']Authorization: Bearer \$")


def test_store_sh_never_puts_the_token_on_curls_argv(tmp_path: Path) -> None:
    real = shutil.which("curl")
    assert real, "curl is needed for this test"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "curl").write_text(FAKE_CURL.format(real=real))
    (bin_dir / "curl").chmod(0o755)
    log = tmp_path / "argv.log"
    FakeGcs.objects, FakeGcs.sessions, FakeGcs.seen_auth = {}, {}, set()
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGcs)  # test_store's fake Cloud Storage
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        out = sh(
            tmp_path,
            'echo one >"$T/a"; store_put artifacts/x/k "$T/a" && store_get artifacts/x/k "$T/got" && cat "$T/got"',
            PATH=f"{bin_dir}:/usr/bin:/bin",
            ARGV_LOG=str(log),
            DEEPEP_STORE_URL="gs://bucket/p",
            DEEPEP_GCS_API=url,
            DEEPEP_METADATA_URL=url,
        )
    finally:
        server.shutdown()
    assert out.stdout.strip().endswith("one"), out.stderr
    assert FakeGcs.seen_auth == {"Bearer tok"}  # the token did reach the server, in the header
    calls = log.read_text().split("--\n")
    assert len([c for c in calls if c.strip()]) >= 4  # token, upload start, upload, metadata, media
    assert "tok" not in log.read_text().split(), "the token appears in curl's argv"
    assert "Bearer" not in log.read_text()


@pytest.mark.parametrize("stack", plan_engine.available_stacks())
def test_no_rendered_script_puts_a_bearer_token_on_argv(stack: str) -> None:
    files = plan(stack).files
    assert files
    for path, text in files.items():
        assert not BEARER_ON_ARGV.search(text), f"{path}: an Authorization header on curl's argv"
    for script in (ROOT / "scripts").rglob("*.sh"):
        assert not BEARER_ON_ARGV.search(script.read_text()), f"{script}: an Authorization header on argv"

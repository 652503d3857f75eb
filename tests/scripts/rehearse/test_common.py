"""The probes' shared line: what counts as the seam's FAIL and what is the probe's own bug."""

from __future__ import annotations

import io
import socket
import threading
from http.client import IncompleteRead

import pytest

from scripts.rehearse import common


def run(check: object) -> dict[str, object]:
    out = io.StringIO()
    common.run_seam("stage-dns", check, out)  # type: ignore[arg-type]
    line = common.parse_line(out.getvalue())
    assert line is not None and set(line) == {"seam", "status", "evidence", "seconds"}
    return line


def test_an_answer_cut_off_mid_body_is_the_seams_fail() -> None:
    # A server that promises 100 bytes and sends 5: urllib raises http.client.IncompleteRead.
    with socket.create_server(("127.0.0.1", 0)) as server:
        port = server.getsockname()[1]

        def answer() -> None:
            conn, _ = server.accept()
            with conn:
                conn.recv(4096)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nshort")

        thread = threading.Thread(target=answer, daemon=True)
        thread.start()
        line = run(lambda: common.http("GET", f"http://127.0.0.1:{port}/", timeout=5).text())
        thread.join(timeout=5)
    assert line["status"] == "FAIL" and "IncompleteRead" in str(line["evidence"])


def test_a_bug_of_the_probe_is_not_a_fail() -> None:
    def bug() -> str:
        raise TypeError("a probe's own bug")

    with pytest.raises(TypeError):
        run(bug)


def test_evidence_is_one_trimmed_line() -> None:
    line = run(lambda: "a\nb " + "x" * 5000)
    text = str(line["evidence"])
    assert "\n" not in text and len(text) <= common.EVIDENCE_MAX and " ... " in text and text.startswith("a b x")


def test_refused_and_timeout_errors_are_fails() -> None:
    line = run(lambda: (_ for _ in ()).throw(ConnectionRefusedError(111, "Connection refused")))
    assert line["status"] == "FAIL" and "ConnectionRefusedError" in str(line["evidence"])
    assert run(lambda: (_ for _ in ()).throw(IncompleteRead(b"")))["status"] == "FAIL"

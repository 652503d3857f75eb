"""What every rehearsal probe shares: the REHEARSAL line, its timing, the inputs, name resolution, HTTP and TCP.

Stdlib only (Python 3.11+): the probes run in a CPU pod, a GCE startup script and a Cloud Build step, each of
which has python3 and nothing else of ours. A probe prints exactly one line per seam on stdout,

    REHEARSAL {"seam": "stage-dns", "status": "PASS", "evidence": "...", "seconds": 0.012}

and exits 0 whether its seams PASS or FAIL: a FAIL is the rehearsal's finding, not the probe's. It exits 2 when
an input (an environment variable) is missing or malformed, which is a bug of whatever rendered it, and
with Python's own traceback on a bug of its own. Evidence is the request or command and its answer, trimmed;
no token or other secret ever goes into it.
"""

from __future__ import annotations

import json
import socket
import ssl
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.client import HTTPException
from typing import TextIO

LINE_PREFIX = "REHEARSAL "
EVIDENCE_MAX = 900  # characters of evidence on a line: enough for a request, its status and the answer's start
EXIT_INPUT = 2
# A hosts file (the /etc/hosts format: "ADDRESS NAME [NAME...]") that replaces DNS for the resolution seams:
# tests point it at 127.0.0.1, or leave a name out to break resolution.
HOSTS_VAR = "REHEARSAL_HOSTS"


class SeamFailedError(Exception):
    """The seam is broken; the message is the evidence."""


class InputError(Exception):
    """An input is missing or malformed: the rendering's bug, not the seam's (exit 2)."""


def trim(text: str, limit: int = EVIDENCE_MAX) -> str:
    """One line, at most `limit` characters: the start and the end of a long text, joined by ' ... '."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    half = (limit - 5) // 2
    return f"{text[:half]} ... {text[-half:]}"


def line(seam: str, ok: bool, evidence: str, seconds: float) -> str:
    doc = {"seam": seam, "status": "PASS" if ok else "FAIL", "evidence": trim(evidence), "seconds": round(seconds, 3)}
    return LINE_PREFIX + json.dumps(doc)


def parse_line(text: str) -> dict[str, object] | None:
    """The REHEARSAL line's object, None for any other line (the command reads a pod's log with this)."""
    return json.loads(text[len(LINE_PREFIX) :]) if text.startswith(LINE_PREFIX) else None


def run_seam(
    seam: str, check: Callable[[], str], out: TextIO | None = None, clock: Callable[[], float] = time.monotonic
) -> bool:
    """Runs `check` (it returns the PASS evidence, or raises SeamFailedError with the FAIL evidence) and prints
    the seam's line. A network or protocol error is the seam's FAIL too; anything else is a bug and propagates."""
    t0 = clock()
    try:
        ok, evidence = True, check()
    except SeamFailedError as err:
        ok, evidence = False, str(err)
    except (OSError, HTTPException, ValueError, KeyError) as err:  # refused, cut off, not JSON, no field
        ok, evidence = False, f"{type(err).__name__}: {err}"
    print(line(seam, ok, evidence, clock() - t0), file=out or sys.stdout, flush=True)
    return ok


def main_of(probe: Callable[[Inputs, TextIO], None], env: Mapping[str, str], out: TextIO | None = None) -> int:
    """Runs a probe: 0 once its lines are printed, 2 on a missing input (one line on stderr)."""
    try:
        probe(Inputs(env), out or sys.stdout)
    except InputError as err:
        print(f"rehearsal probe: {err}", file=sys.stderr)
        return EXIT_INPUT
    return 0


@dataclass(frozen=True)
class Inputs:
    """The probe's environment variables, with one-line errors that name the variable."""

    env: Mapping[str, str]

    def need(self, name: str) -> str:
        value = self.env.get(name, "").strip()
        if not value:
            raise InputError(f"{name} is not set (see this probe's docstring for its inputs)")
        return value

    def get(self, name: str, default: str = "") -> str:
        return self.env.get(name, "").strip() or default

    def port(self, name: str) -> int:
        text = self.need(name)
        if not text.isdigit() or not 0 < int(text) < 65536:
            raise InputError(f"{name}={text!r} is not a TCP port")
        return int(text)

    def number(self, name: str, default: float) -> float:
        text = self.get(name)
        try:
            value = float(text) if text else default
        except ValueError:
            raise InputError(f"{name}={text!r} is not a number") from None
        if value < 0:
            raise InputError(f"{name}={text!r} must not be negative")
        return value


# -- names ---------------------------------------------------------------------------------------------------

Resolver = Callable[[str], list[str]]


def system_resolver(name: str) -> list[str]:
    """The addresses the system resolver (in a pod: kube-dns through /etc/resolv.conf) gives NAME."""
    return sorted({str(info[4][0]) for info in socket.getaddrinfo(name, None, proto=socket.IPPROTO_TCP)})


def hosts_resolver(path: str) -> Resolver:
    """Names from a hosts file only; a name it lacks does not resolve (socket.gaierror, as from DNS)."""
    table: dict[str, list[str]] = {}
    with open(path, encoding="utf-8") as f:
        for raw in f:
            fields = raw.split("#", 1)[0].split()
            for name in fields[1:]:
                table.setdefault(name.lower(), []).append(fields[0])

    def resolve(name: str) -> list[str]:
        if name.lower() not in table:
            raise socket.gaierror(socket.EAI_NONAME, f"{name} is not in {path}")
        return table[name.lower()]

    return resolve


def resolver(inputs: Inputs) -> Resolver:
    path = inputs.get(HOSTS_VAR)
    return hosts_resolver(path) if path else system_resolver


def check_names(resolve: Resolver, names: tuple[str, ...]) -> str:
    """PASS evidence when every name resolves; SeamFailedError naming those that do not."""
    got, failed = [], []
    for name in names:
        try:
            got.append(f"{name} -> {', '.join(resolve(name))}")
        except OSError as err:
            failed.append(f"{name}: {err}")
    if failed:
        raise SeamFailedError("getaddrinfo: " + "; ".join(failed + got))
    return "getaddrinfo: " + "; ".join(got)


# -- HTTP ----------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Reply:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    def text(self, limit: int = 300) -> str:
        return self.body[:limit].decode("utf-8", "replace")

    def json(self) -> dict[str, object]:
        doc = json.loads(self.body)
        if not isinstance(doc, dict):
            raise ValueError(f"expected a JSON object, got {self.text(80)!r}")
        return doc


def _opener(context: ssl.SSLContext | None) -> urllib.request.OpenerDirector:
    # No proxy, whatever the environment says: the metadata server refuses proxied requests, and a probe
    # proves this machine's own path to each endpoint.
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if context is not None:
        handlers.append(urllib.request.HTTPSHandler(context=context))
    return urllib.request.build_opener(*handlers)


def http(
    method: str,
    url: str,
    *,
    headers: Mapping[str, str] | None = None,
    data: bytes | None = None,
    timeout: float = 30.0,
    context: ssl.SSLContext | None = None,
    sink: Callable[[bytes], None] | None = None,
) -> Reply:
    """One request; an HTTP error status is a Reply too. With `sink`, a 2xx body streams into it in 1 MiB
    chunks (a store part can be hundreds of MB) and the Reply's body stays empty."""
    if not url.startswith(("http://", "https://")):
        raise ValueError(f"not an http(s) URL: {url}")
    req = urllib.request.Request(url, data=data, headers=dict(headers or {}), method=method)  # noqa: S310
    try:
        with _opener(context).open(req, timeout=timeout) as resp:
            if sink is None:
                return Reply(resp.status, resp.read(), dict(resp.headers))
            while chunk := resp.read(1 << 20):
                sink(chunk)
            return Reply(resp.status, b"", dict(resp.headers))
    except urllib.error.HTTPError as err:
        return Reply(err.code, err.read(), dict(err.headers or {}))


# -- TCP -----------------------------------------------------------------------------------------------------


def try_connect(host: str, port: int, timeout: float) -> str:
    """'connected' or why not ('refused', 'timed out', the OS error): one attempt, bounded by `timeout`."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return "connected"
    except ConnectionRefusedError:
        return "refused"
    except TimeoutError:
        return f"timed out after {timeout:g} s"
    except socket.gaierror:
        raise
    except OSError as err:
        return f"{type(err).__name__}: {err}"


def host_port(text: str, name: str) -> tuple[str, int]:
    """'HOST:PORT' or '[V6]:PORT' -> (host, port); InputError naming the variable otherwise."""
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise InputError(f"{name}={text!r} is not HOST:PORT")
    return host, int(port)

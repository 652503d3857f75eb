#!/usr/bin/env python3
"""Rehearsal probe: the internode pair's rendezvous, in CPU pods of the internode Indexed Job's shape (same labels,
`subdomain` of the headless Service, MASTER_ADDR, MASTER_PORT, RANK from the completion index, so the
deepep-bench-isolated and deepep-bench-internode-peers NetworkPolicies select them), plus one outsider pod that
the internode selector does not match.

    python3 probe_internode.py      # one REHEARSAL line per seam on stdout (common.py), exit 0

Seams, by role:
- rank 0 (REHEARSAL_ROLE=peer, RANK=0): internode-rendezvous. Listens on MASTER_PORT, as torch.distributed's
  TCPStore does, until every other rank said hello (PASS) or REHEARSAL_WAIT_S ran out (FAIL, naming the missing
  ranks); then it stays listening REHEARSAL_LINGER_S more, so the outsider has something to be refused by.
- rank N > 0 (REHEARSAL_ROLE=peer): internode-dns (MASTER_ADDR resolves; the pod's DNS record appears once
  rank 0 is Ready, so it retries), then internode-hello (connects, says hello, hears rank 0's welcome; retried
  until rank 0 listens). Both bounded by REHEARSAL_WAIT_S.
- outsider (REHEARSAL_ROLE=outsider): internode-outsider. Resolves MASTER_ADDR and tries one connect to
  MASTER_PORT; PASS when it is refused or dropped, FAIL when it connects. Start it after rank 0's PASS line,
  within rank 0's linger: before, a refusal would only mean that nothing listened yet.

The hello is one line each way: "HELLO deepep-a4 rank=N" (or "HELLO deepep-a4 outsider") and
"WELCOME deepep-a4 rank=0".

Inputs (environment):
  REHEARSAL_ROLE              peer | outsider (default peer)
  RANK, WORLD_SIZE            this pod's rank and the pod count, as the internode Job sets them (peer; required)
  MASTER_ADDR, MASTER_PORT    rank 0's DNS name (deepep-internode-0.SERVICE.NAMESPACE.svc.cluster.local) and port
                              (required)
  REHEARSAL_WAIT_S            how long a rank waits for its peers or rank 0 (default 300)
  REHEARSAL_LINGER_S          how long rank 0 keeps listening after its peers (default 60)
  REHEARSAL_CONNECT_TIMEOUT_S one connect attempt's bound; the outsider's counts as dropped after it (default 10)
  REHEARSAL_BIND              the address rank 0 listens on (default 0.0.0.0, every address of the pod)
  REHEARSAL_HOSTS             a hosts file that replaces DNS (tests only)
"""

from __future__ import annotations

import os
import socket
import sys
import time
from collections.abc import Callable
from typing import TextIO

try:  # in the package (tests) or next to each other (the probe pod)
    from scripts.rehearse import common
except ImportError:  # pragma: no cover - shipped as plain files
    import common  # type: ignore[no-redef]

HELLO = "HELLO deepep-a4"
WELCOME = "WELCOME deepep-a4 rank=0"
POLL_S = 1.0  # between tries: a name that does not resolve yet, a rank 0 that does not listen yet


def _line(sock: socket.socket, limit: int = 200) -> str:
    data = b""
    while not data.endswith(b"\n") and len(data) < limit:
        chunk = sock.recv(limit - len(data))
        if not chunk:
            break
        data += chunk
    return data.decode("utf-8", "replace").strip()


def listen(inputs: common.Inputs, clock: Callable[[], float] = time.monotonic) -> str:
    """Rank 0: every other rank's hello on MASTER_PORT within the wait; evidence names who came from where."""
    world = int(inputs.need("WORLD_SIZE"))
    port = inputs.port("MASTER_PORT")
    wait, linger = inputs.number("REHEARSAL_WAIT_S", 300), inputs.number("REHEARSAL_LINGER_S", 60)
    bind = inputs.get("REHEARSAL_BIND", "0.0.0.0")  # noqa: S104 (the pod's own addresses; the policies decide)
    want = set(range(1, world))
    heard: dict[int, str] = {}
    others: list[str] = []
    end = clock() + wait
    with socket.create_server((bind, port)) as server:
        server.settimeout(POLL_S)
        while clock() < end:
            try:
                conn, addr = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(5)
                try:
                    hello = _line(conn)
                    conn.sendall(f"{WELCOME}\n".encode())
                except OSError:
                    hello = ""
            rank = hello.removeprefix(f"{HELLO} rank=")
            if hello.startswith(f"{HELLO} rank=") and rank.isdigit():
                heard[int(rank)] = addr[0]
            else:
                others.append(f"{addr[0]} said {hello[:60]!r}")
            if want <= heard.keys() and end > clock() + linger:
                end = clock() + linger  # the peers are here: linger for the outsider, then stop
    evidence = f"listened on {bind}:{port}; hello from " + (
        ", ".join(f"rank {r} ({a})" for r, a in sorted(heard.items())) or "nobody"
    )
    if others:
        evidence += "; also connected: " + "; ".join(others)
    missing = sorted(want - heard.keys())
    if missing:
        raise common.SeamFailedError(f"{evidence}; no hello from rank {', '.join(map(str, missing))} in {wait:g} s")
    return evidence


def _resolve_until(resolve: common.Resolver, name: str, end: float, clock: Callable[[], float]) -> list[str]:
    while True:
        try:
            return resolve(name)
        except OSError:
            if clock() + POLL_S >= end:
                raise
            time.sleep(POLL_S)


def say_hello(inputs: common.Inputs, addrs: list[str], clock: Callable[[], float] = time.monotonic) -> str:
    """Rank N > 0: connect to rank 0, hello, welcome; retried until rank 0 listens or the wait runs out."""
    rank, port = inputs.need("RANK"), inputs.port("MASTER_PORT")
    end = clock() + inputs.number("REHEARSAL_WAIT_S", 300)
    timeout = inputs.number("REHEARSAL_CONNECT_TIMEOUT_S", 10)
    tries, last = 0, ""
    while True:
        tries += 1
        try:
            with socket.create_connection((addrs[0], port), timeout=timeout) as conn:
                conn.sendall(f"{HELLO} rank={rank}\n".encode())
                answer = _line(conn)
            if answer == WELCOME:
                return f"connect {addrs[0]}:{port} (try {tries}), sent '{HELLO} rank={rank}', got {answer!r}"
            last = f"got {answer!r}, not {WELCOME!r}"
        except OSError as err:
            last = f"{type(err).__name__}: {err}"
        if clock() + POLL_S >= end:
            raise common.SeamFailedError(f"connect {addrs[0]}:{port}: {tries} tries, the last: {last}")
        time.sleep(POLL_S)


def outsider(inputs: common.Inputs, resolve: common.Resolver) -> str:
    host, port = inputs.need("MASTER_ADDR"), inputs.port("MASTER_PORT")
    timeout = inputs.number("REHEARSAL_CONNECT_TIMEOUT_S", 10)
    try:
        addrs = resolve(host)
    except OSError as err:
        raise common.SeamFailedError(f"getaddrinfo {host}: {err}: the refusal cannot be tried") from None
    try:
        with socket.create_connection((addrs[0], port), timeout=timeout) as conn:
            conn.settimeout(timeout)
            try:
                conn.sendall(f"{HELLO} outsider\n".encode())
                answer = _line(conn)
            except OSError:
                answer = ""
    except ConnectionRefusedError:
        return f"connect {host} ({addrs[0]}):{port} -> refused"
    except TimeoutError:
        return f"connect {host} ({addrs[0]}):{port} -> timed out after {timeout:g} s (dropped)"
    except OSError as err:
        return f"connect {host} ({addrs[0]}):{port} -> {type(err).__name__}: {err}"
    raise common.SeamFailedError(
        f"connect {host} ({addrs[0]}):{port} -> connected, answer {answer!r}: a pod outside the internode "
        "selector reaches the rendezvous"
    )


def probe(inputs: common.Inputs, out: TextIO) -> None:
    role = inputs.get("REHEARSAL_ROLE", "peer")
    resolve = common.resolver(inputs)
    inputs.need("MASTER_ADDR")  # both roles need these before any seam
    inputs.port("MASTER_PORT")
    if role == "outsider":
        common.run_seam("internode-outsider", lambda: outsider(inputs, resolve), out)
        return
    if role != "peer":
        raise common.InputError(f"REHEARSAL_ROLE={role!r} is not peer or outsider")
    rank, world = inputs.need("RANK"), inputs.need("WORLD_SIZE")
    if not rank.isdigit() or not world.isdigit() or int(rank) >= int(world) or int(world) < 2:
        raise common.InputError(f"RANK={rank!r}, WORLD_SIZE={world!r}: need 0 <= RANK < WORLD_SIZE, WORLD_SIZE >= 2")
    if rank == "0":
        common.run_seam("internode-rendezvous", lambda: listen(inputs), out)
        return
    found: list[str] = []

    def dns() -> str:
        host = inputs.need("MASTER_ADDR")
        end = time.monotonic() + inputs.number("REHEARSAL_WAIT_S", 300)
        found.extend(_resolve_until(resolve, host, end, time.monotonic))
        return f"getaddrinfo {host} -> {', '.join(found)}"

    common.run_seam("internode-dns", dns, out)

    def hello() -> str:
        if not found:
            raise common.SeamFailedError("MASTER_ADDR did not resolve (internode-dns): no hello tried")
        return say_hello(inputs, found)

    common.run_seam("internode-hello", hello, out)


def main(env: dict[str, str] | None = None, out: TextIO | None = None) -> int:
    return common.main_of(probe, os.environ if env is None else env, out)


if __name__ == "__main__":
    sys.exit(main())

"""The internode pair's probe on 127.0.0.1: rank 0 and rank 1 meet; a broken rendezvous, an unresolvable
MASTER_ADDR and an outsider that gets through each FAIL. (Locally nothing drops packets, so the outsider's PASS
is shown with a refused connect; its FAIL with a rank 0 that lets it in, as a missing NetworkPolicy would.)"""

from __future__ import annotations

import io
import socket
import threading
from pathlib import Path

import pytest

from scripts.rehearse import common, probe_internode


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_of(tmp_path: Path, port: int, **more: str) -> dict[str, str]:
    hosts = tmp_path / "hosts"
    if not hosts.exists():
        hosts.write_text("127.0.0.1 deepep-internode-0.deepep-internode.deepep-a4.svc.cluster.local\n")
    return {
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "deepep-internode-0.deepep-internode.deepep-a4.svc.cluster.local",
        "MASTER_PORT": str(port),
        "REHEARSAL_HOSTS": str(hosts),
        "REHEARSAL_BIND": "127.0.0.1",
        "REHEARSAL_WAIT_S": "10",
        "REHEARSAL_LINGER_S": "0",
        "REHEARSAL_CONNECT_TIMEOUT_S": "2",
    } | more


def run(env: dict[str, str]) -> tuple[int, list[dict[str, object]]]:
    out = io.StringIO()
    rc = probe_internode.main(env=env, out=out)
    return rc, [ln for ln in map(common.parse_line, out.getvalue().splitlines()) if ln]


def start_rank0(env: dict[str, str]) -> tuple[threading.Thread, list]:
    result: list = []
    thread = threading.Thread(target=lambda: result.append(run(env | {"RANK": "0"})), daemon=True)
    thread.start()
    return thread, result


def test_rank_0_and_rank_1_meet_on_the_rendezvous_port(tmp_path: Path) -> None:
    env = env_of(tmp_path, free_port())
    thread, rank0 = start_rank0(env)
    rc, lines = run(env | {"RANK": "1"})
    thread.join(timeout=20)
    assert rc == 0
    assert [(ln["seam"], ln["status"]) for ln in lines] == [("internode-dns", "PASS"), ("internode-hello", "PASS")]
    assert "got 'WELCOME deepep-a4 rank=0'" in str(lines[1]["evidence"])
    assert rank0[0][0] == 0
    [line] = rank0[0][1]
    assert (line["seam"], line["status"]) == ("internode-rendezvous", "PASS")
    assert "hello from rank 1 (127.0.0.1)" in str(line["evidence"])


def test_a_refused_rendezvous_fails_internode_hello(tmp_path: Path) -> None:
    _, lines = run(env_of(tmp_path, free_port(), RANK="1", REHEARSAL_WAIT_S="2"))
    assert [(ln["seam"], ln["status"]) for ln in lines] == [("internode-dns", "PASS"), ("internode-hello", "FAIL")]
    assert "ConnectionRefusedError" in str(lines[1]["evidence"])


def test_an_unresolvable_master_addr_fails_internode_dns(tmp_path: Path) -> None:
    (tmp_path / "hosts").write_text("127.0.0.1 somewhere-else\n")
    _, lines = run(env_of(tmp_path, free_port(), RANK="1", REHEARSAL_WAIT_S="1"))
    assert [(ln["seam"], ln["status"]) for ln in lines] == [("internode-dns", "FAIL"), ("internode-hello", "FAIL")]


def test_rank_0_without_its_peer_fails_naming_the_missing_rank(tmp_path: Path) -> None:
    _, lines = run(env_of(tmp_path, free_port(), RANK="0", REHEARSAL_WAIT_S="1"))
    assert [(ln["seam"], ln["status"]) for ln in lines] == [("internode-rendezvous", "FAIL")]
    assert "no hello from rank 1 in 1 s" in str(lines[0]["evidence"])


def test_an_outsider_that_is_refused_passes(tmp_path: Path) -> None:
    _, lines = run(env_of(tmp_path, free_port(), REHEARSAL_ROLE="outsider"))
    assert [(ln["seam"], ln["status"]) for ln in lines] == [("internode-outsider", "PASS")]
    assert "-> refused" in str(lines[0]["evidence"])


def test_an_outsider_that_gets_through_fails_and_rank_0_names_it(tmp_path: Path) -> None:
    port = free_port()
    env = env_of(tmp_path, port, REHEARSAL_LINGER_S="3")
    thread, rank0 = start_rank0(env)
    run(env | {"RANK": "1"})  # the peer first: rank 0 then lingers for the outsider
    _, lines = run(env | {"REHEARSAL_ROLE": "outsider"})
    thread.join(timeout=20)
    assert [(ln["seam"], ln["status"]) for ln in lines] == [("internode-outsider", "FAIL")]
    assert "connected, answer 'WELCOME deepep-a4 rank=0'" in str(lines[0]["evidence"])
    assert "said 'HELLO deepep-a4 outsider'" in str(rank0[0][1][0]["evidence"])


@pytest.mark.parametrize(
    ("more", "says"),
    [
        ({"RANK": "2"}, "need 0 <= RANK < WORLD_SIZE"),
        ({"RANK": "1", "MASTER_PORT": "http"}, "MASTER_PORT='http' is not a TCP port"),
        ({"REHEARSAL_ROLE": "spy"}, "REHEARSAL_ROLE='spy' is not peer or outsider"),
    ],
)
def test_bad_inputs_are_exit_2(tmp_path: Path, more: dict[str, str], says: str, capsys: pytest.CaptureFixture) -> None:
    assert run(env_of(tmp_path, free_port()) | more) == (2, [])
    assert says in capsys.readouterr().err

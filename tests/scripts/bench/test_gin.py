"""DeepEP V2's elastic test on RDMA as V1's RDMA tests (issue 42, item 6): gIB's settings, Google's traffic class for
NCCL's Gin, and the Gin transport NCCL took in the results.

NCCL's order is applied as NVIDIA/nccl writes it (docs/platforms.md cites the lines, master 5067397c of
2026-06-11): NCCL_GIN_IB_TC, else NCCL_IB_TC, else the class the caller asked for (DeepEP's sl_idx), else 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from scripts.bench import bench_env
from scripts.bench import bench_env as gin
from tests.conftest import ROOT
from tests.scripts.bench.test_runner import fake_deepep, fake_ib_sysfs, run

ELASTIC = (ROOT / "tests/fixtures/bench/v2_elastic_synth.log").read_text()
GOOGLE_TC = int(bench_env.GIB_NCCL_ENV["NCCL_IB_TC"])
# What NCCL prints once it assigned a Gin transport to a communicator, with NCCL_DEBUG=INFO and the INIT or NET
# subsystem (src/plugin/gin.cc:158; NCCL's INFO prefix "host:pid:tid [dev] NCCL INFO ", src/debug.cc), in a
# stand-in test's `extra`. The stand-in prints it only under the settings NCCL needs to print it.
NCCL_GIN_INFO = (
    "if os.environ.get('NCCL_DEBUG') == 'INFO' and 'INIT' in os.environ.get('NCCL_DEBUG_SUBSYS', 'INIT'):\n"
    "    for r in range(2):\n"
    "        print(f'a4-0:{100 + r}:{200 + r} [{r}] NCCL INFO '\n"
    "              'GIN/Plugin: Assigned plugin GIN_IB_GDAKI type 3 to comm')\n"
)


@pytest.mark.parametrize(
    ("env", "requested", "expected"),
    [
        ({}, None, (0, "NCCL's default")),  # gin_host_gdaki.cc: NCCL_IB_TC_DEFAULT
        ({}, 3, (3, "ginTrafficClass (the caller's)")),  # DeepEP's --sl-idx reaches Gin
        ({"NCCL_IB_TC": "52"}, 3, (52, "NCCL_IB_TC")),  # NCCL_IB_TC replaces the caller's class
        ({"NCCL_IB_TC": "52", "NCCL_GIN_IB_TC": "106"}, 3, (106, "NCCL_GIN_IB_TC")),  # Gin's own wins
        ({"NCCL_GIN_IB_TC": "-1", "NCCL_IB_TC": "52"}, None, (52, "NCCL_IB_TC")),  # -1 is NCCL's "unset"
    ],
)
def test_nccls_traffic_class_order(env: dict[str, str], requested: int | None, expected: tuple[int, str]) -> None:
    assert gin.traffic_class(env, requested) == expected


def test_gin_env_names_googles_class_for_gin_itself() -> None:
    rdma, _ = bench_env.gib_env({}, "/nonexistent", ["mlx5_0"], nccl_gib=False)
    assert rdma is None  # without gIB, no class: NCCL's own choice, as for V1
    base = dict(bench_env.GIB_NCCL_ENV)
    env, note = gin.gin_env(base)
    assert env["NCCL_GIN_IB_TC"] == env["NCCL_IB_TC"] == str(GOOGLE_TC) and "NCCL_GIN_IB_TC" not in base
    # DeepEP's default sl_idx 0 as ginTrafficClass no longer decides the class.
    assert gin.traffic_class(env, 0) == (GOOGLE_TC, "NCCL_GIN_IB_TC") and f"class {GOOGLE_TC}" in note
    assert env["NCCL_DEBUG"] == "INFO" and "INIT" in env["NCCL_DEBUG_SUBSYS"]


def test_the_elastic_test_runs_with_gibs_settings_and_records_its_gin_type(tmp_path: Path) -> None:
    gib = tmp_path / "gib"
    (gib / "lib64").mkdir(parents=True)
    (gib / "lib64" / "libnccl-net.so").write_text("")
    ib = fake_ib_sysfs(tmp_path / "ib")
    deepep = fake_deepep(tmp_path, {"elastic": ELASTIC}, extra=NCCL_GIN_INFO)
    args = ["--deepep-dir", str(deepep), "--skip-nccl-check", "--tests", "elastic"]
    rc, out = run(tmp_path, *args, "--gib-dir", str(gib), "--ib-sysfs", str(ib), "--processes", "2")
    assert rc == 0, out
    seen = json.loads((tmp_path / "seen-elastic.json").read_text())["env"]
    for key, value in bench_env.GIB_NCCL_ENV.items():  # gIB's environment, as low-latency and internode get it
        assert seen[key] == value, key
    assert str(gib / "lib64") in seen["LD_LIBRARY_PATH"].split(":")
    assert gin.traffic_class(seen, 0) == (GOOGLE_TC, "NCCL_GIN_IB_TC")
    (test,) = json.loads((tmp_path / "results" / "summary.json").read_text())["tests"]
    assert test["gin"] == {"plugin": "GIN_IB_GDAKI", "type": 3, "typeName": "GIN_GDAKI", "comms": 2}
    begin = json.loads((tmp_path / "results" / "elastic.json").read_text())["begin"]
    assert begin["gin"] == {"trafficClass": GOOGLE_TC, "from": "NCCL_GIN_IB_TC"}
    assert '"mlx5_0/1": ' in out  # the NIC counters around it, as for the other RDMA tests


def test_no_gin_line_is_recorded_as_unknown_not_guessed() -> None:
    assert gin.gin_of(["plain output"])["plugin"] is None
    assert gin.gin_of(["x:1:1 [0] NCCL INFO GIN/Plugin: Failed to initialize any GIN plugin"])["plugin"] is None

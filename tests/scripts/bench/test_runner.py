"""The runner (scripts/bench/run_bench.py) with stand-in DeepEP tests: env handling, streaming, JSON, exit codes."""

from __future__ import annotations

import ctypes
import io
import json
import os
import re
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from components import config
from deepep_a4.plan import engine as plan_engine
from scripts.bench import preflight, run_bench
from tests.conftest import ROOT

FIX = ROOT / "tests" / "fixtures" / "bench"
RUN_LOG = (FIX / "h200x2_run.log").read_text()


def _raw(test: str) -> str:
    """The raw DeepEP output of one test from the real H200 run (runner lines removed)."""
    seg = RUN_LOG.split(f'"test": "{test}"}}\n', 1)[1].split("[runner] end", 1)[0]
    return seg


def fake_deepep(tmp: Path, outputs: dict[str, str], extra: str = "") -> Path:
    """A DeepEP checkout whose tests print `outputs[test]` (and record argv and env in tmp/seen-*.json)."""
    tests = tmp / "DeepEP" / "tests"
    tests.mkdir(parents=True)
    for test, script in run_bench.DEEPEP_SCRIPTS.items():
        text = outputs.get(test, "")
        (tests / script).parent.mkdir(parents=True, exist_ok=True)
        (tests / script).write_text(
            "import json, os, sys, time\n"
            f"json.dump({{'argv': sys.argv, 'env': dict(os.environ)}}, open({str(tmp / f'seen-{test}.json')!r}, 'w'))\n"
            f"{extra}\n"
            f"sys.stdout.write({text!r})\n"
        )
    return tmp / "DeepEP"


# What NVSHMEM's IBGDA transport prints with NVSHMEM_DEBUG=INFO (which the runner sets for the RDMA tests) once it
# took the GPU handler: its INFO format "<file> <line> <message>" (src/modules/transport/common/transport_common.h)
# and message (src/modules/transport/ibgda/ibgda.cpp, nvshmemt_init), in a stand-in test's `extra`.
NVSHMEM_INFO_GPU_HANDLER = (
    "if os.environ.get('NVSHMEM_DEBUG') == 'INFO':\n"
    "    print('/src/modules/transport/ibgda/ibgda.cpp 4859 NIC buffer will be on GPU memory.')\n"
    "    print('/src/modules/transport/ibgda/ibgda.cpp 4873 NIC handler will be GPU.')\n"
)


def run(tmp: Path, *args: str, env: dict[str, str] | None = None, results: str = "results") -> tuple[int, str]:
    out = io.StringIO()
    old = dict(os.environ)
    try:
        # This machine has no HCAs: the device check before RDMA tests has its own tests below.
        os.environ.update({"BENCH_SKIP_DEVICE_CHECK": "1", **(env or {})})
        rc = run_bench.main([*args, "--results-dir", str(tmp / results)], out=out)
    finally:
        os.environ.clear()
        os.environ.update(old)
    return rc, out.getvalue()


@pytest.fixture
def deepep(tmp_path: Path) -> Path:
    return fake_deepep(tmp_path, {"intranode": _raw("intranode"), "low-latency": _raw("low-latency")})


def test_runs_tests_streams_output_and_writes_json(tmp_path: Path, deepep: Path) -> None:
    rc, out = run(tmp_path, "--deepep-dir", str(deepep), "--skip-nccl-check", "--processes", "2")
    assert rc == 1, out  # the H200's low-latency output shows NVSHMEM refusing IBGDA (no NICs there)
    # Streamed: the tests' own lines appear between the runner's markers.
    assert out.index('[runner] begin {"argv"') < out.index("[tuning] Best combine") < out.index("[runner] end")
    results = tmp_path / "results"
    intra = json.loads((results / "intranode.json").read_text())
    assert intra["status"] == "passed" and intra["rc"] == 0
    assert any(r["kind"] == "best" for r in intra["records"])
    summary = json.loads((results / "summary.json").read_text())
    assert [(t["test"], t["status"]) for t in summary["tests"]] == [("intranode", "passed"), ("low-latency", "failed")]
    assert summary["tests"][1]["problems"][0].startswith("transport check FAIL: line 3: NVSHMEM could not start IBGDA")
    assert (results / "low-latency.log").read_text().startswith("[runner] begin")
    # What ran is in every begin marker and the summary; "unknown" where this machine says nothing.
    assert summary["ran"]["deepep_ref"] == "unknown" and summary["ran"]["kernel"] == os.uname().release
    assert json.loads((results / "low-latency.json").read_text())["begin"]["ran"] == summary["ran"]


def test_passes_the_stack_arguments_to_each_test(tmp_path: Path, deepep: Path) -> None:
    rc, _ = run(
        tmp_path,
        "--deepep-dir",
        str(deepep),
        "--skip-nccl-check",
        "--processes",
        "2",
        "--hidden",
        "4096",
        "--topk",
        "4",
        "--intranode-tokens",
        "1024",
        "--intranode-experts",
        "64",
        env={"BENCH_LOW_LATENCY_TOKENS": "64", "BENCH_LOW_LATENCY_EXPERTS": "32"},
    )
    assert rc == 1  # low-latency: the H200 output shows NVSHMEM refusing IBGDA; the arguments are the point
    intra = json.loads((tmp_path / "seen-intranode.json").read_text())["argv"][1:]
    assert intra == [
        "--num-processes",
        "2",
        "--num-tokens",
        "1024",
        "--hidden",
        "4096",
        "--num-topk",
        "4",
        "--num-experts",
        "64",
    ]
    ll = json.loads((tmp_path / "seen-low-latency.json").read_text())["argv"][1:]
    assert ll[ll.index("--num-tokens") + 1] == "64" and ll[ll.index("--num-experts") + 1] == "32"


def test_env_file_loaded_and_nonblocking_unset(tmp_path: Path, deepep: Path) -> None:
    env_file = tmp_path / "unified-env.sh"
    env_file.write_text("export NVSHMEM_HCA_PREFIX=mlx5\nexport TORCH_NCCL_USE_COMM_NONBLOCKING=0\nNOT_EXPORTED=1\n")
    rc, out = run(
        tmp_path,
        "--deepep-dir",
        str(deepep),
        "--skip-nccl-check",
        "--tests",
        "intranode",
        "--processes",
        "2",
        "--env-file",
        str(env_file),
        "--gib-dir",
        str(tmp_path / "no-gib"),
        env={"TORCH_NCCL_USE_COMM_NONBLOCKING": "0", "NCCL_NVLS_ENABLE": "0"},
    )
    assert rc == 0, out
    seen = json.loads((tmp_path / "seen-intranode.json").read_text())["env"]
    assert seen["NVSHMEM_HCA_PREFIX"] == "mlx5"
    assert seen["NOT_EXPORTED"] == "1"  # sourced with set -a, as the field reports' env scripts expect
    assert "TORCH_NCCL_USE_COMM_NONBLOCKING" not in seen
    assert seen["NCCL_NVLS_ENABLE"] == "0"  # the machine's own settings are kept
    assert "NCCL_NET" not in seen
    # Single-node tests always run as one node on loopback, whatever the pod says.
    assert (seen["WORLD_SIZE"], seen["RANK"], seen["MASTER_ADDR"]) == ("1", "0", "127.0.0.1")
    assert "[runner] env unset TORCH_NCCL_USE_COMM_NONBLOCKING" in out


def test_gib_settings_only_where_the_plugin_and_rdma_devices_are(tmp_path: Path) -> None:
    gib = tmp_path / "gib"
    base = {"LD_LIBRARY_PATH": "/usr/local/nvidia/lib64", "NCCL_IB_TC": "41", "TORCH_NCCL_USE_COMM_NONBLOCKING": "1"}
    env, _ = run_bench.build_env(base, None)
    assert "NCCL_NET" not in env and "TORCH_NCCL_USE_COMM_NONBLOCKING" not in env  # build_env never adds gIB
    none, note = run_bench.gib_env(env, str(gib), ["mlx5_0"])
    assert none is None and "no gIB" in note
    (gib / "lib64").mkdir(parents=True)
    (gib / "lib64" / "libnccl-net_internal.so").write_text("")
    (gib / "configs").mkdir()
    (gib / "configs" / "tuner_config_a4.txtpb").write_text("")
    # The plugin, but no RDMA device: NCCL_NET=gIB would fail NCCL's init (tests/components/test_nccl_net_rule.py).
    none, note = run_bench.gib_env(env, str(gib), [])
    assert none is None and "no RDMA device" in note
    rdma, note = run_bench.gib_env(env, str(gib), ["mlx5_0", "mlx5_1"])
    assert rdma is not None and "2 RDMA device(s)" in note
    assert rdma["NCCL_NET"] == "gIB" and "NCCL_NET" not in env  # the test's own copy
    assert rdma["NCCL_IB_TC"] == "41"  # an explicit setting wins over the field report's default
    assert rdma["NCCL_IB_QPS_PER_CONNECTION"] == "4" and rdma["NCCL_NET_GDR_LEVEL"] == "PIX"
    assert rdma["NCCL_TUNER_CONFIG_PATH"].endswith("configs/tuner_config_a4.txtpb")
    assert rdma["LD_LIBRARY_PATH"] == f"/usr/local/nvidia/lib64:{gib}/lib64"


def test_failed_test_exits_1_with_the_reason(tmp_path: Path) -> None:
    deepep = fake_deepep(tmp_path, {"intranode": (FIX / "intranode_failed.log").read_text()})
    rc, out = run(tmp_path, "--deepep-dir", str(deepep), "--skip-nccl-check", "--tests", "intranode")
    assert rc == 1
    assert "[runner] error intranode: " in out and "timeout (dispatch CPU)" in out
    doc = json.loads((tmp_path / "results" / "intranode.json").read_text())
    assert doc["status"] == "failed"


def test_truncated_output_exits_1(tmp_path: Path) -> None:
    deepep = fake_deepep(tmp_path, {"intranode": (FIX / "intranode_truncated.log").read_text()})
    rc, out = run(tmp_path, "--deepep-dir", str(deepep), "--skip-nccl-check", "--tests", "intranode")
    assert rc == 1
    assert "truncated: no '[tuning] Best combine' line" in out


def test_timeout_kills_the_test_and_exits_1(tmp_path: Path) -> None:
    deepep = fake_deepep(
        tmp_path,
        {"intranode": ""},
        extra="print('[config] num_tokens=1, hidden=1, num_topk=1', flush=True); time.sleep(60)",
    )
    rc, _ = run(
        tmp_path, "--deepep-dir", str(deepep), "--skip-nccl-check", "--tests", "intranode", "--timeout-minutes", "0.02"
    )
    assert rc == 1
    doc = json.loads((tmp_path / "results" / "intranode.json").read_text())
    assert doc["timed_out"] is True
    assert doc["problems"][0].startswith("timeout: killed after")


def test_failed_nccl_check_skips_deepep_and_blames_the_fabric(tmp_path: Path, deepep: Path) -> None:
    fake_python = tmp_path / "python"
    fake_python.write_text(
        '#!/bin/bash\nif [[ " $* " == *" --nccl-worker "* ]]; then\n'
        '  echo "NCCL error: unhandled system error"; exit 1\nfi\n'
        f'exec {sys.executable} "$@"\n'
    )
    fake_python.chmod(fake_python.stat().st_mode | stat.S_IEXEC)
    rc, _ = run(tmp_path, "--deepep-dir", str(deepep), "--python", str(fake_python), "--processes", "2")
    assert rc == 1
    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    assert [(t["test"], t["status"]) for t in summary["tests"]] == [
        ("nccl", "failed"),
        ("intranode", "skipped"),
        ("low-latency", "skipped"),
    ]
    assert "fabric" in summary["tests"][1]["problems"][0]
    assert not (tmp_path / "seen-intranode.json").exists()


IBGDA_ENV = {"NVSHMEM_REMOTE_TRANSPORT": "ibgda", "NVSHMEM_IB_ENABLE_IBGDA": "1", "NVSHMEM_IBGDA_NIC_HANDLER": "gpu"}


def run_internode(
    tmp: Path, deepep: Path, ib: Path, rank: int, env: dict[str, str] | None = None, results: str = "results"
) -> tuple[int, str]:
    """The internode test as pod `rank` of a 2-node Indexed Job runs it, with NIC counters under ib."""
    args = ["--deepep-dir", str(deepep), "--skip-nccl-check", "--tests", "internode", "--ib-sysfs", str(ib)]
    job = {"WORLD_SIZE": "2", "JOB_COMPLETION_INDEX": str(rank), "MASTER_ADDR": "localhost", "MASTER_PORT": "29500"}
    return run(tmp, *args, env=job | (env or {}), results=results)


def test_internode_rank_world_size_and_master_from_the_job(tmp_path: Path) -> None:
    deepep = fake_deepep(tmp_path, {"internode": (FIX / "r2_internode_gke.log").read_text()})
    rc, out = run_internode(tmp_path, deepep, tmp_path / "no-counters", rank=1)
    # The test completed, but without counters and with no transport named nothing proves RDMA: not a pass,
    # and not a failure a Job should retry.
    assert rc == 3, out
    (test,) = json.loads((tmp_path / "results" / "summary.json").read_text())["tests"]
    assert test["status"] == "unproven"
    assert test["problems"] == [
        "transport check not run: NVSHMEM_REMOTE_TRANSPORT=unset: the test ran without IBGDA (the installer's env "
        "file sets ibgda on a machine with RDMA NICs)",
        f"NIC check not run: NIC counters not read (no readable port_xmit_data under {tmp_path / 'no-counters'}/*/"
        "ports/*/counters): nothing shows that the traffic crossed the NICs",
    ]
    seen = json.loads((tmp_path / "seen-internode.json").read_text())["env"]
    assert (seen["WORLD_SIZE"], seen["RANK"], seen["MASTER_ADDR"]) == ("2", "1", "localhost")
    assert seen["MASTER_PORT"] == "29501"  # every test its own port, the same on every node


def fake_ib_sysfs(root: Path, hcas: int = 8) -> Path:
    for i in range(hcas):
        counters = root / f"mlx5_{i}" / "ports" / "1" / "counters"
        counters.mkdir(parents=True)
        (counters / "port_xmit_data").write_text("1000\n")
    return root


@pytest.mark.parametrize(("busy_nics", "passes"), [(8, True), (1, False)])
def test_internode_traffic_must_spread_over_the_nics(tmp_path: Path, busy_nics: int, passes: bool) -> None:
    """field report R1's PR #466 check: port_xmit_data of every NIC before and after the internode test."""
    ib = fake_ib_sysfs(tmp_path / "ib")
    send = (  # the stand-in test "sends" 1 GB over the first busy_nics NICs
        f"from pathlib import Path\nfor i in range({busy_nics}):\n"
        f"    c = Path({str(ib)!r}) / f'mlx5_{{i}}/ports/1/counters/port_xmit_data'\n"
        f"    c.write_text(str(int(c.read_text()) + 250_000_000 // {busy_nics}))\n"
    )
    deepep = fake_deepep(
        tmp_path, {"internode": (FIX / "r2_internode_gke.log").read_text()}, extra=send + NVSHMEM_INFO_GPU_HANDLER
    )
    rc, out = run_internode(tmp_path, deepep, ib, rank=0, env=IBGDA_ENV)
    assert '"mlx5_0/1": ' in out  # bytes per NIC are in the log (the end marker) either way
    summary = json.loads((tmp_path / "results" / "summary.json").read_text())
    if passes:
        assert rc == 0, out
    else:
        assert rc == 1
        [problem] = summary["tests"][0]["problems"]
        assert "one NIC only (mlx5_0/1: 100%" in problem and "deepepPr466=true" in problem


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--tests", "nonsense"], {}, "unknown test"),
        (["--tests", "internode"], {"WORLD_SIZE": "1"}, "internode needs WORLD_SIZE >= 2"),
        (["--tests", "intranode"], {"WORLD_SIZE": "2"}, "only the internode test runs"),
        (["--deepep-dir", "/nonexistent"], {"PYTHONPATH": ""}, "DeepEP's tests/ not found"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], env: dict[str, str], message: str) -> None:
    rc, out = run(tmp_path, "--skip-nccl-check", *args, env=env)
    assert rc == 2
    assert message in out


def test_settings_contract_round_trips_and_names_a_bad_variable() -> None:
    from scripts.bench.settings import RunnerSettings

    s = RunnerSettings(processes=4, intranode_tokens=2048, timeout_minutes=45)
    assert RunnerSettings.from_env(s.to_env()) == s
    assert RunnerSettings.from_env({}) == RunnerSettings()
    with pytest.raises(ValueError, match=r"BENCH_HIDDEN='x' is not a whole number"):
        RunnerSettings.from_env({"BENCH_HIDDEN": "x"})
    with pytest.raises(ValueError, match=r"BENCH_TOPK='0' must be above 0"):
        RunnerSettings.from_env({"BENCH_TOPK": "0"})
    assert RunnerSettings().repeats == 1 and RunnerSettings.from_env({"BENCH_REPEATS": "10"}).repeats == 10
    with pytest.raises(ValueError, match=r"BENCH_REPEATS='11' must be 1 to 10"):
        RunnerSettings.from_env({"BENCH_REPEATS": "11"})


def test_bench_repeats_of_a_stack_reach_the_runner_and_share_its_bounds() -> None:
    from components.config import rules
    from components.gce import bench as gce_bench
    from scripts.bench.settings import MAX_REPEATS
    from tests.conftest import stack_config

    assert rules.BENCH_MAX_REPEATS == MAX_REPEATS
    cfg = config.parse(plan_engine.project_keys(stack_config("gce-b200", benchRepeats="3")), "gce-b200")
    assert gce_bench.bench_settings(cfg, [])["runnerEnv"]["BENCH_REPEATS"] == "3"
    with pytest.raises(config.ConfigError, match=r"benchRepeats.*11.*must be 1 to 10"):
        config.parse(plan_engine.project_keys(stack_config("gce-b200", benchRepeats="11")), "gce-b200")


def test_both_platforms_hand_the_runner_the_same_settings() -> None:
    from components.gce import bench as gce_bench
    from components.gke import bench as gke_bench
    from tests.conftest import stack_config

    cfg = config.parse(plan_engine.project_keys(stack_config("gke-b200", intranodeTokens="2048")), "gke-b200")
    gke = {e["name"]: e["value"] for e in gke_bench.bench_env(cfg, "intranode") if e["name"].startswith("BENCH_")}
    gce = gce_bench.bench_settings(cfg, [])["runnerEnv"]
    assert {k: v for k, v in gke.items() if k != "BENCH_TESTS"} == gce
    assert gce["BENCH_INTRANODE_TOKENS"] == "2048"


# -- the device check before RDMA tests (scripts/bench/preflight.py) -------------------------------------


class Fn:
    """A ctypes foreign function stand-in: callable, with a settable restype."""

    def __init__(self, f: Any):
        self.f, self.restype = f, None

    def __call__(self, *args: Any) -> Any:
        return self.f(*args)


class FakeLib:
    """libibverbs/libcuda as ctypes sees them: the calls preflight.py makes, with canned answers."""

    def __init__(self, hcas: list[str], gpus: int):
        self.hcas, self.gpus = hcas, gpus
        self._devices = (ctypes.c_void_p * (len(hcas) + 1))(*range(1, len(hcas) + 1))
        self.ibv_get_device_list = Fn(self._list)
        self.ibv_get_device_name = Fn(lambda dev: hcas[dev.value - 1].encode())
        self.ibv_free_device_list = Fn(lambda devices: None)

    def _list(self, count: Any) -> Any:
        count._obj.value = len(self.hcas)
        return self._devices

    def cuInit(self, flags: int) -> int:
        return 0

    def cuDeviceGetCount(self, count: Any) -> int:
        count._obj.value = self.gpus
        return 0


def loader(hcas: list[str], gpus: int, missing: str = "") -> Any:
    def load(name: str) -> Any:
        if missing and name.startswith(missing):
            raise OSError(f"libnl-route-3.so.200: cannot open shared object file (loading {name})")
        return FakeLib(hcas, gpus)

    return load


A4_HCAS = [f"mlx5_{i}" for i in range(8)]


@pytest.mark.parametrize(
    ("hcas", "gpus", "missing", "reason"),
    [
        (A4_HCAS, 8, "", ""),
        (A4_HCAS, 8, "libibverbs", "libnl-3.so.200 and libnl-route-3.so.200"),
        ([], 8, "", "the mlx5 provider did not load"),
        ([f"rocep{i}s0" for i in range(8)], 8, "", "do not start with mlx5"),
        (A4_HCAS, 4, "", "CUDA sees 4 GPU(s), the test needs 8"),
    ],
)
def test_device_check_names_what_the_pod_is_missing(hcas: list[str], gpus: int, missing: str, reason: str) -> None:
    seen, problem = preflight.check(8, 8, "mlx5", load=loader(hcas, gpus, missing))
    assert (reason in problem) if reason else problem == ""
    if not problem:
        assert seen == {"gpus": 8, "hcas": A4_HCAS}


def test_rdma_tests_do_not_start_where_the_pod_sees_no_hca(tmp_path: Path, deepep: Path) -> None:
    """This machine has no HCAs (or no libibverbs): low-latency is failed with the reason, intranode runs."""
    rc, _ = run(
        tmp_path,
        "--tests",
        "intranode,low-latency",
        "--deepep-dir",
        str(deepep),
        "--skip-nccl-check",
        env={"BENCH_SKIP_DEVICE_CHECK": "0"},
    )
    assert rc == 1
    summary = json.loads((tmp_path / "results/summary.json").read_text())
    by_test = {t["test"]: t for t in summary["tests"]}
    assert by_test["intranode"]["status"] == "passed"
    assert by_test["low-latency"]["status"] == "failed"
    assert by_test["low-latency"]["problems"][0].startswith("not run: ")
    assert "libibverbs" in by_test["low-latency"]["problems"][0]


# -- repeated starts, what ran, and the evidence the report needs --------------------


def test_repeated_starts_run_each_test_again_and_record_the_spread(tmp_path: Path, deepep: Path) -> None:
    rc, out = run(
        tmp_path,
        "--deepep-dir",
        str(deepep),
        "--skip-nccl-check",
        "--tests",
        "intranode",
        "--processes",
        "2",
        env={"BENCH_REPEATS": "3"},
    )
    assert rc == 0, out
    results = tmp_path / "results"
    assert sorted(p.name for p in results.glob("intranode*.log")) == [
        "intranode-2.log",
        "intranode-3.log",
        "intranode.log",
    ]
    summary = json.loads((results / "summary.json").read_text())
    assert [(t["test"], t["repeat"], t["status"]) for t in summary["tests"]] == [
        ("intranode", i, "passed") for i in (1, 2, 3)
    ]
    bf16 = summary["spread"]["intranode"]["dispatch_BF16_nvl_bw"]
    assert bf16 == {"min": 331.99, "median": 331.99, "max": 331.99, "n": 3}  # the same recorded output each time
    begins = [json.loads(line.split(" ", 2)[2]) for line in out.splitlines() if line.startswith("[runner] begin")]
    assert [(b["repeat"], b["repeats"]) for b in begins] == [(1, 3), (2, 3), (3, 3)]


@pytest.mark.parametrize("value", ["0", "11", "x"])
def test_repeats_outside_1_to_10_is_a_usage_error(tmp_path: Path, deepep: Path, value: str) -> None:
    with pytest.raises(SystemExit) as err:
        run(tmp_path, "--deepep-dir", str(deepep), env={"BENCH_REPEATS": value})
    assert err.value.code == 2


def test_what_ran_comes_from_the_installers_files_and_the_checkout(tmp_path: Path, deepep: Path) -> None:
    """DEEPEP_ROOT (the env file exports it) holds the rendered config.sh and the installer's status.json."""
    from components import artifacts
    from components.node import installer
    from scripts.bench.what_ran import what_ran
    from tests.conftest import stack_config

    cfg = config.parse(plan_engine.project_keys(stack_config("gke-b200-ubuntu")), "gke-b200-ubuntu")
    artifacts.reset()  # a plan rendered earlier in this process published its own installer
    root = tmp_path / "deepep-root"
    (root / "installer").mkdir(parents=True)
    (root / "installer" / "config.sh").write_text(installer.render_installer(cfg, "gke")["config.sh"])
    (root / "state").mkdir()
    status = ROOT / "tests/fixtures/install/hw/hwtest-3.5.1-h200x2.status.json"  # a real install's status
    (root / "state" / "status.json").write_text(status.read_text())
    git = deepep / ".git"
    (git / "refs" / "heads").mkdir(parents=True)
    (git / "HEAD").write_text("ref: refs/heads/main\n")
    (git / "refs" / "heads" / "main").write_text("29d31c0" + "0" * 33 + "\n")
    proc = tmp_path / "proc"
    (proc / "driver" / "nvidia").mkdir(parents=True)
    (proc / "driver" / "nvidia" / "version").write_text(
        "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.126.09  Release Build  (dvs-builder@U16)\n"
    )
    ran = what_ran({"DEEPEP_ROOT": str(root), "PATH": os.environ["PATH"]}, sys.executable, deepep, proc)
    v = cfg.versions
    assert (ran["stack"], ran["deepep_ref"], ran["nvshmem"], ran["cuda"]) == (
        "gke-b200-ubuntu",
        v.deepep_ref,
        v.nvshmem,
        v.cuda,
    )
    assert ran["deepep_commit"] == installer.deepep_commit(v.deepep_ref) and ran["deepep_pr466"] == (
        "on" if v.deepep_pr466 else "off"
    )
    assert ran["installer_hash"] == "54ab78f4027e1902" and ran["install_updated"] == "2026-11-24T01:50:41Z"
    assert ran["verify_rdma"].startswith("no RDMA NICs on this machine")  # the H200 hwtest: no RDMA proof
    assert ran["driver"] == "580.126.09" and ran["deepep_checkout"] == "29d31c0" + "0" * 33
    assert ran["image"] == "unknown"  # a container cannot see its image; the report takes the pod's
    from scripts import names
    from scripts.bench import what_ran as node_ran

    assert node_ran.IMAGE_VAR == names.IMAGE_VAR
    assert what_ran({names.IMAGE_VAR: "projects/p/global/images/i"}, "/x", None, proc)["image"].endswith("/i")
    assert what_ran({}, "/nonexistent/python", None, proc)["deepep_ref"] == "unknown"
    # The open kernel modules (B200 needs them) name themselves differently: this line is an H100's, read there.
    (proc / "driver" / "nvidia" / "version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.159.04  Release Build  (nixbld@)  \n"
    )
    assert what_ran({}, "/nonexistent/python", None, proc)["driver"] == "580.159.04"


def test_a_two_node_internode_run_with_its_evidence_passes_the_report(tmp_path: Path) -> None:
    """Runner to report: both pods of the Indexed Job record IBGDA and traffic on all eight NICs."""
    from deepep_a4 import report

    send = (
        "from pathlib import Path\nimport os\n"
        "ib = Path(os.environ['FAKE_IB'])\nfor i in range(8):\n"
        "    c = ib / f'mlx5_{i}/ports/1/counters/port_xmit_data'\n"
        "    c.write_text(str(int(c.read_text()) + 250_000_000))\n"
    )
    deepep = fake_deepep(
        tmp_path, {"internode": (FIX / "r2_internode_gke.log").read_text()}, extra=send + NVSHMEM_INFO_GPU_HANDLER
    )
    for rank in (0, 1):
        ib = fake_ib_sysfs(tmp_path / f"ib-{rank}")
        rc, out = run_internode(
            tmp_path, deepep, ib, rank, env=IBGDA_ENV | {"FAKE_IB": str(ib)}, results=f"node-{rank}"
        )
        assert rc == 0, out
    both = [i for r in (0, 1) for i in report.PathSource(str(tmp_path / f"node-{r}")).items()]
    rep = report.analyze(both, 0.5, ["node-0", "node-1"])
    assert rep.verdict == "PASS", [(c.origin, c.name, c.detail) for c in rep.open_checks]
    one_node = report.analyze(report.PathSource(str(tmp_path / "node-0")).items(), 0.5, ["node-0"])
    assert one_node.verdict == "NOT PROVEN"
    assert any(c.detail.startswith("no result from node(s) 1 of 2") for c in one_node.open_checks)


def test_a_run_without_evidence_exits_unproven_so_a_job_does_not_retry_it() -> None:
    from scripts import names
    from scripts.bench import run_bench

    assert (run_bench.EXIT_OK, run_bench.EXIT_FAILED, run_bench.EXIT_UNPROVEN) == (
        names.EXIT_OK,
        names.EXIT_FAILED,
        names.EXIT_UNPROVEN,
    )
    assert run_bench.overall_status(["passed", "passed"]) == "passed"
    assert run_bench.overall_status(["passed", "unproven"]) == "unproven"
    assert run_bench.overall_status(["unproven", "failed"]) == "failed"
    assert run_bench.overall_status(["passed", "skipped"]) == "failed"
    assert run_bench.overall_status([]) == "failed"


# -- Google's NCCL settings, socket interfaces, gIB and NCCL versions ----------------------------


def test_googles_nccl_settings_include_the_roce_v2_gid_and_follow_ncclgib(tmp_path: Path) -> None:
    from scripts.bench import bench_env

    gib = tmp_path / "gib"
    (gib / "lib64").mkdir(parents=True)
    (gib / "lib64" / "libnccl-net.so").write_text("")
    env, _ = bench_env.gib_env({}, str(gib), ["mlx5_0"])
    assert env is not None
    # cluster-toolkit a4high-vm.yaml's values, all of them, with NCCL_NET=gIB.
    assert {k: env[k] for k in bench_env.GIB_NCCL_ENV} == bench_env.GIB_NCCL_ENV
    assert env["NCCL_IB_GID_INDEX"] == "3" and env["NCCL_IB_TC"] == "52" and env["NCCL_IB_FIFO_TC"] == "84"
    off, note = bench_env.gib_env({}, str(gib), ["mlx5_0"], nccl_gib=False)
    assert off is None and "ncclGib is off" in note


@pytest.mark.parametrize(
    ("platform", "pod_networking", "ifname"),
    [("gke", "hostNetwork", "eth0,eth1"), ("gke", "multiNetwork", "eth0"), ("gce", "", "enp0s19,enp192s20")],
)
def test_socket_interfaces_per_platform_and_pod_networking(
    tmp_path: Path, platform: str, pod_networking: str, ifname: str
) -> None:
    from scripts.bench import bench_env

    env, notes = bench_env.build_env({}, None, platform=platform, pod_networking=pod_networking)
    assert env["NCCL_SOCKET_IFNAME"] == ifname
    assert f"NCCL_SOCKET_IFNAME={ifname}" in " ".join(notes)
    assert "NCCL_SOCKET_IFNAME" not in bench_env.build_env({}, None)[0]  # not said: NCCL picks


def test_stacks_tell_the_runner_their_platform_networking_and_gib() -> None:
    from components.bench_settings import runner_settings
    from scripts.bench.settings import RunnerSettings
    from tests.conftest import stack_config

    gke = runner_settings(config.parse(plan_engine.project_keys(stack_config("gke-b200-ubuntu")), "gke-b200-ubuntu"))
    assert (gke.platform, gke.pod_networking, gke.nccl_gib) == ("gke", "hostNetwork", True)
    gce_cfg = config.parse(plan_engine.project_keys(stack_config("gce-b200", ncclGib="false")), "gce-b200")
    gce = runner_settings(gce_cfg)
    assert (gce.platform, gce.pod_networking, gce.nccl_gib) == ("gce", "", False)
    env = gce.to_env()
    assert env["BENCH_PLATFORM"] == "gce" and env["BENCH_NCCL_GIB"] == "0" and env["BENCH_POD_NETWORKING"] == ""
    assert RunnerSettings.from_env(env) == gce
    with pytest.raises(ValueError, match=r"BENCH_PLATFORM='aws' must be one of: gke, gce"):
        RunnerSettings.from_env({"BENCH_PLATFORM": "aws"})
    with pytest.raises(ValueError, match=r"BENCH_NCCL_GIB='yes' must be 1 or 0"):
        RunnerSettings.from_env({"BENCH_NCCL_GIB": "yes"})


def test_what_ran_records_the_loaded_nccl_the_gib_plugin_and_their_pairing(tmp_path: Path) -> None:
    from scripts.bench import what_ran as node_ran

    gib = tmp_path / "gib"
    gib.mkdir()
    (gib / node_ran.GIB_VERSION_FILE).write_text(
        "us-docker.pkg.dev/gce-ai-infra/gpudirect-gib/nccl-plugin-gib:v1.1.1\n"
    )
    python = tmp_path / "python"  # reports what PyTorch 2.10's import would: its wheel and the NCCL it loads
    python.write_text(  # 2.27.5: the NCCL its wheel requires (tests/fixtures/pytorch/torch-2.10.0_metadata.txt)
        '#!/bin/sh\necho \'{"torch": "2.10.0+cu129", "nvidia-nccl-cu12": "2.27.5", "loaded": "2.27.5"}\'\n'
    )
    python.chmod(0o755)
    ran = node_ran.what_ran({"NCCL_NET": "gIB"}, str(python), None, tmp_path, gib_dir=gib)
    assert ran["nccl"] == "2.27.5" and ran["gib"].endswith("nccl-plugin-gib:v1.1.1")
    assert ran["nccl_pairing"].startswith("NCCL 2.27.5 with gIB") and "mismatch" not in ran["nccl_pairing"]
    assert node_ran.nccl_pairing("2.28.9", "nccl-gib 1.1.0") == (
        "mismatch: NCCL 2.28.9 with gIB nccl-gib 1.1.0; Google pairs gIB 1.1 with NCCL 2.27"
    )
    off = node_ran.what_ran({}, str(python), None, tmp_path, gib_dir=gib)
    assert off["gib"].startswith("off") and off["nccl_pairing"].startswith("no gIB plugin")


def _wheel_nccl(version: str) -> str:
    """The NCCL a PyTorch wheel requires, from its METADATA kept in tests/fixtures/pytorch/."""
    text = (ROOT / f"tests/fixtures/pytorch/torch-{version}_metadata.txt").read_text()
    assert re.search(r"^Version: (\S+)$", text, re.M)[1] == version  # type: ignore[index]
    nccl = re.search(r"^Requires-Dist: nvidia-nccl-cu1[23]==(\S+);", text, re.M)
    assert nccl is not None
    return nccl[1]


def test_the_default_pytorch_brings_the_nccl_google_pairs_with_gib() -> None:
    # PyTorch loads the NCCL its wheel requires: 2.11.0+cu130 requires 2.28.9 and loaded 2.28.9 on the H100
    # (tests/fixtures/bench/h100_what_ran.txt). PyPI's 2.10.0 is the CUDA 12.8 build; PyTorch's build matrix
    # gives every CUDA 12 wheel the NCCL of one pin (.github/scripts/generate_binary_build_matrix.py checks
    # each against .ci/docker/ci_commit_pins/nccl-cu12.txt), so the stacks' 2.10.0+cu129 requires the same.
    from scripts.bench import what_ran as node_ran

    measured = (ROOT / "tests/fixtures/bench/h100_what_ran.txt").read_text()
    assert "torch 2.11.0+cu130 nccl (2, 28, 9)" in measured and _wheel_nccl("2.11.0") == "2.28.9"
    default_torch = config.KEYS_BY_NAME["torchVersion"].default  # the stacks' PyTorch
    nccl = _wheel_nccl(default_torch.split("+")[0])
    assert nccl == "2.27.5"
    assert "mismatch" not in node_ran.nccl_pairing(nccl, "nccl-gib 1.1.0")


def test_what_ran_on_a_real_gpu_machine_records_the_nccl_pytorch_loads(tmp_path: Path) -> None:
    # tests/fixtures/bench/h100_what_ran.txt: the runner's own what_ran on an H100 with PyTorch 2.11.0+cu130
    # (2026-11-24), once without gIB and once with NCCL_NET=gIB and a gIB folder holding a version file.
    from scripts.bench import what_ran as node_ran

    text = (ROOT / "tests/fixtures/bench/h100_what_ran.txt").read_text()
    torch_line = re.search(r"^torch (\S+) nccl \((\d+), (\d+), (\d+)\)$", text, re.M)
    assert torch_line is not None
    loaded = ".".join(torch_line.groups()[1:])
    blocks = [json.loads(b) for b in re.findall(r"^(\{.*?^\})$", text, re.M | re.S)]
    plain, gib = blocks
    assert tuple(plain) == tuple(node_ran.RAN_KEYS)  # the fixture is what the current runner records
    assert plain["nccl"] == gib["nccl"] == loaded == "2.28.9"  # torch.cuda.nccl.version(), a tuple in 2.11
    assert plain["gib"].startswith("off") and plain["nccl_pairing"] == node_ran.nccl_pairing(loaded, "")
    assert gib["nccl_pairing"] == node_ran.nccl_pairing(loaded, gib["gib"]) and "mismatch" in gib["nccl_pairing"]


def test_the_first_line_is_the_runners_start_in_utc_and_the_summary_keeps_it(tmp_path: Path, deepep: Path) -> None:
    """`deepep-a4 run` measures bring-up up to this line (GKE: the kubelet's time of it; GCE: `started`)."""
    import datetime as dt

    run(tmp_path, "--deepep-dir", str(deepep), "--skip-nccl-check", "--processes", "2", "--tests", "intranode")
    rc, out = run(tmp_path, "--deepep-dir", str(deepep), "--skip-nccl-check", "--processes", "2", "--tests", "nope")
    assert rc == 2 and out.splitlines()[0].startswith("[runner] start {")  # first, even before a usage error
    first = out.splitlines()[0]
    body = json.loads(first.split(" ", 2)[2])
    assert body["tests"] == "nope" and re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", body["utc"])
    started = json.loads((tmp_path / "results" / "summary.json").read_text())["started"]
    assert dt.datetime.fromisoformat(started) <= dt.datetime.fromisoformat(body["utc"])

#!/usr/bin/env python3
"""Runs DeepEP's tests on this machine and turns their output into JSON results.

Inside a benchmark pod or on a VM, after the installer:

    python3 run_bench.py --tests intranode,low-latency --processes 8 --results-dir /results

1. Loads the installer's environment file (--env-file), unsets TORCH_NCCL_USE_COMM_NONBLOCKING (the gIB
   NCCL shim wants it unset); the RDMA tests (low-latency, internode) alone get the gIB NCCL settings, where the
   plugin is present and this process sees RDMA devices (NCCL_NET=gIB with none fails NCCL's init), and
   NVSHMEM_DEBUG=INFO (NVSHMEM then names the IBGDA path it took).
2. Runs a short torch.distributed all-to-all over NCCL among the same processes (and nodes) the tests
   will use, checks the data and prints its bandwidth: a broken fabric shows here, before DeepEP.
3. Runs each DeepEP test (tests/test_intranode.py, test_low_latency.py, test_internode.py) with the
   arguments given, streams its output live, keeps it in RESULTS/<test>.log and parses it into
   RESULTS/<test>.json (records as parse.py prints them); --repeats N (BENCH_REPEATS) starts each test N
   times in a row, the later starts as RESULTS/<test>-<i>.log/.json. Around each test the runner records
   what the report needs as evidence: what ran (versions, commits: `[runner] ran`), the NVSHMEM settings
   (the transport, in the begin marker) and the bytes every RDMA NIC sent (in the end marker).

The first line it prints is `[runner] start {"utc": ...}`, its start in ISO 8601 UTC (also `started` in
RESULTS/summary.json): `deepep-a4 run` measures a node's bring-up up to it.

Internode: the same command runs on every node with WORLD_SIZE = number of nodes, RANK = this node's
index (or JOB_COMPLETION_INDEX), MASTER_ADDR = node 0's address and MASTER_PORT.

Exit status: 0 when every test passed; 1 when a test failed, timed out, or printed unknown or truncated
output (the reason is printed as `[runner] error ...` and kept in RESULTS/summary.json); 2 when the
runner itself cannot start (bad arguments, no DeepEP checkout). Stdlib only, except the NCCL worker,
which imports torch in its own process.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shlex
import socket
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TextIO

try:  # in the package (tests) or flat in the folder the files were shipped to (pods, VMs)
    from scripts.bench import bench_env, nccl_check, preflight
    from scripts.bench import parse as bench_parse
    from scripts.bench import settings as bench_settings
    from scripts.bench import what_ran as bench_ran
except ImportError:  # pragma: no cover - on a node the script's own folder is sys.path[0]
    import bench_env  # type: ignore[no-redef]
    import nccl_check  # type: ignore[no-redef]
    import parse as bench_parse  # type: ignore[no-redef]
    import preflight  # type: ignore[no-redef]
    import settings as bench_settings  # type: ignore[no-redef]
    import what_ran as bench_ran  # type: ignore[no-redef]

DEEPEP_SCRIPTS, DEFAULT_PORT, IB_SYSFS = bench_env.DEEPEP_SCRIPTS, bench_env.DEFAULT_PORT, bench_env.IB_SYSFS
build_env, log, stream_process = bench_env.build_env, bench_env.log, bench_env.stream_process
gib_env, rdma_devices = bench_env.gib_env, bench_env.rdma_devices
nic_record, nic_tx_bytes = bench_env.nic_record, bench_env.nic_tx_bytes
nccl_worker_main = nccl_check.nccl_worker_main
RDMA_TESTS, device_problem = preflight.RDMA_TESTS, preflight.device_problem
MAX_REPEATS, RunnerSettings = bench_settings.MAX_REPEATS, bench_settings.RunnerSettings
transport_of, what_ran = bench_ran.transport_of, bench_ran.what_ran

# The runner ships without scripts/names.py; these equal its EXIT_* (tests/scripts/bench/test_runner.py checks).
EXIT_OK, EXIT_FAILED, EXIT_UNPROVEN = 0, 1, 3

# -- one test --------------------------------------------------------------------------------------


@dataclass
class TestRun:
    test: str
    argv: list[str]
    rc: int | None = None
    timed_out: bool = False
    seconds: float = 0.0
    status: str = "skipped"
    problems: list[str] = field(default_factory=list)
    summary: dict[str, Any] = field(default_factory=lambda: {"values": {}})
    repeat: int = 1
    checks: list[dict[str, str]] = field(default_factory=list)


def run_test(
    run: TestRun,
    env: dict[str, str],
    cwd: str,
    timeout_s: float,
    results_dir: Path,
    expect: bench_parse.Expect,
    out: TextIO,
    ib_dir: Path | None = None,
    context: dict[str, Any] | None = None,
    hcas: int = 0,
) -> TestRun:
    """Runs one test with begin/end markers around its output, then parses and records it. `context` goes
    into the begin marker (node rank, start, what ran, the transport); with ib_dir, the bytes each RDMA NIC
    sent meanwhile go into the end marker. The parser judges both (parse_records.judge)."""
    nics_before = nic_tx_bytes(ib_dir) if ib_dir else {}
    begin = {"test": run.test, "argv": run.argv, "processes": expect.processes, "nodes": expect.nodes}
    begin.update(context or {}, repeat=run.repeat)
    log(out, "begin", begin)
    stem = run.test if run.repeat == 1 else f"{run.test}-{run.repeat}"
    log_path = results_dir / f"{stem}.log"
    start = time.monotonic()
    with log_path.open("w", encoding="utf-8") as f:
        log(f, "begin", begin)
        rc, timed_out = stream_process(run.argv, env, cwd, timeout_s, [out, f])
        run.seconds = round(time.monotonic() - start, 1)
        run.rc, run.timed_out = rc, timed_out
        end = {"test": run.test, "rc": rc, "timed_out": timed_out, "timeout_s": int(timeout_s), "seconds": run.seconds}
        if ib_dir:
            end["nics"] = nic_record(ib_dir, nics_before, nic_tx_bytes(ib_dir), hcas)
        log(f, "end", end)
    log(out, "end", end)
    results = bench_parse.parse_log(log_path.read_text(encoding="utf-8", errors="replace"))
    res = next((r for r in results if r.test == run.test), None)
    if res is None:
        run.problems, run.status = [f"no output of {run.test} found in its log"], "failed"
        records: list[dict[str, Any]] = []
    else:
        run.problems, run.status, run.checks = res.problems, res.status, res.checks
        run.summary = res.summary
        records = res.records
    if run.test in bench_env.GIN_TESTS:
        run.summary = {**run.summary, "gin": bench_env.gin_of(log_path.read_text(errors="replace").splitlines())}
    doc = {**asdict(run), "records": records, "host": socket.gethostname(), "begin": begin, "end": end}
    (results_dir / f"{stem}.json").write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    result = {"test": run.test, "repeat": run.repeat, "status": run.status, "problems": run.problems}
    log(out, "result", result | {"checks": run.checks, "values": run.summary.get("values", {})})
    for p in run.problems:
        log(out, "error", f"{run.test}: {p}")
    return run


# -- orchestration -------------------------------------------------------------------------------------

SUMMARY_KEYS = ("test", "repeat", "status", "problems", "checks", "rc", "timed_out", "seconds")


def script_path(tests_dir: Path, test: str) -> Path:
    """V1 keeps its tests in tests/; V2 (deepseek-ai/DeepEP dd758ca) moved them to tests/legacy/ and added
    tests/elastic/test_ep.py."""
    rel = DEEPEP_SCRIPTS[test]
    legacy = tests_dir / "legacy" / rel
    return legacy if "/" not in rel and legacy.is_file() else tests_dir / rel


def test_argv(test: str, args: argparse.Namespace, script_dir: Path) -> list[str]:
    # V2's elastic test takes intranode's sizes (its own defaults: 4096 tokens, 256 experts, tests/elastic/test_ep.py).
    tokens = {
        "intranode": args.intranode_tokens,
        "low-latency": args.low_latency_tokens,
        "internode": args.internode_tokens,
        "elastic": args.intranode_tokens,
    }
    experts = {
        "intranode": args.intranode_experts,
        "low-latency": args.low_latency_experts,
        "internode": args.internode_experts,
        "elastic": args.intranode_experts,
    }
    argv = [
        args.python,
        str(script_path(script_dir, test)),
        "--num-processes",
        str(args.processes),
        "--num-tokens",
        str(tokens[test]),
        "--hidden",
        str(args.hidden),
        "--num-topk",
        str(args.topk),
        "--num-experts",
        str(experts[test]),
    ]
    extra = {
        "intranode": args.intranode_args,
        "low-latency": args.low_latency_args,
        "internode": args.internode_args,
        "elastic": args.elastic_args,
    }
    return argv + shlex.split(extra[test] or "")


def wait_resolvable(host: str, timeout_s: float, out: TextIO) -> bool:
    """Waits until `host` resolves: pod 0's DNS name appears only once that pod exists."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            socket.getaddrinfo(host, None)
            return True
        except OSError:
            if time.monotonic() > deadline:
                return False
            log(out, "info", f"waiting for {host} to resolve")
            time.sleep(5)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    e = os.environ.get
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--tests", default=e("BENCH_TESTS", "intranode,low-latency"), help="comma-separated DeepEP tests")
    ap.add_argument("--deepep-dir", default=e("DEEPEP_DIR", ""), help="DeepEP checkout holding tests/")
    ap.add_argument("--env-file", default=e("DEEPEP_ENV_FILE", ""), help="the installer's environment file")
    ap.add_argument("--gib-dir", default=e("GIB_DIR", "/usr/local/gib"), help="where the gIB NCCL plugin would be")
    ap.add_argument("--results-dir", default=e("BENCH_RESULTS_DIR", "bench-results"))
    ap.add_argument("--python", default=e("BENCH_PYTHON", sys.executable), help="python that runs the tests")
    try:
        s = RunnerSettings.from_env(os.environ)
    except ValueError as err:  # a bad BENCH_* variable: a usage error, like a bad flag
        ap.error(str(err))
    ap.add_argument("--processes", type=int, default=s.processes, help="GPUs per node")
    ap.add_argument("--hidden", type=int, default=s.hidden)
    ap.add_argument("--topk", type=int, default=s.topk)
    ap.add_argument("--intranode-tokens", type=int, default=s.intranode_tokens)
    ap.add_argument("--intranode-experts", type=int, default=s.intranode_experts)
    ap.add_argument("--low-latency-tokens", type=int, default=s.low_latency_tokens)
    ap.add_argument("--low-latency-experts", type=int, default=s.low_latency_experts)
    ap.add_argument("--internode-tokens", type=int, default=s.internode_tokens)
    ap.add_argument("--internode-experts", type=int, default=s.internode_experts)
    ap.add_argument("--intranode-args", default=e("BENCH_INTRANODE_ARGS", ""), help="extra arguments, shell-quoted")
    ap.add_argument("--low-latency-args", default=e("BENCH_LOW_LATENCY_ARGS", ""))
    ap.add_argument("--internode-args", default=e("BENCH_INTERNODE_ARGS", ""))
    ap.add_argument("--elastic-args", default=e("BENCH_ELASTIC_ARGS", ""), help="extra arguments of V2's test_ep.py")
    ap.add_argument("--timeout-minutes", type=float, default=s.timeout_minutes)
    ap.add_argument("--repeats", type=int, choices=range(1, MAX_REPEATS + 1), default=s.repeats, metavar="1-10")
    ap.add_argument("--hcas", type=int, default=s.hcas, help="RDMA NICs the node has (checked before RDMA tests)")
    ap.add_argument(
        "--skip-device-check",
        action="store_true",
        default=e("BENCH_SKIP_DEVICE_CHECK", "") == "1",
        help="do not check HCAs and GPUs before the RDMA tests",
    )
    ap.add_argument("--skip-nccl-check", action="store_true", default=e("BENCH_SKIP_NCCL_CHECK", "") == "1")
    ap.add_argument("--nccl-sizes-mb", default=e("BENCH_NCCL_SIZES_MB", "16,256"), help="all-to-all sizes per rank")
    ap.add_argument("--nccl-iters", type=int, default=int(e("BENCH_NCCL_ITERS", "20")))
    ap.add_argument("--ib-sysfs", default=IB_SYSFS, help=argparse.SUPPRESS)  # tests point it at a fake tree
    ap.add_argument("--nccl-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--nodes", type=int, default=1, help=argparse.SUPPRESS)
    ap.add_argument("--node-rank", type=int, default=0, help=argparse.SUPPRESS)
    ap.add_argument("--master-addr", default="127.0.0.1", help=argparse.SUPPRESS)
    ap.add_argument("--master-port", type=int, default=DEFAULT_PORT, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if isinstance(args.nccl_sizes_mb, str):
        args.nccl_sizes_mb = [float(x) for x in args.nccl_sizes_mb.split(",") if x.strip()]
    return args


def find_tests_dir(deepep_dir: str, env: dict[str, str]) -> Path | None:
    """DeepEP's tests/ folder: under --deepep-dir, or next to a deep_ep found on PYTHONPATH."""
    candidates = [deepep_dir] if deepep_dir else []
    candidates += [p for p in env.get("PYTHONPATH", "").split(":") if p]
    for c in candidates:
        d = Path(c) / "tests"
        if script_path(d, "intranode").is_file():
            return d.resolve()
    return None


def main(argv: list[str] | None = None, out: TextIO = sys.stdout) -> int:
    args = parse_args(argv)
    if args.nccl_worker:
        return nccl_worker_main(args)
    # The first line, with the runner's own UTC time: `deepep-a4 run` measures bring-up up to here
    # (deepep_a4/timeline.py; GCE reads it back from summary.json's `started`).
    started = dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    log(out, "start", {"utc": started, "host": socket.gethostname(), "tests": args.tests})

    tests = [t.strip() for t in args.tests.split(",") if t.strip()]
    unknown = [t for t in tests if t not in DEEPEP_SCRIPTS]
    if unknown:
        log(out, "error", f"unknown test(s) {', '.join(unknown)}; known: {', '.join(DEEPEP_SCRIPTS)}")
        return 2
    nodes = int(os.environ.get("WORLD_SIZE", "1") or "1")
    node_rank = int(os.environ.get("RANK") or os.environ.get("JOB_COMPLETION_INDEX") or "0")
    master_addr = os.environ.get("MASTER_ADDR", "127.0.0.1")
    base_port = int(os.environ.get("MASTER_PORT", str(DEFAULT_PORT)))
    if "internode" in tests and (nodes < 2 or args.processes != 8):
        log(out, "error", f"internode needs WORLD_SIZE >= 2 nodes and 8 processes (got {nodes} and {args.processes})")
        return 2
    if nodes > 1 and any(t != "internode" for t in tests):
        log(out, "error", "with WORLD_SIZE > 1 only the internode test runs; run the others on one node")
        return 2

    try:
        settings = RunnerSettings.from_env(os.environ)  # checked by parse_args already
        env, notes = build_env(
            dict(os.environ),
            args.env_file or None,
            platform=settings.platform,
            pod_networking=settings.pod_networking,
        )
    except (subprocess.CalledProcessError, OSError) as err:
        log(out, "error", f"cannot load the env file {args.env_file}: {err}")
        return 2
    # The RDMA tests' environment: gIB where this process sees RDMA devices and the plugin (bench_env.gib_env), and
    # NVSHMEM's INFO lines, which name the IBGDA path and where the NIC buffers went (parse_records.transport_verdict).
    devices = rdma_devices(Path(args.ib_sysfs))
    rdma_env, gib_note = gib_env(env, args.gib_dir, devices, nccl_gib=settings.nccl_gib)
    rdma_env = dict(rdma_env or env)
    rdma_env.setdefault("NVSHMEM_DEBUG", "INFO")
    if any(t in RDMA_TESTS for t in tests):
        notes.append(gib_note)
    for note in notes:
        log(out, "env", note)

    gin_test_env, gin_note = bench_env.gin_env(rdma_env)
    if any(t in bench_env.GIN_TESTS for t in tests):
        log(out, "env", gin_note)

    def env_of(test: str) -> dict[str, str]:
        if test in bench_env.GIN_TESTS:
            return gin_test_env
        return rdma_env if test in RDMA_TESTS else env

    # The NCCL check runs among the processes of the tests, with the RDMA tests' NCCL settings where any runs.
    check_env = rdma_env if any(t in RDMA_TESTS for t in tests) else env
    tests_dir = find_tests_dir(args.deepep_dir, env)
    if tests_dir is None:
        log(out, "error", "DeepEP's tests/ not found: give --deepep-dir or put the checkout on PYTHONPATH")
        return 2
    results_dir = Path(args.results_dir)
    results_dir.mkdir(parents=True, exist_ok=True)
    # What ran, once per node: it goes into every begin marker, so each test's log carries it.
    ran = what_ran(check_env, args.python, tests_dir.parent, gib_dir=Path(args.gib_dir))
    log(out, "ran", ran)
    context: dict[str, Any] = {"node_rank": node_rank, "host": ran["host"], "repeats": args.repeats, "ran": ran}

    timeout_s = args.timeout_minutes * 60
    expect = bench_parse.Expect(args.processes, nodes)
    if nodes > 1 and not wait_resolvable(master_addr, timeout_s, out):
        log(out, "error", f"MASTER_ADDR {master_addr} never resolved")
        return 1

    # Every test gets its own port (same order on every node) so no rendezvous meets a stale one.
    runs: list[TestRun] = []
    port = base_port
    fabric_ok = True
    if not args.skip_nccl_check:
        worker = [
            args.python,
            str(Path(__file__).resolve()),
            "--nccl-worker",
            "--processes",
            str(args.processes),
            "--nodes",
            str(nodes),
            "--node-rank",
            str(node_rank),
            "--master-addr",
            master_addr,
            "--master-port",
            str(port + 1),
            "--nccl-sizes-mb",
            ",".join(str(x) for x in args.nccl_sizes_mb),
            "--nccl-iters",
            str(args.nccl_iters),
        ]
        nccl_run = TestRun("nccl", worker)
        nccl = run_test(
            nccl_run, check_env, str(results_dir), min(timeout_s, 900), results_dir, expect, out, None, context
        )
        runs.append(nccl)
        fabric_ok = nccl.status == "passed"
        port += 1

    no_devices = ""
    if any(t in RDMA_TESTS for t in tests) and not args.skip_device_check:
        prefix = env.get("NVSHMEM_HCA_PREFIX", "")
        seen, no_devices = device_problem(args.python, args.processes, args.hcas, prefix, rdma_env)
        log(out, "preflight", seen)

    for test, repeat in [(t, i) for t in tests for i in range(1, args.repeats + 1)]:
        port += 1
        run = TestRun(test, test_argv(test, args, tests_dir), repeat=repeat)
        if ((no_devices and test in RDMA_TESTS) or not fabric_ok) and repeat > 1:
            continue  # said once for the test
        if no_devices and test in RDMA_TESTS:
            run.problems = [f"not run: {no_devices}"]
            run.status = "failed"
            log(out, "error", f"{test}: {run.problems[0]}")
            runs.append(run)
            continue
        if not fabric_ok:
            run.problems = ["skipped: the NCCL all-to-all check failed, so the fabric (not DeepEP) is at fault"]
            run.status = "skipped"
            log(out, "error", f"{test}: {run.problems[0]}")
            runs.append(run)
            continue
        test_env = dict(env_of(test), MASTER_ADDR=master_addr if nodes > 1 else "127.0.0.1", MASTER_PORT=str(port))
        test_env.update(WORLD_SIZE=str(nodes), RANK=str(node_rank))
        ib_dir, ctx = None, context
        if test in RDMA_TESTS:  # the evidence the parser asks of an RDMA test: the transport and the NICs
            ib_dir, ctx = Path(args.ib_sysfs), context | {"transport": transport_of(test_env)}
        if test in bench_env.GIN_TESTS:
            tc, source = bench_env.traffic_class(test_env)
            ctx = ctx | {"gin": {"trafficClass": tc, "from": source}}
        runs.append(
            run_test(run, test_env, str(tests_dir), timeout_s, results_dir, expect, out, ib_dir, ctx, args.hcas)
        )

    summary = {
        "started": started,
        "host": socket.gethostname(),
        "node_rank": node_rank,
        "nodes": nodes,
        "status": overall_status([r.status for r in runs]),
        "ran": ran,
        "tests": [
            {k: v for k, v in asdict(r).items() if k in SUMMARY_KEYS}
            | {k: r.summary[k] for k in ("values", "gin") if k in r.summary}
            for r in runs
        ],
        "spread": bench_parse.spread([(r.test, r.summary.get("values", {})) for r in runs]),
    }
    (results_dir / "summary.json").write_text(json.dumps(summary, indent=1, sort_keys=True) + "\n")
    log(out, "summary", summary)
    return {"passed": EXIT_OK, "unproven": EXIT_UNPROVEN}.get(summary["status"], EXIT_FAILED)


def overall_status(statuses: list[str]) -> str:
    """passed only when every run passed; unproven when none failed but some lacked evidence."""
    if statuses and all(s == "passed" for s in statuses):
        return "passed"
    if statuses and all(s in ("passed", "unproven") for s in statuses):
        return "unproven"
    return "failed"


if __name__ == "__main__":
    sys.exit(main())

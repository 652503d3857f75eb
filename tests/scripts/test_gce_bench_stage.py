"""The GCE benchmark stage for real: several 'VMs' as processes, a folder as the bucket, a fake runner."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from components import config
from components.gce import bench as gce_bench
from components.gce import fleet as gce
from deepep_a4.plan import engine as plan_engine
from tests.conftest import ROOT, stack_config

STAGE = ROOT / "scripts" / "gce" / "bench_stage.py"

# Stands in for the runner (scripts/bench/run_bench.py): records its call, writes what the runner writes.
FAKE_RUNNER = r"""
import json, os, sys
from pathlib import Path
args = sys.argv[1:]
test = args[args.index("--tests") + 1]
results = Path(args[args.index("--results-dir") + 1])
results.mkdir(parents=True, exist_ok=True)
SEEN = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "BENCH_PROCESSES", "DEEPEP_IMAGE")
env = {k: os.environ.get(k) for k in SEEN}
n = len(open(os.environ["CALLS"]).readlines()) if os.path.exists(os.environ["CALLS"]) else 0
with open(os.environ["CALLS"], "a") as f:
    f.write(json.dumps({"test": test, "env": env, "args": args}) + "\n")
if test == "internode":  # like torch.distributed: nobody finishes before every node has joined
    import time
    def joined():
        return sum('"internode"' in line for line in open(os.environ["CALLS"]))
    mine = joined()
    world = int(env["WORLD_SIZE"])
    need = world * ((mine - 1) // world + 1)
    deadline = time.time() + 30
    while joined() < need:
        if time.time() > deadline:
            sys.exit(9)
        time.sleep(0.05)
(results / f"{test}.log").write_text(f"[runner] begin {test}\n")
(results / f"{test}.json").write_text(json.dumps({"test": test, "records": []}))
# The runner's `started`: the time of its first line (a second later for each call).
(results / "summary.json").write_text(json.dumps({"status": "passed", "started": f"2026-11-25T18:03:{20 + n}.000Z"}))
sys.exit(int(os.environ.get("FAIL_" + test.replace("-", "_").upper(), "0")))
"""


IMAGE = "https://www.googleapis.com/compute/v1/projects/ubuntu-os-cloud/global/images/ubuntu-2404-noble-amd64-v20261110"


def attributes(tmp: Path, rank: int, world: int, tests: list[str], wait_s: int = 30) -> Path:
    cfg = config.parse(plan_engine.project_keys(stack_config("gce-b200")), "gce-b200")
    peers = [{"rank": i, "name": gce.instance_name(cfg.name_prefix, i), "ip": f"10.0.0.{10 + i}"} for i in range(world)]
    bench = gce_bench.bench_settings(cfg, peers)
    bench.update(
        tests=tests,
        runner=str(tmp / "fake_runner.py"),
        python=[sys.executable],
        testPythons=[],
        peerWaitSeconds=wait_s,
        pollSeconds=0.2,
        resultsDir=str(tmp / f"vm{rank}" / "results"),
    )
    attrs = {
        "deepep-rank": str(rank),
        "deepep-world-size": str(world),
        "deepep-master-addr": "10.0.0.10",
        "deepep-master-port": "29500",
        "deepep-bucket": "bkt",
        "deepep-run-id": "run1",
        "deepep-bench": json.dumps(bench),
        "deepep-image": IMAGE,
    }
    path = tmp / f"attrs-{rank}.json"
    path.write_text(json.dumps(attrs))
    return path


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "fake_runner.py").write_text(FAKE_RUNNER)
    startup_log = tmp_path / "startup.log"
    startup_log.write_text("[gce] boot\n")
    e = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")}
    e.update(
        DEEPEP_GCE_STORE_DIR=str(tmp_path / "bucket"),
        CALLS=str(tmp_path / "calls.jsonl"),
        DEEPEP_GCE_STARTUP_LOG=str(startup_log),
        DEEPEP_INSTALL_STATUS=str(tmp_path / "install" / "status.json"),  # none unless a test writes one
    )
    return e


def start(attrs: Path, env: dict[str, str], *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(STAGE), "--attributes", str(attrs), *extra],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> tuple[int, str]:
    out, _ = proc.communicate(timeout=60)
    return proc.returncode, out


def calls(env: dict[str, str]) -> list[dict[str, Any]]:
    path = Path(env["CALLS"])
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def bucket(tmp: Path, name: str) -> dict[str, Any]:
    return json.loads((tmp / "bucket" / name).read_text())


ALL = ["intranode", "low-latency", "internode"]


def test_two_vms_run_local_tests_then_internode_together(tmp_path: Path, env: dict[str, str]) -> None:
    procs = [start(attributes(tmp_path, r, 2, ALL), env) for r in (0, 1)]
    results = [finish(p) for p in procs]
    assert [rc for rc, _ in results] == [0, 0], results
    made = calls(env)
    assert sorted((c["test"], c["env"]["RANK"]) for c in made) == [
        ("internode", "0"),
        ("internode", "1"),
        ("intranode", None),
        ("intranode", None),
        ("low-latency", None),
        ("low-latency", None),
    ]
    for c in made:
        if c["test"] == "internode":
            assert c["env"]["WORLD_SIZE"] == "2"
            assert c["env"]["MASTER_ADDR"] == "10.0.0.10"
            assert c["env"]["MASTER_PORT"] == "29500"
        else:
            assert c["env"]["WORLD_SIZE"] is None  # the runner runs single-node tests only without it
        assert c["env"]["BENCH_PROCESSES"] == "8"  # the stack's settings reach the runner's environment
        assert c["env"]["DEEPEP_IMAGE"] == IMAGE  # the boot image, for what ran
    for r in (0, 1):
        for test in ALL:
            assert bucket(tmp_path, f"runs/run1/node-{r}/{test}/done.json")["status"] == "passed"
            assert (tmp_path / "bucket" / f"runs/run1/node-{r}/{test}/{test}.log").is_file()
        assert bucket(tmp_path, f"runs/run1/node-{r}/status.json")["state"] == "done"
        assert (tmp_path / "bucket" / f"runs/run1/node-{r}/startup-script.out").is_file()


def test_a_second_boot_resumes_and_repeats_nothing(tmp_path: Path, env: dict[str, str]) -> None:
    for _ in range(2):
        procs = [start(attributes(tmp_path, r, 2, ALL), env) for r in (0, 1)]
        assert [finish(p)[0] for p in procs] == [0, 0]
    assert len(calls(env)) == 6
    rc, out = finish(start(attributes(tmp_path, 0, 2, ALL), env))
    assert rc == 0
    assert "intranode: already done (passed" in out
    assert "internode: already done (passed" in out


def test_a_failed_test_is_recorded_and_not_repeated_at_the_next_boot(tmp_path: Path, env: dict[str, str]) -> None:
    env["FAIL_INTRANODE"] = "1"
    attrs = attributes(tmp_path, 0, 1, ["intranode", "low-latency"])
    rc, _ = finish(start(attrs, env))
    assert rc == 1
    assert bucket(tmp_path, "runs/run1/node-0/intranode/done.json")["status"] == "failed"
    assert bucket(tmp_path, "runs/run1/node-0/status.json") | {"failed": ["intranode"]} == bucket(
        tmp_path, "runs/run1/node-0/status.json"
    )
    rc, out = finish(start(attrs, env))
    assert rc == 1
    assert len(calls(env)) == 2  # intranode and low-latency once each
    assert "intranode: already done (failed" in out
    env.pop("FAIL_INTRANODE")
    rc, _ = finish(start(attrs, env, "--rerun", "intranode"))
    assert rc == 0
    assert bucket(tmp_path, "runs/run1/node-0/intranode/done.json")["status"] == "passed"


def test_a_peer_that_never_shows_up_is_named_and_the_wait_ends(tmp_path: Path, env: dict[str, str]) -> None:
    rc, out = finish(start(attributes(tmp_path, 0, 3, ["internode"], wait_s=1), env))
    assert rc == 1
    assert "gave up after 0 min waiting for" in out
    assert "rank 1 (deepep-gce-b200-vm-1, 10.0.0.11): never reported" in out
    assert "rank 2 (deepep-gce-b200-vm-2, 10.0.0.12): never reported" in out
    assert "pulumi up --refresh" in out
    assert calls(env) == []
    status = bucket(tmp_path, "runs/run1/node-0/status.json")
    assert status["state"] == "failed" and status["missing"] == [1, 2]
    # It left the barrier, so a late peer does not start against nobody.
    assert not (tmp_path / "bucket" / "runs/run1/internode/1/ready/0").exists()


def test_a_peer_that_failed_to_install_is_reported_with_its_state(tmp_path: Path, env: dict[str, str]) -> None:
    rc, out = finish(start(attributes(tmp_path, 1, 2, ALL), env, "--install-failed", "7"))
    assert rc == 7
    assert bucket(tmp_path, "runs/run1/node-1/status.json")["state"] == "install-failed"
    rc, out = finish(start(attributes(tmp_path, 0, 2, ["internode"], wait_s=1), env))
    assert rc == 1
    assert "rank 1 (deepep-gce-b200-vm-1, 10.0.0.11): last status 'install-failed'" in out


def test_a_recreated_vm_is_told_its_peers_finished_already(tmp_path: Path, env: dict[str, str]) -> None:
    procs = [start(attributes(tmp_path, r, 2, ["internode"]), env) for r in (0, 1)]
    assert [finish(p)[0] for p in procs] == [0, 0]
    # VM 1 was preempted mid-run and recreated: its internode result never reached the bucket.
    (tmp_path / "bucket" / "runs/run1/node-1/internode/done.json").unlink()
    rc, out = finish(start(attributes(tmp_path, 1, 2, ["internode"], wait_s=1), env))
    assert rc == 1
    assert "rank 0 (deepep-gce-b200-vm-0, 10.0.0.10): finished internode already (passed" in out
    assert len(calls(env)) == 2  # it did not start the test alone
    # The way out the message gives: a new attempt on every VM.
    procs = [
        start(attributes(tmp_path, r, 2, ["internode"]), env, "--rerun", "internode", "--attempt", "2") for r in (0, 1)
    ]
    assert [finish(p)[0] for p in procs] == [0, 0]
    assert len(calls(env)) == 4


def test_rerunning_internode_in_the_same_attempt_is_refused(tmp_path: Path, env: dict[str, str]) -> None:
    procs = [start(attributes(tmp_path, r, 2, ["internode"]), env) for r in (0, 1)]
    assert [finish(p)[0] for p in procs] == [0, 0]
    rc, out = finish(start(attributes(tmp_path, 0, 2, ["internode"]), env, "--rerun", "internode"))
    assert rc == 2
    assert "needs a new --attempt" in out


class FakeResponse:
    def __init__(self, body: bytes):
        self.body = body

    def read(self) -> bytes:
        return self.body

    def __enter__(self) -> FakeResponse:
        return self

    def __exit__(self, *exc: object) -> None:
        return None


def test_gcs_store_speaks_the_json_api_with_the_metadata_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """The real store: token from the metadata server, media upload, alt=media, paged listing, 404 and retry."""
    import urllib.error

    from scripts.gce import stage_io

    seen: list[tuple[str, str, dict[str, str], bytes | None]] = []
    failures = {"count": 1}

    def urlopen(req: Any, timeout: float = 0) -> FakeResponse:
        url = req.full_url
        seen.append((req.get_method(), url, dict(req.header_items()), req.data))
        if url.endswith("/service-accounts/default/token"):
            return FakeResponse(b'{"access_token": "tok", "expires_in": 3599}')
        if "missing.json" in url:
            raise urllib.error.HTTPError(url, 404, "not found", None, None)  # type: ignore[arg-type]
        if "alt=media" in url and failures["count"]:
            failures["count"] -= 1
            raise urllib.error.HTTPError(url, 503, "busy", None, None)  # type: ignore[arg-type]
        if "alt=media" in url:
            return FakeResponse(b"hello")
        if "pageToken=p2" in url:
            return FakeResponse(b'{"items": [{"name": "runs/r/b"}]}')
        if "/o?" in url and "prefix=" in url:
            return FakeResponse(b'{"items": [{"name": "runs/r/a"}], "nextPageToken": "p2"}')
        return FakeResponse(b"{}")

    monkeypatch.setattr(stage_io.urllib.request, "urlopen", urlopen)
    monkeypatch.setattr(stage_io.time, "sleep", lambda s: None)
    store = stage_io.GcsStore("bkt")
    store.put("runs/r/node-0/status.json", b"{}")
    assert store.get("runs/r/x.json") == b"hello"  # after one 503
    assert store.get("runs/r/missing.json") is None
    assert store.list("runs/r/") == ["runs/r/a", "runs/r/b"]
    store.delete("runs/r/a")

    token_calls = [s for s in seen if s[1].endswith("/token")]
    assert len(token_calls) == 1 and token_calls[0][2] == {"Metadata-flavor": "Google"}
    upload = next(s for s in seen if s[0] == "POST")
    assert upload[1] == (
        "https://storage.googleapis.com/upload/storage/v1/b/bkt/o?uploadType=media&name=runs%2Fr%2Fnode-0%2Fstatus.json"
    )
    assert upload[2]["Authorization"] == "Bearer tok"
    assert ("DELETE", "https://storage.googleapis.com/storage/v1/b/bkt/o/runs%2Fr%2Fa") == seen[-1][:2]
    with pytest.raises(ValueError, match="refusing"):
        stage_io.request("file:///etc/passwd")


def test_results_py_reads_the_bucket_through_gs_source(tmp_path: Path) -> None:
    """What the VMs uploaded, read back with `results.py gs://...` (gcloud faked by a folder copy)."""
    bucket_dir = tmp_path / "bucket"
    node = bucket_dir / "runs" / "run1" / "node-0" / "internode"
    node.mkdir(parents=True)
    (node / "internode.log").write_text((ROOT / "tests/fixtures/bench/r2_internode_gke.log").read_text())
    (node / "done.json").write_text('{"test": "internode", "status": "passed"}')
    (node.parent / "status.json").write_text('{"state": "done"}')
    (node.parent / "startup-script.out").write_text("[runner] begin {}\n")  # not read: it repeats the logs
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    gcloud = bin_dir / "gcloud"
    gcloud.write_text(
        "#!/bin/sh\n"
        '[ "$1 $2 $3" = "storage cp -r" ] || exit 64\n'
        f'src="{bucket_dir}/${{4#gs://bkt/}}"\n'
        'cp -r "$src" "$5"/\n'
    )
    gcloud.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    out = tmp_path / "report"
    proc = subprocess.run(
        [sys.executable, "-m", "deepep_a4.report", "gs://bkt/runs/run1", "--out", str(out), "--no-plots"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode in (0, 1), proc.stdout + proc.stderr  # 1: the gate may fail on field report R2 numbers
    report = (out / "report.md").read_text()
    assert "gs://bkt/runs/run1" in report
    assert "internode" in report


def test_the_stage_off_a_vm_fails_at_once_with_one_line() -> None:
    # Off a VM the metadata server's name does not resolve; asking it over HTTP would wait through retries.
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    started = __import__("time").monotonic()
    proc = subprocess.run([sys.executable, str(STAGE)], capture_output=True, text=True, check=False, env=env)
    took = __import__("time").monotonic() - started
    if proc.returncode == 0:  # pragma: no cover - this machine is a GCE VM
        pytest.skip("running on a GCE VM")
    assert proc.returncode == 2 and took < 10
    assert proc.stderr.startswith("error: metadata.google.internal does not resolve")
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


def test_on_gce_vm_asks_name_resolution_only() -> None:
    from scripts.gce import stage_io

    def fail(host: str, port: int) -> None:
        raise OSError("no such host")

    assert stage_io.on_gce_vm(fail) is False
    assert stage_io.on_gce_vm(lambda host, port: [("ok",)]) is True


def test_the_vms_status_carries_its_bring_up_times_and_keeps_the_first(tmp_path: Path, env: dict[str, str]) -> None:
    """installerReady: the installer's status.json `updated` once ready; firstBenchmarkLine: the runner's
    `started` of the first test. `deepep-a4 run` reads both (deepep_a4/timeline.py)."""
    status = Path(env["DEEPEP_INSTALL_STATUS"])
    status.parent.mkdir()
    status.write_text(json.dumps({"ready": True, "updated": "2026-11-25T18:03:00Z", "phase": None, "phases": {}}))
    attrs = attributes(tmp_path, 0, 1, ["intranode", "low-latency"])
    assert finish(start(attrs, env))[0] == 0
    doc = bucket(tmp_path, "runs/run1/node-0/status.json")
    assert doc["state"] == "done"
    assert (doc["installerReady"], doc["firstBenchmarkLine"]) == ("2026-11-25T18:03:00Z", "2026-11-25T18:03:20.000Z")
    # A later boot: the installer rewrote its file and a test ran again; the first times stay.
    status.write_text(json.dumps({"ready": True, "updated": "2026-11-25T19:00:00Z"}))
    assert finish(start(attrs, env, "--rerun", "intranode"))[0] == 0
    again = bucket(tmp_path, "runs/run1/node-0/status.json")
    assert (again["installerReady"], again["firstBenchmarkLine"]) == (doc["installerReady"], doc["firstBenchmarkLine"])


def test_an_installer_that_is_not_ready_gives_no_ready_time(tmp_path: Path, env: dict[str, str]) -> None:
    status = Path(env["DEEPEP_INSTALL_STATUS"])
    status.parent.mkdir()
    status.write_text(json.dumps({"ready": False, "updated": "2026-11-25T18:03:00Z", "phase": "stage"}))
    assert finish(start(attributes(tmp_path, 0, 1, ["intranode"]), env))[0] == 0
    doc = bucket(tmp_path, "runs/run1/node-0/status.json")
    assert "installerReady" not in doc and doc["firstBenchmarkLine"] == "2026-11-25T18:03:20.000Z"


def test_the_installer_status_the_stage_reads_is_the_one_the_installer_writes_on_gce() -> None:
    from scripts import names
    from scripts.gce import bench_stage

    assert bench_stage.INSTALL_STATUS == names.install_paths("gce", staged=True)["status"]
    assert bench_stage.INSTALL_STATUS == names.install_paths("gce", staged=False)["status"]


def test_a_later_boot_of_a_vm_without_times_does_not_take_the_installers_rewritten_time(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """A VM that finished before the stage recorded times (or whose first stage run had no status file):
    its installer's `updated` at a later boot is that boot's, not its bring-up."""
    attrs = attributes(tmp_path, 0, 1, ["intranode"])
    assert finish(start(attrs, env))[0] == 0  # the first boot: no installer status file to read
    status = Path(env["DEEPEP_INSTALL_STATUS"])
    status.parent.mkdir()
    status.write_text(json.dumps({"ready": True, "updated": "2026-11-25T19:00:00Z"}))
    assert finish(start(attrs, env))[0] == 0
    assert "installerReady" not in bucket(tmp_path, "runs/run1/node-0/status.json")
    # After a failed install, the boot that installs is the first to get here: its time counts.
    finish(start(attrs, env, "--install-failed", "1"))
    failed = bucket(tmp_path, "runs/run1/node-0/status.json")
    assert failed["state"] == "install-failed" and failed["firstBenchmarkLine"] == "2026-11-25T18:03:20.000Z"  # kept
    assert finish(start(attrs, env))[0] == 0
    assert bucket(tmp_path, "runs/run1/node-0/status.json")["installerReady"] == "2026-11-25T19:00:00Z"

#!/usr/bin/env python3
"""GCE benchmark stage: what every A4 VM does after the installer, on every boot.

The VM's startup script (rendered by components/gce/bench.py) runs the installer, then this file:

    python3 bench_stage.py                     # settings from the VM's metadata
    python3 bench_stage.py --install-failed RC # the installer failed: record it for the peers, exit RC
    python3 bench_stage.py --rerun TEST[,TEST] [--attempt N]   # by hand: run finished tests again

1. The single-node tests (intranode, low-latency) run here with the benchmark runner
   (bench/run_bench.py, shipped next to this file), one runner call per test.
2. Then every VM meets the others at a barrier in the results bucket and all run the internode test
   together: RANK = this VM's index, WORLD_SIZE = node count, MASTER_ADDR = VM 0's static address.
   A peer that does not show up within the wait is named, with the last status it reported.
3. Each test's results folder (the runner's <test>.log, <test>.json, nccl.*, summary.json) is
   uploaded to gs://BUCKET/runs/RUN_ID/node-RANK/TEST/, followed by TEST/done.json.

Resume, not repeat: a test whose done.json exists in the bucket is not run again (passed or failed),
on this boot, after a reboot, or on a VM that was recreated after spot preemption. A test interrupted
by preemption has no done.json and runs again. `--rerun` ignores done.json for the tests it names.

Bucket layout (RUN_ID changes whenever versions or benchmark settings change):

    runs/RUN_ID/node-R/status.json           state of node R: benchmarking | done | failed | install-failed,
                                             and its bring-up times: installerReady (the installer's
                                             status.json `updated` once ready), firstBenchmarkLine (the
                                             runner's `started`); the first recorded value is kept
    runs/RUN_ID/node-R/TEST/...              the runner's files for TEST
    runs/RUN_ID/node-R/TEST/done.json        {"test", "rc", "status", "finished"}
    runs/RUN_ID/node-R/startup-script.out    this VM's startup script log (install + stage)
    runs/RUN_ID/internode/ATTEMPT/ready/R    barrier: node R is ready for the internode test

Stdlib only: this runs with the VM's system python3. Storage goes through the GCS JSON API with the
VM service account's token from the metadata server (no gcloud, no client library).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

try:  # in the package (tests) or next to each other on the VM (/opt/deepep/gce)
    from scripts import names
    from scripts.gce import stage_io as io
except ImportError:  # pragma: no cover - on a VM the script's own folder is sys.path[0]
    import names  # type: ignore[no-redef]
    import stage_io as io  # type: ignore[no-redef]


# The installer's status file on the VM (scripts/install/run.sh writes it; both profiles use one root on GCE).
INSTALL_STATUS = names.install_paths("gce")["status"]
BRINGUP_KEYS = ("installerReady", "firstBenchmarkLine")

# -- the stage -------------------------------------------------------------------------------------


class Stage:
    def __init__(self, s: io.Settings, store: io.Store, attempt: str = "1"):
        self.s = s
        self.store = store
        self.attempt = attempt
        self.node = f"runs/{s.run_id}/node-{s.rank}"
        self.host = socket.gethostname()
        # Bring-up times for `deepep-a4 run` (deepep_a4/timeline.py), in every status document.
        self.times: dict[str, str] = {}

    def status(self, state: str, **extra: Any) -> None:
        doc = {"state": state, "rank": self.s.rank, "host": self.host, "runId": self.s.run_id, "updated": io.now()}
        io.put_json(self.store, f"{self.node}/status.json", doc | self.times | extra)

    def load_times(self, installer: bool = True) -> None:
        """The bring-up times an earlier boot recorded (kept: the first is the measurement). On the first
        boot that gets here (no status yet, or only a failed install's) the installer's ready time from its
        status file: `updated` of the write that set `ready` true. A later boot's installer rewrites that
        time without installing anything, so it is not taken then."""
        prior = io.get_json(self.store, f"{self.node}/status.json") or {}
        self.times = {k: str(prior[k]) for k in BRINGUP_KEYS if prior.get(k)}
        first = prior.get("state") in (None, names.GCE_STATE_INSTALL_FAILED)
        if installer and first and "installerReady" not in self.times:
            path = Path(os.environ.get("DEEPEP_INSTALL_STATUS", INSTALL_STATUS))
            try:
                doc = json.loads(path.read_text())
            except (OSError, ValueError):
                doc = None
            if isinstance(doc, dict) and doc.get("ready") is True and doc.get("updated"):
                self.times["installerReady"] = str(doc["updated"])

    def note_first_line(self, summary: Path) -> None:
        """The runner's own time of its first line (`started` in its summary.json), from the first test."""
        if "firstBenchmarkLine" in self.times:
            return
        try:
            started = json.loads(summary.read_text()).get("started")
        except (OSError, ValueError, AttributeError):
            started = None
        if started:
            self.times["firstBenchmarkLine"] = str(started)

    def upload_startup_log(self) -> None:
        path = Path(os.environ.get("DEEPEP_GCE_STARTUP_LOG", io.STARTUP_LOG))
        if path.is_file():
            # Not *.log: results.py reads every .log it finds, and this one repeats the tests' output.
            self.store.put(f"{self.node}/startup-script.out", path.read_bytes())

    def done(self, test: str) -> dict[str, Any] | None:
        return io.get_json(self.store, f"{self.node}/{test}/done.json")

    def runner_argv(self, test: str, results: Path) -> list[str]:
        runner = self.s.runner or str(Path(__file__).resolve().parent / "bench" / "run_bench.py")
        argv = [*self.s.python, runner, "--tests", test, "--results-dir", str(results), *self.s.runner_args]
        # The tests need the installer's PyTorch: its interpreter, where the installer put one.
        test_python = next((p for p in self.s.test_pythons if os.access(p, os.X_OK)), None)
        return [*argv, "--python", test_python] if test_python else argv

    def run_test(self, test: str, env_extra: dict[str, str]) -> int:
        results = Path(self.s.results_dir) / self.s.run_id / test
        results.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "MASTER_ADDR", "MASTER_PORT")}
        env.update(self.s.runner_env)  # the stack's test settings (the runner's BENCH_* contract)
        env.update(env_extra)
        if self.s.image:
            env[names.IMAGE_VAR] = self.s.image
        argv = self.runner_argv(test, results)
        io.say(f"{test}: {' '.join(argv)}")
        started = time.monotonic()
        rc = subprocess.call(argv, env=env)
        self.note_first_line(results / "summary.json")
        for path in sorted(results.rglob("*")):
            if path.is_file():
                self.store.put(f"{self.node}/{test}/{path.relative_to(results)}", path.read_bytes())
        status = {names.EXIT_OK: "passed", names.EXIT_UNPROVEN: "unproven"}.get(rc, "failed")
        doc = {"test": test, "rc": rc, "status": status, "seconds": round(time.monotonic() - started, 1)}
        if test == "internode":
            doc["attempt"] = self.attempt
        io.put_json(self.store, f"{self.node}/{test}/done.json", doc | {"finished": io.now(), "host": self.host})
        io.say(f"{test}: {status} (runner exit {rc}); results in gs://{self.s.bucket}/{self.node}/{test}/")
        return rc

    def barrier(self) -> list[int]:
        """Marks this node ready for the internode test and waits for every peer; returns the missing ranks.

        A peer counts as ready while its marker for this attempt exists and it has not finished this
        attempt yet, so a VM recreated after its peers finished is told so instead of starting alone.
        A node that gives up removes its marker, so a late peer does not start against nobody.
        """
        prefix = f"runs/{self.s.run_id}/internode/{self.attempt}/ready/"
        mine = f"{prefix}{self.s.rank}"
        io.put_json(self.store, mine, {"host": self.host, "ready": io.now()})
        deadline = time.monotonic() + self.s.peer_wait_s
        last_note = 0.0
        while True:
            marked = {int(n.rsplit("/", 1)[1]) for n in self.store.list(prefix) if n.rsplit("/", 1)[1].isdigit()}
            missing = [r for r in range(self.s.world_size) if r not in marked]
            if not missing:  # read the peers' done markers only once everyone has marked (64 VMs poll this)
                missing = [r for r in range(self.s.world_size) if self.finished_attempt(r)]
            if not missing:
                io.say(f"internode: all {self.s.world_size} nodes are ready (attempt {self.attempt})")
                return []
            if time.monotonic() >= deadline:
                self.store.delete(mine)
                return missing
            if time.monotonic() - last_note >= 300 or not last_note:
                waited = int(self.s.peer_wait_s - (deadline - time.monotonic()))
                names = "; ".join(self.describe(r) for r in missing)
                io.say(f"internode: waiting for {len(missing)} peer(s) ({waited}s of {self.s.peer_wait_s}s): {names}")
                last_note = time.monotonic()
            time.sleep(self.s.poll_s)

    def finished_attempt(self, rank: int) -> bool:
        done = io.get_json(self.store, f"runs/{self.s.run_id}/node-{rank}/internode/done.json")
        return bool(done) and str(done.get("attempt")) == self.attempt

    def describe(self, rank: int) -> str:
        """A peer, with the last status it reported, for messages about peers that did not show up."""
        p = self.s.peer(rank)
        st = io.get_json(self.store, f"runs/{self.s.run_id}/node-{rank}/status.json")
        done = io.get_json(self.store, f"runs/{self.s.run_id}/node-{rank}/internode/done.json")
        if done:
            last = f"finished internode already ({done.get('status')} at {done.get('finished')})"
        elif st:
            last = f"last status '{st.get('state')}' at {st.get('updated')}"
        else:
            last = "never reported (not booted, still installing, or preempted)"
        return f"rank {rank} ({p.name}, {p.ip}): {last}"

    def run(self, rerun: tuple[str, ...] = ()) -> int:
        s = self.s
        self.load_times()
        self.status(names.GCE_STATE_BENCHMARKING)
        io.say(f"run {s.run_id}: node {s.rank} of {s.world_size}, tests {', '.join(s.tests) or 'none'}")
        failed: list[str] = []
        for test in (t for t in io.LOCAL_TESTS if t in s.tests):
            prior = self.done(test)
            if prior and test not in rerun:
                io.say(f"{test}: already done ({prior.get('status')} at {prior.get('finished')}), not repeating")
                if prior.get("status") != "passed":
                    failed.append(test)
                continue
            if self.run_test(test, {}) != 0:
                failed.append(test)

        if "internode" in s.tests and s.world_size > 1:
            prior = self.done("internode")
            if prior and "internode" in rerun and str(prior.get("attempt")) == self.attempt:
                io.say(
                    f"error: internode attempt {self.attempt} already ran here; a rerun needs a new --attempt, "
                    "the same on every VM"
                )
                return 2
            if prior and "internode" not in rerun:
                io.say(f"internode: already done ({prior.get('status')} at {prior.get('finished')}), not repeating")
                if prior.get("status") != "passed":
                    failed.append("internode")
            else:
                self.status(names.GCE_STATE_WAITING)
                missing = self.barrier()
                if missing:
                    minutes = s.peer_wait_s // 60
                    msg = f"internode: gave up after {minutes} min waiting for " + "; ".join(
                        self.describe(r) for r in missing
                    )
                    io.say("error: " + msg)
                    io.say(
                        "bring missing VMs back with `pulumi up --refresh`, then run the internode test again "
                        "on every VM at once: reboot them all, or run "
                        f"`sudo python3 {Path(__file__).resolve()} --rerun internode --attempt 2` on each"
                    )
                    self.status(names.GCE_STATE_FAILED, error=msg, missing=missing)
                    self.upload_startup_log()
                    return 1
                self.status(names.GCE_STATE_INTERNODE)
                env = {
                    "WORLD_SIZE": str(s.world_size),
                    "RANK": str(s.rank),
                    "MASTER_ADDR": s.master_addr,
                    "MASTER_PORT": str(s.master_port),
                }
                if self.run_test("internode", env) != 0:
                    failed.append("internode")

        state = names.GCE_STATE_FAILED if failed else names.GCE_STATE_DONE
        self.status(state, failed=failed)
        self.upload_startup_log()
        io.say(
            f"benchmarks {state}"
            + (f": {', '.join(failed)} failed" if failed else "")
            + f"; gs://{s.bucket}/{self.node}/"
        )
        return 1 if failed else 0


def make_store(s: io.Settings) -> io.Store:
    local = os.environ.get("DEEPEP_GCE_STORE_DIR")
    return io.DirStore(local) if local else io.GcsStore(s.bucket)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--attributes", help="JSON file of instance attributes (default: the metadata server)")
    ap.add_argument("--install-failed", type=int, metavar="RC", help="record that the installer failed with RC")
    ap.add_argument("--rerun", default="", help="comma-separated tests to run again although they are done")
    ap.add_argument("--attempt", default="1", help="internode barrier round; every VM of a rerun must use the same")
    args = ap.parse_args(argv)

    try:
        attrs = json.loads(Path(args.attributes).read_text()) if args.attributes else io.metadata_attributes()
    except (io.NotOnVmError, OSError, json.JSONDecodeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return names.EXIT_USAGE
    settings = io.Settings.from_attributes(attrs)
    stage = Stage(settings, make_store(settings), attempt=args.attempt)
    if args.install_failed is not None:
        io.say(f"the installer failed (exit {args.install_failed}): no benchmarks on this boot")
        stage.load_times(installer=False)  # keep what an earlier boot recorded
        stage.status(names.GCE_STATE_INSTALL_FAILED, rc=args.install_failed)
        stage.upload_startup_log()
        return args.install_failed or 1
    return stage.run(rerun=tuple(t for t in args.rerun.split(",") if t))


if __name__ == "__main__":
    sys.exit(main())

"""deepep-a4 run's orchestration with the Automation API and the platforms replaced by fakes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from deepep_a4 import stackfile
from deepep_a4.run import command as rb
from deepep_a4.timeline import NodeTimeline

OUTPUTS = {"resultsUrl": "gs://bucket/runs/r1", "benchNamespace": "deepep-a4"}


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeStack:
    def __init__(self, calls: list[str], fail_up: Exception | None = None, fail_destroy: Exception | None = None):
        self.name = "gce-b200"
        self.calls, self.fail_up, self.fail_destroy = calls, fail_up, fail_destroy

    def raw_config(self) -> dict[str, Any]:
        return {}

    def preview(self, on_output: Callable[[str], Any]) -> None:
        on_output("Previewing update (gce-b200)")

    def up(self, on_output: Callable[[str], Any]) -> None:
        self.calls.append("up")
        on_output("Updating (gce-b200)")
        if self.fail_up:
            raise self.fail_up

    def outputs(self) -> dict[str, Any]:
        if "up" not in self.calls:  # a stack that was never deployed has no outputs
            return {}
        self.calls.append("outputs")
        return dict(OUTPUTS)

    def destroy(self, on_output: Callable[[str], Any]) -> None:
        self.calls.append("destroy")
        if self.fail_destroy:
            raise self.fail_destroy


class FakeProbe:
    """Answers each wait from a script of Progress values (the last one repeats)."""

    def __init__(
        self,
        calls: list[str],
        installed: list[Any],
        benchmarks: list[Any],
        collect_rc: int = 0,
        nodes: list[NodeTimeline] | Exception | None = None,
    ):
        self.calls = calls
        self._installed: Iterator[Any] = self._script(installed)
        self._bench: Iterator[Any] = self._script(benchmarks)
        self.collect_rc = collect_rc
        self.nodes = nodes if nodes is not None else []

    @staticmethod
    def _script(items: list[Any]) -> Iterator[Any]:
        yield from items
        while True:
            yield items[-1]

    def _next(self, it: Iterator[Any]) -> rb.Progress:
        item = next(it)
        if isinstance(item, BaseException):
            raise item
        return item

    def installed(self, outputs: dict[str, Any]) -> rb.Progress:
        self.calls.append("installed?")
        return self._next(self._installed)

    def benchmarks(self, outputs: dict[str, Any]) -> rb.Progress:
        self.calls.append("benchmarks?")
        return self._next(self._bench)

    def collect(self, outputs: dict[str, Any], out: Path) -> int:
        self.calls.append("collect")
        return self.collect_rc

    def timeline(self, outputs: dict[str, Any], resources: list[dict[str, Any]]) -> list[NodeTimeline]:
        self.calls.append("timeline")
        if isinstance(self.nodes, Exception):
            raise self.nodes
        return self.nodes


def ready(n: int, m: int = 2, failed: list[str] | None = None) -> rb.Progress:
    return rb.Progress(n, m, failed or [])


def run(
    argv: list[str],
    calls: list[str],
    probe: FakeProbe,
    stack: FakeStack | None = None,
    answers: list[str] | None = None,
    which: Callable[[str], str | None] = lambda _: "/usr/bin/pulumi",
) -> tuple[int, list[str], FakeClock]:
    said: list[str] = []
    clock = FakeClock()
    pending = list(answers or [])

    def ask(prompt: str) -> str:
        said.append(prompt)
        calls.append("ask")
        answer = pending.pop(0)
        if answer == "^C":
            raise KeyboardInterrupt
        return answer

    out = [] if "--out" in argv else ["--out", str(REPORT_DIR[0])]  # never build/report/ of the checkout
    rc = rb.main(
        ["--stack", "gce-b200", "--poll", "30", *out, *argv],
        which=which,
        make_stack=lambda name: stack or FakeStack(calls),
        make_probe=lambda cfg: probe,
        ask=ask,
        say=said.append,
        clock=clock,
        sleep=clock.sleep,
    )
    return rc, said, clock


@pytest.fixture(autouse=True)
def no_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks before anything is created are tests/deepep_a4/run/test_preflight.py's, on a stand-in CLI."""
    monkeypatch.setattr(rb.run_preflight, "check", lambda *args, **kwargs: [])


@pytest.fixture(autouse=True)
def interactive(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)


REPORT_DIR: list[Path] = []


@pytest.fixture(autouse=True)
def report_dir(tmp_path: Path) -> Iterator[Path]:
    """Where run() writes the report and timeline.json: this test's own folder."""
    REPORT_DIR[:] = [tmp_path / "report"]
    yield REPORT_DIR[0]
    REPORT_DIR.clear()


def test_happy_path_runs_every_phase_in_order_and_destroys() -> None:
    calls: list[str] = []
    probe = FakeProbe(calls, [ready(0), ready(1), ready(2)], [ready(0), ready(2)])
    rc, said, _ = run([], calls, probe)
    assert rc == rb.EXIT_PASS
    assert calls == [
        "up", "outputs",
        "installed?", "installed?", "installed?",
        "benchmarks?", "benchmarks?",
        "collect", "timeline", "destroy",
    ]  # fmt: skip
    text = "\n".join(said)
    assert "nodes ready 1/2" in text and "nodes ready 2/2" in text and "benchmarks finished 2/2" in text
    assert "] install: " in text and "] bench: " in text and "] destroy: pulumi destroy --refresh -s gce-b200" in text
    assert "[0:01:00] bench: benchmarks finished 0/2" in text  # elapsed: two 30 s sleeps of the install wait
    assert "Bill cap: ttl 8h" in text and "destroyed: nothing of it is left running" in text
    assert "    Updating (gce-b200)" in text  # pulumi's own output is shown, indented
    assert "ask" not in calls


def test_keep_leaves_the_stack_up_and_says_how_to_remove_it() -> None:
    calls: list[str] = []
    rc, said, _ = run(["--keep"], calls, FakeProbe(calls, [ready(2)], [ready(2)]))
    assert rc == rb.EXIT_PASS and "destroy" not in calls
    text = "\n".join(said)
    assert "pulumi destroy --refresh -s gce-b200" in text and "still up and billing" in text and "Bill cap" in text


def test_gate_failure_still_destroys_and_exits_1() -> None:
    calls: list[str] = []
    rc, _, _ = run([], calls, FakeProbe(calls, [ready(2)], [ready(2)], collect_rc=1))
    assert rc == rb.EXIT_GATE_FAILED and calls[-3:] == ["collect", "timeline", "destroy"]


def test_failed_up_offers_destroy_and_destroys_on_yes() -> None:
    calls: list[str] = []
    stack = FakeStack(calls, fail_up=RuntimeError("quota exceeded: NVIDIA_B200"))
    rc, said, _ = run([], calls, FakeProbe(calls, [ready(2)], [ready(2)]), stack=stack, answers=[""])
    assert rc == rb.EXIT_FAILED
    assert calls == ["up", "ask", "destroy"]  # partial resources may exist: destroy is offered
    assert any("quota exceeded" in line for line in said)


def test_install_failure_is_reported_at_once_and_destroyed_with_yes() -> None:
    calls: list[str] = []
    probe = FakeProbe(calls, [ready(0), ready(1, failed=["vm-1: install failed"])], [ready(2)])
    rc, said, _ = run(["--yes"], calls, probe)
    assert rc == rb.EXIT_FAILED
    # No benchmark wait, no question; the times so far are recorded before the destroy.
    assert calls == ["up", "outputs", "installed?", "installed?", "timeline", "destroy"]
    assert any("FAILED: install: vm-1: install failed" in line for line in said)


def test_install_timeout_fails_and_destroys() -> None:
    calls: list[str] = []
    rc, said, clock = run(["--install-timeout", "2", "--yes"], calls, FakeProbe(calls, [ready(1)], [ready(2)]))
    assert rc == rb.EXIT_FAILED and calls[-1] == "destroy" and "collect" not in calls
    assert clock.now - 1000 >= 120
    assert any("timed out after 2 min with nodes ready 1/2" in line for line in said)


def test_ctrl_c_offers_destroy_and_declining_says_what_runs() -> None:
    calls: list[str] = []
    probe = FakeProbe(calls, [ready(2)], [ready(0), KeyboardInterrupt()])
    rc, said, _ = run([], calls, probe, answers=["n"])
    assert rc == rb.EXIT_INTERRUPTED
    assert "destroy" not in calls and calls[-1] == "ask"
    text = "\n".join(said)
    assert "interrupted (Ctrl-C)" in text and "Destroy stack gce-b200 now? [Y/n]" in text
    assert "still up and billing" in text and "pulumi destroy --refresh -s gce-b200" in text and "Bill cap" in text


def test_ctrl_c_at_the_question_keeps_the_stack_and_says_so() -> None:
    calls: list[str] = []
    probe = FakeProbe(calls, [KeyboardInterrupt()], [ready(2)])
    rc, said, _ = run([], calls, probe, answers=["^C"])
    assert rc == rb.EXIT_INTERRUPTED and "destroy" not in calls
    assert any("pulumi destroy --refresh -s gce-b200" in line for line in said)


def test_without_a_terminal_a_failure_destroys_unless_keep(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("sys.stdin.isatty", lambda: False)
    calls: list[str] = []
    rc, _, _ = run([], calls, FakeProbe(calls, [RuntimeError("probe broke")], [ready(2)]))
    assert rc == rb.EXIT_FAILED and calls[-1] == "destroy" and "ask" not in calls
    calls = []
    rc, _, _ = run(["--keep"], calls, FakeProbe(calls, [RuntimeError("probe broke")], [ready(2)]))
    assert rc == rb.EXIT_FAILED and "destroy" not in calls


def test_failed_destroy_exits_5_and_says_how_to_retry() -> None:
    calls: list[str] = []
    stack = FakeStack(calls, fail_destroy=RuntimeError("resource in use"))
    rc, said, _ = run([], calls, FakeProbe(calls, [ready(2)], [ready(2)]), stack=stack)
    assert rc == rb.EXIT_DESTROY_FAILED
    assert any("destroy FAILED" in line and "resource in use" in line for line in said)
    assert any("pulumi destroy --refresh -s gce-b200" in line for line in said)


def test_destroy_only() -> None:
    calls: list[str] = []
    rc, _, _ = run(["--destroy"], calls, FakeProbe(calls, [ready(2)], [ready(2)]))
    assert rc == rb.EXIT_PASS and calls == ["destroy"]


def test_no_pulumi_cli_says_what_to_install_and_creates_nothing() -> None:
    made: list[str] = []
    said: list[str] = []
    rc = rb.main(
        ["--stack", "gce-b200"],
        which=lambda _: None,
        make_stack=lambda name: made.append(name),
        say=said.append,
    )
    assert rc == rb.EXIT_NO_CLI and made == []
    assert "https://www.pulumi.com/docs/install/" in said[0] and "Nothing was created" in said[0]


def test_unknown_stack_is_a_usage_error() -> None:
    said: list[str] = []
    assert rb.main(["--stack", "nope"], which=lambda _: None, say=said.append) == rb.EXIT_USAGE
    assert "gce-b200" in said[0] and "gke-b200" in said[0]


# -- the GCE probe on the bucket's status files ------------------------------------------------------------


def gce_probe(states: dict[int, str | None]) -> tuple[rb.GceProbe, list[list[str]]]:
    seen: list[list[str]] = []

    def runner(cmd: list[str]) -> tuple[int, str]:
        seen.append(cmd)
        rank = int(cmd[-1].split("/node-")[1].split("/")[0])
        state = states.get(rank)
        return (1, "") if state is None else (0, json.dumps({"state": state, "rank": rank}))

    return rb.GceProbe(rb.stack_cfg("gce-b200"), runner=runner), seen


def test_gce_probe_counts_installed_and_finished_vms() -> None:
    probe, seen = gce_probe({0: "benchmarking", 1: None})
    p = probe.installed(OUTPUTS)
    assert (p.done, p.total, p.failed) == (1, 2, []) and "1 no status yet" in p.detail
    assert seen[0] == ["gcloud", "storage", "cat", "gs://bucket/runs/r1/node-0/status.json"]
    probe, _ = gce_probe({0: "done", 1: "waiting-for-peers"})
    assert (probe.installed(OUTPUTS).done, probe.benchmarks(OUTPUTS).done) == (2, 1)
    probe, _ = gce_probe({0: "done", 1: "failed"})
    assert probe.benchmarks(OUTPUTS).complete  # a failed test ends the wait; the report fails the gate


def test_gce_probe_fails_on_install_failed() -> None:
    probe, _ = gce_probe({0: "benchmarking", 1: "install-failed"})
    assert probe.installed(OUTPUTS).failed == ["vm-1: install failed (see node-1/startup-script.out)"]


def test_gke_probe_reads_the_daemonset_and_jobs() -> None:
    class Obj:
        def __init__(self, **kw: Any) -> None:
            self.__dict__.update(kw)

    class Apps:
        def read_namespaced_daemon_set(self, name: str, ns: str) -> Obj:
            assert (name, ns) == ("deepep-installer", "deepep-a4")
            return Obj(status=Obj(number_ready=1, desired_number_scheduled=2))

    class Batch:
        def read_namespaced_job(self, name: str, ns: str) -> Obj:
            conds = {"bench-intranode": [Obj(type="Complete", status="True")], "bench-internode": []}[name]
            return Obj(status=Obj(conditions=conds))

    probe = rb.GkeProbe(rb.stack_cfg("gke-b200"), apis=(Apps(), Batch()))
    outputs = {
        "benchNamespace": "deepep-a4",
        "benchJobs": {"intranode": "bench-intranode", "internode": "bench-internode"},
    }
    assert (probe.installed(outputs).done, probe.installed(outputs).total) == (1, 2)
    bench = probe.benchmarks(outputs)
    assert (bench.done, bench.total, bench.complete) == (1, 2, False)


def test_a_gke_stack_needs_the_auth_plugin_before_anything_is_created() -> None:
    said: list[str] = []
    created: list[str] = []

    class Stack:
        def __init__(self, name: str):
            created.append(name)

        def raw_config(self) -> None:
            return None

    rc = rb.main(
        ["--stack", "gke-b200"],
        which=lambda tool: None if tool == rb.AUTH_PLUGIN else f"/usr/bin/{tool}",
        make_stack=Stack,
        say=said.append,
    )
    assert rc == rb.EXIT_NO_CLI
    assert said == [rb.AUTH_PLUGIN_MISSING] and "Nothing was created" in said[0]


@pytest.mark.parametrize("missing", ["pulumi", rb.AUTH_PLUGIN])
def test_destroy_refused_for_a_missing_tool_never_says_nothing_was_created(missing: str) -> None:
    """`run --destroy` acts on a stack that may hold paid machines: a refusal leaves them, it created nothing."""
    said: list[str] = []

    class Stack:
        def __init__(self, name: str):
            pass

        def raw_config(self) -> None:
            return None

    rc = rb.main(
        ["--stack", "gke-b200", "--destroy"],
        which=lambda tool: None if tool == missing else f"/usr/bin/{tool}",
        make_stack=Stack,
        say=said.append,
    )
    assert rc == rb.EXIT_NO_CLI
    assert len(said) == 1 and "Nothing was created" not in said[0]
    assert "Nothing was destroyed" in said[0] and "still there" in said[0]


class DeployedStack:
    """A stack the Automation API reports as already deployed with these outputs."""

    def __init__(self, outputs: dict[str, Any]):
        self.name = "gce-b200"
        self._outputs, self.calls = outputs, []

    def __call__(self, name: str) -> DeployedStack:
        return self

    def raw_config(self) -> None:
        return None

    def outputs(self) -> dict[str, Any]:
        return dict(self._outputs)

    def up(self, on_output: Callable[[str], Any]) -> None:
        self.calls.append("up")

    def destroy(self, on_output: Callable[[str], Any]) -> None:
        self.calls.append("destroy")


def test_a_platform_switch_on_a_deployed_stack_is_refused_before_up() -> None:
    said: list[str] = []
    stack = DeployedStack({"platform": "gke", "zone": "asia-southeast1-b"})
    rc = rb.main(["--stack", "gce-b200"], which=lambda tool: f"/usr/bin/{tool}", make_stack=stack, say=said.append)
    assert rc == rb.EXIT_USAGE and stack.calls == []
    assert said[0].startswith("error: stack gce-b200 is deployed on gke and its config now says platform gce")
    assert "`deepep-a4 run --stack gce-b200 --destroy`" in said[0]


def test_a_stack_past_its_deadline_is_sent_to_destroy_first() -> None:
    stack = DeployedStack({"platform": "gce", "deadline": "2026-01-01T00:00:00Z"})
    refusal = rb.deployed_refusal("gce-b200", rb.stack_cfg("gce-b200"), stack)
    assert refusal and "deadline 2026-01-01T00:00:00Z has passed" in refusal
    later = DeployedStack({"platform": "gce", "deadline": "2999-01-01T00:00:00Z"})
    assert rb.deployed_refusal("gce-b200", rb.stack_cfg("gce-b200"), later) is None


def test_destroy_is_never_refused_whatever_the_stack_holds() -> None:
    stack = DeployedStack({"platform": "gke", "deadline": "2026-01-01T00:00:00Z"})
    rc = rb.main(
        ["--stack", "gce-b200", "--destroy", "--yes"],
        which=lambda tool: f"/usr/bin/{tool}",
        make_stack=stack,
        say=lambda _: None,
    )
    assert rc == rb.EXIT_PASS and stack.calls == ["destroy"]


def test_the_bench_wait_covers_every_repeated_start() -> None:
    once = rb.stack_cfg("gce-b200")
    thrice = rb.stack_cfg("gce-b200", {**stackfile.read("gce-b200", rb.ROOT), "deepep-a4:benchRepeats": "3"})
    assert thrice.benchmarks.test_budget_seconds == 3 * once.benchmarks.test_budget_seconds

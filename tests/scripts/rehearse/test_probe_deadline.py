"""The deadline checks with clients whose answers change over a clock of the test's own (no waiting)."""

from __future__ import annotations

import io
from datetime import UTC, datetime

from scripts.rehearse import common, probe_deadline

ACCOUNT = "demo-a4-deadline@demo-project.iam.gserviceaccount.com"


class Clock:
    def __init__(self, now: float = 1_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += max(seconds, 0.001)


class Pool:
    """The node pool as nodePools.get and the audit log answer over time."""

    def __init__(self, clock: Clock, gone_at: float | None, deleter: str | None, logged_at: float = 0.0):
        self.clock, self.gone_at, self.deleter, self.logged_at = clock, gone_at, deleter, logged_at

    def pool_status(self) -> str | None:
        return None if self.gone_at is not None and self.clock() >= self.gone_at else "STOPPING"

    def deleted_by(self) -> str | None:
        return self.deleter if self.clock() >= self.logged_at else None


def pool_line(pool: Pool, clock: Clock) -> tuple[bool, dict[str, object]]:
    out = io.StringIO()
    ok = probe_deadline.check_pool_gone(
        pool, account=ACCOUNT, fired_at=1_000.0, within_s=600, poll_s=10, clock=clock, sleep=clock.sleep, out=out
    )
    line = common.parse_line(out.getvalue().strip())
    assert line is not None and line["seam"] == "deadline-pool"
    return ok, line


def test_a_pool_the_deadline_account_deleted_passes() -> None:
    clock = Clock()
    ok, line = pool_line(Pool(clock, gone_at=1_095.0, deleter=ACCOUNT, logged_at=1_150.0), clock)
    assert ok and line["status"] == "PASS"
    assert line["evidence"] == f"nodePools.get -> 404 100 s after the job fired; nodePools.delete by {ACCOUNT}"


def test_a_pool_still_there_at_the_bound_fails() -> None:
    clock = Clock()
    ok, line = pool_line(Pool(clock, gone_at=None, deleter=None), clock)
    assert not ok and "nodePools.get -> STOPPING 600 s after the job fired" in str(line["evidence"])
    assert clock.now <= 1_000.0 + 600 + 10


def test_a_pool_someone_else_deleted_fails() -> None:
    clock = Clock()
    ok, line = pool_line(Pool(clock, gone_at=1_010.0, deleter="me@example.com"), clock)
    assert not ok and f"by me@example.com, not the deadline account {ACCOUNT}" in str(line["evidence"])
    clock = Clock()
    ok, line = pool_line(Pool(clock, gone_at=1_010.0, deleter=ACCOUNT, logged_at=9e9), clock)
    assert not ok and "nodePools.delete by unknown" in str(line["evidence"])


class Vm:
    def __init__(self, clock: Clock, ended_at: float, status: str | None):
        self.clock, self.ended_at, self.status = clock, ended_at, status

    def instance_status(self) -> str | None:
        return self.status if self.clock() >= self.ended_at else "RUNNING"


AT = "2026-12-02T16:00:00Z"
AT_S = datetime(2026, 12, 2, 16, tzinfo=UTC).timestamp()


def vm_line(vm: Vm, clock: Clock) -> tuple[bool, dict[str, object]]:
    out = io.StringIO()
    ok = probe_deadline.check_vm_ended(
        vm, termination_time=AT, grace_s=180, poll_s=10, clock=clock, sleep=clock.sleep, out=out
    )
    line = common.parse_line(out.getvalue().strip())
    assert line is not None and line["seam"] == "deadline-vm"
    return ok, line


def test_a_vm_that_ends_at_its_termination_time_passes() -> None:
    clock = Clock(AT_S - 120)
    ok, line = vm_line(Vm(clock, AT_S + 40, None), clock)
    assert ok and "instances.get -> 404 +40 s from its terminationTime" in str(line["evidence"])
    clock = Clock(AT_S - 120)
    assert vm_line(Vm(clock, AT_S + 5, "TERMINATED"), clock)[0]


def test_a_vm_that_outlives_its_termination_time_fails() -> None:
    clock = Clock(AT_S - 120)
    ok, line = vm_line(Vm(clock, AT_S + 400, None), clock)
    assert not ok and "instances.get -> RUNNING 180 s after its terminationTime" in str(line["evidence"])


def test_a_vm_that_ended_before_proves_nothing() -> None:
    clock = Clock(AT_S - 120)
    ok, line = vm_line(Vm(clock, 0, "TERMINATED"), clock)
    assert not ok and "ended early (preempted?)" in str(line["evidence"])

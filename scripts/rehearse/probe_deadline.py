"""Rehearsal check: the deadline really removes the capacity. Not a script on a machine: `deepep-a4 rehearse` calls
these functions with its API client once it has fired the deadline (GKE: the Cloud Scheduler job's force-run,
`jobs.run`) or once a GCE VM's terminationTime is near. Each prints the seam's REHEARSAL line (common.py) and
returns whether it passed. Stdlib only, so the checks and the probes share one line format.

- deadline-pool (GKE): after the job fired, the node pool goes (nodePools.get answers 404) within `within_s`,
  and the delete was made by the deadline's own account: the principal of the nodePools.delete call, as Cloud
  Audit Logs record it (protoPayload.authenticationInfo.principalEmail of
  google.container.v1.ClusterManager.DeleteNodePool; https://cloud.google.com/logging/docs/audit). A pool that
  the workstation's own teardown deleted proves nothing, so an unknown or other principal FAILs.
- deadline-vm (GCE): the VM has ended (instances.get answers 404 for the DELETE action, or status TERMINATED
  for STOP; https://cloud.google.com/compute/docs/instances/limit-vm-runtime) by its terminationTime plus
  `grace_s`, and was still running shortly before it (a VM preempted earlier proves nothing).

The client protocols are all the command implements; tests drive them with a clock of their own.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Protocol, TextIO

try:  # in the package or next to the probes
    from scripts.rehearse import common
except ImportError:  # pragma: no cover - shipped as plain files
    import common  # type: ignore[no-redef]

ENDED = ("TERMINATED",)  # instances.get status of a stopped VM; a deleted one answers 404 (None below)


class PoolClient(Protocol):
    def pool_status(self) -> str | None:
        """The node pool's status (RUNNING, STOPPING, ...), None once the API answers 404."""
        ...

    def deleted_by(self) -> str | None:
        """The principal email of the pool's nodePools.delete from the audit log, None while none is logged."""
        ...


class VmClient(Protocol):
    def instance_status(self) -> str | None:
        """The instance's status (RUNNING, STOPPING, TERMINATED, ...), None once the API answers 404."""
        ...


def _poll(
    until: float, poll_s: float, clock: Callable[[], float], sleep: Callable[[float], None], ask: Callable[[], bool]
) -> bool:
    """ask() every poll_s until it is true or the clock passes `until` (then one last ask)."""
    while clock() < until:
        if ask():
            return True
        sleep(max(0.0, min(poll_s, until - clock())))
    return ask()


def check_pool_gone(
    client: PoolClient,
    *,
    account: str,
    fired_at: float,
    within_s: float,
    poll_s: float = 10.0,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    out: TextIO | None = None,
) -> bool:
    """deadline-pool: gone by fired_at + within_s (seconds on `clock`), deleted as `account`."""

    def check() -> str:
        last: list[str | None] = ["?"]

        def gone() -> bool:
            last[0] = client.pool_status()
            return last[0] is None

        if not _poll(fired_at + within_s, poll_s, clock, sleep, gone):
            raise common.SeamFailedError(
                f"nodePools.get -> {last[0]} {clock() - fired_at:.0f} s after the job fired (allowed {within_s:g} s)"
            )
        took = clock() - fired_at
        who: list[str | None] = [None]

        def logged() -> bool:
            who[0] = client.deleted_by()
            return who[0] is not None

        # The audit log entry may trail the delete by a minute or two: the same bound again for it.
        _poll(clock() + within_s, poll_s, clock, sleep, logged)
        evidence = f"nodePools.get -> 404 {took:.0f} s after the job fired; nodePools.delete by {who[0] or 'unknown'}"
        if who[0] != account:
            raise common.SeamFailedError(f"{evidence}, not the deadline account {account}")
        return evidence

    return common.run_seam("deadline-pool", check, out)


def check_vm_ended(
    client: VmClient,
    *,
    termination_time: str,
    grace_s: float = 180.0,
    poll_s: float = 10.0,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
    out: TextIO | None = None,
) -> bool:
    """deadline-vm: running before `termination_time` (RFC 3339), ended by it plus grace_s; `clock` is epoch s."""

    def check() -> str:
        at = datetime.fromisoformat(termination_time.replace("Z", "+00:00")).timestamp()
        before = client.instance_status()
        if clock() < at and (before is None or before in ENDED):
            raise common.SeamFailedError(
                f"instances.get -> {before or 404} {at - clock():.0f} s before its terminationTime "
                f"{termination_time}: it ended early (preempted?), which proves nothing"
            )
        last: list[str | None] = [before]

        def ended() -> bool:
            last[0] = client.instance_status()
            return last[0] is None or last[0] in ENDED

        if not _poll(at + grace_s, poll_s, clock, sleep, ended):
            raise common.SeamFailedError(
                f"instances.get -> {last[0]} {clock() - at:.0f} s after its terminationTime {termination_time} "
                f"(allowed {grace_s:g} s)"
            )
        return f"instances.get -> {last[0] or '404'} {clock() - at:+.0f} s from its terminationTime {termination_time}"

    return common.run_seam("deadline-vm", check, out)

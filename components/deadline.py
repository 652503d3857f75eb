"""The stack's deadline: the moment its A4 capacity must be gone, fixed at the first `pulumi up`.

`max_run_duration` (GKE node pools and GCE VMs) is a clock per machine that starts when that machine starts,
so a machine that comes back gets a fresh one: a spot node the node pool's managed instance group recreates
after a preemption, or a node a later `pulumi up` adds. The deadline does not move. It is computed once,
kept in the stack's state (a Stash whose input is never updated), and

- a `pulumi up` after it is refused before anything changes: the way to a new run is `pulumi destroy`, then
  `pulumi up`, which fixes a new deadline;
- a `pulumi up` before it keeps it: neither a new nodeCount nor a new node moves it, and changing `ttl` on a
  deployed stack is refused rather than silently ignored;
- on GKE a Cloud Scheduler job deletes the A4 node pool at the deadline (gke_deadline.py), so nothing brings a
  node back afterwards: not the node pool's repair, not the cluster autoscaler, not a resize.

`pulumi destroy` and `pulumi refresh` do not run the program, so neither is ever refused.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import Any

import pulumi

STASH_NAME = "stack-deadline"
TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


def deadline_after(now: dt.datetime, ttl_seconds: int) -> str:
    """now + ttl, rounded up to the whole minute (Cloud Scheduler's resolution), as UTC ISO 8601."""
    now = now.astimezone(dt.UTC)
    minute = now.replace(second=0, microsecond=0)
    if minute < now:
        minute += dt.timedelta(minutes=1)
    return (minute + dt.timedelta(seconds=ttl_seconds)).strftime(TIME_FORMAT)


def parse_time(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, TIME_FORMAT).replace(tzinfo=dt.UTC)


def _hours(seconds: int) -> str:
    return f"{seconds / 3600:g}h"


def check_kept(kept: dict[str, Any], ttl_seconds: int, now: dt.datetime) -> str:
    """The deadline a deployed stack keeps, or pulumi.RunError (one line: what, since when, what to do)."""
    at, kept_ttl = str(kept["at"]), int(kept["ttlSeconds"])
    if kept_ttl != ttl_seconds:
        raise pulumi.RunError(
            f"deepep-a4:ttl is {_hours(ttl_seconds)} but this stack was deployed with {_hours(kept_ttl)}, "
            f"whose deadline {at} was fixed at its first `pulumi up`; to change it run `pulumi destroy --refresh`, "
            "then `pulumi up` (or set ttl back)"
        )
    if now >= parse_time(at):
        raise pulumi.RunError(
            f"this stack's deadline {at} has passed: its A4 capacity is gone and `pulumi up` would not bring it "
            "back; run `pulumi destroy --refresh`, then `pulumi up` for a new run with a new deadline"
        )
    return at


@dataclass(frozen=True)
class StackDeadline:
    """`at`: the deadline (UTC ISO 8601). `gate`: the Stash, resolved only when the deadline is accepted; the
    stack's providers depend on it, so a refusal stops every resource before any change."""

    at: pulumi.Output[str]
    gate: pulumi.Output[pulumi.Resource]


def stack_deadline(ttl_seconds: int | None, now: dt.datetime | None = None) -> StackDeadline | None:
    """The stack's deadline, None without a ttl."""
    if ttl_seconds is None:
        return None
    now = now or dt.datetime.now(dt.UTC)
    kept = pulumi.Stash(
        STASH_NAME,
        input={"ttlSeconds": ttl_seconds, "at": deadline_after(now, ttl_seconds)},
        # The input moves with the clock; ignoring it keeps the first value and keeps `pulumi up` free of a
        # diff on every run.
        opts=pulumi.ResourceOptions(ignore_changes=["input"]),
    )
    at = kept.output.apply(lambda value: check_kept(value, ttl_seconds, now))
    return StackDeadline(at=at, gate=at.apply(lambda _: kept))


def cron_at(at: str) -> str:
    """A unix-cron schedule that fires at `at` (UTC): minute hour day month, any weekday. It fires again a
    year later, by which time the stack is long destroyed; if not, deleting the pool again is harmless."""
    t = parse_time(at)
    return f"{t.minute} {t.hour} {t.day} {t.month} *"

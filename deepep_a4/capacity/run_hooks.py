"""What `deepep-a4 run` adds for capacity, in one call: the `capacity` fallback around the stack's `up`
(fallback.py) and the internode watchdog around the benchmark wait (preemption.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from deepep_a4.capacity import fallback, preemption


def wrap(
    stack: Any, probe: Any, cfg: Any, say: Callable[[str], None], clock: Callable[[], float], timeout_s: float
) -> tuple[Any, Any]:
    """(stack, probe) for the run: the fallback stack when `capacity` lists more than one try, the watched probe
    when the internode test runs on more than one node; each unchanged otherwise."""
    watched = preemption.watch(probe, cfg, stack, say)
    return fallback.wrap(stack, cfg, say=say, clock=clock, timeout_s=timeout_s), watched

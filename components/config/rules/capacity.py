"""The `capacity` key: the ordered (zone, provisioning) tries of `deepep-a4 run` (deepep_a4/capacity/fallback.py).

Pulumi's project config types only string, integer, boolean and array (pulumi/pulumi
pkg/workspace/project.go, the config type's allowed values), so each try is one string `ZONE/MODEL`. Every
zone must be in the stack's region: the region fixes the subnets, the cluster, the store's location and the
prices, so another region is another stack (docs/deploy.md#no-capacity). The stack's own zone/provisioning must
be one of the entries: the plan describes it, `run` starts at the first entry and each try changes only those
two keys (after a try that worked, the stack file holds it, still one of the entries).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from components.config import provisioning, versions
from components.config.keys import ConfigError, Problem

# A reservation does not stock out: it is capacity the project holds (provisioning=reservation instead).
FALLBACK_MODELS = tuple(m for m in provisioning.NAMES if m != "reservation")
MAX_ENTRIES = 8  # bounds the tries in count; run bounds them in time too (--capacity-timeout)
_ENTRY_RE = re.compile(r"(?P<zone>[a-z]+-[a-z]+\d+-[a-z])/(?P<model>[a-z-]+)")


def check_capacity_fallback(
    v: dict[str, Any], problems: list[Problem], parse_with: Callable[[dict[str, Any]], Any] | None = None
) -> tuple[tuple[str, str], ...]:
    """The tries, in order; each one's whole config is checked too (`parse_with` the entry's zone and
    provisioning): a flex-start entry must meet flex-start's rules (ttl, terminationAction) before the first try."""
    entries: tuple[str, ...] = tuple(v.get("capacity") or ())
    if not entries:
        return ()
    tries: list[tuple[str, str]] = []
    offered = versions.A4_ZONES.get(v["machineType"], ())
    for entry in entries:
        m = _ENTRY_RE.fullmatch(entry)
        if not m:
            problems.append(Problem("capacity", entry, "each entry must be ZONE/MODEL, e.g. asia-southeast1-b/spot"))
            continue
        zone, model = m["zone"], m["model"]
        if model not in FALLBACK_MODELS:
            why = "; a reservation does not stock out: use provisioning=reservation" if model == "reservation" else ""
            problems.append(Problem("capacity", entry, f"MODEL must be one of: {', '.join(FALLBACK_MODELS)}{why}"))
        elif not zone.startswith(v["region"] + "-"):
            problems.append(
                Problem(
                    "capacity",
                    entry,
                    f"must be a zone of the stack's region {v['region']}: another region means other subnets, "
                    "cluster, store location and prices, so it is another stack (docs/deploy.md#no-capacity)",
                )
            )
        elif offered and zone not in offered:
            problems.append(
                Problem("capacity", entry, f"Google offers {v['machineType']} only in {', '.join(offered)}")
            )
        elif (zone, model) in tries:
            problems.append(Problem("capacity", entry, "is listed twice"))
        else:
            tries.append((zone, model))
    if len(entries) > MAX_ENTRIES:
        problems.append(Problem("capacity", list(entries), f"at most {MAX_ENTRIES} entries"))
    own = f"{v['zone']}/{v['provisioning']}"
    if own not in entries:
        problems.append(Problem("capacity", list(entries), f"must list the stack's own zone/provisioning, {own}"))
    if problems:  # the stack's own problems would come back once per entry
        return tuple(tries)
    for zone, model in tries:
        if parse_with is None or (zone, model) == (v["zone"], v["provisioning"]):
            continue
        try:
            parse_with({"zone": zone, "provisioning": model, "capacity": []})
        except ConfigError as err:
            why = "; ".join(str(p) for p in err.problems)
            problems.append(Problem("capacity", f"{zone}/{model}", f"this try's config is refused: {why}"))
    return tuple(tries)

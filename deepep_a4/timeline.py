"""How long each node of a run took: created, ready, installed, first benchmark line (`deepep-a4 run`).

Pure functions over what the platform reports, as plain dicts, so they run offline:

- GKE: Node and Pod objects (the kubernetes client's `to_dict()`, snake_case, or the API's JSON, camelCase)
  and the first line of each benchmark pod's log read with `timestamps=True` (the kubelet puts an
  RFC 3339 time in front of every line).
- GCE: the instances as compute v1 `Instance` resources (`name`, `creationTimestamp` with GCE's offset,
  `labels`), and each VM's status document in the results bucket (scripts/gce/bench_stage.py records
  `installerReady` and `firstBenchmarkLine` there).

Per node: `created` (GKE: the Node's metadata.creationTimestamp; GCE: the instance's creationTimestamp),
`ready` (GKE: lastTransitionTime of the Node's Ready condition while it is True; GCE has no Ready
condition: the installer's ready time), `installed` (the installer finished: GKE the installer pod's init
containers' finishedAt, else its Ready condition; GCE the installer's status.json `updated` once `ready`),
`firstBenchmarkLine`. Anything the platform did not report is "not recorded", with the reason, never a guess.
`write()` puts them into the run's results folder (timeline.json, results.json, report.md).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from deepep_a4.expected_times import Expected

NOT_RECORDED = "not recorded"
KIND = "deepep-a4 bring-up timeline"
TIMELINE_FILE = "timeline.json"
# (key in timeline.json, from, to, how the console says it). The bring-up table's rows map onto these
# (docs/installer.md#bring-up-time).
DURATIONS = (
    ("createdToReady", "created", "ready", "created->ready"),
    ("readyToInstalled", "ready", "installed", "ready->installed"),
    ("installedToFirstLine", "installed", "firstBenchmarkLine", "installed->first line"),
    ("readyToFirstLine", "ready", "firstBenchmarkLine", "ready->first line"),
    ("createdToFirstLine", "created", "firstBenchmarkLine", "created->first line"),
)
POINTS = ("created", "ready", "installed", "firstBenchmarkLine")


def parse_time(value: Any) -> dt.datetime | None:
    """A timezone-aware UTC datetime from an API time (datetime, RFC 3339 string with Z or an offset, up to
    nanoseconds); None when missing or without a zone (a time of unknown zone is not a measurement)."""
    if isinstance(value, dt.datetime):
        parsed = value
    elif isinstance(value, str) and value.strip():
        text = value.strip().replace("z", "Z")
        # Python 3.11 takes at most microseconds: the kubelet writes nanoseconds.
        text = re.sub(r"(\.\d{6})\d+", r"\1", text)
        try:
            parsed = dt.datetime.fromisoformat(text)
        except ValueError:
            return None
    else:
        return None
    return parsed.astimezone(dt.UTC) if parsed.tzinfo else None


def iso(value: dt.datetime | None) -> str:
    if value is None:
        return NOT_RECORDED
    return value.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _get(doc: Any, *keys: str) -> Any:
    """The first of `keys` present in `doc` (snake_case of to_dict() or camelCase of the API's JSON)."""
    if not isinstance(doc, dict):
        return None
    for key in keys:
        if doc.get(key) is not None:
            return doc[key]
    return None


@dataclass
class NodeTimeline:
    node: str
    created: dt.datetime | None = None
    ready: dt.datetime | None = None
    installed: dt.datetime | None = None
    first_line: dt.datetime | None = None
    why: dict[str, str] = field(default_factory=dict)  # point -> why it is not recorded

    def point(self, name: str) -> dt.datetime | None:
        return {"created": self.created, "ready": self.ready, "installed": self.installed}.get(
            name, self.first_line if name == "firstBenchmarkLine" else None
        )

    def seconds(self, key: str) -> float | None:
        start, end = next((a, b) for k, a, b, _ in DURATIONS if k == key)
        t0, t1 = self.point(start), self.point(end)
        if t0 is None or t1 is None or t1 < t0:
            return None
        return round((t1 - t0).total_seconds(), 3)

    def to_dict(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"node": self.node}
        for name in POINTS:
            doc[name] = iso(self.point(name))
        doc["seconds"] = {key: self.seconds(key) for key, *_ in DURATIONS}
        doc["notRecorded"] = {name: self.why.get(name, "not reported") for name in POINTS if not self.point(name)}
        return doc


def _condition_time(obj: dict[str, Any], kind: str) -> dt.datetime | None:
    """lastTransitionTime of condition `kind` while its status is "True"."""
    for cond in _get(_get(obj, "status") or {}, "conditions") or []:
        if _get(cond, "type") == kind and _get(cond, "status") == "True":
            return parse_time(_get(cond, "last_transition_time", "lastTransitionTime"))
    return None


def _meta(obj: dict[str, Any], *keys: str) -> Any:
    return _get(_get(obj, "metadata") or {}, *keys)


def _node_name_of_pod(pod: dict[str, Any]) -> str:
    return str(_get(_get(pod, "spec") or {}, "node_name", "nodeName") or "")


def _installer_finished(pod: dict[str, Any]) -> dt.datetime | None:
    """When the installer finished in this pod: its init containers ran it, so the last one's finishedAt
    once all terminated with exit 0; else the pod's Ready condition (the readiness probe, 30 s period)."""
    status = _get(pod, "status") or {}
    inits = _get(status, "init_container_statuses", "initContainerStatuses") or []
    ends = []
    for cs in inits:
        term = _get(_get(cs, "state") or {}, "terminated")
        if not term or _get(term, "exit_code", "exitCode") != 0:
            ends = []
            break
        ends.append(parse_time(_get(term, "finished_at", "finishedAt")))
    if ends and all(ends):
        return max(e for e in ends if e)
    return _condition_time(pod, "Ready")


def first_log_time(text: str | None) -> dt.datetime | None:
    """The time of a log's first line: the kubelet's prefix (`timestamps=True`), else the runner's own
    `[runner] start {"utc": ...}` line."""
    for line in (text or "").splitlines():
        if not line.strip():
            continue
        stamp = parse_time(line.split(" ", 1)[0])
        if stamp:
            return stamp
        m = re.search(r"\[runner\] start (\{.*\})", line)
        if m:
            try:
                return parse_time(json.loads(m[1]).get("utc"))
            except (json.JSONDecodeError, AttributeError):
                return None
        return None
    return None


def gke_nodes(
    nodes: list[dict[str, Any]],
    installer_pods: list[dict[str, Any]],
    bench_pods: list[dict[str, Any]],
    first_lines: dict[str, str | None],
) -> list[NodeTimeline]:
    """One timeline per A4 Node; `first_lines` maps a benchmark pod's name to the head of its log."""
    out = []
    for node in sorted(nodes, key=lambda n: str(_meta(n, "name") or "")):
        name = str(_meta(node, "name") or "?")
        t = NodeTimeline(name, created=parse_time(_meta(node, "creation_timestamp", "creationTimestamp")))
        t.ready = _condition_time(node, "Ready")
        if t.ready is None:
            t.why["ready"] = "the Node is not Ready (no Ready condition with status True)"
        mine = [p for p in installer_pods if _node_name_of_pod(p) == name]
        done = [x for x in (_installer_finished(p) for p in mine) if x]
        t.installed = min(done) if done else None
        if t.installed is None:
            t.why["installed"] = "no installer pod on this node" if not mine else "its installer pod is not done"
        pods = [str(_meta(p, "name")) for p in bench_pods if _node_name_of_pod(p) == name]
        firsts = [x for x in (first_log_time(first_lines.get(p)) for p in pods) if x]
        t.first_line = min(firsts) if firsts else None
        if t.first_line is None:
            t.why["firstBenchmarkLine"] = "no benchmark pod ran here" if not pods else "no log line yet"
        if t.created is None:
            t.why["created"] = "the Node has no creationTimestamp"
        out.append(t)
    return out


def gce_rank(instance: dict[str, Any]) -> int | None:
    """The VM's rank: its `deepep-a4-rank` label (components/gce/fleet.py), else the `-vm-N` suffix of its name."""
    label = (_get(instance, "labels") or {}).get("deepep-a4-rank")
    m = re.search(r"-vm-(\d+)$", str(_get(instance, "name") or ""))
    text = label if label is not None else (m[1] if m else None)
    return int(text) if text is not None and str(text).isdigit() else None


def gce_nodes(instances: list[dict[str, Any]], statuses: dict[int, dict[str, Any] | None]) -> list[NodeTimeline]:
    """One timeline per VM, from compute v1 Instance resources and the VMs' status documents by rank."""
    out = []
    for inst in sorted(instances, key=lambda i: (gce_rank(i) is None, gce_rank(i) or 0, str(_get(i, "name")))):
        t = NodeTimeline(str(_get(inst, "name") or "?"), created=parse_time(_get(inst, "creationTimestamp")))
        if t.created is None:
            t.why["created"] = "the instance has no creationTimestamp"
        rank = gce_rank(inst)
        doc = statuses.get(rank) if rank is not None else None
        if not doc:
            reason = "the VM wrote no status to the bucket yet"
            t.why.update(ready=reason, installed=reason, firstBenchmarkLine=reason)
            out.append(t)
            continue
        t.installed = t.ready = _not_before(t, parse_time(doc.get("installerReady")), "installed", "ready")
        if "installed" not in t.why and t.installed is None:
            t.why["installed"] = t.why["ready"] = "the installer's ready time is not in the VM's status"
        t.first_line = _not_before(t, parse_time(doc.get("firstBenchmarkLine")), "firstBenchmarkLine")
        if "firstBenchmarkLine" not in t.why and t.first_line is None:
            t.why["firstBenchmarkLine"] = "the runner's first line is not in the VM's status (no test started)"
        out.append(t)
    return out


def _not_before(t: NodeTimeline, value: dt.datetime | None, *points: str) -> dt.datetime | None:
    """A time the bucket kept from an earlier VM of the same name (before this one was created) is no
    measurement of this VM."""
    if value is not None and t.created is not None and value < t.created:
        for p in points:
            t.why[p] = f"the bucket's time {iso(value)} is older than this VM (an earlier VM of its name)"
        return None
    return value


def instances_from_state(resources: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The stack's VMs in compute v1 Instance shape, from the Pulumi state's gcp:compute/instance:Instance
    resources (their outputs carry the provider's `creationTimestamp`, `name`, `labels`, `currentStatus`)."""
    out = []
    for res in resources:
        if res.get("type") != "gcp:compute/instance:Instance":
            continue
        o = res.get("outputs") or {}
        out.append(
            {
                "name": o.get("name"),
                "creationTimestamp": o.get("creationTimestamp"),
                "labels": o.get("labels") or {},
                "status": o.get("currentStatus"),
            }
        )
    return out


# -- totals, the table, the results folder ----------------------------------------------------------------


def _s(value: float) -> str:
    return f"{value:.0f} s"


def totals(nodes: list[NodeTimeline]) -> dict[str, list[float] | None]:
    """Each duration's [fastest, slowest] over the nodes that recorded it; None where none did."""
    out: dict[str, list[float] | None] = {}
    for key, *_ in DURATIONS:
        values = [v for v in (t.seconds(key) for t in nodes) if v is not None]
        out[key] = [min(values), max(values)] if values else None
    return out


def node_line(t: NodeTimeline) -> str:
    parts = []
    for key, start, end, label in DURATIONS:
        if key in ("readyToInstalled", "installedToFirstLine"):
            continue  # the console shows the three the table is compared on; timeline.json has all
        value = t.seconds(key)
        if value is not None:
            parts.append(f"{label} {_s(value)}")
        else:
            missing = next((p for p in (start, end) if t.point(p) is None), None)
            reason = t.why.get(missing, "not reported") if missing else f"{end} is before {start}"
            parts.append(f"{label} {NOT_RECORDED} ({reason})")
    return f"node {t.node}: created {iso(t.created)}; " + ", ".join(parts)


def total_line(nodes: list[NodeTimeline]) -> str:
    spans = totals(nodes)
    parts = []
    for key, _, _, label in DURATIONS:
        if key in ("readyToInstalled", "installedToFirstLine"):
            continue
        span = spans[key]
        text = NOT_RECORDED if span is None else _s(span[0]) if span[0] == span[1] else f"{span[0]:.0f}-{_s(span[1])}"
        parts.append(f"{label} {text}")
    return f"totals over {len(nodes)} node(s): " + ", ".join(parts)


def compare(nodes: list[NodeTimeline], expected: Expected | None) -> str:
    """created->first line of the slowest node (the run waits for every node) against the table's total."""
    table = "no table total" if expected is None else f"table {expected.total[0]:.0f}-{_s(expected.total[1])}"
    where = "" if expected is None else f" ({expected.platform}, {expected.profile})"
    values = [v for v in (t.seconds("createdToFirstLine") for t in nodes) if v is not None]
    if not values:
        return f"created->first line{where}: measured {NOT_RECORDED} vs {table}"
    worst = max(values)
    of = "" if len(values) == len(nodes) else f", {len(values)} of {len(nodes)} nodes recorded"
    verdict = ""
    if expected is not None:
        low, high = expected.total
        where_in = "within" if low <= worst <= high else "below" if worst < low else "above"
        verdict = f"; {where_in} the table"
    return f"created->first line{where}: measured {_s(worst)} vs {table}{of}{verdict}"


def document(
    nodes: list[NodeTimeline],
    stack: str,
    platform: str,
    profile: str,
    expected: Expected | None,
    now: dt.datetime | None = None,
) -> dict[str, Any]:
    """timeline.json: what a measured row of expected_times.yaml cites (docs/installer.md#bring-up-time)."""
    return {
        "kind": KIND,
        "stack": stack,
        "platform": platform,
        "profile": profile,
        "recorded": iso(now or dt.datetime.now(dt.UTC)),
        "nodes": [t.to_dict() for t in nodes],
        "totals": totals(nodes),
        "table": None if expected is None else {"total": list(expected.total), "measuredOrCited": list(expected.known)},
        "comparison": compare(nodes, expected),
    }


def console_lines(doc: dict[str, Any], nodes: list[NodeTimeline]) -> list[str]:
    return [*(node_line(t) for t in nodes), total_line(nodes), doc["comparison"]]


def write(out: Path, doc: dict[str, Any], lines: list[str]) -> Path:
    """timeline.json in the results folder; the same under `bringUp` in results.json and a section of
    report.md when the report wrote them."""
    out.mkdir(parents=True, exist_ok=True)
    path = out / TIMELINE_FILE
    path.write_text(json.dumps(doc, indent=1) + "\n")
    results = out / "results.json"
    if results.is_file():
        try:
            data = json.loads(results.read_text())
        except (OSError, json.JSONDecodeError):
            data = None
        if isinstance(data, dict):
            data["bringUp"] = doc
            results.write_text(json.dumps(data, indent=1) + "\n")
    report = out / "report.md"
    if report.is_file():
        section = ["", "## Bring-up per node", "", f"From `{TIMELINE_FILE}` (docs/installer.md#bring-up-time):", ""]
        section += [f"- {line}" for line in lines]
        report.write_text(report.read_text().rstrip("\n") + "\n" + "\n".join(section) + "\n")
    return path

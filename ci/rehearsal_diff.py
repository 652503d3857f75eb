"""Every difference between a stack's plan and its rehearsal's plan, each sorted into the categories the rehearsal
may differ by (components/rehearsal.py); anything else is a finding (tests/components/rehearsal/test_plan_diff.py).

Both plans come from the offline plan engine (deepep_a4/plan/engine.py). Before comparing, the rehearsal's names
are written back to the real ones (its own name prefix and stack name: not a difference of the plan, a second stack
in the same project), and ci/plan_diff.py's masks apply (content hashes, the clock's deadline).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from ci.plan_diff import normalise
from components import rehearsal
from components.gke.objects import installer_ksa
from deepep_a4.rehearse import stack as rehearsal_stack

GONE = "<absent>"

# The categories (components/rehearsal.py), each with the differences that belong to it: (resource type
# pattern, resource name pattern, input path pattern). First match wins; a difference matching none is a finding.
_POOL = r"gcp:container/nodePool:NodePool"
_VM = r"gcp:compute/instance:Instance"
_KEPT_POD = (
    r"serviceAccountName|nodeSelector|priorityClassName|automountServiceAccountToken|tolerations|subdomain|affinity"
)
CATEGORIES: dict[str, tuple[tuple[str, str, str], ...]] = {
    "machine: a CPU machine in the A4's place (no GPU, no accelerator or driver block)": (
        (_POOL, r".*", r"nodeConfig\.(machineType|guestAccelerators.*)"),
        (_VM, r".*", r"machineType"),
    ),
    "follows from the machine: what an e2 takes (pd-balanced, no local SSD, spot, no compact placement)": (
        (_POOL, r".*", r"nodeConfig\.(diskType|ephemeralStorageLocalSsdConfig.*|spot|reservationAffinity.*)"),
        (_POOL, r".*", r"placementPolicy.*|autoscaling.*|initialNodeCount|nodeCount"),
        (_VM, r".*", r"bootDisk\.initializeParams\.type|reservationAffinity.*|resourcePolicies"),
        # A reservation or flex-start stack's VMs: the rehearsal's e2 VMs are spot (the rest of the block is kept).
        (_VM, r".*", r"scheduling\.(provisioningModel|preemptible|automaticRestart|instanceTerminationAction)"),
        (r"gcp:compute/resourcePolicy:ResourcePolicy", r".*placement.*", r"\*"),
    ),
    "no GPU taints or selectors": (
        (_POOL, r".*", r"nodeConfig\.taints.*"),
        (r"kubernetes:batch/v1:Job", r".*", r"spec\.template\.spec\.nodeSelector\.deepep-a4/installed"),
    ),
    "no RDMA NIC attachments or RDMA resource requests (an e2 cannot join the RoCE VPC)": (
        (_POOL, r".*", r"networkConfig\.additionalNodeNetworkConfigs\.[1-8]\..*"),
        (_VM, r".*", r"networkInterfaces\.[2-9]\..*"),
        (r"kubernetes:batch/v1:Job", r".*", r"spec\.template\.metadata\.annotations(\.networking\.gke\.io/.*)?"),
    ),
    "short TTL": (
        (_POOL, r".*", r"nodeConfig\.maxRunDuration"),
        (_VM, r".*", r"scheduling\.maxRunDuration\..*"),
        (r"pulumi:index:Stash", r"stack-deadline", r"input\.ttlSeconds"),
    ),
    "probes in place of the installer's GPU phases and the benchmarks": (
        (r"kubernetes:apps/v1:DaemonSet", r"deepep-installer", r"metadata\.annotations\.pulumi\.com/timeoutSeconds"),
        # The pod's work, not its identity or placement (the KSA, node selector, priority, token stay the real ones).
        (
            r"kubernetes:apps/v1:DaemonSet",
            r"deepep-installer",
            rf"spec\.template\.spec\.(?!{_KEPT_POD})(hostNetwork|dnsPolicy|hostPID|initContainers\..*|containers\..*|volumes\..*)",
        ),
        # gIB's DaemonSet and everything of it (its image's lookup, ConfigMap, policy).
        (r".*", r"deepep-gib(-.*)?", r"\*"),
        (r"kubernetes:core/v1:ConfigMap", r"deepep-rehearsal-probes", r"\*"),
        # The installer's downloads pinned at the first `up` (components/node/pins.py): the GCE VMs install nothing.
        (r"pulumi:index:Stash", r"pin-.*", r"\*"),
        (r"kubernetes:batch/v1:Job", r"deepep-bench-(intranode|low-latency|elastic|rehearsal-outsider)", r"\*"),
        (
            r"kubernetes:batch/v1:Job",
            r"deepep-bench-internode",
            r"spec\.template\.spec\.(initContainers\..*|containers\..*|volumes\..*)",
        ),
        (_VM, r".*", r"metadata\.startup-script"),
        (r"gcp:artifactregistry/.*|gcp:container/getRegistryImage.*", r".*gib.*", r"\*"),
    ),
}


@dataclass(frozen=True)
class Difference:
    type: str
    name: str
    path: str  # "*" for a resource only one plan has
    real: Any
    rehearsal: Any

    def line(self) -> str:
        if self.path == "*":
            where = "only in the rehearsal" if self.real == GONE else "only in the real plan"
            return f"{self.type} {self.name}: {where}"
        return f"{self.type} {self.name} {self.path}: {_show(self.real)} -> {_show(self.rehearsal)}"


def _show(value: Any) -> str:
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return text if len(text) <= 80 else text[:77] + "..."


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """{dotted path: leaf} of a resource's inputs (list items by index)."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    if isinstance(value, list) and value:
        out = {}
        for i, v in enumerate(value):
            out.update(flatten(v, f"{prefix}.{i}" if prefix else str(i)))
        return out
    return {prefix: value}


def renamer(stack: str, real_prefix: str) -> Any:
    """Writes the rehearsal's names back to the real stack's, then applies ci/plan_diff.py's masks."""
    reh_prefix = rehearsal.name_prefix(real_prefix)
    reh_stack = rehearsal_stack.stack_name(stack)
    label = re.sub(r"[^a-z0-9_-]", "-", reh_stack.lower())[:63]
    # Whole names only: the real prefix's own names go on with `-r...` (`-rdma`, `-router`).
    pairs = [
        (re.compile(re.escape(a) + r"(?![A-Za-z0-9])"), b)
        for a, b in (
            # The installer's KSA is named for its stack with a hash of the name (components/gke/objects.py): the
            # rehearsal's own, so its Workload Identity principal is not the real stack's (a second stack's name).
            (installer_ksa(reh_stack), installer_ksa(stack)),
            (reh_stack, stack),
            (label, stack),
            (reh_prefix, real_prefix),
            (reh_prefix.replace("-", "_"), real_prefix.replace("-", "_")),
            # A name cut at its length limit (a service account id: 30 characters) keeps part of the suffix.
            (reh_prefix[:-1], real_prefix),
            (reh_prefix[:-1].replace("-", "_"), real_prefix.replace("-", "_")),
        )
    ]
    # The plan engine's stand-in DNS endpoint of the cluster hashes the cluster's name (deepep_a4/plan/engine.py).
    pairs.append((re.compile(r"\bgke-[0-9a-f]{32}-"), "gke-<name hash>-"))

    def rename(value: Any) -> Any:
        if isinstance(value, str):
            for pattern, b in pairs:
                value = pattern.sub(b, value)
            return normalise(value)
        if isinstance(value, dict):
            return {rename(k): rename(v) for k, v in value.items()}
        if isinstance(value, list):
            return [rename(v) for v in value]
        return value

    return rename


def differences(
    stack: str, real_prefix: str, real: list[dict[str, Any]], rehearsed: list[dict[str, Any]]
) -> list[Difference]:
    rename = renamer(stack, real_prefix)
    a = {(r["type"], r["name"]): r for r in real}
    b = {(r["type"], rename(r["name"])): r for r in rehearsed}
    out: list[Difference] = []
    for key in sorted(set(a) | set(b)):
        if key not in a or key not in b:
            out.append(Difference(*key, "*", GONE if key not in a else "present", GONE if key not in b else "present"))
            continue
        left = flatten(rename(a[key]["inputs"]))
        right = flatten(rename(b[key]["inputs"]))
        for path in sorted(set(left) | set(right)):
            lv, rv = left.get(path, GONE), right.get(path, GONE)
            if lv != rv:
                out.append(Difference(*key, path, lv, rv))
    return out


def category(diff: Difference) -> str | None:
    for name, rules in CATEGORIES.items():
        for type_re, name_re, path_re in rules:
            if re.fullmatch(type_re, diff.type) and re.fullmatch(name_re, diff.name):
                if path_re == r"\*" or re.fullmatch(path_re, diff.path):
                    return name
    return None


def classify(diffs: list[Difference]) -> tuple[dict[str, list[Difference]], list[Difference]]:
    """(differences by category, differences in none: the findings)."""
    sorted_: dict[str, list[Difference]] = {}
    findings: list[Difference] = []
    for d in diffs:
        c = category(d)
        if c is None:
            findings.append(d)
        else:
            sorted_.setdefault(c, []).append(d)
    return sorted_, findings

"""A stack name Pulumi allows yields label values and resource names Google accepts.

Pulumi's rule for stack names: `^[A-Za-z0-9_.-]{1,100}$` (pulumi/pulumi pkg/backend/diy/backend.go, formerly
pkg/backend/filestate/backend.go, validateStackName), so `Acme.B200` is a stack. Google's rules: a GCE label value
has only lowercase letters, digits, `_` and `-`, at most 63 characters
(https://cloud.google.com/compute/docs/labeling-resources#requirements); a resource name is RFC 1035,
`[a-z]([-a-z0-9]*[a-z0-9])?`, at most 63 characters (https://cloud.google.com/compute/docs/naming-resources).
"""

from __future__ import annotations

import re
from typing import Any

import pytest

from components.config import parse
from components.config.model import stack_label
from deepep_a4.plan import engine as plan_engine
from tests.conftest import stack_config

PULUMI_STACK_NAME = re.compile(r"[A-Za-z0-9_.-]{1,100}")
GCE_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
GCE_LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
RFC1035 = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
NAMED = (
    "gcp:compute/network:Network",
    "gcp:compute/subnetwork:Subnetwork",
    "gcp:compute/router:Router",
    "gcp:compute/instance:Instance",
    "gcp:container/cluster:Cluster",
    "gcp:container/nodePool:NodePool",
    "gcp:compute/resourcePolicy:ResourcePolicy",
    "gcp:compute/firewall:Firewall",
)


def labels_in(value: Any, parent: str = "") -> list[dict[str, str]]:
    """Every GCE label mapping (`labels`, `resourceLabels`, `defaultLabels`) in a resource's inputs; a node
    pool's `nodeConfig.labels` are Kubernetes node labels, whose rule differs (and `/` is allowed)."""
    found: list[dict[str, str]] = []
    if isinstance(value, dict):
        for key, inner in value.items():
            kube = key == "labels" and parent == "nodeConfig"
            if key in ("labels", "resourceLabels", "defaultLabels") and isinstance(inner, dict) and not kube:
                found.append(inner)
            found.extend(labels_in(inner, key))
    elif isinstance(value, list):
        for inner in value:
            found.extend(labels_in(inner, parent))
    return found


@pytest.mark.parametrize("name", ["Acme.B200", "ACME_b200.v2", "a" * 100, "x.y-Z_9"])
def test_the_label_of_every_pulumi_stack_name_is_a_gce_label_value(name: str) -> None:
    assert PULUMI_STACK_NAME.fullmatch(name)
    assert GCE_LABEL_VALUE.fullmatch(stack_label(name))
    assert stack_label("acme-b200") == "acme-b200"  # a name Google takes stays as it is


@pytest.mark.parametrize(("stack", "example"), [("Acme.B200", "gke-b200"), ("Acme.G200", "gce-b200")])
def test_a_stack_named_like_acme_b200_plans_with_labels_and_names_google_accepts(stack: str, example: str) -> None:
    raw = stack_config(example)
    result, _ = plan_engine.run_program(stack, raw)
    cloud = [r for r in result.resources if r["type"].startswith("gcp:")]
    labels = [m for r in cloud for m in labels_in(r["inputs"])]
    assert labels, "the plan labels its cloud resources"
    for mapping in labels:
        for key, value in mapping.items():
            assert GCE_LABEL_KEY.fullmatch(key), key
            assert GCE_LABEL_VALUE.fullmatch(str(value)), (key, value)
    assert {"acme-b200" if stack == "Acme.B200" else "acme-g200"} == {
        m["deepep-a4-stack"] for m in labels if "deepep-a4-stack" in m
    }
    names = [r["inputs"]["name"] for r in cloud if r["type"] in NAMED and "name" in r["inputs"]]
    assert names
    for resource_name in names:
        assert RFC1035.fullmatch(resource_name), resource_name
    cfg = parse({k.split(":", 1)[1]: v for k, v in raw.items()}, stack)
    assert cfg.name_prefix == f"deepep-{stack.lower().replace('.', '-')}"

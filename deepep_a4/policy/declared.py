"""The pack's default-deny rules over the locks (lock.py): whatever a stack adds to its shape's bill is refused.

- `declared-resource` (each resource, before it is created: the engine's per-resource analysis runs at
  registration, with the inputs known in an update): its type, logical name, properties and power values are
  in the lock of the stack's shape. The Pulumi CLI hands the pack the stack's name and config (PULUMI_STACK,
  PULUMI_CONFIG: pulumi/pulumi pkg/resource/plugin/analyzer_plugin.go constructEnv), so names and the project
  are compared exactly; without them the resource is compared with every lock, the stack and project as any.
- `declared-types` (the same without the name, for callers that know only a type and properties).
- `declared-powers` (the whole stack): every resource in one shape's lock; without the config, the shape
  whose lock the stack fits best, and the stack and project read from its gcp provider.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from deepep_a4.policy import identities, lock
from deepep_a4.policy.bill import Context, bill_of
from deepep_a4.policy.trust import Props

GCP_PROVIDER = "pulumi:providers:gcp"
NETWORK = "gcp:compute/network:Network"


def declared_resource(type_: str, name: str, props: Props) -> list[str]:
    ctx, shape = lock.env_context()
    return lock.check(type_, name, props, ctx, shape)


def declared_types(type_: str, props: Props) -> list[str]:
    ctx, shape = lock.env_context()
    return lock.check(type_, None, props, ctx, shape)


def _inferred(resources: list[Any], ctx: Context) -> Context:
    """The stack and project from the gcp provider the program makes (components: project, defaultLabels)."""
    for r in resources:
        if r.type != GCP_PROVIDER:
            continue
        labels: Any = r.props.get("defaultLabels")
        if isinstance(labels, str):
            try:
                labels = json.loads(labels)
            except ValueError:
                labels = {}
        stack = ctx.stack or (labels or {}).get("deepep-a4-stack")
        project = ctx.project or r.props.get("project")
        ctx = replace(ctx, stack=stack, project=project if isinstance(project, str) else None)
        break
    # The name prefix (namePrefix, or deepep-<stack>): the host VPC is <prefix>-host (components/network).
    for r in resources:
        name = r.props.get("name")
        if not ctx.name_prefix and r.type == NETWORK and r.name == "a4-host" and isinstance(name, str):
            ctx = replace(ctx, name_prefix=name.removesuffix("-host"))
    return ctx


def declared_powers(resources: Iterable[Any]) -> list[str]:
    resources = list(resources)
    ctx, shape = lock.env_context()
    ctx = _inferred(resources, ctx)
    shapes = [shape] if shape else list(lock.locks())
    bills = [(r, bill_of(r.type, r.name, r.props, ctx)) for r in resources]
    best: list[str] | None = None
    for s in shapes:
        found = [m for r, b in bills for m in lock.check_bill(b, r.type, r.name, ctx, s)]
        if best is None or len(found) < len(best):
            best = found
        if not found:
            break
    plain = [(r.type, r.name, r.props) for r in resources]
    return (best or []) + identities.custom_roles_defined(plain)

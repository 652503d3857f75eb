"""The pack's default-deny rules over the locks (lock.py): whatever a stack adds to its shape's bill is refused.

- `declared-resource` (each resource, before it is created: the engine's per-resource analysis runs at
  registration, with the inputs known in an update): its type, logical name, properties and power values are
  in the lock of the stack's shape. The Pulumi CLI hands the pack the stack's name and config (PULUMI_STACK,
  PULUMI_CONFIG: pulumi/pulumi pkg/resource/plugin/analyzer_plugin.go constructEnv), so names and the project
  are compared exactly; without them the resource is compared with every lock, the stack and project as any.
- `declared-types` (the same without the name, for callers that know only a type and properties).
- `declared-powers` (the whole stack): every resource, by type and name, in one shape's lock; without the
  config, the shape whose lock the stack fits best.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from deepep_a4.policy import identities, lock
from deepep_a4.policy.bill import logical
from deepep_a4.policy.trust import Props

GCP_PROVIDER = "pulumi:providers:gcp"
NETWORK = "gcp:compute/network:Network"


def declared_resource(type_: str, name: str, props: Props) -> list[str]:
    ctx, shape = lock.env_context()
    return lock.check(type_, name, props, ctx, shape)


def declared_types(type_: str, props: Props) -> list[str]:
    ctx, shape = lock.env_context()
    return lock.check(type_, None, props, ctx, shape)


def declared_powers(resources: Iterable[Any]) -> list[str]:
    resources = list(resources)
    shape = lock.env_context()[1]
    shapes = [shape] if shape else list(lock.locks())
    # The engine hands a stack policy the resources' outputs (pulumi/pulumi pkg/engine: AnalyzeStack with
    # res.Outputs), which hold what the cloud computed: here only which resources exist is judged; their
    # inputs were judged before each was created (declared-resource).
    keys = [(r, f"{r.type} {logical(r.name)}") for r in resources]
    best: list[str] | None = None
    for s in shapes:
        found = [m for r, key in keys for m in lock.check_key(key, r.type, s)]
        if best is None or len(found) < len(best):
            best = found
        if not found:
            break
    plain = [(r.type, r.name, r.props) for r in resources]
    return (best or []) + identities.custom_roles_defined(plain)

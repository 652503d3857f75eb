"""No paid machine without a store: what a real `pulumi up` refuses before it registers any resource.

A supported-profile stack (`nodeProfile: supported`) stages its whole user space from the artifact store and
builds nothing on the node (docs/store.md). Without a pinned manifest (`artifactStoreManifest`) every node
fails at `stage`, after its A4 capacity is paid for. So the program refuses such a `pulumi up` with one line
naming the two commands that fill and pin the store. A preview (`pulumi.runtime.is_dry_run()`, true for
`pulumi preview` and the preview step of an interactive `pulumi up`) and the offline plan only warn: they
create nothing, and the plan is where a new user learns what the stack needs. `deepep-a4 run` asks the same
question before it starts the Pulumi CLI (deepep_a4/run/preflight.py).
"""

from __future__ import annotations

import pulumi

from components.config import StackConfig
from components.node import pins


def store_commands(cfg: StackConfig) -> str:
    """The store steps in order, as the user types them (README.md, docs/deploy.md)."""
    bucket = "" if cfg.installer.store_url else "set deepep-a4:artifactStore gs://BUCKET/PREFIX, "
    return (
        f"{bucket}run `deepep-a4 store build --stack {cfg.stack}`, then "
        f"`pulumi config set deepep-a4:artifactStoreManifest SHA256 -s {cfg.stack}` with the sha256 it prints"
    )


def unpinned_store(cfg: StackConfig) -> str | None:
    """Why this stack's nodes would have nothing to stage, or None."""
    if not cfg.staged or cfg.installer.store_manifest:
        return None
    return (
        f"stack {cfg.stack} has nodeProfile supported, which stages the user space from the artifact store, and "
        f"no artifactStoreManifest is pinned: every node would fail at `stage` after the A4s are paid for; "
        f"{store_commands(cfg)} (docs/store.md)"
    )


def planning() -> bool:
    """A preview or the offline plan: nothing is created, the store is only warned about."""
    return pulumi.runtime.is_dry_run() or pins.offline_plan()


def refuse_unpinned_up(cfg: StackConfig) -> None:
    """pulumi.RunError (the message alone, no traceback) at a real `up` of a stack with nothing to stage."""
    reason = unpinned_store(cfg)
    if reason and not planning():
        raise pulumi.RunError(reason)

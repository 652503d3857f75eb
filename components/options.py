"""Resource options every component handles the same way."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi


def depends_of(opts: pulumi.ResourceOptions | None) -> list[Any]:
    """A component's own depends_on, for the children that must wait too.

    Components take `(name, args, opts)`; what they wait for comes in `opts.depends_on` like for any
    resource, and the component hands it to the children that must not start before it.
    """
    after = opts.depends_on if opts is not None else None
    if after is None:
        return []
    return list(after) if isinstance(after, Sequence) else [after]

"""GCE platform: A4 VMs with ten NICs, placement, results bucket (built out by the GCE issue)."""

from __future__ import annotations

from typing import Any

import pulumi

from components.config import StackConfig
from components.network import A4Network


def build_gce_platform(cfg: StackConfig, network: A4Network, gcp_opts: pulumi.ResourceOptions) -> dict[str, Any]:
    """Creates the GCE side of the stack and returns the stack outputs it adds."""
    return {}

"""GKE platform: cluster, A4 node pool, Kubernetes provider and workloads (built out by the GKE issues)."""

from __future__ import annotations

from typing import Any

import pulumi

from components.config import StackConfig
from components.network import A4Network


def build_gke_platform(cfg: StackConfig, network: A4Network, gcp_opts: pulumi.ResourceOptions) -> dict[str, Any]:
    """Creates the GKE side of the stack and returns the stack outputs it adds."""
    return {}

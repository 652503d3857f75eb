"""A stack's benchmark settings in the runner's contract (scripts/bench/settings.py)."""

from __future__ import annotations

from components.config import StackConfig
from scripts.bench.settings import RunnerSettings


def runner_settings(cfg: StackConfig) -> RunnerSettings:
    b = cfg.benchmarks
    return RunnerSettings(
        processes=b.processes,
        hidden=b.hidden,
        topk=b.topk,
        intranode_tokens=b.intranode.tokens,
        intranode_experts=b.intranode.experts,
        low_latency_tokens=b.low_latency.tokens,
        low_latency_experts=b.low_latency.experts,
        internode_tokens=b.internode.tokens,
        internode_experts=b.internode.experts,
        timeout_minutes=b.timeout_minutes,
        hcas=cfg.shape.rdma_nics,
        repeats=b.repeats,
        platform=cfg.platform,
        # Only GKE's pods have a pod networking; a VM's NCCL uses its own gVNICs.
        pod_networking=cfg.gke.pod_networking if cfg.platform == "gke" else "",
        nccl_gib=cfg.installer.nccl_gib,
    )

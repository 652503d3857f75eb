"""The benchmark settings a stack gives the runner: one contract, one set of defaults, both platforms.

The Pulumi program serialises a stack's benchmark settings with `to_env()`; GKE puts the variables in the
benchmark Jobs' environment, GCE in the `deepep-bench` metadata that the stage hands to the runner's
environment. The runner reads them back with `from_env()`. Stdlib only: shipped next to run_bench.py.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields

MAX_REPEATS = 10
# The text settings and what each may be ("" = not said: a runner started by hand, the hardware test).
CHOICES = {"platform": ("", "gke", "gce"), "pod_networking": ("", "hostNetwork", "multiNetwork")}


@dataclass(frozen=True)
class DeepEPArgs:
    """DeepEP test arguments per node; the defaults are DeepEP's own test defaults (tests/test_*.py)."""

    processes: int = 8
    hidden: int = 7168
    topk: int = 8
    intranode_tokens: int = 4096
    intranode_experts: int = 256
    low_latency_tokens: int = 128
    low_latency_experts: int = 288
    internode_tokens: int = 4096
    internode_experts: int = 256


@dataclass(frozen=True)
class RunnerSettings(DeepEPArgs):
    """The DeepEP test arguments (first, in their order) and how the runner runs the tests."""

    timeout_minutes: float = 30
    # RDMA NICs of the machine type: a pod must see this many HCAs before an RDMA test (preflight.py).
    hcas: int = 8
    # Starts of each DeepEP test in a row (the report gives min/median/max of 3 or more), at most MAX_REPEATS.
    repeats: int = 1
    # Where the runner runs and, on GKE, how its pod reaches the network: NCCL's socket interfaces follow them
    # (bench_env.socket_ifname).
    platform: str = ""
    pod_networking: str = ""
    # Google's gIB NCCL plugin and its NCCL settings, where the plugin is installed (deepep-a4:ncclGib).
    nccl_gib: bool = True

    @staticmethod
    def variable(field_name: str) -> str:
        return "BENCH_" + field_name.upper()

    def to_env(self) -> dict[str, str]:
        """BENCH_<FIELD> -> value, in field order; whole numbers without a decimal point, flags as 1 or 0."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if isinstance(value, bool):
                value = int(value)
            elif isinstance(value, float) and value.is_integer():
                value = int(value)
            out[self.variable(f.name)] = str(value)
        return out

    @classmethod
    def from_env(cls, env: Mapping[str, str]) -> RunnerSettings:
        """The settings in `env`, defaults for the variables it lacks; ValueError names a bad variable."""
        values: dict[str, object] = {}
        for f in fields(cls):
            name = cls.variable(f.name)
            text = env.get(name, "").strip()
            if not text:
                continue
            if f.type in ("str", str):
                if text not in CHOICES[f.name]:
                    raise ValueError(f"{name}={text!r} must be one of: {', '.join(c for c in CHOICES[f.name] if c)}")
                values[f.name] = text
                continue
            if f.type in ("bool", bool):
                if text not in ("0", "1"):
                    raise ValueError(f"{name}={text!r} must be 1 or 0")
                values[f.name] = text == "1"
                continue
            kind = float if f.type in ("float", float) else int
            try:
                value = kind(text)
            except ValueError:
                raise ValueError(f"{name}={text!r} is not a {'number' if kind is float else 'whole number'}") from None
            if value <= 0:
                raise ValueError(f"{name}={text!r} must be above 0")
            if f.name == "repeats" and value > MAX_REPEATS:
                raise ValueError(f"{name}={text!r} must be 1 to {MAX_REPEATS}")
            values[f.name] = value
        return cls(**values)  # pyright: ignore[reportArgumentType]

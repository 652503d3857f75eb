"""What `deepep-a4 store build --remote` (store_remote.py) costs and takes: the machine it asks for, Cloud Build's
price per build-minute for it (prices.yaml `cloud_build`, cited with the date it was read) and the ESTIMATED time,
derived from the local builder measured cold on the H100 host. The plan prints it (plan.py store_warnings)."""

from __future__ import annotations

from typing import Any

from components import config
from components.node import installer
from deepep_a4.plan import engine as plan_engine

MACHINE_TYPE = "E2_HIGHCPU_32"  # 32 vCPUs, 32 GB: the largest machine of Cloud Build's default pool
MACHINE_PRICE_KEY = "e2-highcpu-32"  # its row in Cloud Build's price table (prices.yaml cloud_build)
TIMEOUT_S = 5400  # 90 min: about 6x the estimate's upper end

# MEASURED: the local builder, cold, on the H100 host (16 cores), 2026-11-25: 499 s in all
# (tests/fixtures/install/hw/hwtest-staged-builder.log; NVSHMEM 316 s, DeepEP 113 s, PyTorch env 45 s, pack 24 s).
MEASURED_TOTAL_S, MEASURED_COMPILE_S, MEASURED_CORES = 499, 316 + 113, 16
REMOTE_VCPUS = 32
# ASSUMED, not measured: the devel image's pull (about 8 GB unpacked), the PyTorch wheels (about 3 GB; the measured
# run copied the machine's torch), the 4.6 GB upload to a bucket of the same region.
PULL_S, WHEELS_S, UPLOAD_S = (60, 180), (30, 120), (40, 120)


def estimate_s() -> tuple[int, int]:
    """ESTIMATE of the remote build's seconds: the measured local run with its two compiles (make -j nproc) at
    32/16 of their time (best case) or no faster (worst: E2 vCPUs are hyperthreads), plus the assumed transfers."""
    rest = MEASURED_TOTAL_S - MEASURED_COMPILE_S
    low = MEASURED_COMPILE_S * MEASURED_CORES / REMOTE_VCPUS + rest + PULL_S[0] + WHEELS_S[0] + UPLOAD_S[0]
    high = MEASURED_COMPILE_S + rest + PULL_S[1] + WHEELS_S[1] + UPLOAD_S[1]
    return round(low), round(high)


def price_per_minute(prices: dict[str, Any] | None = None) -> tuple[float | None, str, str]:
    """Cloud Build's USD per build-minute of MACHINE_TYPE, its source and the date it was read (prices.yaml)."""
    from deepep_a4 import cost

    entry = (cost.load_prices() if prices is None else prices).get("cloud_build") or {}
    rate = (entry.get("per_build_minute") or {}).get(MACHINE_PRICE_KEY)
    return (
        (float(rate) if isinstance(rate, int | float) else None),
        str(entry.get("source", "")),
        str(entry.get("read", "")),
    )


def estimate_line(prices: dict[str, Any] | None = None, cfg: config.StackConfig | None = None) -> str:
    rate, source, read = price_per_minute(prices)
    low, high = estimate_s()
    money = f"USD {rate * low / 60:.2f}-{rate * high / 60:.2f}" if rate is not None else "cost unknown"
    price = f"USD {rate}/build-minute" if rate is not None else "price unknown"
    line = (
        f"{MACHINE_PRICE_KEY} at {price} (cited: {source}, read {read}); ESTIMATE {low / 60:.0f}-{high / 60:.0f} min, "
        f"{money} (from the local build measured on a 16-core H100 host, docs/store.md); timeout {TIMEOUT_S // 60} min"
    )
    return line if cfg is None else f"{line}; {transfer_line(cfg, prices)}"


# The user space the build publishes (docs/store.md: "upload 4.6 GB"); its source archive comes on top.
PUBLISHED_GB = 4.6


def transfer_category(bucket: str, build: str) -> str:
    """Cloud Storage's category for data between a bucket in `bucket` and a service in `build` (prices.yaml
    storage_transfer)."""
    from components.config import cloud_build

    if bucket == build:
        return "same-region"
    ends = {cloud_build.continent(bucket), cloud_build.continent(build)}
    if "australia" in ends and len(ends) == 2:
        return "australia"
    return "same-continent" if len(ends) == 1 else "between-continents"


def transfer_line(cfg: config.StackConfig, prices: dict[str, Any] | None = None) -> str:
    """Where the build runs, where the bucket is, and what moving the build's data between them costs. The
    offline plan does not read the bucket: it takes the store project's advice, the stack's region
    (store/Pulumi.yaml deepep-a4-store:location)."""
    from deepep_a4 import cost

    build, bucket = cfg.installer.store_build_region, cfg.region
    entry = (cost.load_prices() if prices is None else prices).get("storage_transfer") or {}
    category = transfer_category(bucket, build)
    rate = cost._price((entry.get("per_gib") or {}).get(category))
    where = f"built in {build} (artifactStoreBuildRegion), store bucket assumed in {bucket} (the stack's region)"
    if category == "same-region":
        return f"{where}: the same region, no data transfer charge"
    money = f"USD {rate * PUBLISHED_GB:.2f}" if rate is not None else "rate unknown"
    kind = category.replace("-", " ")
    return (
        f"{where}: about {PUBLISHED_GB} GB cross between them, Cloud Storage data transfer {kind} "
        f"({money}; {entry.get('source', '?')}, read {entry.get('read', '?')}); building in the bucket's region "
        "avoids it where the project may build there"
    )


def store_warnings(cfg: config.StackConfig, stack: str) -> list[str]:
    """What waits for the store manifest (docs/store.md), and the sha256 that the first `pulumi up` resolves
    where no manifest pins a download (components/node/pins.py): stand-ins in the plan."""
    if cfg.installer.store_manifest:
        return []
    build = f"deepep-a4 store build --stack {stack}, then pulumi config set deepep-a4:artifactStoreManifest SHA256"
    lines = []
    if not cfg.installer.store_url and cfg.staged:
        lines.append(
            "WARNING: nodeProfile supported stages the user space from the store and builds nothing: set "
            f"artifactStore and run {build} before `pulumi up`, which refuses the stack until then"
        )
    elif cfg.installer.store_url:
        cold = (
            "the nodes stage nothing until one is pinned, and `pulumi up` is refused until then"
            if cfg.staged
            else "every node builds cold (docs/store.md)"
        )
        lines.append(f"STAND-IN: no artifactStoreManifest: {cold}; run {build}")
    if lines:  # the build the lines above ask for, on Cloud Build (store build --remote, or `run --build-store`)
        lines.append(f"  store build on Cloud Build: {estimate_line(cfg=cfg)}")
    if first_up := installer.first_up_names(cfg):
        lines.append(
            f"STAND-IN: the sha256 of {', '.join(first_up)} ({plan_engine.STAND_IN}: downloaded once on your "
            "machine, then kept in the stack's state; nodes refuse a stand-in): pin one yourself with "
            "versionOverrides (GDRCopy, NVSHMEM) or the store manifest"
        )
    return lines

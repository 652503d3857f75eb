"""Cost, quota and wait of each provisioning model in one region: what `capacity` and the plan print per model.

Prices come from deepep_a4/prices.yaml (each entry names its source and the date it was read); a model whose
price nobody here could source is `unknown`, with the reason. The quota each model draws on is
deepep_a4/cloud/capacity_reads.QUOTA_METRICS (cited there). No source we found gives an expected wait for A4
capacity under any model, so the wait is `unknown` with that reason rather than a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.config import provisioning
from deepep_a4 import cost
from deepep_a4.cloud.capacity_reads import QUOTA_METRICS

WAIT_UNKNOWN = (
    "unknown: no Google page or field report gives an expected wait for A4 capacity; "
    "spot and flex-start wait until Google finds the capacity or fail"
)
# What a reservation's quota is: it comes with the reservation (consumption options page, capacity_reads).
RESERVATION_QUOTA = "none: quota comes with the reservation"


@dataclass(frozen=True)
class ModelFacts:
    model: str
    quota_metric: str  # "" for a reservation
    price: float | None  # USD per node-hour; None = unknown
    price_note: str  # the source and date, or why unknown
    wait: str


def facts(region: str, machine_type: str = "a4-highgpu-8g", prices: dict[str, Any] | None = None) -> list[ModelFacts]:
    """One row per provisioning model, in components/config/provisioning.py's order."""
    prices = prices if prices is not None else cost.load_prices()
    entry = (prices.get("machines") or {}).get(machine_type) or {}
    read = str(entry.get("read", "undated"))
    rows = []
    for model in provisioning.MODELS.values():
        column = model.price_column
        regional = (entry.get("regions") or {}).get(region) or {}
        value = regional.get(column) if column in regional else entry.get(column)
        price = value if isinstance(value, (int, float)) and not isinstance(value, bool) else None
        if price is not None:
            note = f"prices.yaml {machine_type} {column}, read {read}"
        elif column in regional or column in entry:
            note = f"unknown: no public {column} price for {machine_type} found (prices.yaml, read {read})"
        else:
            note = f"unknown: prices.yaml has no {column} price for {machine_type} in {region}"
        rows.append(ModelFacts(model.name, QUOTA_METRICS.get(model.name, ""), price, note, WAIT_UNKNOWN))
    return rows


def quota_text(metric: str) -> str:
    return metric or RESERVATION_QUOTA


def price_text(row: ModelFacts) -> str:
    return f"{row.price:g} USD/node-hour ({row.price_note})" if row.price is not None else row.price_note


def plan_lines(cfg: Any, prices: dict[str, Any] | None = None) -> list[str]:
    """The plan's block: each model's price, quota and wait in the stack's region; the stack's model marked."""
    lines = [f"Capacity per model ({cfg.region}; the stack uses {cfg.provisioning}; docs/deploy.md#no-capacity):"]
    for row in facts(cfg.region, cfg.machine_type, prices):
        mark = "*" if row.model == cfg.provisioning else " "
        lines.append(f" {mark}{row.model:<12} price: {price_text(row)}")
        lines.append(f"  {'':<12} quota: {quota_text(row.quota_metric)}")
    lines.append(f"  expected wait, every model: {WAIT_UNKNOWN}")
    return lines


def as_dict(cfg: Any, prices: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    return [
        {
            "model": r.model,
            "usdPerNodeHour": r.price,
            "price": r.price_note,
            "quotaMetric": r.quota_metric or None,
            "expectedWait": r.wait,
        }
        for r in facts(cfg.region, cfg.machine_type, prices)
    ]

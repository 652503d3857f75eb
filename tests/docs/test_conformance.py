"""docs/conformance.md and docs/deploy.md stay checkable: every compared row cites a Google source and ends in
a verdict, every row without a reason is on the list to change, every config key they name exists, and the
deploy page names the API and the role of every kind of Google Cloud resource the program creates."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from components.config.keys import KEYS_BY_NAME

ROOT = Path(__file__).resolve().parents[2]
CONFORMANCE = (ROOT / "docs" / "conformance.md").read_text()
DEPLOY = (ROOT / "docs" / "deploy.md").read_text()
PROGRAM = ROOT / "components"

VERDICTS = ("**same**", "**differs**", "**no reason yet**")
# What creating each pulumi_gcp module's resources needs from the project and from the deployer.
API_AND_ROLE = {
    "compute": ("compute.googleapis.com", "roles/compute.admin"),
    "container": ("container.googleapis.com", "roles/container.admin"),
    "serviceaccount": ("iam.googleapis.com", "roles/iam.serviceAccountAdmin"),
    "projects": ("cloudresourcemanager.googleapis.com", "roles/resourcemanager.projectIamAdmin"),
    "storage": ("storage.googleapis.com", "roles/storage.admin"),
    "cloudscheduler": ("cloudscheduler.googleapis.com", "roles/cloudscheduler.admin"),
    "artifactregistry": ("artifactregistry.googleapis.com", "roles/artifactregistry.admin"),
}


def section(text: str, title: str) -> str:
    """The body of the `## title` section, up to the next `## `."""
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def table_rows(text: str, header_start: str) -> list[list[str]]:
    """The cells of every row of every table whose header begins with `header_start`."""
    rows, inside = [], False
    for line in text.splitlines():
        if line.startswith(header_start):
            inside = True
        elif inside and line.startswith("|---"):
            continue
        elif inside and line.startswith("|"):
            rows.append([c.strip() for c in line.strip().strip("|").split(" | ")])
        else:
            inside = False
    return rows


SOURCES = {row[0]: row for row in table_rows(section(CONFORMANCE, "Sources"), "| ID |")}
ROWS = table_rows(CONFORMANCE, "| setting |")


def test_every_source_has_an_address() -> None:
    assert len(SOURCES) >= 10
    for source_id, row in SOURCES.items():
        assert re.fullmatch(r"\[[A-Z]+-[A-Z]+\]", source_id), source_id
        assert row[-1].startswith("https://"), f"{source_id} has no address"


def test_the_tables_cover_each_area() -> None:
    titles = re.findall(r"^## (.+)$", CONFORMANCE, flags=re.M)
    for area in ("Networks", "GKE cluster", "GKE A4 node pool", "GCE VMs", "NCCL", "NVSHMEM"):
        assert any(t.startswith(area) for t in titles), area
    assert len(ROWS) >= 60


@pytest.mark.parametrize("row", ROWS, ids=lambda r: r[0])
def test_each_row_cites_a_known_google_source_and_ends_in_a_verdict(row: list[str]) -> None:
    assert len(row) == 4, row
    cited = re.findall(r"\[[A-Z]+-[A-Z]+\]", row[1])
    assert cited, f"{row[0]}: Google's value names no source"
    assert set(cited) <= set(SOURCES), f"{row[0]}: unknown source {set(cited) - set(SOURCES)}"
    assert row[3].startswith(VERDICTS), f"{row[0]}: the verdict must start with one of {VERDICTS}"
    if row[3].startswith("**differs**"):
        assert len(row[3]) > len("**differs**: "), f"{row[0]}: a difference needs its reason"


def test_every_row_without_a_reason_is_on_the_list_to_change() -> None:
    todo = section(CONFORMANCE, "Differences without a reason yet (to change in code)")
    # Empty when every difference has its reason: then the list is empty too.
    open_rows = [r for r in ROWS if r[3].startswith("**no reason yet**")]
    for row in open_rows:
        assert f"**{row[0]}**" in todo, f"{row[0]} is not on the list to change"
    listed = set(re.findall(r"\*\*([^*]+)\*\*", todo)) - {"no reason yet"}
    assert listed <= {r[0] for r in open_rows}, f"listed but not open in a table: {listed - {r[0] for r in open_rows}}"


@pytest.mark.parametrize("doc", ["conformance", "deploy"])
def test_every_config_key_named_exists(doc: str) -> None:
    text = CONFORMANCE if doc == "conformance" else DEPLOY
    named = set(re.findall(r"deepep-a4:([a-z][A-Za-z]*)", text))
    assert named
    assert named <= set(KEYS_BY_NAME), f"not config keys: {sorted(named - set(KEYS_BY_NAME))}"


def test_deploy_names_the_api_and_role_of_every_resource_kind_the_program_creates() -> None:
    modules = set()
    for path in [*PROGRAM.glob("*.py"), ROOT / "__main__.py"]:
        modules |= set(re.findall(r"\bgcp\.([a-z_]+)\.[A-Z]\w*\(", path.read_text()))
    assert "compute" in modules
    unknown = modules - set(API_AND_ROLE)
    assert not unknown, f"program uses gcp.{sorted(unknown)}: add its API and role to docs/deploy.md and here"
    for module in modules:
        api, role = API_AND_ROLE[module]
        assert api in DEPLOY, f"docs/deploy.md does not name {api} (gcp.{module})"
        assert role in DEPLOY, f"docs/deploy.md does not name {role} (gcp.{module})"


def test_deploy_quotes_the_current_spot_price() -> None:
    prices = yaml.safe_load((ROOT / "deepep_a4" / "prices.yaml").read_text())
    regions = prices["machines"]["a4-highgpu-8g"]["regions"]
    for region in ("asia-southeast1", "us-central1", "asia-northeast1"):
        assert f"${regions[region]['spot']}" in DEPLOY, f"docs/deploy.md's {region} spot price is not prices.yaml's"

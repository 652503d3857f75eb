"""Where `deepep-a4 store build --remote` may run its Cloud Build: the regions Google lists, and the few every
project may use.

From https://cloud.google.com/build/docs/locations (read 2026-12-02 through the stored copies of the page, the
zh-CN, ko and de versions; the English one in its 2025 form lists the same regions without europe-north2 and
northamerica-south1):

- "Cloud Build is available in the following regions": AVAILABLE below;
- "Restricted regions for some projects: Depending on usage, certain projects might be restricted to only use
  Cloud Build in the following regions": ALWAYS_ALLOWED below (us-central1, us-west2, europe-west1, asia-east1,
  australia-southeast1, southamerica-east1).

A restricted project's build elsewhere fails with FAILED_PRECONDITION ("failed precondition: due to quota
restrictions, cannot run builds in this region. Please contact support", as gcloud printed it in
google-github-actions/deploy-cloudrun#480, 2024-01-09). asia-southeast1, the stacks' default region, is available
but not always allowed, so the build region is a setting of its own (`artifactStoreBuildRegion`) whose default
is one every project may use.
"""

from __future__ import annotations

ALWAYS_ALLOWED = (
    "us-central1",
    "us-west2",
    "europe-west1",
    "asia-east1",
    "australia-southeast1",
    "southamerica-east1",
)
AVAILABLE = (
    "africa-south1",
    "asia-east1",
    "asia-east2",
    "asia-northeast1",
    "asia-northeast2",
    "asia-northeast3",
    "asia-south1",
    "asia-south2",
    "asia-southeast1",
    "asia-southeast2",
    "australia-southeast1",
    "australia-southeast2",
    "europe-central2",
    "europe-north1",
    "europe-north2",
    "europe-southwest1",
    "europe-west1",
    "europe-west2",
    "europe-west3",
    "europe-west4",
    "europe-west6",
    "europe-west8",
    "europe-west9",
    "europe-west10",
    "europe-west12",
    "me-central1",
    "me-central2",
    "me-west1",
    "northamerica-northeast1",
    "northamerica-northeast2",
    "northamerica-south1",
    "southamerica-east1",
    "southamerica-west1",
    "us-central1",
    "us-east1",
    "us-east4",
    "us-east5",
    "us-south1",
    "us-west1",
    "us-west2",
    "us-west3",
    "us-west4",
)
# The default: always allowed, and the region of the cheapest regional Cloud Storage (prices.yaml storage).
DEFAULT_REGION = "us-central1"
SOURCE = "https://cloud.google.com/build/docs/locations"
KEY = "artifactStoreBuildRegion"


def continent(region: str) -> str:
    """The continent Cloud Storage prices data transfer by (its pricing page's "same continent" / "different
    continents", with Australia apart): from the region name's prefix."""
    prefix = region.split("-", 1)[0]
    if region.startswith("australia"):
        return "australia"
    return {
        "us": "north-america",
        "northamerica": "north-america",
        "southamerica": "south-america",
        "europe": "europe",
        "asia": "asia",
        "me": "middle-east",
        "africa": "africa",
    }.get(prefix, prefix)

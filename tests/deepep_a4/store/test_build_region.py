"""`store build --remote` where the project may build (issue 42, item 5): Cloud Build's allowed regions applied to
the setting, the request's location, the plan's store estimate and the error on FAILED_PRECONDITION.

Cloud Build's rule (https://cloud.google.com/build/docs/locations, components/config/cloud_build.py): a build
may run in any listed region, but "depending on usage, certain projects might be restricted to only use Cloud
Build in" six of them; a restricted project's build elsewhere ends in FAILED_PRECONDITION."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import click
import grpc
import pytest
from google.api_core import exceptions

from components import config
from components.config import cloud_build
from deepep_a4.plan import engine as plan_engine
from deepep_a4.store import command as store_build
from deepep_a4.store import estimate as store_estimate
from deepep_a4.store import remote as store_remote
from tests.conftest import stack_config

URL = "gs://my-own-project-artifacts/deepep-a4"
# What gcloud printed for a restricted project (google-github-actions/deploy-cloudrun#480, 2024-01-09).
REFUSAL = "failed precondition: due to quota restrictions, cannot run builds in this region. Please contact support"


def cfg_of(stack: str = "gke-b200", **overrides: Any) -> config.StackConfig:
    return config.parse(plan_engine.project_keys(stack_config(stack, **overrides)), stack)


def cloud_build_accepts(region: str, restricted_project: bool) -> bool:
    """Cloud Build's location rule, as its locations page states it."""
    if region not in cloud_build.AVAILABLE:
        return False
    return region in cloud_build.ALWAYS_ALLOWED or not restricted_project


@pytest.mark.parametrize("stack", ["gke-b200", "gce-b200", "gke-b200-ubuntu"])
def test_the_default_build_region_is_one_every_project_may_use_and_the_stacks_region_is_not(stack: str) -> None:
    cfg = cfg_of(stack)
    assert cloud_build_accepts(cfg.installer.store_build_region, restricted_project=True)
    # The stacks' region: available, but a restricted project cannot build there (the build used to run there).
    assert cloud_build_accepts(cfg.region, restricted_project=False)
    assert not cloud_build_accepts(cfg.region, restricted_project=True)


def test_the_build_runs_in_the_setting_not_the_stacks_region(tmp_path: Any) -> None:
    """`store build --remote --dry-run` prints the request it would send: its location is the setting's."""
    from click.testing import CliRunner

    from deepep_a4.cli import main as cli

    args = ["store", "build", "--stack", "gke-b200", "--store", URL, "--remote", "--dry-run", "--work", str(tmp_path)]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    project = cfg_of().project
    assert f"POST https://cloudbuild.googleapis.com/v1/projects/{project}/locations/us-central1/builds" in result.output
    assert "store bucket assumed in asia-southeast1" in result.output  # the estimate it prints first


def test_a_region_cloud_build_does_not_list_is_refused_naming_the_key() -> None:
    with pytest.raises(config.ConfigError) as err:
        cfg_of(artifactStoreBuildRegion="asia-southeast3")  # a region Cloud Build does not list
    (problem,) = [p for p in err.value.problems if p.key == cloud_build.KEY]
    assert "must be one of" in str(problem) and "us-central1" in problem.allowed and "asia-southeast3" in str(problem)


class RefusingCloudBuild:
    """create_build as the client raises Cloud Build's refusal: the gRPC status FAILED_PRECONDITION, which
    google.api_core maps to its FailedPrecondition exception (exceptions.from_grpc_status)."""

    def __init__(self) -> None:
        self.parents: list[str] = []

    def create_build(self, parent: str, project_id: str, build: Any) -> Any:
        self.parents.append(parent)
        raise exceptions.from_grpc_status(grpc.StatusCode.FAILED_PRECONDITION, REFUSAL)


class FakeStoreGcs:
    """Cloud Storage as the remote build uses it: create-only put, then the object's md5Hash and generation."""

    def __init__(self) -> None:
        self.objects: dict[str, str] = {}

    def put(self, rel: str, file: Any) -> bool:
        from deepep_a4.store import sources as store

        self.objects.setdefault(rel, store.md5_b64(file))
        return True

    def stored(self, rel: str) -> tuple[str, int]:
        return self.objects.get(rel, ""), 1

    def generation(self, rel: str) -> int:
        return 1


def test_failed_precondition_names_the_setting_and_the_regions_every_project_may_use(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from deepep_a4.store import sources as store

    monkeypatch.setattr(store, "fill", lambda *a, **k: 0)
    cfg = cfg_of(artifactStoreBuildRegion="asia-southeast1")
    target = store_remote.Target(cfg.project, cfg.installer.store_build_region, URL, store_build.build_root(cfg))
    store_build.render(cfg, tmp_path)
    client = RefusingCloudBuild()
    with pytest.raises(click.ClickException) as err:
        store_remote.run(
            cfg, tmp_path, "i@sha256:" + "0" * 64, target, None, lambda _: None, client,
            lambda *_: {}, FakeStoreGcs(), lambda _: None,  # type: ignore[arg-type]
        )  # fmt: skip
    text = err.value.message
    assert client.parents == [f"projects/{cfg.project}/locations/asia-southeast1"]
    assert "deepep-a4:artifactStoreBuildRegion" in text and "FAILED_PRECONDITION" in text and REFUSAL in text
    assert all(r in text for r in cloud_build.ALWAYS_ALLOWED) and "\n" not in text
    # Any other error is the client's own, not blamed on the region.
    other = exceptions.from_grpc_status(grpc.StatusCode.PERMISSION_DENIED, "no")
    assert store_remote.region_refused(other, target) is None
    assert store_remote.region_refused(SimpleNamespace(), target) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("bucket", "build", "category"),
    [
        ("us-central1", "us-central1", "same-region"),
        ("us-east4", "us-central1", "same-continent"),
        ("asia-southeast1", "asia-east1", "same-continent"),
        ("asia-southeast1", "us-central1", "between-continents"),
        ("asia-southeast1", "australia-southeast1", "australia"),
    ],
)
def test_the_transfer_category_follows_cloud_storages_continents(bucket: str, build: str, category: str) -> None:
    assert store_estimate.transfer_category(bucket, build) == category


def test_the_plans_store_estimate_names_the_build_region_the_bucket_and_the_transfer() -> None:
    cfg = cfg_of(artifactStore=URL)
    (line,) = [x for x in store_estimate.store_warnings(cfg, "gke-b200") if "Cloud Build" in x]
    assert "built in us-central1 (artifactStoreBuildRegion)" in line
    assert "store bucket assumed in asia-southeast1" in line and "between continents" in line
    assert "https://cloud.google.com/storage/pricing" in line and "read 2026-12-02" in line
    here = cfg_of(artifactStore=URL, artifactStoreBuildRegion="asia-southeast1")
    (line,) = [x for x in store_estimate.store_warnings(here, "gke-b200") if "Cloud Build" in x]
    assert "the same region, no data transfer charge" in line
    priced = {"storage_transfer": {"per_gib": {"between-continents": 0.08}, "source": "s", "read": "r"}}
    assert "USD 0.37" in store_estimate.transfer_line(cfg, priced)  # 4.6 GB at a rate, once one is cited

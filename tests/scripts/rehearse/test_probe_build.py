"""The store builder's probe (a Cloud Build step) against its stand-ins: it writes under the store's prefix and is
refused outside it; a grant without the prefix condition, a missing grant or another account each FAIL."""

from __future__ import annotations

import pytest

from scripts.rehearse import probe_build
from tests.fixtures.rehearse.gcs_iam import VIEWER_AND_CREATOR, Grant
from tests.scripts.rehearse.conftest import STORE_BUCKET, STORE_PREFIX, World, evidence_of, status_of

BUILDER = "deepep-store-builder@demo-project.iam.gserviceaccount.com"


@pytest.fixture
def build(world: World) -> World:
    world.metadata.email = BUILDER
    world.gcs.tokens = {world.metadata.token: BUILDER}
    # store/: objectViewer and objectCreator under the prefix, with the IAM condition (components/node/store_grants.py).
    world.gcs.grants = [Grant(BUILDER, STORE_BUCKET, STORE_PREFIX, VIEWER_AND_CREATOR)]
    world.env["REHEARSAL_EXPECT_EMAIL"] = BUILDER
    return world


def test_inside_is_written_and_outside_is_refused(build: World) -> None:
    rc, lines = build.run(probe_build.main)
    assert rc == 0
    assert status_of(lines) == {"build-token": "PASS", "build-inside": "PASS", "build-outside": "PASS"}
    assert f"gs://{STORE_BUCKET}/{STORE_PREFIX}/rehearsal/r1/build-probe.txt" in evidence_of(lines, "build-inside")
    outside = evidence_of(lines, "build-outside")
    assert f"gs://{STORE_BUCKET}/deepep-a4-rehearsal-outside/r1/build-probe.txt" in outside
    assert "-> 403 (refused, as it must be)" in outside


def test_a_grant_without_the_prefix_condition_fails_build_outside(build: World) -> None:
    build.gcs.grants = [Grant(BUILDER, STORE_BUCKET, "", VIEWER_AND_CREATOR)]
    _, lines = build.run(probe_build.main)
    assert status_of(lines)["build-outside"] == "FAIL"
    assert "accepted outside the store's prefix" in evidence_of(lines, "build-outside")


def test_no_grant_fails_build_inside(build: World) -> None:
    build.gcs.grants = []
    _, lines = build.run(probe_build.main)
    assert status_of(lines) == {"build-token": "PASS", "build-inside": "FAIL", "build-outside": "PASS"}


def test_another_account_fails_build_token(build: World) -> None:
    build.metadata.email = "123@cloudbuild.gserviceaccount.com"  # Cloud Build's legacy default account
    _, lines = build.run(probe_build.main)
    assert status_of(lines)["build-token"] == "FAIL"


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({"REHEARSAL_OUTSIDE_URL": f"gs://{STORE_BUCKET}/{STORE_PREFIX}/x"}, "is inside the store's prefix"),
        ({"REHEARSAL_STORE_URL": f"gs://{STORE_BUCKET}"}, "the store is a whole bucket"),
        ({"REHEARSAL_STORE_URL": "s3://x"}, "is not gs://BUCKET[/PREFIX]"),
    ],
)
def test_an_outside_that_is_not_outside_is_exit_2(
    build: World, env: dict[str, str], says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert build.run(probe_build.main, **env) == (2, [])
    assert says in capsys.readouterr().err

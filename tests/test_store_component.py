"""The artifact store's Pulumi side: URL parsing and the prefix-only IAM condition."""

from __future__ import annotations

import pytest

from deepep_a4.program import store


def test_store_url_splits_into_bucket_and_prefix() -> None:
    assert store.parse_store_url("gs://team-store/deepep/a4/") == ("team-store", "deepep/a4")


@pytest.mark.parametrize("url", ["team-store/x", "gs://team-store", "gs://team-store/", "gs:///prefix", "s3://b/p"])
def test_store_url_without_bucket_or_prefix_is_refused(url: str) -> None:
    with pytest.raises(ValueError, match="gs://BUCKET/PREFIX"):
        store.parse_store_url(url)


def test_grant_is_limited_to_objects_under_the_prefix() -> None:
    expr = store.prefix_condition("team-store", "deepep/a4")
    assert expr == 'resource.name.startsWith("projects/_/buckets/team-store/objects/deepep/a4/")'
    # The trailing slash keeps a sibling prefix ("deepep/a4-other") out of the grant.
    assert expr.endswith('/a4/")')


def test_nodes_cannot_delete_or_overwrite_what_the_store_holds() -> None:
    # objectAdmin/objectUser carry storage.objects.delete, which also allows overwriting an object.
    assert set(store.NODE_ROLES) == {"roles/storage.objectCreator", "roles/storage.objectViewer"}

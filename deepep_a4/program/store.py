"""The artifact store: a bucket that outlives benchmark stacks, and a node's access to one prefix of it.

Built artifacts (GDRCopy, NVSHMEM, DeepEP) and the installer's pinned sources live under a prefix of a
bucket. Every spot node or preemption replacement that finds its artifact there installs in seconds
instead of rebuilding for minutes, so the store must survive `pulumi destroy` of the stacks that use it.
Two shapes, both from the same stack config key `artifactStore`:

- `gs://BUCKET/PREFIX`: an existing bucket the user owns (shared across teams or projects). The stack
  only grants its node service account access to PREFIX, through an IAM condition.
- the `store` platform: a stack of its own whose only resource is the store bucket (protected, so a
  `pulumi destroy` of that stack refuses until the user lifts the protection on purpose). Benchmark
  stacks then name it as above; the teardown rule "nothing of a stack remains" has this one exception.

Trust model: nodes may create objects and read them, never overwrite or delete them
(`roles/storage.objectCreator` + `roles/storage.objectViewer`; overwriting needs delete permission).
An artifact, once published, is what every later node runs: whoever can run a node of a stack with
access to the prefix can publish the first copy of a key. The installer checks each object against the
sha256 published in its metadata, which protects against a broken transfer, not against a hostile
publisher: give store access only to stacks you trust as much as the code they run.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

# Create + read, no delete: a published artifact cannot be replaced by a later node (write-once by IAM,
# on top of the installer's create-only precondition).
NODE_ROLES = ("roles/storage.objectCreator", "roles/storage.objectViewer")


def parse_store_url(url: str) -> tuple[str, str]:
    """`gs://bucket/some/prefix` -> ("bucket", "some/prefix"); the prefix has no leading or trailing '/'."""
    if not url.startswith("gs://"):
        raise ValueError(f"artifact store {url!r} is not a gs://BUCKET/PREFIX URL")
    bucket, _, prefix = url[len("gs://") :].partition("/")
    prefix = prefix.strip("/")
    if not bucket or not prefix:
        raise ValueError(f"artifact store {url!r} needs a bucket and a prefix: gs://BUCKET/PREFIX")
    return bucket, prefix


def prefix_condition(bucket: str, prefix: str) -> str:
    """The CEL expression that limits a grant to the objects under `prefix` (IAM Conditions on Cloud Storage
    match object names as `projects/_/buckets/BUCKET/objects/NAME`)."""
    return f'resource.name.startsWith("projects/_/buckets/{bucket}/objects/{prefix}/")'


@dataclass(frozen=True)
class ArtifactStoreArgs:
    bucket_name: str
    location: str
    # Objects older than this are deleted by the bucket itself: old versions' artifacts and stale locks.
    retention_days: int
    labels: dict[str, str]


class ArtifactStore(pulumi.ComponentResource):
    """The store bucket of the `store` platform: private, uniform access, old objects expire."""

    bucket: gcp.storage.Bucket

    def __init__(self, name: str, args: ArtifactStoreArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:store:ArtifactStore", name, None, opts)
        self.bucket = gcp.storage.Bucket(
            name,
            name=args.bucket_name,
            location=args.location.upper(),
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            # The store outlives every benchmark stack: never emptied by a destroy, and the bucket itself is
            # protected so deleting it takes a deliberate `pulumi state unprotect`.
            force_destroy=False,
            lifecycle_rules=[
                gcp.storage.BucketLifecycleRuleArgs(
                    action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                    condition=gcp.storage.BucketLifecycleRuleConditionArgs(age=args.retention_days),
                )
            ],
            labels=args.labels,
            opts=pulumi.ResourceOptions(parent=self, protect=True),
        )
        self.register_outputs({"storeUrl": self.bucket.url})


@dataclass(frozen=True)
class StoreAccessArgs:
    store_url: str
    member: pulumi.Input[str]


class StoreAccess(pulumi.ComponentResource):
    """The node service account's access to one prefix of a store bucket, and nothing else of it."""

    grants: list[gcp.storage.BucketIAMMember]

    def __init__(self, name: str, args: StoreAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:store:StoreAccess", name, None, opts)
        bucket, prefix = parse_store_url(args.store_url)
        self.grants = [
            gcp.storage.BucketIAMMember(
                f"{name}-{role.rsplit('.', 1)[-1].lower()}",
                bucket=bucket,
                role=role,
                member=args.member,
                condition=gcp.storage.BucketIAMMemberConditionArgs(
                    title=f"deepep-a4 store prefix {prefix}"[:100],
                    description="Objects under the artifact store prefix only",
                    expression=prefix_condition(bucket, prefix),
                ),
                opts=pulumi.ResourceOptions(parent=self),
            )
            for role in NODE_ROLES
        ]
        self.register_outputs({"storeUrl": args.store_url})

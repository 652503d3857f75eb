"""GceResultsBucket: one private bucket per stack that the VMs' service account may use and nothing else
may; it is emptied and deleted with the stack."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from components.config import StackConfig

# What a VM's service account may do with the results bucket: write results and status, overwrite its
# own status, list and read the peers' markers (the internode barrier). objectCreator cannot overwrite
# (that needs storage.objects.delete) and cannot list; objectAdmin on this one bucket is the least
# predefined role that covers it. With uniform bucket-level access there are no object ACLs to abuse.
BUCKET_ROLE = "roles/storage.objectAdmin"


def bucket_name(name_prefix: str, project: str) -> str:
    """Bucket names are global: the stack's prefix plus the project, shortened with a digest if too long."""
    name = f"{name_prefix}-results-{project}"
    if len(name) > 63:
        name = f"{name_prefix}-results-{hashlib.sha256(project.encode()).hexdigest()[:10]}"
    return name


@dataclass(frozen=True)
class GceResultsBucketArgs:
    cfg: StackConfig
    writer: gcp.serviceaccount.Account  # the VMs' service account, the one account that may use the bucket


class GceResultsBucket(pulumi.ComponentResource):
    """A private, per-stack bucket for benchmark results; only the VMs' service account may use it."""

    bucket: gcp.storage.Bucket
    grant: gcp.storage.BucketIAMMember

    def __init__(self, name: str, args: GceResultsBucketArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gce:GceResultsBucket", name, None, opts)
        cfg, writer = args.cfg, args.writer
        bucket, location, labels = bucket_name(cfg.name_prefix, cfg.project), cfg.region, cfg.labels
        child = pulumi.ResourceOptions(parent=self)
        self.bucket = gcp.storage.Bucket(
            name,
            name=bucket,
            location=location.upper(),
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            # Deleted with the stack even when results are still in it; no soft-deleted copies linger.
            force_destroy=True,
            soft_delete_policy=gcp.storage.BucketSoftDeletePolicyArgs(retention_duration_seconds=0),
            labels=labels,
            opts=child,
        )
        self.grant = gcp.storage.BucketIAMMember(
            f"{name}-vm-writer",
            bucket=self.bucket.name,
            role=BUCKET_ROLE,
            member=writer.member,
            opts=child,
        )
        self.register_outputs({"bucketUrl": self.bucket.url})

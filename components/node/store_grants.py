"""The artifact store, the grants' side (docs/store.md): the nodes' access to it, and the bucket itself.

`StoreAccess` (every benchmark stack with `artifactStore`): the reader may read objects under the store's
prefix, nothing else. The reader is the node service account, or on GKE's supported profile the staging pod's
own Workload Identity principal (components/gke/staging_access.py); only a stack with `artifactStorePublish`
lets it create objects too (the sources it downloads). The store's writer is `deepep-a4 store build`, on the
user's credentials: a node's account is reachable from its privileged pods, so nodes that could write would
decide what later nodes run as root. The grant is on the bucket with an IAM condition on the object name, so a
bucket shared with other data stays closed to the nodes. objectCreator cannot overwrite or delete (that needs
storage.objects.delete), which with create-only requests makes every object write-once.
Before it grants anything, it reads the bucket (`check_store_bucket`): a store the nodes could never read
stops the deployment with one line instead of failing on the grant or, worse, on every node's install; so does
a bucket without uniform bucket-level access, on which the conditioned grant would be refused.

`ArtifactStoreBucket` (the store's own small Pulumi project, `store/`): a bucket that outlives the
benchmark stacks, with uniform bucket-level access (IAM conditions need it), public access prevention,
and lifecycle rules that delete old artifacts and stale build locks.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components.config import StackConfig
from components.config.rules.inputs import BUCKET_RULE, bucket_name_problem, store_prefix_problem
from components.options import depends_of

READ_ROLE = "roles/storage.objectViewer"
CREATE_ROLE = "roles/storage.objectCreator"
# The remote store build's own identity (deepep_a4/store/remote.py): made by the store project (store/).
BUILDER_ACCOUNT_ID = "deepep-store-builder"
LOG_WRITER_ROLE = "roles/logging.logWriter"
# Build locks older than this are stale (store.sh ignores expired ones; nodes cannot delete them).
LOCK_MAX_AGE_DAYS = 1


def split_store_url(url: str) -> tuple[str, str]:
    """gs://BUCKET/PREFIX -> (BUCKET, PREFIX without slashes at either end)."""
    if not url.startswith("gs://"):
        raise ValueError(f"artifact store must be gs://BUCKET[/PREFIX], not {url!r}")
    bucket, _, prefix = url[len("gs://") :].partition("/")
    return bucket, prefix.strip("/")


def cel_string(text: str) -> str:
    """TEXT as a CEL double-quoted string literal: the quote and the backslash escaped, every code point outside
    printable ASCII as \\u or \\U (google/cel-spec doc/langdef.md at 508bd98, "String and Bytes Values": a quoted
    literal holds any unescaped character but its delimiter and CR/LF; ESCAPE ::= \\ [abfnrtv\\?"'`] |
    \\u HEX{4} | \\U HEX{8}; surrogate code points are invalid, so they are refused here)."""
    out = []
    for ch in text:
        code = ord(ch)
        if 0xD800 <= code <= 0xDFFF:
            raise ValueError(f"{text!r} holds a UTF-16 surrogate, which no CEL string may hold")
        if ch in ('"', "\\"):
            out.append("\\" + ch)
        elif 0x20 <= code < 0x7F:
            out.append(ch)
        else:
            out.append(f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}")
    return '"' + "".join(out) + '"'


def prefix_condition(bucket: str, prefix: str) -> str:
    """CEL on the object's resource name: objects under PREFIX/ of BUCKET only. The path is a CEL string
    literal, escaped (the settings refuse such names first; the escape keeps a missed one a name)."""
    path = f"projects/_/buckets/{bucket}/objects/{prefix + '/' if prefix else ''}"
    return f"resource.name.startsWith({cel_string(path)})"


@dataclass(frozen=True)
class StoreAccessArgs:
    store_url: str
    # Who reads: serviceAccount:EMAIL of the nodes, or the staging pod's Workload Identity principal (GKE supported)
    member: pulumi.Input[str]
    publish: bool  # nodes may create objects (otherwise read only)
    project: str  # the stack's project: a store bucket elsewhere needs its owner's IAM policy


def _reason(err: Exception) -> str:
    """The provider's own words, on one line (the invoke error wraps Cloud Storage's message)."""
    text = " ".join(str(err).split())
    return text.removeprefix("invoke of ").split(" failed: ", 1)[-1][:300]


def check_store_bucket(url: str, project: str, parent: pulumi.Resource) -> None:
    """Stops the deployment (pulumi.RunError, one line) when the nodes could not read the store.

    Cloud Storage answers for the bucket itself: a missing bucket, or one this deployment may not see, fails
    `buckets.get` (the data source returns that error: terraform-provider-google,
    google/services/storage/data_source_google_storage_bucket.go). The bucket's project is compared by
    number: the data source's `project` falls back to the provider's project when it cannot look the number
    up, `project_number` comes from the bucket. A bucket of another project is usable only when this
    deployment can change its IAM policy, which the grant below does; reading that policy is the check.
    """
    bucket, _ = split_store_url(url)
    opts = pulumi.InvokeOptions(parent=parent)
    key = f"deepep-a4:artifactStore = {url!r}"
    try:
        found = gcp.storage.get_bucket(name=bucket, opts=opts)
    except Exception as err:  # the invoke's error is a plain Exception carrying the API's message
        raise pulumi.RunError(
            f"{key}: bucket {bucket} cannot be read ({_reason(err)}): create it with the store project "
            "(store/, docs/store.md), or set artifactStore to '' to build on every node"
        ) from None
    if found.uniform_bucket_level_access is False:
        # The grants below carry an IAM condition (the store's prefix); Cloud Storage takes IAM Conditions only
        # on a bucket with uniform bucket-level access: "You can only use IAM Conditions on buckets that have
        # uniform bucket-level access enabled" (https://cloud.google.com/storage/docs/access-control/iam#conditions).
        raise pulumi.RunError(
            f"{key}: bucket {bucket} has uniform bucket-level access off, and the nodes' prefix-limited grant is an "
            "IAM condition, which Cloud Storage allows only with it on: turn it on (gcloud storage buckets update "
            f"gs://{bucket} --uniform-bucket-level-access), or use the store project's bucket (store/, docs/store.md)"
        )
    if found.project_number is None:  # not known in a preview: `pulumi up` checks
        return
    own = gcp.organizations.get_project(project_id=project, opts=opts)
    if str(found.project_number) == str(own.number):
        return
    try:
        gcp.storage.get_bucket_iam_policy(bucket=bucket, opts=opts)
    except Exception as err:
        raise pulumi.RunError(
            f"{key}: bucket {bucket} belongs to project number {found.project_number}, not to {project} "
            f"({own.number}), and this deployment cannot grant the nodes access to it ({_reason(err)}): use a "
            f"bucket of {project} (store/, docs/store.md), or get roles/storage.admin on {bucket} from its owner"
        ) from None


class StoreAccess(pulumi.ComponentResource):
    """The nodes' object access to the store's prefix: read, and create-only when they publish."""

    grants: list[gcp.storage.BucketIAMMember]

    def __init__(self, name: str, args: StoreAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:store:StoreAccess", name, None, opts)
        check_store_bucket(args.store_url, args.project, self)
        bucket, prefix = split_store_url(args.store_url)
        # What the component waits for (the cluster, for a Workload Identity reader), its grants wait for.
        child = pulumi.ResourceOptions(parent=self, depends_on=depends_of(opts))
        roles = [READ_ROLE, CREATE_ROLE] if args.publish else [READ_ROLE]
        self.grants = [
            gcp.storage.BucketIAMMember(
                f"{name}-{role.rsplit('.', 1)[-1].lower()}",
                bucket=bucket,
                role=role,
                member=args.member,
                condition=gcp.storage.BucketIAMMemberConditionArgs(
                    title=f"deepep-a4 store prefix {prefix or '(whole bucket)'}"[:100],
                    description="Objects under the artifact store's prefix only (docs/store.md).",
                    expression=prefix_condition(bucket, prefix),
                ),
                opts=child,
            )
            for role in roles
        ]
        self.register_outputs({"bucket": bucket, "prefix": prefix, "roles": roles})


@dataclass(frozen=True)
class ArtifactStoreBucketArgs:
    name: str
    prefix: str  # the store's objects live under PREFIX/ (sources/, artifacts/, locks/ below it)
    project: str
    location: str
    artifact_max_age_days: int
    labels: dict[str, str]


class ArtifactStoreBucket(pulumi.ComponentResource):
    """The store's bucket: outlives benchmark stacks; protected, so destroying it is a deliberate act."""

    bucket: gcp.storage.Bucket

    def __init__(self, name: str, args: ArtifactStoreBucketArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:store:ArtifactStoreBucket", name, None, opts)
        base = f"{args.prefix.strip('/')}/" if args.prefix.strip("/") else ""
        rules = [
            gcp.storage.BucketLifecycleRuleArgs(
                action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                    age=args.artifact_max_age_days, matches_prefixes=[f"{base}artifacts/", f"{base}sources/"]
                ),
            ),
            gcp.storage.BucketLifecycleRuleArgs(
                action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                    age=LOCK_MAX_AGE_DAYS, matches_prefixes=[f"{base}locks/"]
                ),
            ),
        ]
        self.bucket = gcp.storage.Bucket(
            name,
            name=args.name,
            project=args.project,
            location=args.location,
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            # Objects are write-once: no versions to keep.
            versioning=gcp.storage.BucketVersioningArgs(enabled=False),
            lifecycle_rules=rules,
            force_destroy=False,
            labels=args.labels,
            opts=pulumi.ResourceOptions(parent=self, protect=True),
        )
        self.url = pulumi.Output.concat("gs://", self.bucket.name, f"/{base}".rstrip("/"))
        self.register_outputs({"url": self.url})


class StoreBuilder(pulumi.ComponentResource):
    """`store build --remote`'s service account: it reads (its source, the objects it checks) and creates objects
    under the store's prefix, nothing else of the bucket, and writes its build's log (Cloud Build with a
    user-specified account logs to Cloud Logging: roles/logging.logWriter,
    https://cloud.google.com/build/docs/securing-builds/configure-user-specified-service-accounts). It holds
    no delete, so it can never replace an object (create-only, as the nodes' grant)."""

    account: gcp.serviceaccount.Account
    grants: list[pulumi.Resource]

    def __init__(self, name: str, args: ArtifactStoreBucketArgs, bucket: pulumi.Input[str], opts=None):
        super().__init__("deepep-a4:store:StoreBuilder", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        self.account = gcp.serviceaccount.Account(
            name,
            account_id=BUILDER_ACCOUNT_ID,
            project=args.project,
            display_name="deepep-a4 store builder (Cloud Build)",
            description="Runs `deepep-a4 store build --remote`: creates objects under the store prefix only.",
            opts=child,
        )
        member = self.account.email.apply(lambda e: f"serviceAccount:{e}")
        prefix = args.prefix.strip("/")
        self.grants = [
            gcp.storage.BucketIAMMember(
                f"{name}-{role.rsplit('.', 1)[-1].lower()}",
                bucket=bucket,
                role=role,
                member=member,
                condition=gcp.storage.BucketIAMMemberConditionArgs(
                    title=f"deepep-a4 store prefix {prefix or '(whole bucket)'}"[:100],
                    description="The store builder: objects under the artifact store's prefix only (docs/store.md).",
                    expression=pulumi.Output.from_input(bucket).apply(lambda b: prefix_condition(b, prefix)),
                ),
                opts=child,
            )
            for role in (READ_ROLE, CREATE_ROLE)
        ]
        self.grants.append(
            gcp.projects.IAMMember(
                f"{name}-logwriter", project=args.project, role=LOG_WRITER_ROLE, member=member, opts=child
            )
        )
        self.register_outputs({"email": self.account.email})


def store_name_warning(cfg: StackConfig) -> str:
    """One line when the store's bucket does not look like the stack project's (its name lacks the project
    id), else "". The offline plan cannot read the bucket; `pulumi up` does (check_store_bucket)."""
    if not cfg.installer.store_url:
        return ""
    bucket, _ = split_store_url(cfg.installer.store_url)
    if cfg.project in bucket:
        return ""
    return (
        f"WARNING: artifactStore bucket {bucket} does not name project {cfg.project}: `pulumi up` reads its project "
        "and stops unless this deployment can grant the nodes access to it (docs/store.md)"
    )


def store_access(cfg: StackConfig, member: pulumi.Input[str], opts: pulumi.ResourceOptions) -> list[pulumi.Resource]:
    """The grants a platform's nodes need before they start (none without a store)."""
    store = cfg.installer
    if not store.store_url:
        return []
    args = StoreAccessArgs(store.store_url, member, store.store_publish, cfg.project)
    return list(StoreAccess("store", args, opts).grants)


_BUCKET_RE = re.compile(r"[a-z0-9][a-z0-9_.-]{1,61}[a-z0-9]")
# A project id (6-30 characters: lowercase letters, digits, hyphens; a letter first), optionally domain-scoped.
_PROJECT_RE = re.compile(r"(?:[a-z0-9.-]+:)?[a-z][a-z0-9-]{4,28}[a-z0-9]")
# What store/Pulumi.demo.yaml holds until the user sets theirs: no project can be named so.
STORE_PROJECT_PLACEHOLDER = "SET-YOUR-PROJECT"


def store_settings(config: Any) -> ArtifactStoreBucketArgs:
    """The store project's config (pulumi.Config("deepep-a4-store")), checked; ValueError names the key."""
    project = config.get("project") or ""
    set_yours = "pulumi config set deepep-a4-store:project YOUR-PROJECT"
    if not project or project == STORE_PROJECT_PLACEHOLDER:
        raise ValueError(f"deepep-a4-store:project is {project or 'not set'}: set yours ({set_yours})")
    if not _PROJECT_RE.fullmatch(project):
        raise ValueError(
            f"deepep-a4-store:project {project!r} is not a project id (6-30 chars: a-z 0-9 -): {set_yours}"
        )
    bucket = config.get("bucket") or f"{project}-artifacts"
    if not _BUCKET_RE.fullmatch(bucket) or bucket_name_problem(bucket):
        why = bucket_name_problem(bucket) or "is not 3-63 characters"
        raise ValueError(f"deepep-a4-store:bucket {bucket!r} {why}: {BUCKET_RULE}")
    # The prefix limits the builder's and the nodes' grants (an IAM condition): artifactStore's rule.
    raw_prefix = config.get("prefix")
    prefix = "deepep-a4" if raw_prefix is None or raw_prefix == "" else raw_prefix
    if store_prefix_problem(prefix):
        raise ValueError(f"deepep-a4-store:prefix {prefix!r} {store_prefix_problem(prefix)}")
    age = config.get_int("maxAgeDays")
    age = 90 if age is None else age
    if not 1 <= age <= 3650:
        raise ValueError(f"deepep-a4-store:maxAgeDays {age} must be 1-3650")
    return ArtifactStoreBucketArgs(
        name=bucket,
        prefix=prefix.strip("/"),
        project=project,
        location=config.get("location") or "asia-southeast1",
        artifact_max_age_days=age,
        labels={"deepep-a4-store": "true"},
    )

"""PoolDeadline: at the stack's deadline (deadline.py) Cloud Scheduler deletes the A4 node pool.

Why a deletion, and why from Cloud Scheduler: the A4 pool's `max_run_duration` deletes each node when its own
clock ends, and the managed instance group then lowers its target size
(https://cloud.google.com/compute/docs/instance-groups/limit-vm-runtime-in-migs). But every node that starts
later gets a fresh clock: the group recreates a preempted spot node, the cluster autoscaler adds flex-start
nodes for pending pods, a `pulumi up --refresh` resizes the pool back to nodeCount. Deleting the pool at a
fixed time ends all three, and Cloud Scheduler does it whether or not the deployer's laptop is on.
The call is GKE's nodePools.delete
(https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/projects.locations.clusters.nodePools/delete),
made as a service account of its own that only Cloud Scheduler acts as. A `pulumi destroy` after the
deadline finds the pool gone, which the provider's delete accepts (a 404 needs no clean-up:
terraform-provider-google, google/services/container/resource_container_node_pool.go).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from components import deadline
from components.config import StackConfig

# What deleting one node pool needs: nodePools.delete requires container.clusters.update on the cluster, and
# reading the deletion's operation container.operations.get (GKE's API permissions page,
# https://cloud.google.com/kubernetes-engine/docs/reference/api-permissions). No predefined role holds just
# these (roles/container.clusterAdmin would also create, upgrade and delete every cluster of the project), so
# the account gets a custom role of exactly these two. The account has no key: only Cloud Scheduler mints
# its tokens. docs/security.md says why the grant is not conditioned on the one cluster.
DEADLINE_PERMISSIONS = ("container.clusters.update", "container.operations.get")
GKE_API = "https://container.googleapis.com/v1"
# A deletion GKE refuses (another operation runs on the cluster: an upgrade, a repair; a quota) succeeds on a
# later attempt. Cloud Scheduler retries "until both limits are reached" when retryCount and maxRetryDuration
# are both set (https://cloud.google.com/scheduler/docs/configuring/retry-jobs): at most 5 retries (the API's
# maximum) alone would end 44 minutes after the deadline, so the duration keeps it trying for 6 hours:
# after 2, 6, 14, 29 and 44 minutes, then every 15 minutes (retry_offsets).
RETRY_HOURS = 6
RETRY = {
    "retry_count": 5,
    "max_retry_duration": f"{RETRY_HOURS * 3600}s",
    "min_backoff_duration": "120s",
    "max_backoff_duration": "900s",
    "max_doublings": 2,
}


def retry_offsets(retry: dict[str, Any]) -> list[int]:
    """Seconds after the first attempt at which Cloud Scheduler retries, by its documented backoff: the interval
    starts at minBackoffDuration, doubles maxDoublings times, then grows by that last step, capped at
    maxBackoffDuration; retries go on until retryCount retries are made and maxRetryDuration has passed."""
    low, high = (int(str(retry[k]).removesuffix("s")) for k in ("min_backoff_duration", "max_backoff_duration"))
    limit, count, doublings = (
        int(str(retry["max_retry_duration"]).removesuffix("s")),
        retry["retry_count"],
        retry["max_doublings"],
    )
    offsets: list[int] = []
    step, at = low, 0
    while len(offsets) < count or at + min(step, high) <= limit:
        at += min(step, high)
        offsets.append(at)
        step = step * 2 if len(offsets) <= doublings else step + low * 2**doublings
    return offsets


def account_id(name_prefix: str) -> str:
    """A 6-30 character account id derived from the stack's prefix."""
    return f"{name_prefix[:21].rstrip('-')}-deadline"


def role_id(name_prefix: str, at: str) -> str:
    """The custom role's id: the stack's prefix and a hash of its deadline (fixed at the first `pulumi up`).

    IAM keeps a deleted custom role for 7 days (undeletable), then takes 30 more to purge it; meanwhile no role
    of that id can be created (https://cloud.google.com/iam/docs/reference/rest/v1/projects.roles/delete). The
    provider undeletes a soft-deleted role of the same id on create (terraform-provider-google,
    resource_google_project_iam_custom_role.go), which covers the first 7 days but not the 30 after. A
    `pulumi destroy` ends the deadline too, so the next `pulumi up` fixes a new one, and a new id: it never
    meets the old role. Ids allow [a-zA-Z0-9_.] only, 3-64 characters.
    """
    digest = hashlib.sha256(at.encode()).hexdigest()[:8]
    return f"{name_prefix[:40].replace('-', '_')}_deadline_{digest}"


@dataclass(frozen=True)
class PoolDeadlineArgs:
    cfg: StackConfig
    at: pulumi.Output[str]
    cluster: gcp.container.Cluster
    pool: gcp.container.NodePool


class PoolDeadline(pulumi.ComponentResource):
    """A Cloud Scheduler job that deletes the A4 node pool at the stack's deadline, and the account it runs as."""

    account: gcp.serviceaccount.Account
    role: gcp.projects.IAMCustomRole
    grant: gcp.projects.IAMMember
    job: gcp.cloudscheduler.Job

    def __init__(self, name: str, args: PoolDeadlineArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("deepep-a4:gke:PoolDeadline", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        cfg = args.cfg
        self.account = gcp.serviceaccount.Account(
            name,
            account_id=account_id(cfg.name_prefix),
            display_name=f"deepep-a4 deadline of {cfg.name_prefix}",
            description="Cloud Scheduler deletes the stack's A4 node pool at its deadline as this account",
            opts=child,
        )
        prefix = cfg.name_prefix
        self.role = gcp.projects.IAMCustomRole(
            f"{name}-delete-pool",
            project=cfg.project,
            role_id=args.at.apply(lambda at: role_id(prefix, at)),
            title=f"deepep-a4 deadline of {prefix}"[:100],
            description="Deletes the stack's A4 node pool at its deadline: nodePools.delete and its operation",
            permissions=list(DEADLINE_PERMISSIONS),
            stage="GA",
            opts=child,
        )
        self.grant = gcp.projects.IAMMember(
            f"{name}-delete-pool", project=cfg.project, role=self.role.name, member=self.account.member, opts=child
        )
        uri = pulumi.Output.format(
            "{0}/projects/{1}/locations/{2}/clusters/{3}/nodePools/{4}",
            GKE_API,
            cfg.project,
            args.cluster.location,
            args.cluster.name,
            args.pool.name,
        )
        self.job = gcp.cloudscheduler.Job(
            name,
            name=f"{cfg.name_prefix}-a4-deadline",
            description=args.at.apply(lambda at: f"deletes the A4 node pool at the stack's deadline {at}"),
            region=cfg.region,
            schedule=args.at.apply(deadline.cron_at),
            time_zone="Etc/UTC",
            attempt_deadline="180s",
            retry_config=gcp.cloudscheduler.JobRetryConfigArgs(**RETRY),
            http_target=gcp.cloudscheduler.JobHttpTargetArgs(
                http_method="DELETE",
                uri=uri,
                oauth_token=gcp.cloudscheduler.JobHttpTargetOauthTokenArgs(
                    service_account_email=self.account.email,
                    scope="https://www.googleapis.com/auth/cloud-platform",
                ),
            ),
            # The role must be in place when the job first fires.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.grant]),
        )
        self.register_outputs({"deadline": args.at, "job": self.job.name})

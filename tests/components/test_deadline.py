"""The stack's deadline (components/deadline.py, gke_deadline.py): fixed once, enforced by the cloud, and a
`pulumi up` after it changes nothing."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pulumi
import pytest

from components import deadline
from components.gke import deadline as gke_deadline
from deepep_a4.plan import engine as plan_engine
from tests.conftest import ROOT, of_type, one, plan, stack_config

JOB = "gcp:cloudscheduler/job:Job"
STASH = "pulumi:index:Stash"
IAM_MEMBER = "gcp:projects/iAMMember:IAMMember"
NOW = dt.datetime(2026, 11, 24, 9, 30, 15, tzinfo=dt.UTC)


def test_deadline_is_whole_minutes_rounded_up_and_fires_once_a_year() -> None:
    at = deadline.deadline_after(NOW, 8 * 3600)
    assert at == "2026-11-24T17:31:00Z"
    assert deadline.cron_at(at) == "31 17 24 11 *"


def test_a_kept_deadline_is_accepted_before_it_passes() -> None:
    kept = {"ttlSeconds": 28800.0, "at": "2026-11-24T17:31:00Z"}  # numbers come back from the state as floats
    assert deadline.check_kept(kept, 28800, NOW) == "2026-11-24T17:31:00Z"


def test_pulumi_up_after_the_deadline_is_refused_with_the_way_out() -> None:
    kept = {"ttlSeconds": 28800, "at": "2026-11-24T09:00:00Z"}
    with pytest.raises(pulumi.RunError) as err:
        deadline.check_kept(kept, 28800, NOW)
    text = str(err.value)
    assert "deadline 2026-11-24T09:00:00Z has passed" in text
    assert "`pulumi destroy --refresh`, then `pulumi up`" in text and "\n" not in text


def test_a_new_ttl_on_a_deployed_stack_is_refused_not_ignored() -> None:
    kept = {"ttlSeconds": 28800, "at": "2026-11-24T17:31:00Z"}
    with pytest.raises(pulumi.RunError, match=r"deepep-a4:ttl is 12h but this stack was deployed with 8h"):
        deadline.check_kept(kept, 12 * 3600, NOW)


def test_gke_deletes_the_a4_pool_at_the_deadline_from_cloud_scheduler() -> None:
    result = plan("gke-b200")
    at = result.outputs["deadline"]
    job = one(result, JOB)
    inputs = job["inputs"]
    assert inputs["schedule"] == deadline.cron_at(at) and inputs["timeZone"] == "Etc/UTC"
    target = inputs["httpTarget"]
    assert target["httpMethod"] == "DELETE"
    assert target["uri"].endswith("/locations/asia-southeast1/clusters/deepep-gke-b200-gke/nodePools/a4-highgpu-8g")
    account = target["oauthToken"]["serviceAccountEmail"]
    grants = [
        g
        for g in of_type(result, "gcp:projects/iAMMember:IAMMember")
        if g["inputs"]["member"] == f"serviceAccount:{account}"
    ]
    # One custom role of exactly what deleting a node pool needs, no predefined role (no clusterAdmin).
    [role] = of_type(result, "gcp:projects/iAMCustomRole:IAMCustomRole")
    assert sorted(role["inputs"]["permissions"]) == ["container.clusters.update", "container.operations.get"]
    name = f"projects/{role['inputs']['project']}/roles/{role['inputs']['roleId']}"
    assert [g["inputs"]["role"] for g in grants] == [name]
    assert grants[0]["name"] in job["dependsOn"]  # the role exists before the job can fire
    assert not any(g["inputs"]["role"].startswith("roles/container.cluster") for g in of_type(result, IAM_MEMBER))


def test_the_deadline_role_id_is_new_for_every_deadline_so_destroy_then_up_never_meets_a_deleted_role() -> None:
    a = gke_deadline.role_id("deepep-gke-b200", "2026-11-25T16:00:00Z")
    b = gke_deadline.role_id("deepep-gke-b200", "2026-11-26T09:00:00Z")
    assert a != b and a.startswith("deepep_gke_b200_deadline_")
    for rid in (a, b, gke_deadline.role_id("x" * 30 + "-y" * 10, "t")):
        assert re.fullmatch(r"[a-zA-Z0-9_.]{3,64}", rid), rid


@pytest.mark.parametrize("stack", plan_engine.available_stacks())
def test_no_project_wide_admin_owner_or_editor_grant(stack: str) -> None:
    for g in of_type(plan(stack), IAM_MEMBER):
        assert g["inputs"]["role"] not in ("roles/owner", "roles/editor", "roles/container.clusterAdmin"), g["name"]
        assert not g["inputs"]["role"].endswith(".admin"), g["name"]


def test_every_gcp_resource_waits_for_the_deadline_check() -> None:
    for stack in ("gke-b200", "gce-b200"):
        result = plan(stack)
        stash = one(result, STASH, deadline.STASH_NAME)
        assert stash["ignoreChanges"] == ["input"]  # the first value stays; no diff on every `pulumi up`
        provider = one(result, "pulumi:providers:gcp")
        assert deadline.STASH_NAME in provider["dependsOn"]
        assert all(r["provider"] in (None, "gcp", "gke") for r in result.resources if r["type"].startswith("gcp:"))


def test_without_a_ttl_there_is_no_deadline_and_no_job() -> None:
    result = plan("gke-b200", provisioning="on-demand", ttl="off")
    assert not of_type(result, JOB) and not [s for s in of_type(result, STASH) if s["name"] == deadline.STASH_NAME]
    assert result.outputs["deadline"] is None


def test_a_refused_deadline_creates_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """What `pulumi up` does on a stack whose deadline has passed: the Stash returns the kept value."""
    real = plan_engine._computed_outputs

    def expired(type_: str, name: str, inputs: Any, project: str) -> dict[str, Any]:
        out = real(type_, name, inputs, project)
        if type_ == STASH:
            out["output"] = {"ttlSeconds": 28800, "at": "2026-01-01T00:00:00Z"}
        return out

    monkeypatch.setattr(plan_engine, "_computed_outputs", expired)
    created: list[str] = []
    real_new = plan_engine.PlanMocks.new_resource

    def record(self: plan_engine.PlanMocks, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict]:
        created.append(args.typ)
        return real_new(self, args)

    monkeypatch.setattr(plan_engine.PlanMocks, "new_resource", record)
    with pytest.raises(Exception, match="deadline 2026-01-01T00:00:00Z has passed"):
        plan_engine.run_program("gke-b200", stack_config("gke-b200"))
    assert created == [STASH]


def test_the_deadline_job_retries_a_refused_deletion_for_six_hours() -> None:
    retry = one(plan("gke-b200"), JOB)["inputs"]["retryConfig"]
    assert retry["retryCount"] > 0
    assert int(retry["maxRetryDuration"].removesuffix("s")) >= 6 * 3600
    # The window the rendered settings give, by Cloud Scheduler's documented backoff, and what the docs say.
    snake = {re.sub(r"([A-Z])", lambda m: "_" + m[1].lower(), k): v for k, v in retry.items()}
    offsets = gke_deadline.retry_offsets(snake)
    assert [o // 60 for o in offsets[:5]] == [2, 6, 14, 29, 44] and 5.9 * 3600 <= offsets[-1] <= 6 * 3600
    docs = " ".join((ROOT / "docs" / "deploy.md").read_text().split())
    assert "retries it for 6 hours: after 2, 6, 14, 29 and 44 minutes, then every 15 minutes" in docs
    assert "the last retry 5 h 59 min after the deadline" in docs
    assert "failed later counts as done for Cloud Scheduler and is not retried" in docs

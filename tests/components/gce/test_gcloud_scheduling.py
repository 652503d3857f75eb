"""gcloud's scheduling rule applied to every VM the plan renders (issue 42, item 2).

`validate_instance_scheduling` is gcloud's own check, written from google-cloud-sdk
lib/googlecloudsdk/command_lib/compute/instances/flags.py, `ValidateInstanceScheduling`
(google-cloud-sdk-unofficial/google-cloud-sdk@01f043c2289dbd5b8de55d1d271ead804f9448f0), called by
`gcloud compute instances create` with support_max_run_duration=True:

- `--instance-termination-action` needs one of `--provisioning-model`, `--max-run-duration`,
  `--termination-time` (MinimumArgumentException);
- `--termination-time` with `--max-run-duration` is refused: "Must specify exactly one of --max-run-duration or
  --termination-time as these fields are mutually exclusive." (compute_exceptions.ArgumentError).

A rendered instance's scheduling is read as the flags that would set it (each scheduling field is one flag of
`gcloud compute instances create`: AddProvisioningModelVmArgs, AddMaxRunDurationVmArgs,
AddInstanceTerminationActionVmArgs in the same file).
"""

from __future__ import annotations

from typing import Any

import pytest

from deepep_a4.policy import rules
from tests.conftest import of_type, plan

INSTANCE = "gcp:compute/instance:Instance"
# scheduling field (the API's, camelCase as the plan shows it) -> gcloud's argument name (args.IsSpecified).
FLAG_OF_FIELD = {
    "provisioningModel": "provisioning_model",
    "maxRunDuration": "max_run_duration",
    "terminationTime": "termination_time",
    "instanceTerminationAction": "instance_termination_action",
}
MUTUALLY_EXCLUSIVE = (
    "Must specify exactly one of --max-run-duration or --termination-time as these fields are mutually exclusive."
)


class GcloudRefusedError(Exception):
    pass


def specified(scheduling: dict[str, Any]) -> set[str]:
    return {flag for field, flag in FLAG_OF_FIELD.items() if scheduling.get(field) not in (None, "", {})}


def validate_instance_scheduling(args: set[str], support_max_run_duration: bool = True) -> None:
    """gcloud's ValidateInstanceScheduling over the set of specified arguments."""
    if "instance_termination_action" in args:
        if support_max_run_duration:
            if not args & {"provisioning_model", "max_run_duration", "termination_time"}:
                raise GcloudRefusedError(
                    "One of [--provisioning-model, --max-run-duration, --termination-time] must be supplied: "
                    "required with argument `--instance-termination-action`."
                )
        elif "provisioning_model" not in args:
            raise GcloudRefusedError("--provisioning-model: required with argument `--instance-termination-action`.")
    if support_max_run_duration and {"termination_time", "max_run_duration"} <= args:
        raise GcloudRefusedError(MUTUALLY_EXCLUSIVE)


def test_the_model_refuses_what_gcloud_refuses() -> None:
    """gcloud's own cases, so the model can fail: both limits, and an action with nothing it applies to."""
    with pytest.raises(GcloudRefusedError, match="mutually exclusive"):
        validate_instance_scheduling({"max_run_duration", "termination_time", "instance_termination_action"})
    with pytest.raises(GcloudRefusedError, match="must be supplied"):
        validate_instance_scheduling({"instance_termination_action"})
    validate_instance_scheduling({"termination_time", "instance_termination_action"})
    validate_instance_scheduling({"max_run_duration", "instance_termination_action"})


@pytest.mark.parametrize(
    ("stack", "overrides"),
    [
        ("gce-b200", {}),
        ("gce-b200-ubuntu", {}),
        ("gce-b200", {"terminationAction": "STOP", "ttl": "90m"}),
        ("gce-b200", {"provisioning": "flex-start"}),
        ("gce-b200", {"provisioning": "on-demand", "ttl": "8h"}),
        ("gce-b200", {"provisioning": "on-demand", "ttl": "off"}),
    ],
)
def test_every_rendered_vm_passes_gclouds_scheduling_rule(stack: str, overrides: dict[str, Any]) -> None:
    vms = of_type(plan(stack, **overrides), INSTANCE)
    assert vms
    for vm in vms:
        sched = vm["inputs"]["scheduling"]
        validate_instance_scheduling(specified(sched))
        # The policy pack's rule says the same of the same properties.
        assert rules.gce_one_run_limit(INSTANCE, {"scheduling": sched}) == []
        if overrides.get("ttl") != "off":
            assert "termination_time" in specified(sched), "with a ttl the VM ends at the stack's deadline"


def test_the_policy_rule_refuses_the_pair_as_gcloud_does() -> None:
    both = {
        "provisioningModel": "SPOT",
        "instanceTerminationAction": "DELETE",
        "maxRunDuration": {"seconds": 28800},
        "terminationTime": "2026-01-02T11:04:00Z",
    }
    with pytest.raises(GcloudRefusedError):
        validate_instance_scheduling(specified(both))
    problems = rules.gce_one_run_limit(INSTANCE, {"scheduling": both})
    assert len(problems) == 1 and "both maxRunDuration and terminationTime" in problems[0]
    one_limit = {k: v for k, v in both.items() if k != "maxRunDuration"}
    assert rules.gce_one_run_limit(INSTANCE, {"scheduling": one_limit}) == []
    assert rules.spot_has_ttl(INSTANCE, {"scheduling": one_limit}) == []

"""The rules of rules.py as pulumi-policy policies: mandatory, but for rules.ADVISORY_RULES.

`__main__.py` serves them as a pack."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from deepep_a4.policy import rules

PACK_NAME = "deepep-a4"


def _resource_validator(rule: Callable[[str, rules.Props], list[str]]):
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        for message in rule(args.resource_type, args.props):
            report_violation(message, None)

    return validate


def _named_validator(rule: Callable[[str, str, rules.Props], list[str]]):
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        for message in rule(args.resource_type, args.name, args.props):
            report_violation(message, None)

    return validate


def _stack_validator(rule: Callable[[Iterable[rules.Resource]], list[str]]):
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [rules.Resource(r.resource_type, r.name, r.props) for r in args.resources]
        for message in rule(resources):
            report_violation(message, None)

    return validate


def _level(name: str) -> EnforcementLevel:
    return EnforcementLevel.ADVISORY if name in rules.ADVISORY_RULES else EnforcementLevel.MANDATORY


def _common(name: str, description: str) -> dict[str, Any]:
    """What every policy of the pack says besides its validator."""
    return {"name": name, "description": description, "enforcement_level": _level(name)}


def policies() -> list[Policy]:
    out: list[Policy] = [
        ResourceValidationPolicy(validate=_resource_validator(rule), **_common(name, description))
        for name, (description, rule) in rules.RESOURCE_RULES.items()
    ]
    out += [
        ResourceValidationPolicy(validate=_named_validator(rule), **_common(name, description))
        for name, (description, rule) in rules.NAMED_RESOURCE_RULES.items()
    ]
    out += [
        StackValidationPolicy(validate=_stack_validator(rule), **_common(name, description))
        for name, (description, rule) in rules.STACK_RULES.items()
    ]
    return out

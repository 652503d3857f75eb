"""IAM grants with their permissions resolved, from a pinned copy of Google's role definitions.

policy/roles.json holds the predefined roles the stack and the store project grant, transcribed from
github.com/iann0036/iam-dataset gcp/roles/<role>.json at the commit it names (that dataset records
`gcloud iam roles describe` of every predefined role). A predefined role not in it is refused: its
permissions are not known here, so nothing can say what it grants. A custom role resolves to the
permissions the stack defines for it; one the stack does not define is refused by identities.py.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from deepep_a4.policy.bill import Context, logical, template
from deepep_a4.policy.trust import as_list, get_path

ROLES_FILE = Path(__file__).resolve().parents[2] / "policy" / "roles.json"


@functools.cache
def _pinned() -> dict[str, Any]:
    return json.loads(ROLES_FILE.read_text())


ROLES_SOURCE = "policy/roles.json"


def predefined(role: str) -> list[str] | None:
    found = _pinned()["roles"].get(role)
    return list(found["permissions"]) if found else None


def is_custom(role: str) -> bool:
    return role.startswith(("projects/", "organizations/")) and "/roles/" in role


def iam_grants(type_: str, props: Mapping[str, Any]) -> Iterator[tuple[str, str, str | None]]:
    """(role, member, condition expression) of every IAM member, binding or policy of any Google service."""
    if not type_.startswith("gcp:"):
        return
    kind = type_.rsplit(":", 1)[-1]
    role = str(props.get("role") or "")
    cond = get_path(props, "condition", "expression")
    cond = cond if isinstance(cond, str) else None
    if kind.endswith(("IAMMember", "IamMember")):
        yield role, str(props.get("member") or ""), cond
    elif kind.endswith(("IAMBinding", "IamBinding")):
        yield from ((role, str(m), cond) for m in as_list(props.get("members")))
    elif kind.endswith(("IAMPolicy", "IamPolicy")) and isinstance(props.get("policyData"), str):
        try:
            policy = json.loads(props["policyData"])
        except ValueError:
            yield "<unreadable policyData>", "<unknown>", None
            return
        for b in as_list(get_path(policy, "bindings")):
            expr = get_path(b, "condition", "expression")
            for m in as_list(get_path(b, "members")):
                yield str(get_path(b, "role") or ""), str(m), expr if isinstance(expr, str) else None


def custom_roles(resources: Iterable[tuple[str, str, Mapping[str, Any]]]) -> dict[str, list[str]]:
    """roleId -> permissions of every custom role the resources define."""
    out: dict[str, list[str]] = {}
    for type_, _, props in resources:
        if type_.startswith("gcp:") and type_.endswith(("IAMCustomRole", "IamCustomRole")):
            out[str(props.get("roleId") or "")] = sorted(str(p) for p in as_list(props.get("permissions")))
    return out


def resolved(resources: list[tuple[str, str, Mapping[str, Any]]], ctx: Context) -> list[dict[str, Any]]:
    """Every grant of the resources, its role's permissions resolved (the lock's `grants`)."""
    custom = custom_roles(resources)
    out = []
    for type_, name, props in resources:
        for role, member, cond in iam_grants(type_, props):
            if is_custom(role):
                perms = custom.get(role.rsplit("/", 1)[-1])
            else:
                perms = predefined(role)
            out.append(
                {
                    "resource": f"{type_} {logical(name)}",
                    "role": template(role, ctx),
                    "member": template(member, ctx),
                    "condition": template(cond, ctx) if cond else None,
                    "permissions": perms if perms is not None else "UNRESOLVED",
                }
            )
    return out


def roles_resolved(type_: str, props: Mapping[str, Any]) -> list[str]:
    """A predefined role granted must be one policy/roles.json defines (its permissions known)."""
    return [
        f"grants {role} to {member}: not in the pinned role definitions ({ROLES_SOURCE}), its permissions unknown"
        for role, member, _ in iam_grants(type_, props)
        if role and not is_custom(role) and predefined(role) is None
    ]

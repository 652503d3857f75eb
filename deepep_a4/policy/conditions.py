"""IAM conditions on Cloud Storage grants: a grant that writes objects is confined to the store's prefix.

A conditional grant's expression must be exactly `resource.name.startsWith("<literal>")`, the literal (CEL
string escapes decoded) `projects/_/buckets/<bucket>/objects/<prefix>/` with the declared prefix: the store
project's `deepep-a4-store:prefix` or the stack's `deepep-a4:artifactStore` path; when the pack is not handed
the config, any prefix of the validated form (/-separated parts of letters, digits, . _ -), never empty.
Anything else (`||`, a second call, a quote or backslash in the literal, a bare `/`) is refused: CEL is read,
not matched by substring. An unconditioned writer (objectCreator, objectAdmin, admin, legacy writer) on a
bucket is refused but on the stack's own results bucket (<namePrefix>-results-..., which only it uses).

CEL's grammar: https://github.com/google/cel-spec/blob/master/doc/langdef.md "String and Bytes Values"
(escapes \\\\ \\" \\' \\n \\r \\t \\xHH \\uHHHH ...); the resource name form of an object is Cloud Storage's
(https://cloud.google.com/storage/docs/access-control/iam#conditions).
"""

from __future__ import annotations

import json
import os
import re

from deepep_a4.policy.grants import iam_grants
from deepep_a4.policy.trust import Props

WRITE_ROLES = frozenset(
    {
        "roles/storage.objectCreator",
        "roles/storage.objectAdmin",
        "roles/storage.objectUser",
        "roles/storage.admin",
        "roles/storage.legacyBucketWriter",
        "roles/storage.legacyBucketOwner",
        "roles/storage.legacyObjectOwner",
    }
)
SEGMENT = r"[A-Za-z0-9._-]+"
PREFIX = re.compile(rf"{SEGMENT}(?:/{SEGMENT})*")
CALL = re.compile(r'\s*resource\.name\.startsWith\(\s*"((?:[^"\\]|\\.)*)"\s*\)\s*')
OBJECT = re.compile(r"projects/_/buckets/([a-z0-9][a-z0-9._-]*[a-z0-9])/objects/(.*)/")
ESCAPES = {"\\\\": "\\", '\\"': '"', "\\'": "'", "\\n": "\n", "\\r": "\r", "\\t": "\t", "\\/": "/"}
# components/gce/results.py bucket_name: <namePrefix>-results-<project or its digest>.
RESULTS_BUCKET = re.compile(r"[a-z0-9-]+-results-[a-z0-9-]+")


def cel_string(literal: str) -> str | None:
    """A CEL double-quoted literal's body decoded; None for an escape CEL does not define."""
    out, i = [], 0
    while i < len(literal):
        if literal[i] != "\\":
            out.append(literal[i])
            i += 1
            continue
        pair = literal[i : i + 2]
        if pair in ESCAPES:
            out.append(ESCAPES[pair])
            i += 2
        elif pair in ("\\x", "\\u", "\\U"):
            width = {"\\x": 2, "\\u": 4, "\\U": 8}[pair]
            digits = literal[i + 2 : i + 2 + width]
            if not re.fullmatch(rf"[0-9a-fA-F]{{{width}}}", digits):
                return None
            out.append(chr(int(digits, 16)))
            i += 2 + width
        else:
            return None
    return "".join(out)


def declared_prefix() -> str | None:
    """The store prefix of the config the Pulumi CLI hands the pack (PULUMI_CONFIG), if any."""
    try:
        config = json.loads(os.environ.get("PULUMI_CONFIG") or "{}")
    except ValueError:
        return None
    if "deepep-a4-store:project" in config:
        return str(config.get("deepep-a4-store:prefix") or "deepep-a4").strip("/")
    url = str(config.get("deepep-a4:artifactStore") or "")
    return url.removeprefix("gs://").partition("/")[2].strip("/") or None if url else None


def judge(expression: str, bucket: str | None, want: str | None) -> str | None:
    """Why the expression does not confine a grant to one prefix of one bucket; None when it does."""
    call = CALL.fullmatch(expression)
    if not call:
        return f'condition {expression!r} is not one resource.name.startsWith("...") call'
    path = cel_string(call.group(1))
    if path is None or any(c in path for c in '"\\') or any(ord(c) < 0x20 or ord(c) == 0x7F for c in path):
        return f"condition literal {call.group(1)!r} holds an escape, quote or control character"
    found = OBJECT.fullmatch(path)
    if not found or not PREFIX.fullmatch(found.group(2)):
        return f"condition {path!r} is not projects/_/buckets/BUCKET/objects/PREFIX/ with a non-empty prefix"
    if bucket and found.group(1) != bucket:
        return f"condition names bucket {found.group(1)}, the grant is on {bucket}"
    if want is not None and found.group(2) != want:
        return f"condition confines to {found.group(2)}/, the declared prefix is {want}/"
    return None


def storage_conditions(type_: str, props: Props) -> list[str]:
    if not type_.startswith("gcp:storage/"):
        return []
    bucket = props.get("bucket")
    bucket = bucket.removeprefix("b/") if isinstance(bucket, str) else None
    want = declared_prefix()
    problems = []
    for role, member, cond in iam_grants(type_, props):
        if cond is not None:
            why = judge(cond, bucket, want)
            if why:
                problems.append(f"grants {role} to {member} with an open condition: {why}")
        elif role in WRITE_ROLES and not (bucket and RESULTS_BUCKET.fullmatch(bucket)):
            problems.append(
                f"grants {role} to {member} on bucket {bucket or '?'} with no condition: confine it to the prefix"
            )
    return problems


RESOURCE_RULES = {
    "storage-conditions": (
        "Bucket grants that write are confined by a condition to the declared prefix, read as CEL.",
        storage_conditions,
    ),
}

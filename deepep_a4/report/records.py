"""The runner's JSON summary checked against its schema before any figure is read."""

from __future__ import annotations

from typing import Any

from scripts.bench import parse as bp

# -- runner JSON --------------------------------------------------------------------------------------

# What the report reads of a record besides its kind, by (test, kind): params and values that must be
# numbers. Other numbers it reads are optional (`values` must hold numbers only, `params` below).
REQUIRED_FIELDS: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {
    ("intranode", "sweep"): ((), ("nvl_bw",)),
    ("internode", "sweep"): (("nvl_chunk", "rdma_chunk"), ("rdma_bw",)),
    ("nccl", "nccl"): ((), ("busbw", "algbw")),
}
NUMERIC_PARAMS = ("sms", "nvl_chunk", "rdma_chunk", "size", "ranks")  # when present and not null
CHECK_FIELDS = ("check", "status", "detail")  # an evidence check (parse_records.evidence_checks)


def _is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _check_record(test: str, i: int, rec: Any) -> dict[str, Any]:
    """Record `i` of a runner JSON with its optional fields filled in, or ValueError saying what is wrong."""
    if not isinstance(rec, dict):
        raise ValueError(f"record {i} is a {type(rec).__name__}, not an object")
    kind = rec.get("kind")
    if not isinstance(kind, str) or not kind:
        raise ValueError(f"record {i} has no `kind`" if kind is None else f"record {i}: `kind` {kind!r} is not a name")
    where = f"record {i} ({kind})"
    for key in ("name", "dtype"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            raise ValueError(f"{where}: `{key}` must be a string or null, not {rec[key]!r}")
    rank = rec.get("rank")
    if rank is not None and (not isinstance(rank, int) or isinstance(rank, bool)):
        raise ValueError(f"{where}: `rank` must be an integer or null, not {rank!r}")
    params = rec.get("params", {})
    values = rec.get("values", {})
    for key, obj in (("params", params), ("values", values)):
        if not isinstance(obj, dict):
            raise ValueError(f"{where}: `{key}` must be an object, not {type(obj).__name__}")
    bad = [k for k, v in values.items() if not _is_number(v)]
    if bad:
        raise ValueError(f"{where}: values.{bad[0]} must be a number, not {values[bad[0]]!r}")
    bad = [k for k in NUMERIC_PARAMS if params.get(k) is not None and not _is_number(params[k])]
    if bad:
        raise ValueError(f"{where}: params.{bad[0]} must be a number, not {params[bad[0]]!r}")
    need_params, need_values = REQUIRED_FIELDS.get((test, kind), ((), ()))
    missing = [f"params.{k}" for k in need_params if params.get(k) is None]
    missing += [f"values.{k}" for k in need_values if k not in values]
    if missing:
        raise ValueError(f"{where} lacks {', '.join(missing)}")
    return {**rec, "name": rec.get("name"), "dtype": rec.get("dtype"), "rank": rank, "params": params, "values": values}


def check_runner_doc(doc: dict[str, Any]) -> dict[str, Any]:
    """A runner <test>.json with its records checked and completed, or ValueError saying what is wrong."""
    test = doc.get("test")
    if test not in bp.TESTS:
        raise ValueError(f"`test` is {test!r}, not one of {', '.join(bp.TESTS)}")
    status = doc.get("status", "failed")
    if not isinstance(status, str):
        raise ValueError(f"`status` must be a string such as 'passed', not {status!r}")
    problems = doc.get("problems", [])
    if not isinstance(problems, list) or not all(isinstance(p, str) for p in problems):
        raise ValueError(f"`problems` must be a list of strings, not {problems!r}"[:200])
    records = doc.get("records")
    if not isinstance(records, list):
        raise ValueError(f"`records` must be a list of records, not {type(records).__name__}")
    checked = [_check_record(test, i, r) for i, r in enumerate(records)]
    for key in ("begin", "end"):  # the runner's markers: where it ran and the evidence around the test
        if doc.get(key) is not None and not isinstance(doc[key], dict):
            raise ValueError(f"`{key}` must be an object (the runner's {key} marker), not {doc[key]!r}"[:200])
    checks = doc.get("checks")
    if checks is not None and not (
        isinstance(checks, list)
        and all(isinstance(c, dict) and all(isinstance(c.get(k), str) for k in CHECK_FIELDS) for c in checks)
    ):
        raise ValueError(f"`checks` must be a list of {{{', '.join(CHECK_FIELDS)}}} strings, not {checks!r}"[:200])
    return {**doc, "test": test, "status": status, "problems": problems, "records": checked}


def skip_text(what: str, why: str) -> str:
    return f"skipping {what}: {why} (not a usable runner result: re-run the test, or remove the file)"

"""Offline Kubernetes schema validation of the manifests an offline plan rendered.

    python ci/gates/k8s_schemas.py build/plan/STACK [build/plan/OTHER ...]

For each plan folder it takes the Kubernetes minor the plan's cluster gets (its `minMasterVersion` in
plan.json: a pinned `gkeVersion`, or the version the deploy chooses from the release channel, which the
offline plan mocks: deepep_a4/plan/engine.py) and validates every document of `files/k8s/*.yaml`
strictly (unknown fields are errors, as the API server's strict field validation
makes them): built-in kinds against the schemas kubernetes-validate ships for that minor, the GKE
networking custom resources against schemas/networking.gke.io/*.json (their source is in each
file's `$comment`). A kind with no schema is an error, never a skip. Exit 1 on any problem.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import yaml
from kubernetes_validate.utils import ValidationError as KvValidationError
from referencing import Registry, Resource

ROOT = Path(__file__).resolve().parents[2]
SCHEMAS = ROOT / "schemas"
CLUSTER_TYPE = "gcp:container/cluster:Cluster"


@dataclass(frozen=True)
class Problem:
    file: str
    doc: str
    message: str

    def __str__(self) -> str:
        return f"{self.file}: {self.doc}: {self.message}"


def plan_minor(plan_dir: Path) -> str | None:
    """The Kubernetes minor of the plan's GKE cluster, e.g. '1.36' for minMasterVersion 1.36.4-gke.1221000;
    None when the plan has no cluster (a GCE stack). A cluster without a version is an error, never a guess."""
    doc = json.loads((plan_dir / "plan.json").read_text())
    clusters = [r for r in doc.get("resources", []) if r.get("type") == CLUSTER_TYPE]
    if not clusters:
        return None
    version = str(clusters[0].get("inputs", {}).get("minMasterVersion") or "")
    parts = version.split(".")
    if len(parts) < 2 or not (parts[0].isdigit() and parts[1].isdigit()):
        raise SystemExit(f"{plan_dir}: the GKE cluster's minMasterVersion {version!r} names no Kubernetes minor")
    return f"{parts[0]}.{parts[1]}"


def _definitions(minor: str) -> Resource:
    """kubernetes-validate's ObjectMeta & co. for `minor`: the custom resources' metadata refers to them."""
    base = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
    folder = base / f"v{minor}.0-local-strict"
    if not folder.is_dir():
        raise SystemExit(f"kubernetes-validate {kubernetes_validate.__version__} has no schemas for Kubernetes {minor}")
    return Resource.from_contents(json.loads((folder / "_definitions.json").read_text()))


def custom_schema(api_version: str, kind: str) -> dict[str, Any] | None:
    if "/" not in api_version:
        return None
    group, version = api_version.split("/", 1)
    path = SCHEMAS / group / f"{kind.lower()}-{version}.json"
    return json.loads(path.read_text()) if path.exists() else None


def _where(err: jsonschema.ValidationError) -> str:
    return ".".join(str(p) for p in err.absolute_path) or "(top)"


def validate_doc(doc: dict[str, Any], minor: str, definitions: Resource) -> list[str]:
    """Every schema error of one manifest, as 'path: message'."""
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return ["apiVersion and kind must both be set"]
    schema = custom_schema(api_version, kind)
    if schema is not None:
        registry = Registry().with_resource(definitions.id() or "", definitions)
        validator = jsonschema.Draft202012Validator(schema, registry=registry)
        errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
        return [f"{_where(e)}: {e.message}" for e in errors]
    try:
        kubernetes_validate.validate(doc, f"{minor}.0", strict=True)
    except KvValidationError as err:
        return [f"{_where(err)}: {err.message}"]
    except kubernetes_validate.SchemaNotFoundError:
        return [f"no schema for {kind} {api_version} in Kubernetes {minor} nor in schemas/"]
    return []


def validate_plan(plan_dir: Path) -> tuple[str | None, int, list[Problem]]:
    """(Kubernetes minor, documents checked, problems) for one plan folder."""
    minor = plan_minor(plan_dir)
    manifests = sorted((plan_dir / "files" / "k8s").glob("*.yaml"))
    if minor is None:
        rel = str(plan_dir)
        return None, 0, [Problem(rel, "-", "Kubernetes manifests but no GKE cluster in plan.json")] if manifests else []
    definitions = _definitions(minor)
    count, problems = 0, []
    for path in manifests:
        rel = str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if d is not None]
        except yaml.YAMLError as err:
            problems.append(Problem(rel, "-", f"not YAML: {err}"))
            continue
        for doc in docs:
            count += 1
            name = f"{doc.get('kind', '?')}/{(doc.get('metadata') or {}).get('name', '?')}"
            problems += [Problem(rel, name, msg) for msg in validate_doc(doc, minor, definitions)]
    return minor, count, problems


def main(argv: list[str]) -> int:
    if not argv:
        print((__doc__ or "").strip().splitlines()[2], file=sys.stderr)
        return 2
    total, failed = 0, []
    for arg in argv:
        plan_dir = Path(arg)
        if not plan_dir.is_dir():
            failed.append(Problem(arg, "-", "no such plan folder"))
            continue
        minor, count, problems = validate_plan(plan_dir)
        where = f"Kubernetes {minor}" if minor else "no GKE cluster"
        print(f"{plan_dir.name}: {where}, {count} manifests, {len(problems)} problems")
        total += count
        failed += problems
    for p in failed:
        print(f"  {p}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))

"""The offline plan imports only the provider modules the program uses (deepep_a4/plan/provider_imports.py).

Python's rule for `from .module import *` in a package's `__init__.py` (docs.python.org/3/reference/
simple_stmts.html#the-import-statement): the names bound are those of the module's `__all__`, in statement
order, a later statement rebinding a name. A thin package must answer every name exactly as the real package
does after its `__init__.py` ran: the same object, not a copy, so that pulumi registers the same types.
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from deepep_a4.plan import command as plan
from deepep_a4.plan import engine as plan_engine
from deepep_a4.plan import provider_imports
from tests.conftest import ROOT
from tests.conftest import plan as run_plan

# For each package: every name of the thin index against what the real __init__.py binds to it, after a name
# in no index made the thin package load the whole package (the fallback).
CHECK_INDEX = """
import importlib, json, sys
from pathlib import Path
from deepep_a4.plan import provider_imports as p
p.install()
report = {}
for name in sys.argv[1:]:
    thin = sys.modules[name]
    index = p._index(Path(thin.__path__[0]))
    picked = {n: getattr(importlib.import_module(f"{name}.{m}"), n) for n, m in index.items()}
    try:
        getattr(thin, "NoSuchThing")
        missing = False
    except AttributeError:
        missing = True
    wrong = [n for n, obj in picked.items() if getattr(thin, n) is not obj]
    report[name] = {"names": len(index), "wrong": wrong[:5], "whole": thin._whole, "missing": missing}
print(json.dumps(report))
"""


def test_every_name_of_a_thin_package_is_the_object_the_real_package_binds() -> None:
    packages = ["pulumi_gcp.compute", "pulumi_kubernetes.core.v1"]
    out = subprocess.run(
        [sys.executable, "-c", CHECK_INDEX, *packages], capture_output=True, text=True, cwd=ROOT, check=True
    )
    report = json.loads(out.stdout)
    for name in packages:
        got = report[name]
        assert got["names"] > 100 and got["wrong"] == [] and got["whole"] and got["missing"], (name, got)


def test_a_plan_uses_the_providers_own_classes_and_writes_the_documents_yaml_safe_dump_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The program's classes come from their own modules, with no whole package loaded. libyaml's emitter folds
    long quoted strings differently from PyYAML's, so the text may differ; the documents kubectl and the
    provider read must not."""
    result = run_plan("gke-b200-ubuntu")
    compute = sys.modules["pulumi_gcp.compute"]
    if isinstance(compute, provider_imports.ThinPackage):  # not when an earlier test loaded the real one first
        assert not compute._whole, "a name the index did not answer loaded all of pulumi_gcp.compute"
        assert compute.Network is sys.modules["pulumi_gcp.compute.network"].Network
    files = plan.kubernetes_manifests(result.resources)
    assert yaml.__with_libyaml__, "PyYAML without libyaml: the plan uses the pure-Python emitter"
    monkeypatch.delattr(yaml, "CSafeDumper")
    python_files = plan.kubernetes_manifests(result.resources)
    assert len(files) > 20 and files.keys() == python_files.keys()
    for rel, text in files.items():
        assert yaml.safe_load(text) == yaml.safe_load(python_files[rel]), rel


def test_a_plan_in_process_leaves_the_collector_as_it_found_it(tmp_path: Path) -> None:
    assert gc.isenabled()
    assert plan.main(["--stack", "gce-b200", "--out", str(tmp_path / "p"), "--quiet"]) == 0
    assert gc.isenabled()


def test_source_positions_are_skipped_only_while_the_program_runs() -> None:
    """pulumi's _get_stack_trace (pulumi/runtime/resource.py) feeds RegisterResourceRequest.sourcePosition, which
    the mock monitor drops; outside the plan pulumi's own function is back."""
    from pulumi.runtime import resource as pulumi_resource

    real = pulumi_resource._get_stack_trace  # type: ignore[attr-defined]
    with plan_engine.no_source_positions():
        assert pulumi_resource._get_stack_trace is not real  # type: ignore[attr-defined]
        assert list(pulumi_resource._get_stack_trace().frames) == []  # type: ignore[attr-defined]
    assert pulumi_resource._get_stack_trace is real  # type: ignore[attr-defined]

"""The tree's rules: no import cycle, dependencies one way (deepep_a4 -> components -> scripts), and our
packages come from this checkout, never from another distribution of the same name."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

import components
import deepep_a4
import scripts
from deepep_a4 import paths

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("deepep_a4", "components", "scripts")


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    # Imports under `if TYPE_CHECKING:` count: a cycle there is still a cycle for a reader and for pyright.
    return grimp.build_graph(*PACKAGES, include_external_packages=False, exclude_type_checking_imports=False)


def cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each a cycle or several."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            group = [stack.pop()]
            while group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                found.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_the_graph_holds_every_package(graph: grimp.ImportGraph) -> None:
    assert {"deepep_a4.report.analysis", "components.config", "scripts.bench.parse"} <= graph.modules


def test_no_import_cycle_type_checking_imports_included(graph: grimp.ImportGraph) -> None:
    assert cycles(graph) == []


def test_a_type_checking_cycle_is_found() -> None:
    g = grimp.ImportGraph()
    for module in ("p", "p.a", "p.b"):
        g.add_module(module)
    g.add_import(importer="p.a", imported="p.b")
    g.add_import(importer="p.b", imported="p.a")  # what `if TYPE_CHECKING: from p.a import X` in p.b gives
    assert cycles(g) == [["p.a", "p.b"]]


@pytest.mark.parametrize(
    ("importer", "imported"), [("scripts", "components"), ("scripts", "deepep_a4"), ("components", "deepep_a4")]
)
def test_dependencies_run_one_way(graph: grimp.ImportGraph, importer: str, imported: str) -> None:
    chains = graph.find_shortest_chains(importer=importer, imported=imported, as_packages=True)
    assert chains == set(), f"{importer} imports {imported}: " + "; ".join(" -> ".join(c) for c in sorted(chains))


@pytest.mark.parametrize("package", [components, scripts, deepep_a4])
def test_packages_come_from_this_checkout(package: object) -> None:
    # The editable install's finder comes after site-packages: a foreign `components` would win there.
    assert Path(str(getattr(package, "__file__", ""))).resolve().parent.parent == ROOT
    assert paths.foreign_packages() == []


def _fake_components(tmp_path: Path) -> dict[str, str]:
    (tmp_path / "fake" / "components").mkdir(parents=True)
    (tmp_path / "fake" / "components" / "__init__.py").write_text("")
    return {**os.environ, "PYTHONPATH": f"{tmp_path / 'fake'}{os.pathsep}{ROOT}"}


def test_the_cli_refuses_a_foreign_components_package_in_one_line(tmp_path: Path) -> None:
    env = _fake_components(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "deepep_a4.cli", "--help"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert proc.returncode != 0 and proc.stdout == ""
    assert proc.stderr.strip().splitlines() == [
        f"error: Python imports components from {tmp_path / 'fake' / 'components'}, not the deepep-a4 project's "
        f"({ROOT}): another package of that name is installed; uninstall it or use a venv of its own"
    ]


def test_the_pulumi_program_refuses_a_foreign_components_package(tmp_path: Path) -> None:
    env = _fake_components(tmp_path)
    # run_path, as the language host does, without putting the project folder first on sys.path.
    run = f"import runpy; runpy.run_path({str(ROOT / '__main__.py')!r})"
    proc = subprocess.run([sys.executable, "-c", run], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert proc.returncode != 0
    assert f"package components is imported from {tmp_path / 'fake' / 'components'}, not from this project" in (
        proc.stderr
    )


MAX_MODULE_LINES = 450


def test_every_module_outside_tests_reads_in_one_sitting() -> None:
    tracked = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "*.py"], cwd=ROOT, capture_output=True)
    files = [f for f in tracked.stdout.decode().split() if not f.startswith("tests/")] or [
        str(p.relative_to(ROOT)) for d in ("components", "scripts", "deepep_a4") for p in (ROOT / d).rglob("*.py")
    ]
    long = {f: n for f in files if (n := len((ROOT / f).read_text().splitlines())) > MAX_MODULE_LINES}
    assert not long, f"split these by responsibility (at most {MAX_MODULE_LINES} lines): {long}"

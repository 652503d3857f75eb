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


# deepep_a4/ by command (issue 46): a subpackage per command family; at the root only what commands share.
SHARED_ROOT = {"__init__", "cli", "options", "paths", "stackfile", "schema", "cost", "timeline", "expected_times"}
COMMANDS = ("plan", "store", "run", "rehearse", "capacity", "bringup", "hwtest", "report", "policy")
SHARED_PACKAGES = ("engine", "cloud")  # the Pulumi engine's config pipeline; Google's reads (capacity, rehearse)
# A command reaches another command's module only through these, each the one face it offers (what, and why):
PUBLIC = {
    "deepep_a4.plan.engine": "the program under Pulumi's mocks: the policy locks, the rehearsal and store build plan",
    "deepep_a4.store.estimate": "the store's cost and time, printed in the plan",
    "deepep_a4.store.sources": "the store's sources and local store: hwtest fills its own",
    "deepep_a4.store.fill": "run fills or builds a store that has no pinned manifest",
    "deepep_a4.store.remote": "the rehearsal's Cloud Build probe submits as the store build does",
    "deepep_a4.store.gcs": "report reads results from a bucket as the store does",
    "deepep_a4.run.platforms": "the Automation API stack and the platforms' probes (capacity, rehearse)",
    "deepep_a4.run.preflight": "the rehearsal checks the CLI as run does",
    "deepep_a4.rehearse.gate": "run rehearses first",
    "deepep_a4.rehearse.estimate": "the rehearsal's cost and time, printed in the plan",
    "deepep_a4.capacity.models": "cost per provisioning model, printed in the plan",
    "deepep_a4.capacity.run_hooks": "run's capacity fallback and preemption watchdog",
    "deepep_a4.report": "run writes the report",
}


def test_deepep_a4s_root_holds_only_what_commands_share() -> None:
    root = ROOT / "deepep_a4"
    modules = {p.stem for p in root.glob("*.py")}
    assert modules == SHARED_ROOT, f"a module of one command at deepep_a4's root: {sorted(modules - SHARED_ROOT)}"
    packages = {p.name for p in root.iterdir() if (p / "__init__.py").is_file()}
    assert packages == set(COMMANDS) | set(SHARED_PACKAGES)


def prefix_groups(folder: Path) -> list[list[str]]:
    """Files of one folder that share a first word (`store.py`, `store_build.py`; `test_plan_x.py`,
    `test_plan_y.py`): a prefix doing a folder's job."""
    groups: dict[str, list[str]] = {}
    for p in sorted(folder.iterdir()):
        if p.suffix not in (".py", ".sh") or p.name == "__init__.py":
            continue
        stem = p.stem.removeprefix("test_")
        groups.setdefault(stem.split("_")[0], []).append(p.name)
    return [names for names in groups.values() if len(names) > 1]


# scripts/bench's parse*.py ship to the nodes by name (the runner), so renaming them changes every plan; the
# rehearsal's probe_*.py are mounted by name from one ConfigMap key each (scripts/rehearse/seams.py PROBE_FILES).
PREFIX_GROUPS_KEPT = {
    ("scripts/bench", "parse"),
    ("tests/scripts/bench", "parse"),
    ("scripts/rehearse", "probe"),
    ("tests/scripts/rehearse", "probe"),
}


def test_no_prefix_groups() -> None:
    found = []
    for top in ("deepep_a4", "components", "scripts", "tests"):
        for folder in [ROOT / top, *sorted(p for p in (ROOT / top).rglob("*") if p.is_dir())]:
            if "__pycache__" in folder.parts or "fixtures" in folder.parts:
                continue
            rel = folder.relative_to(ROOT).as_posix()
            for names in prefix_groups(folder):
                word = names[0].removeprefix("test_").split("_")[0].split(".")[0]
                if (rel, word) not in PREFIX_GROUPS_KEPT:
                    found.append(f"{rel}: {names}")
    assert not found, found


def test_a_command_reaches_another_only_through_its_public_face(graph: grimp.ImportGraph) -> None:
    families = set(COMMANDS) | set(SHARED_PACKAGES)
    found = []
    for module in sorted(graph.modules):
        parts = module.split(".")
        if parts[0] != "deepep_a4" or len(parts) < 2 or parts[1] not in COMMANDS:
            continue
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            ip = imported.split(".")
            if len(ip) < 2 or ip[1] not in families or ip[1] == parts[1] or ip[1] in SHARED_PACKAGES:
                continue
            if imported not in PUBLIC and ".".join(ip[:2]) not in PUBLIC:
                found.append(f"{module} -> {imported}")
    assert not found, found

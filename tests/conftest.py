"""Shared helpers: run the real program under mocks with a stack file plus overrides.

The default stack is the host-install one (the field reports' path) that most component tests describe; the
supported profile's stacks are named where a test is about them (tests/components/test_node_profile.py)."""

from __future__ import annotations

import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Protocol

import pytest

from deepep_a4.plan import engine as plan_engine

ROOT = Path(__file__).resolve().parent.parent

# The longest tests (tens of seconds each on a 2-core machine), started first: with `-n auto` a long test
# that starts last keeps one worker busy while the others wait (ci/test.sh, docs/development.md). Node id
# prefixes, longest first; an entry that no longer matches only loses its head start.
START_FIRST = (
    "tests/test_user_stack.py::test_the_checks_that_walk_stacks_pass_with_a_users_stack",
    "tests/deepep_a4/store/test_sources.py::test_artifact_keys_follow_what_made_the_bytes_and_nothing_else",
    "tests/components/gce/test_fleet.py::test_plan_of_64_vms_is_fast_and_grows_linearly",
    "tests/docs/test_pages.py::test_every_deepep_a4_command_in_the_docs_names_a_real_subcommand_and_flags",
    "tests/deepep_a4/plan/test_command.py::test_plan_of_every_stack_writes_plan_json",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    def rank(item: pytest.Item) -> int:
        return next((i for i, prefix in enumerate(START_FIRST) if item.nodeid.startswith(prefix)), len(START_FIRST))

    items.sort(key=rank)  # stable: the rest keep their order


def stack_config(stack: str = "gke-b200-ubuntu", **overrides: Any) -> dict[str, Any]:
    """The stack file's config with `overrides` (keys without namespace) applied."""
    cfg = plan_engine.read_stack_config(stack)
    cfg.update({f"deepep-a4:{k}": v for k, v in overrides.items()})
    return cfg


def plan(stack: str = "gke-b200-ubuntu", **overrides: Any) -> plan_engine.PlanResult:
    """Runs __main__.py under mocks and returns every registered resource with its inputs."""
    result, _ = plan_engine.run_program(stack, stack_config(stack, **overrides))
    return result


def of_type(result: plan_engine.PlanResult, type_token: str) -> list[dict[str, Any]]:
    return [r for r in result.resources if r["type"] == type_token]


def one(result: plan_engine.PlanResult, type_token: str, name: str | None = None) -> dict[str, Any]:
    found = [r for r in of_type(result, type_token) if name is None or r["name"] == name]
    assert len(found) == 1, f"expected one {type_token} {name or ''}, found {[r['name'] for r in found]}"
    return found[0]


class PlanCommand(Protocol):
    """`python -m MODULE ARGS... --out OUT` -> (the finished process, its seconds)."""

    def __call__(
        self, module: str, *args: str, out: Path, timeout: int = 120
    ) -> tuple[subprocess.CompletedProcess[str], float]: ...


@pytest.fixture(scope="session")
def plan_command(tmp_path_factory: pytest.TempPathFactory, pytestconfig: pytest.Config) -> PlanCommand:
    """The offline plan as a user runs it, a subprocess: `python -m MODULE ARGS... --out OUT` in the project
    folder. Tests that check different things of the same command line share one run of it per test session
    (a gke plan is seconds of CPU): each gets that run's exit code, output and time, and its own copy of the
    files under the OUT it names (the output names OUT, as it would have). The xdist workers of one session
    share the runs through a folder of that session and a lock per command line."""
    # Each xdist worker's basetemp is a folder of the session's basetemp (what xdist advises for sharing).
    shared = tmp_path_factory.getbasetemp()
    if hasattr(pytestconfig, "workerinput"):  # an xdist worker (not a pytest that merely inherited its env)
        shared = shared.parent
    runs = shared / "plan-runs"

    def run(module: str, *args: str, out: Path, timeout: int = 120) -> tuple[subprocess.CompletedProcess[str], float]:
        cmd = [sys.executable, "-m", module, *args]
        slot = runs / hashlib.sha256(json.dumps([str(ROOT), *cmd]).encode()).hexdigest()[:16]
        slot.mkdir(parents=True, exist_ok=True)
        with (slot / "lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            if not (slot / "run.json").exists():
                started = time.monotonic()
                proc = subprocess.run(
                    [*cmd, "--out", str(slot / "out")],
                    cwd=ROOT,
                    capture_output=True,
                    text=True,
                    timeout=timeout,
                    check=False,
                )
                took = time.monotonic() - started
                done = {"returncode": proc.returncode, "stdout": proc.stdout, "stderr": proc.stderr, "seconds": took}
                (slot / "run.json").write_text(json.dumps(done))
        done = json.loads((slot / "run.json").read_text())
        if (slot / "out").exists():
            shutil.copytree(slot / "out", out, symlinks=True, dirs_exist_ok=True)
        said = {k: done[k].replace(str(slot / "out"), str(out)) for k in ("stdout", "stderr")}
        proc = subprocess.CompletedProcess([*cmd, "--out", str(out)], done["returncode"], **said)
        return proc, done["seconds"]

    return run

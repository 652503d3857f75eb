"""A stack file the user adds to stacks/ breaks no test and no CI gate: the checks that walk stacks/ run in a
copy of the project that holds one more stack, a copy of the GKE example with only its project changed."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# Every test that reads the set of stacks in stacks/ (parametrized over it, or naming it in a message),
# selected for the new stack where it is parametrized.
STACK_WALKERS = [
    "tests/components/config/test_config.py::test_every_stack_file_validates",
    "tests/deepep_a4/plan/test_command.py::test_plan_of_every_stack_writes_plan_json",
    "tests/deepep_a4/test_results.py::test_unknown_stack_lists_the_available_ones",
    "tests/deepep_a4/test_results.py::test_a_known_stack_is_not_refused",
    "tests/test_readme.py",
    "tests/docs/test_pages.py",
]


def project_copy(dest: Path) -> Path:
    """The checkout's files (tracked, and new ones git does not ignore) under dest, with the shared venv."""
    listed = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        src = ROOT / rel
        if rel.startswith(".venv") or not src.is_file():
            continue
        (dest / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(src, dest / rel)
    return dest


@pytest.fixture(scope="module")
def with_user_stack(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (ROOT / ".git").exists():  # pragma: no cover - a source tarball without git
        pytest.skip("not a git checkout")
    dest = project_copy(tmp_path_factory.mktemp("project"))
    example = (dest / "stacks" / "Pulumi.gke-b200.yaml").read_text()
    (dest / "stacks" / "Pulumi.mine.yaml").write_text(example.replace("deepep-a4-demo", "my-own-project-4711"))
    return dest


def test_the_copy_holds_the_extra_stack(with_user_stack: Path) -> None:
    names = sorted(p.name for p in (with_user_stack / "stacks").glob("Pulumi.*.yaml"))
    assert "Pulumi.mine.yaml" in names and len(names) == len(list((ROOT / "stacks").glob("Pulumi.*.yaml"))) + 1


def test_the_checks_that_walk_stacks_pass_with_a_users_stack(with_user_stack: Path) -> None:
    env = {**os.environ, "PYTHONPATH": str(with_user_stack)}
    selected = [t if "::test_plan_of_every_stack" not in t else f"{t}[mine]" for t in STACK_WALKERS]
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-x", "-p", "no:cacheprovider", *selected],
        cwd=with_user_stack,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert " passed" in proc.stdout.splitlines()[-1]


def test_no_test_names_the_exact_set_of_stacks() -> None:
    # A comparison against exactly the example stacks fails for anyone who adds a stack of their own.
    pattern = ("{'gke-b200', 'gce-b200'}", '{"gke-b200", "gce-b200"}', '{"gce-b200", "gke-b200"}')
    for path in (ROOT / "tests").rglob("*.py"):
        text = path.read_text()
        if path.name == "test_user_stack.py":
            continue
        assert not any(f"== {p}" in text or f"{p} ==" in text for p in pattern), path
        assert "(stacks: gce-b200, gke-b200)" not in text, path

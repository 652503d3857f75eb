"""Where the package's own files are, and where the user's Pulumi project is.

The package is installed (editable or not), so nothing imports through a path on sys.path; the stack
files belong to the project folder the user runs the command in (the folder with Pulumi.yaml), not to
the package.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_FILE = "Pulumi.yaml"
# Installed next to deepep_a4 (one checkout, or one site-packages for a wheel). An editable install's finder
# comes after site-packages, so another distribution's `components` or `scripts` would win silently.
SIBLING_PACKAGES = ("components", "scripts")


def project_root(start: Path | None = None) -> Path:
    """The folder of the deepep-a4 Pulumi project: the nearest Pulumi.yaml at or above `start` (default:
    the working directory), else the checkout the package was installed from."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / PROJECT_FILE).is_file() and (folder / "stacks").is_dir():
            return folder
    return PACKAGE_DIR.parent


def stacks_dir(root: Path | None = None) -> Path:
    return (root or project_root()) / "stacks"


def _origin(name: str) -> str | None:
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__file__", None)
    spec = importlib.util.find_spec(name)  # a top-level name: found, not executed
    return spec.origin if spec else None


def foreign_packages(home: Path | None = None) -> list[str]:
    """Each sibling package that Python takes from somewhere other than `home` (default: where deepep_a4 is)."""
    home = (home or PACKAGE_DIR.parent).resolve()
    wrong = []
    for name in SIBLING_PACKAGES:
        origin = _origin(name)
        if origin is None or Path(origin).resolve().parent.parent != home:
            wrong.append(f"{name} from {Path(origin).parent if origin else 'nowhere'}")
    return wrong


def refuse_foreign_packages() -> None:
    """Stops with one line when another distribution's package shadows ours."""
    if wrong := foreign_packages():
        raise SystemExit(
            f"error: Python imports {', '.join(wrong)}, not the deepep-a4 project's ({PACKAGE_DIR.parent}): "
            "another package of that name is installed; uninstall it or use a venv of its own"
        )

"""Where the package's own files are, and where the user's Pulumi project is.

The package is installed (editable or not), so nothing imports through a path on sys.path; the stack
files belong to the project folder the user runs the command in (the folder with Pulumi.yaml), not to
the package.
"""

from __future__ import annotations

from pathlib import Path

PACKAGE_DIR = Path(__file__).resolve().parent
PROJECT_FILE = "Pulumi.yaml"


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

"""Click options that several `deepep-a4` commands declare the same way (a folder, a choice)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import click


def folder(*decls: str, help: str, exists: bool = False, **kw: Any) -> Callable[[Any], Any]:
    """A folder option, passed on as a Path (`exists`: it must be there already)."""
    return click.option(*decls, type=click.Path(exists=exists, file_okay=False, path_type=Path), help=help, **kw)


def choice(decl: str, choices: Sequence[str], default: str, help: str) -> Callable[[Any], Any]:
    """One of `choices`, the default shown in --help."""
    return click.option(decl, type=click.Choice(list(choices)), default=default, show_default=True, help=help)


def exit_status(command: click.Command, argv: list[str] | None, prog_name: str, **kw: Any) -> int:
    """Runs a click command as a function: its exit status, returned instead of raised."""
    try:
        command.main(args=argv, prog_name=prog_name, **kw)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    return 0

"""What `run` needs of a stack and of a platform's probe: the Automation API's calls and the platform's answers,
each a Protocol so that the tests hand in fakes (command.py)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from deepep_a4.run.platforms import Progress
from deepep_a4.timeline import NodeTimeline


class StackOps(Protocol):
    """The Automation API calls the run makes (a fake in tests)."""

    name: str

    def preview(self, on_output: Callable[[str], Any]) -> None: ...

    def up(self, on_output: Callable[[str], Any]) -> None: ...

    def outputs(self) -> dict[str, Any]: ...

    def destroy(self, on_output: Callable[[str], Any]) -> None: ...


class Probe(Protocol):
    """Asks the platform how far the nodes are (a fake in tests)."""

    def installed(self, outputs: dict[str, Any]) -> Progress: ...

    def benchmarks(self, outputs: dict[str, Any]) -> Progress: ...

    def collect(self, outputs: dict[str, Any], out: Path) -> int: ...

    def timeline(self, outputs: dict[str, Any], resources: list[dict[str, Any]]) -> list[NodeTimeline]: ...

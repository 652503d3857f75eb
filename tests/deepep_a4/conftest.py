"""`deepep-a4 run` rehearses first (deepep_a4/rehearse/gate.py); the run tests here drive `run` with fakes of
Pulumi and the platform, so their rehearsal is a fake that passes unless a test names its own."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def rehearsal_passed(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> None:
    if "rehearse" in request.node.nodeid:  # tests/deepep_a4/rehearse/: the gate itself
        return
    from deepep_a4.rehearse import gate

    monkeypatch.setattr(gate.checklists, "passed", lambda *args, **kwargs: True)

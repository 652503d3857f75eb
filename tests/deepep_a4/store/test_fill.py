"""`deepep-a4 run` with a store and no pinned manifest (deepep_a4/store/fill.py, docs/store.md): it asks
(or takes --build-store), builds, shows the manifest, pins it through the stack's config, then goes on to `up`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click
import pytest

from components import config
from deepep_a4 import stackfile
from deepep_a4.run import command as rb
from deepep_a4.store import fill as store_fill
from tests.conftest import ROOT
from tests.deepep_a4.run.test_command import FakeProbe, FakeStack, ready, run


@pytest.fixture(autouse=True)
def no_preflight(monkeypatch: pytest.MonkeyPatch) -> None:
    """The checks before anything is created are tests/deepep_a4/run/test_preflight.py's, on a stand-in CLI."""
    monkeypatch.setattr(rb.run_preflight, "check", lambda *args, **kwargs: [])


STORE = "gs://my-own-project-artifacts/deepep-a4"
SHA = "c" * 64
MANIFEST = f"{'d' * 64}  userspace/python/k.tar.gz\n"


def raw(store: str = STORE, manifest: str = "") -> dict[str, Any]:
    keys = stackfile.read("gce-b200", ROOT)
    return keys | {"deepep-a4:artifactStore": store, "deepep-a4:artifactStoreManifest": manifest}


def cfg_with(**kw: str) -> config.StackConfig:
    return config.parse(stackfile.project_keys(raw(**kw)), "gce-b200")


class PinningStack(FakeStack):
    def __init__(self, calls: list[str], keys: dict[str, Any]):
        super().__init__(calls)
        self.keys = keys

    def raw_config(self) -> dict[str, Any]:
        return dict(self.keys)

    def set_config(self, key: str, value: str) -> None:
        self.calls.append(f"set {key}={value}")
        self.keys[key] = value


def builder(calls: list[str]) -> store_fill.Builder:
    def build(cfg: config.StackConfig) -> tuple[str, str]:
        calls.append(f"build {cfg.installer.store_url}")
        return SHA, MANIFEST

    return build


@pytest.mark.parametrize("kw", [{"store": ""}, {"manifest": "e" * 64}])
def test_nothing_to_do_without_a_store_or_with_a_pinned_manifest(kw: dict[str, str]) -> None:
    calls: list[str] = []
    got = store_fill.fill_and_pin("gce-b200", cfg_with(**kw), None, False, input, calls.append, False, builder(calls))
    assert got is None and calls == []


def test_without_a_terminal_and_without_the_flag_it_refuses_in_one_line() -> None:
    calls: list[str] = []
    got = store_fill.fill_and_pin("gce-b200", cfg_with(), None, False, input, calls.append, False, builder(calls))
    assert got is not None and "\n" not in got and "--build-store" in got and "deepep-a4 store build" in got
    assert calls == []  # nothing built, nothing billed


@pytest.mark.parametrize(("answer", "builds"), [("", False), ("n", False), ("y", True), ("yes", True)])
def test_on_a_terminal_it_asks_first_with_the_price(answer: str, builds: bool) -> None:
    calls: list[str] = []
    stack = PinningStack(calls, raw())
    asked: list[str] = []

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return answer

    got = store_fill.fill_and_pin("gce-b200", cfg_with(), stack, False, ask, calls.append, True, builder(calls))
    assert asked == ["build the store now and pin its manifest? [y/N] "]
    assert any("USD" in c and "ESTIMATE" in c for c in calls)  # the price and time before the question
    assert (got is None) == builds
    assert (f"set {store_fill.MANIFEST_KEY}={SHA}" in calls) == builds


def test_the_flag_builds_shows_the_manifest_and_pins_it_before_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls: list[str] = []
    stack = PinningStack(calls, raw())
    probe = FakeProbe(calls, [ready(2)], [ready(2)])
    monkeypatch.setattr(store_fill, "default_builder", builder(calls))
    rc, said, _ = run(["--build-store", "--keep", "--out", str(tmp_path / "report")], calls, probe, stack=stack)
    assert rc == rb.EXIT_PASS, said
    assert calls.index(f"build {STORE}") < calls.index(f"set {store_fill.MANIFEST_KEY}={SHA}") < calls.index("up")
    assert f"  {MANIFEST.strip()}" in said  # the user sees what is pinned
    assert stack.keys[store_fill.MANIFEST_KEY] == SHA


def test_a_failed_build_pins_nothing_and_says_so_in_one_line() -> None:
    calls: list[str] = []
    stack = PinningStack(calls, raw())

    def failing(cfg: config.StackConfig) -> tuple[str, str]:
        raise click.ClickException("Cloud Build b-1 ended FAILURE: step build exited 1")

    got = store_fill.fill_and_pin("gce-b200", cfg_with(), stack, True, input, calls.append, False, failing)
    assert got == "the store build failed, nothing pinned: Cloud Build b-1 ended FAILURE: step build exited 1"
    assert not [c for c in calls if c.startswith("set ")]

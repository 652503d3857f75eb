"""`deepep-a4`: the workstation command (plan, cost, run, report)."""

from __future__ import annotations

import sys

import click

PASS_THROUGH = {"ignore_unknown_options": True, "allow_extra_args": True, "help_option_names": []}


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """A4 (B200) machines on Google Cloud with DeepEP installed and benchmarked."""


def _delegate(module: str, args: tuple[str, ...]) -> None:
    import importlib

    sys.exit(importlib.import_module(module).main(list(args)))


@main.command(context_settings=PASS_THROUGH)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def plan(args: tuple[str, ...]) -> None:
    """Offline plan of a stack: resources, rendered files, cost (no cloud, no Pulumi CLI)."""
    _delegate("deepep_a4.tools.plan", args)


@main.command(context_settings=PASS_THROUGH)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def report(args: tuple[str, ...]) -> None:
    """Benchmark report from Jobs, a bucket or saved logs."""
    _delegate("deepep_a4.tools.results", args)


@main.command(context_settings=PASS_THROUGH)
@click.argument("args", nargs=-1, type=click.UNPROCESSED)
def run(args: tuple[str, ...]) -> None:
    """pulumi up, wait for the benchmarks, write the report, pulumi destroy."""
    _delegate("deepep_a4.tools.run_benchmark", args)

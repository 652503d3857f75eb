"""`deepep-a4`: the workstation command.

    .venv/bin/deepep-a4 plan   --stack gke-b200          offline plan: resources, rendered files, cost
    .venv/bin/deepep-a4 cost   --stack gke-b200          cost estimate and bill cap only (no plan written)
    .venv/bin/deepep-a4 run    --stack gke-b200          pulumi up, benchmarks, report, pulumi destroy
    .venv/bin/deepep-a4 report --stack gke-b200          the benchmark report of a stack, a bucket or saved logs
    .venv/bin/deepep-a4 store fill --stack gke-b200      the stack's sources into its artifact store
    .venv/bin/deepep-a4 store build --stack gke-b200     build and publish its artifacts, print the manifest to pin
    .venv/bin/deepep-a4 hwtest --out DIR                 the installer for a GPU machine that is not an A4
    .venv/bin/deepep-a4 capacity --stack gke-b200        where A4s can come from: zones, quota, reservations; reads only

Each subcommand is a click command in its tool module; this file only assembles them. Every
`deepep-a4 SUB --help` starts with the task in one line, then the options with their defaults.
"""

from __future__ import annotations

import importlib
import sys

import click

from deepep_a4 import paths

paths.refuse_foreign_packages()  # before anything imports `components` or `scripts`

from deepep_a4 import stackfile  # noqa: E402
from deepep_a4.plan import command as plan_tool  # noqa: E402


@click.group(context_settings={"help_option_names": ["-h", "--help"], "show_default": True})
@click.version_option(package_name="deepep-a4")
def main() -> None:
    """A4 (B200) machines on Google Cloud with DeepEP installed and benchmarked."""


main.add_command(plan_tool.command, "plan")


def _subcommand(module: str, name: str) -> None:
    main.add_command(importlib.import_module(module).command, name)


_subcommand("deepep_a4.store.command", "store")
_subcommand("deepep_a4.hwtest.command", "hwtest")
_subcommand("deepep_a4.bringup.command", "bringup")


@main.command()
@click.option("--stack", required=True, help=stackfile.STACK_HELP)
def cost(stack: str) -> None:
    """Cost estimate and bill cap of a stack, without writing a plan."""
    from deepep_a4 import cost as cost_tool

    try:
        _, _, cfg = stackfile.load_stack(stack)
    except stackfile.UsageError as err:
        click.echo("error: " + "\n".join(err.lines), err=True)
        raise SystemExit(2) from None
    for line in cost_tool.render(cost_tool.estimate(cfg)):
        click.echo(line)
    click.echo("\n".join(cost_tool.bill_cap(cfg).lines))


_subcommand("deepep_a4.run.command", "run")
_subcommand("deepep_a4.report.cli", "report")
_subcommand("deepep_a4.capacity.command", "capacity")
_subcommand("deepep_a4.rehearse.command", "rehearse")


if __name__ == "__main__":
    sys.exit(main(prog_name="deepep-a4"))

"""`deepep-a4 capacity --stack S`: where the stack's A4s can come from, read from the project; buys nothing.

    .venv/bin/deepep-a4 capacity --stack gke-b200

Needs Application Default Credentials (`gcloud auth application-default login`) with compute.machineTypes.list,
compute.regions.get, compute.reservations.list, compute.reservationBlocks.list and compute.networkProfiles.list
(roles/compute.viewer has them). Exit status: 0 every read answered, 1 some read failed (the table says which),
2 bad arguments.
"""

from __future__ import annotations

from typing import Any

import click

from components.config.keys import MACHINE_SHAPES
from deepep_a4 import stackfile
from deepep_a4.capacity import table

EXIT_OK, EXIT_UNREAD, EXIT_USAGE = 0, 1, 2


@click.command("capacity", help=(__doc__ or "").split("\n\n")[0], context_settings={"show_default": True})
@click.option("--stack", required=True, help=stackfile.STACK_HELP)
@click.pass_context
def command(ctx: click.Context, stack: str) -> None:
    clients = ctx.obj if isinstance(ctx.obj, table.Clients) else table.Clients()
    ctx.exit(execute(stack, clients))


def execute(stack: str, clients: table.Clients, say: Any = click.echo) -> int:
    try:
        name, _, cfg = stackfile.load_stack(stack)
    except stackfile.UsageError as err:
        say("error: " + "\n".join(err.lines))
        return EXIT_USAGE
    snap = table.read(cfg.project, cfg.region, cfg.machine_type, clients)
    gpus = MACHINE_SHAPES[cfg.machine_type].gpus
    extra = tuple(getattr(cfg, "capacity_zones", ()) or ())
    for line in table.render(snap, name, cfg.zone, cfg.node_count, gpus, extra):
        say(line)
    return EXIT_UNREAD if snap.errors else EXIT_OK

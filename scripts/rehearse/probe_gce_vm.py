#!/usr/bin/env python3
"""Rehearsal probe: a GCE VM's seams, run by the rehearsal VM's startup script in the place of the installer's
GPU phases and the benchmarks, as the VM's own service account.

    python3 probe_gce_vm.py                                   # on the VM: one REHEARSAL line per seam, exit 0
    python3 probe_gce_vm.py --scheduling INSTANCE.json --want WANT.json   # the command: gce-scheduling

Seams on the VM, in this order (the startup script's staging path, then the results bucket):
- gce-dns       metadata.google.internal and storage.googleapis.com resolve
- gce-token     the metadata server gives an access token; the email is REHEARSAL_EXPECT_EMAIL when set
- gce-store     the pinned manifest reads and has its sha256; one part it lists reads and has the listed sha256
- gce-results   a create-only object rehearsal/RUN_ID/HOSTNAME.txt in the results bucket, then read back

gce-scheduling is read from the API, not from the VM: `check_scheduling(instance, want)` compares the
Instance resource that compute.instances.get returned (its `scheduling`, field names as the Compute API's REST
reference spells them: https://cloud.google.com/compute/docs/reference/rest/v1/instances) with what the
plan asked for; the command calls it, or this file with --scheduling/--want (both JSON files).

Inputs (environment, on the VM):
  REHEARSAL_STORE_URL         gs://BUCKET/PREFIX, the stack's artifactStore (required)
  REHEARSAL_STORE_MANIFEST    the pinned manifest's sha256 (required)
  REHEARSAL_STORE_OBJECT      the manifest entry to read (optional; default the first `.tar` part, else the first)
  REHEARSAL_RESULTS_URL       gs://BUCKET[/PREFIX], the stack's results bucket (required)
  REHEARSAL_RUN_ID            names the object written (required)
  REHEARSAL_EXPECT_EMAIL      the VM's service account email (optional)
  REHEARSAL_HOSTS             a hosts file that replaces DNS for gce-dns (tests only)
  GCE_METADATA_HOST, STORAGE_EMULATOR_HOST   endpoint overrides as Google's clients read them (tests only; gcp.py)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from datetime import datetime
from typing import Any, TextIO

try:  # in the package (tests) or next to each other (the VM)
    from scripts.rehearse import common, gcp
except ImportError:  # pragma: no cover - shipped as plain files
    import common  # type: ignore[no-redef]
    import gcp  # type: ignore[no-redef]

NAMES = (gcp.METADATA_HOST, gcp.STORAGE_HOST)
# The scheduling fields the plan sets (components/gce/fleet.py `scheduling`), as the REST Instance names them.
SCHEDULING_FIELDS = (
    "provisioningModel",
    "preemptible",
    "automaticRestart",
    "onHostMaintenance",
    "instanceTerminationAction",
    "terminationTime",
    "maxRunDuration",
)


def _same(key: str, want: Any, got: Any) -> bool:
    if key == "terminationTime" and isinstance(want, str) and isinstance(got, str):
        # The API may answer the same instant in another spelling (offset, fraction): compare instants.
        try:
            return datetime.fromisoformat(want.replace("Z", "+00:00")) == datetime.fromisoformat(
                got.replace("Z", "+00:00")
            )
        except ValueError:
            return False
    if key == "maxRunDuration" and isinstance(want, dict) and isinstance(got, dict):
        # Duration.seconds is an int64: REST answers it as a string.
        return str(want.get("seconds")) == str(got.get("seconds")) and int(want.get("nanos") or 0) == int(
            got.get("nanos") or 0
        )
    if want is False and got is None:
        return True  # a false boolean may be left out of the answer, as JSON APIs omit default values
    return want == got


def check_scheduling(instance: dict[str, Any], want: dict[str, Any]) -> str:
    """PASS evidence when the instance's `scheduling` holds every field of `want` (REST names, see above);
    SeamFailedError naming each field that differs. A field the plan leaves out is not compared."""
    got = instance.get("scheduling")
    if not isinstance(got, dict):
        raise common.SeamFailedError(f"instances.get {instance.get('name', '?')}: no scheduling block in the answer")
    unknown = sorted(set(want) - set(SCHEDULING_FIELDS))
    if unknown:
        raise common.InputError(f"want names fields the check does not know: {unknown}")
    asked = [k for k in SCHEDULING_FIELDS if k in want]
    differ = [f"{k}: asked {want[k]!r}, got {got.get(k)!r}" for k in asked if not _same(k, want[k], got.get(k))]
    shown = {k: got[k] for k in SCHEDULING_FIELDS if k in got}
    evidence = f"instances.get {instance.get('name', '?')} -> scheduling {json.dumps(shown, sort_keys=True)}"
    if differ:
        raise common.SeamFailedError(f"{evidence}; differs: {'; '.join(differ)}")
    return f"{evidence}; as asked ({', '.join(asked)})"


def write_results(inputs: common.Inputs, gcs: gcp.Gcs) -> str:
    bucket, prefix = gcp.split_gs(inputs.need("REHEARSAL_RESULTS_URL"), "REHEARSAL_RESULTS_URL")
    run = inputs.need("REHEARSAL_RUN_ID")
    name = gcp.object_name(prefix, f"rehearsal/{run}/{socket.gethostname()}.txt")
    data = f"deepep-a4 rehearsal {run}: written by the VM's service account\n".encode()
    reply = gcs.create(bucket, name, data)
    evidence = f"POST objects.insert gs://{bucket}/{name} (ifGenerationMatch=0) -> {reply.status}"
    if reply.status != 200:
        raise common.SeamFailedError(f"{evidence} {reply.text()}")
    body, read = gcs.read(bucket, name)
    if body != data:
        raise common.SeamFailedError(f"{evidence}; {read} but the bytes differ from those written")
    return f"{evidence}; {read}, the same bytes"


def probe(inputs: common.Inputs, out: TextIO) -> None:
    store_url, manifest = inputs.need("REHEARSAL_STORE_URL"), inputs.need("REHEARSAL_STORE_MANIFEST")
    gcp.split_gs(store_url, "REHEARSAL_STORE_URL")
    gcp.split_gs(inputs.need("REHEARSAL_RESULTS_URL"), "REHEARSAL_RESULTS_URL")
    inputs.need("REHEARSAL_RUN_ID")
    resolve = common.resolver(inputs)
    common.run_seam("gce-dns", lambda: common.check_names(resolve, NAMES), out)
    got: list[gcp.Token] = []

    def get_token() -> str:
        got.append(gcp.token(inputs, inputs.get("REHEARSAL_EXPECT_EMAIL")))
        return got[0].evidence

    common.run_seam("gce-token", get_token, out)

    def gcs() -> gcp.Gcs:
        if not got:
            raise common.SeamFailedError("no token (gce-token failed): not tried")
        return gcp.Gcs(gcp.storage_root(inputs), got[0].value)

    common.run_seam(
        "gce-store", lambda: gcp.check_store(gcs(), store_url, manifest, inputs.get("REHEARSAL_STORE_OBJECT")), out
    )
    common.run_seam("gce-results", lambda: write_results(inputs, gcs()), out)


def main(argv: list[str] | None = None, env: dict[str, str] | None = None, out: TextIO | None = None) -> int:
    parser = argparse.ArgumentParser(description="Rehearsal probe: a GCE VM's seams")
    parser.add_argument("--scheduling", help="the Instance JSON that compute.instances.get returned")
    parser.add_argument("--want", help="the scheduling fields the plan asked for (JSON object, REST names)")
    args = parser.parse_args(argv)
    if args.scheduling or args.want:
        if not (args.scheduling and args.want):
            parser.error("--scheduling and --want go together")
        with open(args.scheduling, encoding="utf-8") as a, open(args.want, encoding="utf-8") as b:
            instance, want = json.load(a), json.load(b)
        try:
            common.run_seam("gce-scheduling", lambda: check_scheduling(instance, want), out)
        except common.InputError as err:
            print(f"rehearsal probe: {err}", file=sys.stderr)
            return common.EXIT_INPUT
        return 0
    return common.main_of(probe, os.environ if env is None else env, out)


if __name__ == "__main__":
    sys.exit(main())

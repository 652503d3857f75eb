#!/usr/bin/env python3
"""Rehearsal probe: the store builder's seams, as the one step of a minimal Cloud Build that the rehearsal submits
in the stack's region as the store's builder account (deepep-store-builder, deepep_a4/store/remote.py), in a
python3 image pinned by digest. The step reaches Google through the build's metadata server, as the real
build's publish step does (scripts/install/store.sh `_gcs_token`).

    python3 probe_build.py          # one REHEARSAL line per seam on stdout (common.py), exit 0

Seams, in this order:
- build-token    the metadata server gives a token, and the account is REHEARSAL_EXPECT_EMAIL
- build-inside   a create-only object under the store's prefix (PREFIX/rehearsal/RUN_ID/build-probe.txt) is
                 accepted (200)
- build-outside  a create-only object outside the prefix is refused (403): the builder's grant carries the
                 prefix condition. Any other answer FAILs; a 200 leaves that object behind (the evidence names it)

That the build was accepted in the region at all, as that account, is the command's seam: it submits it.
The probe objects stay (the builder may not delete, by design); they are a few bytes under rehearsal/.

Inputs (environment; Cloud Build passes them as the step's `env`):
  REHEARSAL_STORE_URL     gs://BUCKET/PREFIX, the stack's artifactStore (required)
  REHEARSAL_RUN_ID        names the objects written (required)
  REHEARSAL_EXPECT_EMAIL  the builder account's email (required)
  REHEARSAL_OUTSIDE_URL   gs://BUCKET/NAME, an object name outside the prefix (optional; default
                          gs://BUCKET/deepep-a4-rehearsal-outside/RUN_ID/build-probe.txt; required when the store
                          is a whole bucket)
  GCE_METADATA_HOST, STORAGE_EMULATOR_HOST   endpoint overrides as Google's clients read them (tests only; gcp.py)
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

try:  # in the package (tests) or next to each other (the build step)
    from scripts.rehearse import common, gcp
except ImportError:  # pragma: no cover - shipped as plain files
    import common  # type: ignore[no-redef]
    import gcp  # type: ignore[no-redef]

OUTSIDE = "deepep-a4-rehearsal-outside"


def targets(inputs: common.Inputs) -> tuple[tuple[str, str], tuple[str, str]]:
    """((bucket, name) inside the prefix, (bucket, name) outside it); InputError when 'outside' is not."""
    bucket, prefix = gcp.split_gs(inputs.need("REHEARSAL_STORE_URL"), "REHEARSAL_STORE_URL")
    run = inputs.need("REHEARSAL_RUN_ID")
    inside = (bucket, gcp.object_name(prefix, f"rehearsal/{run}/build-probe.txt"))
    outside_url = inputs.get("REHEARSAL_OUTSIDE_URL")
    if outside_url:
        out_bucket, out_name = gcp.split_gs(outside_url, "REHEARSAL_OUTSIDE_URL")
    elif prefix:
        out_bucket, out_name = bucket, f"{OUTSIDE}/{run}/build-probe.txt"
    else:
        raise common.InputError("REHEARSAL_OUTSIDE_URL is not set and the store is a whole bucket: name one outside")
    if out_bucket == bucket and (not prefix or out_name.startswith(f"{prefix}/")):
        raise common.InputError(f"REHEARSAL_OUTSIDE_URL gs://{out_bucket}/{out_name} is inside the store's prefix")
    return inside, (out_bucket, out_name)


def write(gcs: gcp.Gcs, bucket: str, name: str, run: str) -> common.Reply:
    return gcs.create(bucket, name, f"deepep-a4 rehearsal {run}: the store builder's probe\n".encode())


def probe(inputs: common.Inputs, out: TextIO) -> None:
    (bucket, name), (out_bucket, out_name) = targets(inputs)
    run, email = inputs.need("REHEARSAL_RUN_ID"), inputs.need("REHEARSAL_EXPECT_EMAIL")
    got: list[gcp.Token] = []

    def get_token() -> str:
        got.append(gcp.token(inputs, email))
        return got[0].evidence

    common.run_seam("build-token", get_token, out)

    def gcs() -> gcp.Gcs:
        if not got:
            raise common.SeamFailedError("no token as the builder (build-token failed): not tried")
        return gcp.Gcs(gcp.storage_root(inputs), got[0].value)

    def inside() -> str:
        reply = write(gcs(), bucket, name, run)
        evidence = f"POST objects.insert gs://{bucket}/{name} (ifGenerationMatch=0) -> {reply.status}"
        if reply.status != 200:
            raise common.SeamFailedError(f"{evidence} {reply.text()}")
        return evidence

    def outside() -> str:
        reply = write(gcs(), out_bucket, out_name, run)
        evidence = f"POST objects.insert gs://{out_bucket}/{out_name} (ifGenerationMatch=0) -> {reply.status}"
        if reply.status == 403:
            return f"{evidence} (refused, as it must be) {reply.text(200)}"
        if reply.status == 200:
            raise common.SeamFailedError(
                f"{evidence}: accepted outside the store's prefix; the object is left there, delete it by hand"
            )
        raise common.SeamFailedError(f"{evidence} {reply.text()}: neither refused (403) nor written")

    common.run_seam("build-inside", inside, out)
    common.run_seam("build-outside", outside, out)


def main(env: dict[str, str] | None = None, out: TextIO | None = None) -> int:
    return common.main_of(probe, os.environ if env is None else env, out)


if __name__ == "__main__":
    sys.exit(main())

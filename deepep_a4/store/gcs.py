"""`gs://BUCKET/PREFIX` as a source of `deepep-a4 report`: the GCE VMs' results in the stack's bucket.

    .venv/bin/deepep-a4 report gs://deepep-gce-b200-results-PROJECT/runs/RUN_ID --stack gce-b200

Copies the prefix with the user's `gcloud storage cp -r` (no client library to install) into a
temporary folder and reads it like a folder of saved results. Layout written by the VMs
(scripts/gce/bench_stage.py): runs/RUN_ID/node-R/TEST/{TEST.log, TEST.json, nccl.*, summary.json}.
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class GcsSource:
    def __init__(self, url: str, path_source: Callable[[str], Any], gcloud: str = "gcloud"):
        self.url = url.rstrip("/")
        self.path_source = path_source
        self.gcloud = gcloud

    def describe(self) -> str:
        return self.url

    def items(self) -> Iterator[Any]:
        if shutil.which(self.gcloud) is None:
            raise SystemExit(f"reading {self.url} needs the gcloud CLI (https://cloud.google.com/sdk/docs/install)")
        with tempfile.TemporaryDirectory(prefix="deepep-gcs-") as tmp:
            proc = subprocess.run(
                [self.gcloud, "storage", "cp", "-r", self.url, tmp], capture_output=True, text=True, check=False
            )
            if proc.returncode != 0:
                raise SystemExit(f"gcloud storage cp -r {self.url} failed: {proc.stderr.strip()[-500:]}")
            folder = Path(tmp)
            for item in self.path_source(str(folder)).items():
                item.origin = f"{self.url.rsplit('/', 1)[0]}/{item.origin}"  # the copy's folder is the last part
                yield item


def make_gs_factory(path_source: Callable[[str], Any]) -> Callable[[str, Any], GcsSource]:
    """The factory results.py registers for the `gs` scheme (it hands in its PathSource)."""

    def factory(spec: str, args: Any) -> GcsSource:
        return GcsSource(spec, path_source)

    return factory

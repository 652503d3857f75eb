"""The GCE side of the rehearsal (components/rehearsal.py): the VMs' startup path runs the VM probe.

The VMs keep their account, scheduling block (spot, the TTL's terminationTime and maxRunDuration, the termination
action), boot image, host NIC and static address, the second gVNIC, metadata and results bucket. The startup
script is the real one's shape (values, then `write_files` with the files' digests, components/gce/bench.py) with
the probes as its files and scripts/rehearse/probe_gce_vm.py as its work: the probe reads the store and writes the
results bucket as the VM's account and prints its REHEARSAL lines to the serial console (the startup script's
output), which `deepep-a4 rehearse` reads, as it reads the copy the probe leaves in the results bucket.
"""

from __future__ import annotations

import shlex

from components import rehearsal
from components.config import StackConfig
from components.gce import bench as gce_bench
from components.gce.fleet import service_account_id
from components.gce.results import bucket_name

# Where the probes are written on the VM (a folder of their own: nothing of the real install is made).
PROBE_DIR = "/opt/deepep-rehearsal"
# Where the VM probe leaves its object in the results bucket (probe_gce_vm.py: rehearsal/RUN_ID/HOSTNAME.txt).
RESULTS_PREFIX = "rehearsal"


def render_startup_script(cfg: StackConfig) -> str:
    """The rehearsal's `startup-script`: the probes written and checked, then the VM probe run once per boot."""
    # probe_gce_vm.py's inputs (its docstring); it writes rehearsal/RUN_ID/HOSTNAME.txt in the results bucket.
    values = {
        "GCE_DIR": PROBE_DIR,
        "REHEARSAL_STORE_URL": cfg.installer.store_url,
        "REHEARSAL_STORE_MANIFEST": cfg.installer.store_manifest,
        "REHEARSAL_RESULTS_URL": f"gs://{bucket_name(cfg.name_prefix, cfg.project)}",
        "REHEARSAL_RUN_ID": gce_bench.run_id(cfg),
        "REHEARSAL_EXPECT_EMAIL": f"{service_account_id(cfg.name_prefix)}@{cfg.project}.iam.gserviceaccount.com",
    }
    files = {name: (text, 0o644) for name, text in rehearsal.probe_files().items()}
    return "".join(
        [
            "#!/bin/bash\n",
            f"# stack {cfg.stack}: the rehearsal's startup script, rendered by components/gce/rehearsal.py\n",
            "set -Euo pipefail\n",
            *(f"export {k}={shlex.quote(v)}\n" for k, v in values.items()),
            gce_bench.write_files_function(files),
            "write_files\n",
            # The metadata values the real startup script reads come from the metadata server in the probe.
            f'python3 "$GCE_DIR/{rehearsal.PROBE_GCE_VM}" || echo "probe {rehearsal.PROBE_GCE_VM} exited $?"\n',
        ]
    )

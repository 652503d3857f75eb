"""Every seam the rehearsal's probes prove (docs/rehearsal.md, "Probes"): id -> its title and the
troubleshooting entry (docs/troubleshooting.md) that fits its FAIL. The probes print one REHEARSAL line per
seam they own (common.py); `deepep-a4 rehearse` writes the checklist from those lines and this table.
Stdlib only, a plain dict: it ships next to the probes."""

from __future__ import annotations

SEAMS: dict[str, dict[str, str]] = {
    # -- the staging pod (GKE): probe_stage.py --------------------------------------------------------------
    "stage-dns": {
        "title": "staging pod resolves metadata.google.internal and storage.googleapis.com",
        "troubleshooting": "T33",
    },
    "stage-token": {"title": "staging pod gets a token as its own KSA principal", "troubleshooting": "T34"},
    "stage-store": {
        "title": "staging pod reads the pinned manifest and one part, sha256 checked",
        "troubleshooting": "T35",
    },
    "stage-node-label": {"title": "staging pod patches its own node's label", "troubleshooting": "T36"},
    "stage-denied": {"title": "staging pod cannot reach an address its egress policy denies", "troubleshooting": "T37"},
    # -- the internode pair (GKE): probe_internode.py ---------------------------------------------------------
    "internode-dns": {"title": "rank 1 resolves MASTER_ADDR (the headless Service)", "troubleshooting": "T38"},
    "internode-hello": {"title": "rank 1 exchanges a TCP hello with rank 0 on MASTER_PORT", "troubleshooting": "T38"},
    "internode-rendezvous": {"title": "rank 0 hears every peer on MASTER_PORT", "troubleshooting": "T38"},
    "internode-outsider": {"title": "a pod outside the internode selector is refused", "troubleshooting": "T39"},
    # -- the deadline: probe_deadline.py (the command calls it with its API client) ---------------------------
    "deadline-pool": {
        "title": "the Cloud Scheduler job deletes the node pool as the deadline account",
        "troubleshooting": "T40",
    },
    "deadline-vm": {"title": "a VM ends at its terminationTime", "troubleshooting": "T40"},
    # -- the GCE VM: probe_gce_vm.py -------------------------------------------------------------------------
    "gce-dns": {"title": "VM resolves metadata.google.internal and storage.googleapis.com", "troubleshooting": "T33"},
    "gce-token": {"title": "VM gets a token as its service account", "troubleshooting": "T34"},
    "gce-store": {"title": "VM reads the pinned manifest and one part, sha256 checked", "troubleshooting": "T35"},
    "gce-results": {"title": "VM writes the results bucket as its service account", "troubleshooting": "T41"},
    "gce-scheduling": {"title": "the API kept the VM's scheduling block as asked", "troubleshooting": "T42"},
    # -- the store builder (Cloud Build): probe_build.py ------------------------------------------------------
    "build-token": {"title": "the build step runs as the store's builder account", "troubleshooting": "T34"},
    "build-inside": {"title": "the builder writes under the store's prefix", "troubleshooting": "T43"},
    "build-outside": {"title": "the builder is refused outside the store's prefix", "troubleshooting": "T43"},
}

# The files each probe needs next to it where it runs (a ConfigMap, the startup script, the build's source):
# the probe and the modules it imports (tests/scripts/rehearse/test_seams.py checks the list against the imports).
PROBE_FILES: dict[str, tuple[str, ...]] = {
    "probe_stage.py": ("probe_stage.py", "common.py", "gcp.py"),
    "probe_internode.py": ("probe_internode.py", "common.py"),
    "probe_gce_vm.py": ("probe_gce_vm.py", "common.py", "gcp.py"),
    "probe_build.py": ("probe_build.py", "common.py", "gcp.py"),
}

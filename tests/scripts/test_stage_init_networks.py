"""stage-init.sh records the multi-network resources its node advertises (docs/troubleshooting.md T27).

GKE names them `networking.gke.io.networks/<network>` and `networking.gke.io.networks/<network>.IP` in the
Node's status: kubernetes/cloud-provider-gcp's node IPAM (pkg/controller/nodeipam/ipam/
multinetwork_cloud_cidr_allocator.go `allocateIPCapacity`, read at 032c421a15a21a00b9aa370c87976467a45dad48)
writes `<network>.IP` capacity for each network with pod ranges (L3) and rebuilds every entry under that
prefix; a Device network's plain `<network>` entry comes from the node, not from there.
The function runs here on Node JSON as the API server returns it, in bash, as in the staging container.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = (ROOT / "scripts/gke/stage-init.sh").read_text()


def advertised(node: dict | str) -> str:
    func = re.search(r"^advertised_networks\(\) \{.*?^\}", SCRIPT, re.M | re.S)
    assert func, "stage-init.sh has no advertised_networks()"
    text = node if isinstance(node, str) else json.dumps(node, indent=2)
    proc = subprocess.run(
        ["bash", "-c", f"set -Eeuo pipefail\n{func.group(0)}\nadvertised_networks"],
        input=text,
        capture_output=True,
        text=True,
        check=True,
    )
    return proc.stdout


def test_the_node_s_network_resources_are_listed_once_each() -> None:
    node = {
        "status": {
            "capacity": {
                "cpu": "224",
                "networking.gke.io.networks/deepep-gke-b200-rdma-0": "1",
                "networking.gke.io.networks/deepep-gke-b200-rdma-0.IP": "1",
                "nvidia.com/gpu": "8",
            },
            "allocatable": {
                "networking.gke.io.networks/deepep-gke-b200-rdma-0": "1",
                "networking.gke.io.networks/deepep-gke-b200-rdma-0.IP": "1",
            },
        }
    }
    assert advertised(node).split() == ["deepep-gke-b200-rdma-0.IP=1", "deepep-gke-b200-rdma-0=1"]


def test_a_node_without_them_or_an_unreadable_answer_gives_nothing_and_no_error() -> None:
    assert advertised({"status": {"allocatable": {"cpu": "224"}}}) == ""
    assert advertised("") == ""


def test_the_record_goes_into_node_json_after_the_label() -> None:
    label = SCRIPT.index("staged and labelled")
    record = SCRIPT.index('"advertisedNetworks"')
    assert label < record and "--max-time" in SCRIPT[label:record]

"""Ordinary mistakes a new user makes in a copy of an example stack, each refused at plan time with a line that
names the key and the value and says what is allowed, by the rule of the system that receives the value; and the
allowed neighbours of each, which must still pass.

The receiving systems' rules, as the checks cite them (components/config/rules/inputs.py, rules.py, parse.py):
- DeepEP at the pinned commit 29d31c0 (deepseek-ai/DeepEP): tests/test_intranode.py and test_low_latency.py
  `assert num_experts % num_ranks == 0`; tests/test_internode.py `assert num_experts % num_ranks == 0 and
  num_local_ranks == 8`; csrc/kernels/launch.cuh SWITCH_RANKS (2, 4, 8), SWITCH_RDMA_RANKS (2, 3, 4, 6, 8, 12, 16,
  18, 20 nodes), SWITCH_HIDDEN (2048 ... 8192); csrc/kernels/internode_ll.cu `kNumMaxTopK = 11`; intranode.cu
  `num_topk <= 32`; csrc/deep_ep.cpp `(hidden * x.element_size()) % sizeof(int4) == 0` and low latency
  `(num_ranks * num_max_dispatch_tokens_per_rank) % 4 == 0`.
- Cloud Storage bucket names: https://cloud.google.com/storage/docs/buckets#naming.
- VPC subnet ranges (/29 or larger, four reserved addresses): https://cloud.google.com/vpc/docs/subnets; GKE's /24
  per node of the pods range: https://cloud.google.com/kubernetes-engine/docs/how-to/flexible-pod-cidr.
- GKE authorized networks are CIDR blocks; the private endpoint is reachable from the VPC only:
  https://cloud.google.com/kubernetes-engine/docs/concepts/network-isolation.
- GKE's gpuDriverVersion: DEFAULT, LATEST, INSTALLATION_DISABLED
  (https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/NodeConfig#gpudriverversion); NVIDIA's driver
  versions as https://download.nvidia.com/XFree86/Linux-x86_64/ lists them.
- A4 machines are x86-64 (https://cloud.google.com/compute/docs/accelerator-optimized-machines#a4-vms); public
  images by project and OS: https://cloud.google.com/compute/docs/images/os-details.
- RoCE's traffic class is the DS field, DSCP << 2 plus two ECN bits (RFC 2474, RFC 3168); Google's A4 NCCL
  settings use 52 and 84 (cluster-toolkit a4high-vm.yaml, [TK-VM] in docs/conformance.md).
- OCI references: https://github.com/distribution/reference/blob/main/regexp.go (path components lower case).
- A stack file's top-level keys: pulumi/pulumi sdk/go/common/workspace/project.go, ProjectStack.
"""

from __future__ import annotations

import math
from typing import Any

import pytest

from components import config
from components.config.rules import inputs as rules_inputs
from deepep_a4 import stackfile
from deepep_a4.expected_times import expected_bringup
from tests.conftest import ROOT

GKE, GCE, GKE_HOST, GCE_HOST = "gke-b200", "gce-b200", "gke-b200-ubuntu", "gce-b200-ubuntu"
DIGEST = "sha256:" + "ab" * 32
ACCEL = "projects/ubuntu-os-accelerator-images/global/images/family/ubuntu-accelerator-"
UBUNTU = "projects/ubuntu-os-cloud/global/images/"


def raw_of(example: str, **changes: Any) -> dict[str, Any]:
    raw = stackfile.project_keys(stackfile.read(example, ROOT))
    raw["project"] = "my-gpu-project"
    raw.update(changes)
    return raw


def lines_of(example: str, **changes: Any) -> list[str]:
    with pytest.raises(config.ConfigError) as err:
        config.parse(raw_of(example, **changes), "mine")
    return [str(p) for p in err.value.problems]


# (example stack, changes, key, the value as the line shows it)
MISTAKES: list[tuple[str, dict[str, Any], str, str]] = [
    # -- DeepEP's benchmark shapes --
    (GKE, {"intranodeExperts": 100}, "intranodeExperts", "100"),
    (GKE, {"lowLatencyExperts": 290}, "lowLatencyExperts", "290"),
    (GKE, {"internodeExperts": 264}, "internodeExperts", "264"),
    (GCE, {"internodeExperts": 8}, "internodeExperts", "8"),
    (GKE, {"benchProcesses": 6}, "benchProcesses", "6"),
    (GKE, {"benchProcesses": 4}, "benchProcesses", "4"),
    (GCE, {"benchProcesses": 1, "benchmarks": ["intranode"]}, "benchProcesses", "1"),
    (GKE, {"nodeCount": 5}, "nodeCount", "5"),
    (GCE, {"nodeCount": 24}, "nodeCount", "24"),
    (GKE, {"benchHidden": 7000}, "benchHidden", "7000"),
    (GCE, {"benchHidden": 1024}, "benchHidden", "1024"),
    (GKE, {"benchHidden": 7176, "benchmarks": ["intranode"]}, "benchHidden", "7176"),
    (GKE, {"benchTopk": 12}, "benchTopk", "12"),
    (GCE, {"benchTopk": 40, "benchmarks": ["intranode", "internode"]}, "benchTopk", "40"),
    (
        GKE,
        {"benchmarks": ["low-latency"], "benchProcesses": 2, "lowLatencyTokens": 129},
        "lowLatencyTokens",
        "129",
    ),
    (GKE, {"benchmarks": ["intranode"], "benchProcesses": 4, "intranodeExperts": 4}, "intranodeExperts", "4"),
    # -- the same benchmark twice --
    (GKE, {"benchmarks": ["intranode", "intranode"]}, "benchmarks", "['intranode', 'intranode']"),
    (GCE, {"benchmarks": ["low-latency", "internode", "low-latency"]}, "benchmarks", "'low-latency'"),
    (GKE_HOST, {"benchmarks": ["internode", "internode"]}, "benchmarks", "['internode', 'internode']"),
    # -- a TTL shorter than the node's own bring-up --
    (GKE_HOST, {"ttl": "20m"}, "ttl", "'20m'"),
    (GCE_HOST, {"ttl": "15m"}, "ttl", "'15m'"),
    (GCE_HOST, {"ttl": "25m"}, "ttl", "'25m'"),
    (GKE, {"ttl": "5m"}, "ttl", "'5m'"),
    # -- driver versions written the way another tool writes them --
    (GKE_HOST, {"nvidiaDriverVersion": "R580"}, "nvidiaDriverVersion", "'R580'"),
    (GKE_HOST, {"nvidiaDriverVersion": "580.95.05-1"}, "nvidiaDriverVersion", "'580.95.05-1'"),
    (GCE_HOST, {"nvidiaDriverVersion": "latest"}, "nvidiaDriverVersion", "'latest'"),
    (GCE_HOST, {"nvidiaDriverVersion": "580-open"}, "nvidiaDriverVersion", "'580-open'"),
    (GKE_HOST, {"nvidiaDriverVersion": "580.126.9"}, "nvidiaDriverVersion", "'580.126.9'"),
    (GKE, {"gkeGpuDriver": "latest"}, "gkeGpuDriver", "'latest'"),
    (GKE, {"gkeGpuDriver": "580"}, "gkeGpuDriver", "'580'"),
    (GKE, {"gkeGpuDriver": "INSTALLATION_DISABLED"}, "gkeGpuDriver", "'INSTALLATION_DISABLED'"),
    (GKE_HOST, {"gkeGpuDriver": "R580"}, "gkeGpuDriver", "'R580'"),
    (GKE, {"gkeGpuDriver": "default"}, "gkeGpuDriver", "'default'"),
    # -- node images of another OS, release or architecture --
    (GCE_HOST, {"gceImage": UBUNTU + "family/ubuntu-2404-lts-arm64"}, "gceImage", "ubuntu-2404-lts-arm64"),
    (GCE_HOST, {"gceImage": UBUNTU + "family/ubuntu-2204-lts"}, "gceImage", "ubuntu-2204-lts"),
    (GCE_HOST, {"gceImage": "projects/cos-cloud/global/images/family/cos-stable"}, "gceImage", "cos-stable"),
    (GCE_HOST, {"gceImage": "projects/debian-cloud/global/images/family/debian-12"}, "gceImage", "debian-12"),
    (GCE_HOST, {"gceImage": "projects/rocky-linux-cloud/global/images/family/rocky-linux-9"}, "gceImage", "rocky"),
    (GCE_HOST, {"gceImage": UBUNTU + "ubuntu-2404-noble-arm64-v20250130"}, "gceImage", "noble-arm64"),
    (GCE, {"gceImage": ACCEL + "2204-amd64-with-nvidia-580"}, "gceImage", "accelerator-2204"),
    (GCE, {"gceImage": ACCEL + "2404-arm64-with-nvidia-580"}, "gceImage", "2404-arm64"),
    (GCE, {"gceImage": "projects/cos-cloud/global/images/family/cos-stable"}, "gceImage", "cos-stable"),
    # -- bucket names that break Cloud Storage's rules --
    (GKE, {"artifactStore": "gs://goog-artifacts/deepep-a4"}, "artifactStore", "goog-artifacts"),
    (GKE, {"artifactStore": "gs://my-google-store/deepep-a4"}, "artifactStore", "my-google-store"),
    (GCE, {"artifactStore": "gs://my-g00gle-store/deepep-a4"}, "artifactStore", "my-g00gle-store"),
    (GCE, {"artifactStore": "gs://googlestore/deepep-a4"}, "artifactStore", "googlestore"),
    (GKE, {"artifactStore": "gs://ab/deepep-a4"}, "artifactStore", "gs://ab/"),
    (GKE, {"artifactStore": "gs://My-Bucket/deepep-a4"}, "artifactStore", "My-Bucket"),
    (GCE, {"artifactStore": "gs://192.168.1.1/deepep-a4"}, "artifactStore", "192.168.1.1"),
    (GKE, {"artifactStore": "gs://-bucket/deepep-a4"}, "artifactStore", "-bucket"),
    (GKE, {"artifactStore": "gs://bucket-/deepep-a4"}, "artifactStore", "bucket-"),
    (GCE, {"artifactStore": f"gs://{'a' * 64}/deepep-a4"}, "artifactStore", "a" * 64),
    (GKE, {"artifactStore": "gs://bucket..name/deepep-a4"}, "artifactStore", "bucket..name"),
    (GKE, {"artifactStore": "gs://my-gooogle-bits/deepep-a4"}, "artifactStore", "my-gooogle-bits"),
    # -- subnets too small or without a prefix length --
    (GKE, {"hostCidr": "10.0.0.0"}, "hostCidr", "'10.0.0.0'"),
    (GCE, {"gvnicCidr": "10.1.0.0"}, "gvnicCidr", "'10.1.0.0'"),
    (GKE, {"rdmaCidr": "192.168.0.0"}, "rdmaCidr", "'192.168.0.0'"),
    (GKE, {"masterCidr": "172.16.0.0"}, "masterCidr", "'172.16.0.0'"),
    (GKE, {"podsCidr": "10.4.0.0/24"}, "podsCidr", "'10.4.0.0/24'"),
    (GCE, {"gvnicCidr": "10.1.0.0/30"}, "gvnicCidr", "'10.1.0.0/30'"),
    (GKE, {"servicesCidr": "10.8.0.0/30"}, "servicesCidr", "'10.8.0.0/30'"),
    (GKE, {"hostCidr": "10.0.0.0/29", "nodeCount": 8}, "hostCidr", "'10.0.0.0/29'"),
    (GCE, {"rdmaCidr": "192.168.0.0/26", "nodeCount": 8}, "rdmaCidr", "'192.168.0.0/26'"),
    # -- authorized networks without a prefix --
    (GKE, {"gkePublicEndpoint": True, "gkeAuthorizedNetworks": ["203.0.113.5"]}, "gkeAuthorizedNetworks", "'203."),
    (GKE, {"gkePublicEndpoint": True, "gkeAuthorizedNetworks": ["203.0.113.0"]}, "gkeAuthorizedNetworks", "'203."),
    (GKE_HOST, {"gkeAuthorizedNetworks": ["10.0.0.0"]}, "gkeAuthorizedNetworks", "'10.0.0.0'"),
    (GKE, {"gkePublicEndpoint": True, "gkeAuthorizedNetworks": ["198.51.100.7/24"]}, "gkeAuthorizedNetworks", "'198"),
    # -- the private endpoint without a way to reach it --
    (GKE, {"gkeDnsEndpoint": False}, "gkeDnsEndpoint", "False"),
    (GKE_HOST, {"gkeDnsEndpoint": False, "gkeAuthorizedNetworks": []}, "gkeDnsEndpoint", "False"),
    (GKE, {"gkeDnsEndpoint": False, "gkeAuthorizedNetworks": ["203.0.113.0/24"]}, "gkeAuthorizedNetworks", "203."),
    (GKE, {"gkeAuthorizedNetworks": ["203.0.113.0/24"]}, "gkeAuthorizedNetworks", "203.0.113.0/24"),
    (GKE, {"gkePublicEndpoint": True}, "gkePublicEndpoint", "True"),
    # -- installerImage where it has no effect, with upper case, or without a digest --
    (GCE, {"installerImage": f"buildpack-deps:noble-curl@{DIGEST}"}, "installerImage", "buildpack-deps"),
    (GKE_HOST, {"installerImage": f"buildpack-deps:noble-curl@{DIGEST}"}, "installerImage", "buildpack-deps"),
    (GKE, {"installerImage": f"Buildpack-deps:noble-curl@{DIGEST}"}, "installerImage", "Buildpack-deps"),
    (GKE, {"installerImage": f"docker.io/Library/ubuntu@{DIGEST}"}, "installerImage", "Library"),
    (GKE, {"installerImage": "buildpack-deps:noble-curl"}, "installerImage", "'buildpack-deps:noble-curl'"),
    (GKE, {"installerImage": f"buildpack-deps:noble curl@{DIGEST}"}, "installerImage", "noble curl"),
    # -- a traffic class RoCE does not use --
    (GKE, {"nvshmemTrafficClass": 13}, "nvshmemTrafficClass", "13"),
    (GCE, {"nvshmemTrafficClass": 53}, "nvshmemTrafficClass", "53"),
    (GKE, {"nvshmemTrafficClass": 106}, "nvshmemTrafficClass", "106"),
    (GKE, {"nvshmemTrafficClass": 256}, "nvshmemTrafficClass", "256"),
    (GCE, {"nvshmemTrafficClass": -1}, "nvshmemTrafficClass", "-1"),
    (GKE, {"nvshmemTrafficClass": 21}, "nvshmemTrafficClass", "21"),
    # -- a value outside a key's choices --
    (GKE, {"nodeProfile": "Supported"}, "nodeProfile", "'Supported'"),
    (GCE, {"nodeProfile": "host_install"}, "nodeProfile", "'host_install'"),
    (GKE, {"platform": "GKE"}, "platform", "'GKE'"),
    (GCE, {"platform": "GCE"}, "platform", "'GCE'"),
    (GKE, {"provisioning": "Spot"}, "provisioning", "'Spot'"),
    # -- accepted in silence until issue 41: each against the receiving system's rule --
    (GKE, {"artifactStorePublish": True}, "artifactStorePublish", "True"),
    (GKE, {"artifactStorePublish": "true"}, "artifactStorePublish", "True"),
    (GKE, {"installerImage": f"ubuntu:24.04@{DIGEST}"}, "installerImage", "ubuntu:24.04"),
    (GKE, {"installerImage": f"docker.io/library/debian:bookworm@{DIGEST}"}, "installerImage", "debian"),
    (GKE, {"installerImage": f"alpine@{DIGEST}"}, "installerImage", "alpine"),
    (GKE, {"installerImage": f"library/busybox:1.36@{DIGEST}"}, "installerImage", "busybox"),
    (GKE, {"installerImage": f"gcr.io/distroless/static-debian12@{DIGEST}"}, "installerImage", "distroless"),
    (GKE, {"benchTimeoutMinutes": 1800}, "benchTimeoutMinutes", "1800"),
    (GCE_HOST, {"benchTimeoutMinutes": 3600}, "benchTimeoutMinutes", "3600"),
    (GKE, {"benchTimeoutMinutes": 241}, "benchTimeoutMinutes", "241"),
    (GKE, {"gkeDnsEndpoint": False, "gkeAuthorizedNetworks": ["192.168.1.0/24"]}, "gkeAuthorizedNetworks", "192.168"),
    (GKE_HOST, {"gkeDnsEndpoint": False, "gkeAuthorizedNetworks": ["10.200.0.0/24"]}, "gkeAuthorizedNetworks", "10.2"),
    (
        GKE,
        {"gkeDnsEndpoint": False, "gkePublicEndpoint": True, "gkeAuthorizedNetworks": ["192.168.0.0/24"]},
        "gkeAuthorizedNetworks",
        "192.168.0.0/24",
    ),
    (GCE, {"localSsdCount": 0}, "localSsdCount", "0"),
    (GCE_HOST, {"localSsdCount": 32}, "localSsdCount", "32"),
    (GCE, {"containerImage": f"ubuntu:24.04@{DIGEST}"}, "containerImage", "ubuntu:24.04"),
    (GKE_HOST, {"nvidiaDriverVersion": "580.126"}, "nvidiaDriverVersion", "'580.126'"),
    (GCE_HOST, {"nvidiaDriverVersion": "570.195"}, "nvidiaDriverVersion", "'570.195'"),
    (GCE, {"gceImage": ACCEL + "2404-amd64-with-nvidia-550"}, "gceImage", "with-nvidia-550"),
    (GCE_HOST, {"gceImage": ACCEL + "2404-amd64-with-nvidia-550"}, "gceImage", "with-nvidia-550"),
    (GCE, {"gceImage": ACCEL + "2404-amd64-with-nvidia-570", "cudaVersion": "13.0"}, "gceImage", "nvidia-570"),
    (GKE, {"provisioning": "reservation", "reservationName": "My-A4-Res"}, "reservationName", "'My-A4-Res'"),
    (GCE, {"provisioning": "reservation", "reservationName": "A4RES"}, "reservationName", "'A4RES'"),
    (GKE, {"provisioning": "reservation", "reservationName": "a4-res-"}, "reservationName", "'a4-res-'"),
    # -- a trailing newline: `$` in re.match accepts one, fullmatch does not (issue 44) --
    (GKE, {"artifactStore": "gs://my-own-project-artifacts\n/deepep-a4"}, "artifactStore", "artifacts\\n"),
    (GKE, {"installerImage": f"buildpack-deps:noble-curl@{DIGEST}\n"}, "installerImage", "\\n'"),
    (GKE, {"containerImage": f"ubuntu:24.04@{DIGEST}\n"}, "containerImage", "\\n'"),
    (GCE, {"project": "my-gpu-project\n"}, "project", "\\n'"),
    (GCE, {"zone": "asia-southeast1-b\n"}, "zone", "\\n'"),
    (GKE, {"namePrefix": "deepep-x\n"}, "namePrefix", "\\n'"),
    (GCE, {"gceImage": ACCEL + "2404-amd64-with-nvidia-580\n"}, "gceImage", "\\n'"),
    (GKE, {"provisioning": "reservation", "reservationName": "a4-res\n"}, "reservationName", "\\n'"),
    (GKE_HOST, {"nvidiaDriverVersion": "580\n"}, "nvidiaDriverVersion", "\\n'"),
]


def test_the_table_covers_every_class_several_times() -> None:
    assert len(MISTAKES) >= 60


@pytest.mark.parametrize(("example", "changes", "key", "value"), MISTAKES)
def test_each_mistake_is_refused_in_a_line_naming_key_and_value(
    example: str, changes: dict[str, Any], key: str, value: str
) -> None:
    lines = lines_of(example, **changes)
    mine = [line for line in lines if line.startswith(f"deepep-a4:{key} = ") and value in line]
    assert mine, lines
    assert all(":" in line.split(" = ", 1)[1] for line in mine), "each line says what is allowed"


# Each a neighbour of a mistake above: it must still plan.
ALLOWED: list[tuple[str, dict[str, Any]]] = [
    (GKE, {}),
    (GCE, {}),
    (GKE_HOST, {}),
    (GCE_HOST, {}),
    (GKE, {"benchProcesses": 4, "benchmarks": ["intranode", "low-latency"]}),
    (GKE, {"benchProcesses": 2, "benchmarks": ["intranode"]}),
    (GKE, {"nodeCount": 4}),
    (GCE, {"nodeCount": 3, "internodeExperts": 240}),
    (GKE, {"nodeCount": 20, "internodeExperts": 320}),
    (GKE, {"benchHidden": 4096, "benchTopk": 11}),
    (GKE, {"benchHidden": 7184, "benchTopk": 16, "benchmarks": ["intranode", "internode"]}),
    (GKE, {"benchmarks": ["low-latency"], "benchProcesses": 2, "lowLatencyTokens": 128}),
    (GKE, {"benchmarks": ["intranode"]}),
    (GKE, {"ttl": "10m"}),
    (GCE, {"ttl": "10m"}),
    (GKE_HOST, {"ttl": "30m"}),
    (GCE_HOST, {"ttl": "26m"}),
    (GKE_HOST, {"nvidiaDriverVersion": "580"}),
    (GKE_HOST, {"nvidiaDriverVersion": "570.195.03"}),
    (GKE, {"gkeGpuDriver": "DEFAULT"}),
    (GCE_HOST, {"gceImage": UBUNTU + "family/ubuntu-2404-lts"}),
    (GCE_HOST, {"gceImage": UBUNTU + "ubuntu-2404-noble-amd64-v20250130"}),
    (GCE_HOST, {"gceImage": "projects/my-gpu-project/global/images/my-a4-image"}),
    (GKE, {"artifactStore": "gs://my-own-project-artifacts/deepep-a4"}),
    (GKE, {"artifactStore": "gs://my_bucket/deepep-a4"}),
    (GCE, {"artifactStore": "gs://store.example.com/deepep-a4/v1"}),
    (GCE, {"artifactStore": "gs://abc/deepep-a4"}),
    (GKE, {"artifactStore": "gs://goggles-store/deepep-a4"}),
    (GKE, {"hostCidr": "10.0.0.0/28"}),
    (GKE, {"podsCidr": "10.4.0.0/22"}),
    (GCE, {"rdmaCidr": "192.168.0.0/23", "nodeCount": 8, "internodeExperts": 256}),
    (GKE, {"gkePublicEndpoint": True, "gkeAuthorizedNetworks": ["203.0.113.5/32"]}),
    (GKE, {"gkeAuthorizedNetworks": ["10.128.0.0/16"]}),
    # A private range with the DNS endpoint on is harmless: pulumi uses the DNS endpoint, the VPC the private one.
    (GKE, {"gkeAuthorizedNetworks": ["192.168.1.0/24"]}),
    (
        GKE,
        {
            "gkeDnsEndpoint": False,
            "gkePublicEndpoint": True,
            "gkeAuthorizedNetworks": ["203.0.113.5/32", "10.2.0.0/24"],
        },
    ),
    (GKE, {"gkeDnsEndpoint": False, "gkePublicEndpoint": True, "gkeAuthorizedNetworks": ["203.0.113.0/24"]}),
    (GKE, {"installerImage": f"registry.example.com:5000/team/stager_x:v1.2@{DIGEST}"}),
    (GKE, {"installerImage": "buildpack-deps:noble-curl", "allowUnpinnedImages": True}),
    (GKE, {"installerImage": f"buildpack-deps:noble-scm@{DIGEST}"}),
    (GKE, {"installerImage": f"registry.example.com/ubuntu-curl:24.04@{DIGEST}"}),
    (GKE, {"installerImage": f"ghcr.io/acme/ubuntu:24.04@{DIGEST}"}),  # not the official image: unknown, allowed
    (GKE, {"benchTimeoutMinutes": 240}),
    (GCE, {"benchTimeoutMinutes": 30}),
    (GKE_HOST, {"artifactStorePublish": True}),  # the host installer publishes what it downloads
    (GCE_HOST, {"artifactStorePublish": True}),
    (GKE, {"localSsdCount": 0}),
    (GKE_HOST, {"containerImage": f"ubuntu:24.04@{DIGEST}"}),
    (GKE_HOST, {"nvidiaDriverVersion": "580.126.09"}),
    (GCE, {"gceImage": ACCEL + "2404-amd64-with-nvidia-590"}),
    (GCE, {"gceImage": ACCEL + "2404-amd64-with-nvidia-570"}),  # CUDA 12.9 runs on 570 (12.x compatibility)
    (GKE, {"provisioning": "reservation", "reservationName": "my-a4-res"}),
    (GCE, {"provisioning": "reservation", "reservationName": "a"}),
    (GKE, {"nvshmemTrafficClass": 0}),
    (GCE, {"nvshmemTrafficClass": 84}),
]


@pytest.mark.parametrize(("example", "changes"), ALLOWED)
def test_the_allowed_neighbours_still_plan(example: str, changes: dict[str, Any]) -> None:
    config.parse(raw_of(example, **changes), "mine")


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("config:\n  deepep-a4:nodeCount: 2\ndeepep-a4:ttl: 4h\n", "deepep-a4:ttl"),
        ("deepep-a4:project: p\nconfig:\n  deepep-a4:nodeCount: 2\n", "deepep-a4:project"),
        ("config:\n  deepep-a4:nodeCount: 2\nconfigs:\n  deepep-a4:ttl: 4h\n", "configs"),
        ("confg:\n  deepep-a4:nodeCount: 2\n", "confg"),
    ],
)
def test_a_key_outside_config_is_refused(text: str, key: str) -> None:
    with pytest.raises(stackfile.StackFileError) as err:
        stackfile.parse_text(text, "stacks/Pulumi.mine.yaml")
    (line,) = err.value.problems
    assert repr(key) in line and "outside `config:`" in line and "config, secretsprovider" in line


def test_the_top_level_keys_pulumi_writes_are_accepted() -> None:
    text = "secretsprovider: passphrase\nencryptionsalt: v1:abc\nconfig:\n  deepep-a4:nodeCount: 2\n"
    assert stackfile.parse_text(text, "x") == {"deepep-a4:nodeCount": "2"}


def test_no_advice_is_built_on_a_value_outside_the_choices() -> None:
    """`platform: GKE` must not tell the user to remove the gke keys they wrote correctly."""
    lines = lines_of(GKE, platform="GKE")
    assert lines == ["deepep-a4:platform = 'GKE': must be one of: gke, gce; did you mean gke?"]
    (line,) = lines_of(GCE, nodeProfile="host_install")
    assert "did you mean host-install?" in line


@pytest.mark.parametrize(("platform", "profile"), list(rules_inputs.BRINGUP_MAX_SECONDS))
def test_the_ttl_floor_is_the_bringup_tables_upper_total(platform: str, profile: str) -> None:
    """config may not import deepep_a4: its copy of the table's totals stays equal to the table."""
    total = expected_bringup(platform, profile).total[1]
    assert rules_inputs.BRINGUP_MAX_SECONDS[(platform, profile)] == math.ceil(total)


@pytest.mark.parametrize("name", ["My-A4-Res", "A4RES"])
def test_a_reservation_name_in_capitals_is_refused_by_compute_engines_naming_rule(name: str) -> None:
    """Compute Engine names are RFC 1035 labels, [a-z]([-a-z0-9]*[a-z0-9])?: the line says so, not only that a
    name is needed (https://cloud.google.com/compute/docs/naming-resources#resource-name-format)."""
    (line,) = [x for x in lines_of(GKE, provisioning="reservation", reservationName=name) if "reservationName" in x]
    assert "RFC 1035" in line and "capitals" in line


def test_a_driver_branch_below_blackwell_is_never_advised() -> None:
    """A host-install GCE stack on a 550 accelerator image: the image is refused, and no line advises setting
    nvidiaDriverVersion to 550 (which the next check would refuse)."""
    lines = lines_of(GCE_HOST, gceImage=ACCEL + "2404-amd64-with-nvidia-550")
    assert any(x.startswith("deepep-a4:gceImage = ") and "branch 550" in x for x in lines), lines
    assert not any("set 550" in x for x in lines), lines

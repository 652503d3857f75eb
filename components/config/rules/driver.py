"""The GKE driver choice `cos-installer`: GKE's driver installation disabled, Google's COS driver installer
DaemonSet installs one pinned build (components/gke/cos_driver.py).

GKE's choices, each from GKE's pages:
- `DEFAULT` and `LATEST` (NodeConfig.accelerators[].gpuDriverInstallationConfig.gpuDriverVersion,
  https://cloud.google.com/kubernetes-engine/docs/reference/rest/v1/NodeConfig#gpudriverversion): GKE installs
  the default or the latest driver of the node's GKE version, no number can be asked for;
- `INSTALLATION_DISABLED` (same enum) with the driver installed by hand: on COS, Google's installer DaemonSet
  (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus#installing_drivers, "Manually install NVIDIA GPU
  drivers": GoogleCloudPlatform/container-engine-accelerators nvidia-driver-installer/cos/daemonset-preloaded*.yaml).
  Its installer takes `--version`: empty the default, `latest` the latest, anything else "an actual version",
  installed as given (cos.googlesource.com/cos/tools src/cmd/cos_gpu_installer/internal/commands/install.go
  `getDriverVersion`, read in the dims/cos-tools mirror at 0340e4b17bde4e7e307a64ab218db8c148030bf1); COS must
  publish that build, signed, for the node's COS milestone, else the install fails with "The GPU driver is not
  available for the COS version".
Why a pinned build matters: llm-d reports that the R580 drivers (GKE 1.36's `default` and `latest`) crash
DeepEP's high-throughput kernels with cudaErrorIllegalAddress on H200 (llm-d guides/wide-ep-lws/modelserver/
gpu/vllm-deepseek-r1-0528/gke/README.md at 2812018fc2002bd5dabff92eaae97281489889aa, "GPU driver"); troubleshooting
T31.
"""

from __future__ import annotations

import re
from typing import Any

from components.config.keys import Problem

COS_INSTALLER = "cos-installer"
# A driver build as NVIDIA numbers it (570.172.08, 570.86.15): what the installer downloads as given.
BUILD_RE = re.compile(r"(\d{3})\.\d{2,3}(\.\d{2})?")
# B200 (Blackwell) needs the R570 branch or newer (docs/platforms.md; keys.py nvidiaDriverVersion).
MIN_BRANCH = 570


def check_cos_driver(v: dict[str, Any], problems: list[Problem]) -> None:
    """gkeCosDriverVersion goes with gkeGpuDriver=cos-installer on GKE, and only there; it names one build."""
    version = v["gkeCosDriverVersion"]
    chosen = v["platform"] == "gke" and v["gkeGpuDriver"] == COS_INSTALLER
    if not chosen:
        if version:
            problems.append(
                Problem(
                    "gkeCosDriverVersion",
                    version,
                    "only with platform=gke and gkeGpuDriver=cos-installer (Google's COS driver installer "
                    "installs it); remove it, or set gkeGpuDriver=cos-installer",
                )
            )
        return
    if not version:
        problems.append(
            Problem(
                "gkeCosDriverVersion",
                version,
                "gkeGpuDriver=cos-installer installs one driver build: set gkeCosDriverVersion to a build COS "
                "publishes for the node's image, such as 570.172.08 (troubleshooting T31)",
            )
        )
        return
    m = BUILD_RE.fullmatch(version)
    if m is None:
        hint = (
            "; for GKE's own choice use gkeGpuDriver=DEFAULT or LATEST"
            if version.lower() in {"default", "latest"}
            else ""
        )
        problems.append(
            Problem(
                "gkeCosDriverVersion",
                version,
                "a driver build as NVIDIA numbers it, such as 570.172.08 (the COS installer installs it as given)"
                + hint,
            )
        )
    elif int(m[1]) < MIN_BRANCH:
        problems.append(
            Problem("gkeCosDriverVersion", version, f"B200 needs the {MIN_BRANCH} branch or newer, such as 570.172.08")
        )

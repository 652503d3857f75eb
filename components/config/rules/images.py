"""Images the stack names: the GCE VMs' boot image (its form, the driver an accelerator image ships) and the
supported profile's staging container on GKE (its reference, its pin, and the tools it must hold).

Each check appends a Problem for every rule a value breaks (one line per mistake), as rules.py does.
"""

from __future__ import annotations

import re
from typing import Any

from components.config import versions
from components.config.images import ACCELERATOR_IMAGE, ACCELERATOR_IMAGE_PROJECT, STAGING_IMAGE
from components.config.keys import Problem
from components.config.model import parse_image_ref

__all__ = ["BARE_INSTALLER_IMAGES", "check_gce", "check_installer_image", "installer_image_repository"]


def check_gce(v: dict[str, Any], problems: list[Problem]) -> None:
    """The VMs' boot image: its form, and the driver an accelerator image already ships."""
    ref = parse_image_ref(v["gceImage"])
    if ref is None:
        problems.append(
            Problem(
                "gceImage",
                v["gceImage"],
                "must be projects/PROJECT/global/images/family/FAMILY (resolved at the first deploy, then kept) "
                "or projects/PROJECT/global/images/IMAGE",
            )
        )
        return
    branch = ref.driver_branch
    if v["platform"] == "gce" and ref.project == ACCELERATOR_IMAGE_PROJECT and not branch:
        # The installer checks the image's driver against the branch in its name; without one it could not.
        problems.append(
            Problem(
                "gceImage",
                v["gceImage"],
                f"an {ACCELERATOR_IMAGE_PROJECT} image must name its driver branch (...-with-nvidia-580...): the "
                "installer checks the image's driver against it",
            )
        )
    usable = check_gce_driver_branch(v, problems)
    if (
        v["platform"] == "gce"
        and branch
        and usable
        and v["nodeProfile"] != "supported"
        and v["nvidiaDriverVersion"] != branch
    ):
        # Never advise the branch of an image the rule above refuses. The image's driver build moves with the
        # family; a pinned build would make the installer replace it.
        problems.append(
            Problem(
                "nvidiaDriverVersion",
                v["nvidiaDriverVersion"],
                f"gceImage ships NVIDIA driver branch {branch}: set {branch} (the installer checks the image's "
                "driver instead of installing one), or use a gceImage without a driver (plain Ubuntu)",
            )
        )


def check_gce_driver_branch(v: dict[str, Any], problems: list[Problem]) -> bool:
    """An accelerator image's driver branch against what a B200 and the stack's CUDA need (versions.py cites
    NVIDIA's CUDA release notes: Blackwell from branch 570; CUDA 13 from 580). True when the branch is usable."""
    ref = parse_image_ref(v["gceImage"])
    branch = ref.driver_branch if ref is not None else ""
    if v["platform"] != "gce" or not branch:
        return True
    fix = f"use {ACCELERATOR_IMAGE.rsplit('/', 1)[1]} (the default)"
    if int(branch) < versions.B200_MIN_DRIVER_BRANCH:
        problems.append(
            Problem(
                "gceImage",
                v["gceImage"],
                f"ships NVIDIA driver branch {branch}, which cannot drive a B200: Blackwell needs branch "
                f"{versions.B200_MIN_DRIVER_BRANCH} or newer (NVIDIA's CUDA 12.8 release notes); {fix}",
            )
        )
        return False
    cuda = re.match(r"(\d+)\.", v["cudaVersion"])
    if cuda and int(cuda[1]) >= 13 and int(branch) < versions.CUDA13_MIN_DRIVER_BRANCH:
        problems.append(
            Problem(
                "gceImage",
                v["gceImage"],
                f"ships NVIDIA driver branch {branch}; CUDA {v['cudaVersion']} needs branch "
                f"{versions.CUDA13_MIN_DRIVER_BRANCH} or newer (CUDA 13 release notes): {fix}",
            )
        )
        return False
    return True


# -- the staging container's image ------------------------------------------------------------------------
# The OCI reference grammar (https://github.com/distribution/reference/blob/main/regexp.go): [domain[:port]/]
# path-component[/path-component...] (a path component: lower-case alphanumerics joined by `.`, `_`, `__` or
# dashes; the name at most 255 characters), then [:tag] ([\w][\w.-]{0,127}) and [@algorithm:hex].
_DC = r"[a-zA-Z0-9](?:[a-zA-Z0-9-]*[a-zA-Z0-9])?"
_PC = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_OCI_REF = re.compile(
    rf"(?P<name>(?:{_DC}(?:\.{_DC})*(?::[0-9]+)?/)?{_PC}(?:/{_PC})*)(?::[\w][\w.-]{{0,127}})?"
    rf"(?P<digest>@sha256:[0-9a-f]{{64}})?"
)


def check_installer_image(v: dict[str, Any], written: set[str], problems: list[Problem]) -> None:
    """installerImage: read only by the supported profile's staging DaemonSet on GKE, an OCI reference, pinned
    by digest unless allowUnpinnedImages."""
    image, where = v["installerImage"], (v["platform"], v["nodeProfile"])
    m = _OCI_REF.fullmatch(image)
    if "installerImage" in written and where != ("gke", "supported"):
        why = "it would have no effect: only platform gke with nodeProfile supported runs the staging container"
        problems.append(Problem("installerImage", image, f"{why}; remove it"))
    elif not m or len(m["name"]) > 255:
        upper = ", repository path in lower case" if image != image.lower() else ""
        problems.append(
            Problem("installerImage", image, f"must be an OCI reference, [registry/]path[:tag]@sha256:<64 hex>{upper}")
        )
    elif not m["digest"] and not v["allowUnpinnedImages"]:
        problems.append(
            Problem(
                "installerImage", image, "must be pinned by digest, name[:tag]@sha256:<64 hex> (or allowUnpinnedImages)"
            )
        )
    elif installer_image_repository(m["name"]) in BARE_INSTALLER_IMAGES:
        lacks = BARE_INSTALLER_IMAGES[installer_image_repository(m["name"])]
        problems.append(
            Problem(
                "installerImage",
                image,
                f"{lacks}, and the staging container runs bash, curl, coreutils and tar: use an image that has them, "
                f"such as {STAGING_IMAGE.split('@')[0]} (the default, pinned), or one built FROM it",
            )
        )


# What is knowable offline about an image is its repository: an image we cannot pull here is not inspected, but
# the official images that lack the staging container's tools are refused by name (a tag or digest of them
# never adds curl). The package lists: docker-library/repo-info repos/<name>/local/<tag>.md (dpkg/apk lists of
# each official image, read 2026-12-02): ubuntu and debian install bash but not curl (curl is what
# buildpack-deps:*-curl adds: docker-library/buildpack-deps ubuntu/noble/curl/Dockerfile, `FROM ubuntu:noble`,
# `apt-get install ... ca-certificates curl gnupg netbase sq wget`); alpine and busybox have BusyBox's ash and
# wget, no bash, no curl; distroless images have no shell (GoogleContainerTools/distroless README.md, "no
# package managers, shells or any other programs"); pause is one static binary (kubernetes/kubernetes
# build/pause/Dockerfile, FROM scratch).
_NO_CURL = "the official {} image has bash but no curl (docker-library/repo-info package list)"
_NO_BASH = "the official {} image has BusyBox's ash and wget, no bash and no curl (docker-library/repo-info)"
BARE_INSTALLER_IMAGES: dict[str, str] = {
    "ubuntu": _NO_CURL.format("ubuntu"),
    "debian": _NO_CURL.format("debian"),
    "alpine": _NO_BASH.format("alpine"),
    "busybox": _NO_BASH.format("busybox"),
    "registry.k8s.io/pause": "the pause image is one static binary, no shell",
    **{
        f"gcr.io/distroless/{name}": "a distroless image has no shell and no curl (GoogleContainerTools/distroless)"
        for name in ("static", "static-debian12", "base", "base-debian12", "base-nossl-debian12", "cc", "cc-debian12")
    },
}


def installer_image_repository(name: str) -> str:
    """An image name as Docker resolves it, short: `docker.io/library/ubuntu` and `library/ubuntu` are `ubuntu`
    (distribution/reference normalize.go: the default domain docker.io, its index alias index.docker.io, and
    the official images' `library/` namespace)."""
    for prefix in ("docker.io/", "index.docker.io/"):
        name = name.removeprefix(prefix)
    return name.removeprefix("library/")

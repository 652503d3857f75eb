"""The images a stack names by default, each pinned or resolved as its comment says (keys.py declares the keys;
this module holds the values, so the key table stays one read)."""

from __future__ import annotations

# Docker Hub's ubuntu:24.04 as an OCI index (every platform), pinned by digest: docker-library/repo-info
# repos/ubuntu/remote/24.04.md at 1c2b9d920fdd20f9cb58fbd6cd771fe434b465d6 (the amd64 image of 2026-09-11,
# sha256:496754492fb28b4d3049432f2ca787449331e23fb14f0dd3fffea86bf5a93eb4). A tag alone could be moved to
# other bytes, and this image runs the privileged installer.
UBUNTU_IMAGE = "ubuntu:24.04@sha256:69cecf4bbf72d2d44a9eef1b71fb98c7fb973d78af11399deccef19beb008ad9"
# Docker's official buildpack-deps:noble-curl (Ubuntu 24.04 plus ca-certificates, curl, gnupg, netbase, sq, wget,
# tzdata; no Python) as an OCI index, pinned by digest: docker-library/repo-info repos/buildpack-deps/remote/
# noble-curl.md (the amd64 image of 2026-09-16, sha256:19436829fc28e3b3d9242ec90c23ab74feedde670470e2baf33cf5fd6ea9f8aa,
# 43.4 MB compressed, on the same first layer as UBUNTU_IMAGE's amd64 image); public Dockerfiles pin the same
# index (`FROM buildpack-deps:noble-curl@sha256:20153d0e...`, found with a code search). The supported profile's
# staging container runs in it: bash, curl, coreutils and tar for store.sh, and Ubuntu 24.04's glibc, the
# builder's and the benchmark pods', for the staged interpreter verify-staged runs.
STAGING_IMAGE = "buildpack-deps:noble-curl@sha256:20153d0e51926e10ed2e2c17343edae0080e4537fa6d613f784b6f64d2df0b69"
# GCE boot images: a family (its newest image when the stack is first deployed, then kept) or one
# image by name. Plain Ubuntu 24.04 is what field report R1 ran (driver and DOCA-OFED from the installer).
# Google's accelerator images ship the NVIDIA driver and the inbox RDMA stack; the family below is the x86
# 580 one, named like those in GoogleCloudPlatform/cluster-toolkit (examples/machine-learning/
# a4-highgpu-8g/a4high-slurm-blueprint.yaml builds on ubuntu-accelerator-2404-amd64-with-nvidia-580-v20260522).
IMAGE_REF_PATTERN = (
    r"projects/(?P<project>[a-z][-a-z0-9]{4,28}[a-z0-9])/global/images/"
    r"(?:family/(?P<family>[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?)|(?P<name>[a-z](?:[-a-z0-9]{0,61}[a-z0-9])?))"
)
PLAIN_UBUNTU_IMAGE = "projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64"
ACCELERATOR_IMAGE_PROJECT = "ubuntu-os-accelerator-images"
ACCELERATOR_IMAGE = (
    f"projects/{ACCELERATOR_IMAGE_PROJECT}/global/images/family/ubuntu-accelerator-2404-amd64-with-nvidia-580"
)

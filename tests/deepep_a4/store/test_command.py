"""`deepep-a4 store build` (docs/store.md): the stack's installer, rendered for the build phases, runs where
the container would (here: the stub machine of tests/components/node/test_installer.py), publishes create-only
with a manifest, and a node of the stack that pins the manifest takes exactly those objects and nothing
else."""

from __future__ import annotations

import base64
import hashlib
import io
import json
import re
import subprocess
import tarfile
from collections.abc import Sequence
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from components import artifacts, config
from components.node import installer, staging
from deepep_a4.cli import main as cli
from deepep_a4.store import command as store_build
from deepep_a4.store import remote as store_remote
from deepep_a4.store import sources as store
from tests.components.node.test_installer import Machine, cfg_of
from tests.conftest import ROOT

STACKS = sorted(p.name[len("Pulumi.") : -len(".yaml")] for p in (ROOT / "stacks").glob("Pulumi.*.yaml"))
IMAGE = "example/cuda:12.9-devel@sha256:" + "0" * 64
STACK_STORE = "gs://deepep-a4-demo-artifacts/deepep-a4"
# The stub machine the build ran on, the store it published to, the manifest's sha256, the container calls.
Built = tuple[Machine, Path, str, list[Sequence[str]]]


def tar_gz(files: dict[str, str], commit: str = "") -> bytes:
    """A source archive as GitHub serves one: one top folder, and for a commit git archive's pax comment."""
    buf = io.BytesIO()
    pax = {"comment": commit} if commit else {}
    with tarfile.open(fileobj=buf, mode="w:gz", format=tarfile.PAX_FORMAT, pax_headers=pax) as tar:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"top/{name}")
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buf.getvalue()


# The function the nvshmem phase reads for NVIDIA/nvshmem#21 (ah_attr not cleared, as in 3.4.5): a stand-in.
IBGDA_STAND_IN = {
    "src/modules/transport/ibgda/ibgda.cpp": (
        "static int ibgda_create_dct_shared_objects(void *state, int portid) {\n"
        "    struct ibv_ah_attr ah_attr;\n    ah = ftable.create_ah(pd, &ah_attr);\n    return 0;\n}\n"
    )
}


def sources_dir(tmp: Path, cfg: config.StackConfig, deepep_commit: str = "") -> Path:
    """The stack's sources as `store fill --from` takes them (stand-ins with the layout the phases read)."""
    src = tmp / "sources"
    src.mkdir(parents=True, exist_ok=True)
    v = cfg.versions
    for s in store.sources(cfg):
        f = src / s.name
        if s.name.startswith("gdrcopy-"):
            f.write_bytes(tar_gz({"README": "gdrcopy"}))
        elif s.name.startswith("nvshmem-"):
            major = 4 if v.nvshmem.startswith("3.5") else 3
            f.write_bytes(tar_gz({"src/CMakeLists.txt": f"set(TRANSPORT_VERSION_MAJOR {major})\n", **IBGDA_STAND_IN}))
        elif s.name.startswith("deepep-pr466-"):
            f.write_text("diff --git a/deep_ep/buffer.py b/deep_ep/buffer.py\n+def _setup_device_hca_mapping(): ...\n")
        elif s.name.startswith("deepep-"):
            files = {"setup.py": "# DeepEP\n", "deep_ep/buffer.py": "class Buffer: ...\n"}
            f.write_bytes(tar_gz(files, deepep_commit or installer.deepep_commit(v.deepep_ref)))
        else:
            f.write_text(f"key {s.name}\n")
    return src


def machine_runner(m: Machine, work: Path, calls: list[Sequence[str]]) -> store_build.Runner:
    """Runs the rendered build where the container would: its mounts are the stub machine's paths."""

    def run(cmd: Sequence[str], env: dict[str, str]) -> int:
        calls.append(cmd)
        (work / "root").rmdir()
        (work / "root").symlink_to(m.root)
        return m.run(work / "installer", DEEPEP_STORE_URL=str(work / "store")).returncode

    return run


def with_cuda(m: Machine, version: str) -> None:
    """The CUDA devel image's toolkit: the cuda phase finds nvcc and installs nothing."""
    nvcc = m.sys / f"usr/local/cuda-{version}/bin/nvcc"
    nvcc.parent.mkdir(parents=True, exist_ok=True)
    nvcc.write_text(f'#!/bin/bash\necho "Cuda compilation tools, release {version}, V{version}.86"\n')
    nvcc.chmod(0o755)


def empty_root(m: Machine) -> None:
    for child in m.root.iterdir():
        subprocess.run(["rm", "-rf", str(child)], check=True)


def node_run(m: Machine, cfg: config.StackConfig, remote: Path) -> subprocess.CompletedProcess[str]:
    d = m.render(cfg)
    proc = m.run(d, DEEPEP_STORE_URL=str(remote))
    if proc.returncode == 75:
        m.reboot()
        proc = m.run(d, DEEPEP_STORE_URL=str(remote))
    return proc


@pytest.fixture
def built(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Built:
    # The stub sources are stand-ins: the published digests in the table would (rightly) refuse them.
    monkeypatch.setattr(installer, "CHECKSUMS", {})
    cfg = cfg_of()
    m = Machine(tmp_path / "m")
    with_cuda(m, cfg.versions.cuda)
    work, remote = tmp_path / "work", tmp_path / "remote"
    calls: list[Sequence[str]] = []
    sha = store_build.build(
        cfg, work, store.LocalStore(remote), IMAGE, sources_dir(tmp_path, cfg), machine_runner(m, work, calls)
    )
    return m, remote, sha, calls


def test_the_builder_runs_only_the_build_phases_in_the_pinned_image() -> None:
    cfg = cfg_of()
    assert store_build.build_phases(cfg) == ("cuda", "gdrcopy", "nvshmem", "pytorch", "deepep")
    assert set(installer.ARTIFACT_DEPS) <= set(store_build.build_phases(cfg))
    cmd = store_build.container_command(IMAGE, Path("/w"), "/opt/deepep")
    assert cmd[:3] == ["docker", "run", "--rm"] and IMAGE in cmd and "--gpus" not in cmd and "--privileged" not in cmd
    assert "/w/root:/opt/deepep" in cmd  # the nodes' install root: part of every artifact key
    for cuda, image in store_build.CUDA_DEVEL_IMAGES.items():
        assert f"cuda:{cuda}" in image and "-devel-ubuntu24.04@sha256:" in image
    with pytest.raises(click.UsageError, match="pinned by digest"):
        store_build.image_for(cfg, "nvidia/cuda:12.9.1-devel-ubuntu24.04")
    with pytest.raises(click.UsageError, match=r"cudaVersion 13\.0"):
        store_build.image_for(
            cfg_of(cudaVersion="13.0", torchVersion="2.11.0+cu130", artifactStore="gs://bucket/prefix"), ""
        )


def test_a_node_that_pins_the_manifest_takes_every_build_from_the_store(built: Built) -> None:
    m, remote, sha, calls = built
    assert len(calls) == 1
    manifest = (remote / "manifests" / f"{sha}.txt" / "data").read_text()
    assert hashlib.sha256(manifest.encode()).hexdigest() == sha
    # "SHA256  REL", an archive's line with "  BYTES" it unpacks to (the node's bound).
    listed = {rel: digest for digest, rel, *_ in (line.split("  ") for line in manifest.splitlines())}
    # Every build phase's artifact, and the PyTorch environment: its list and each of its tar parts.
    phases = {rel.split("/")[1] for rel in listed if rel.startswith("artifacts/")}
    assert phases == {*installer.ARTIFACT_DEPS, "pytorch"}
    assert any(rel.startswith("artifacts/pytorch/") and rel.endswith(".tar") for rel in listed)
    assert {f"sources/{s.name}" for s in store.sources(cfg_of())} <= set(listed)
    for rel, digest in listed.items():
        assert (remote / rel / "sha256").read_text().strip() == digest
    assert not (remote / "locks").exists()
    # A fresh node of the stack with the manifest pinned: every build phase comes from the store.
    empty_root(m)
    proc = node_run(m, cfg_of(artifactStore=STACK_STORE, artifactStoreManifest=sha), remote)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notes = {p: m.status()["phases"][p]["note"] for p in (*installer.ARTIFACT_DEPS, "pytorch")}
    assert all("from the store" in n for n in notes.values()), notes
    assert not [c for c in m.calls("cmake") if "--build" in c]


def test_a_node_refuses_an_object_that_is_not_the_one_its_manifest_pins(built: Built) -> None:
    m, remote, sha, _ = built
    # Whoever can write the bucket replaces an artifact, metadata and all: the manifest still says otherwise.
    [obj] = (remote / "artifacts" / "nvshmem").iterdir()
    (obj / "data").write_bytes(b"poisoned")
    (obj / "sha256").write_text(hashlib.sha256(b"poisoned").hexdigest() + "\n")
    empty_root(m)
    proc = node_run(m, cfg_of(artifactStore=STACK_STORE, artifactStoreManifest=sha), remote)
    assert proc.returncode == 1 and "phase 'nvshmem' failed" in proc.stderr
    assert "is not the object the stack's manifest pins" in (m.root / "logs/nvshmem.log").read_text()
    # A manifest that is not the pinned one is refused before anything is taken from it.
    empty_root(m)
    proc = node_run(m, cfg_of(artifactStore=STACK_STORE, artifactStoreManifest="ab" * 32), remote)
    assert proc.returncode == 1
    assert f"has no manifests/{'ab' * 32}.txt" in proc.stderr


def test_the_builder_refuses_to_vouch_for_an_object_someone_else_wrote(tmp_path: Path, built: Built) -> None:
    _, remote, sha, _ = built
    local = store.LocalStore(tmp_path / "work" / "store")
    rels = store_build.built(cfg_of(), tmp_path / "work")
    [obj] = (remote / "artifacts" / "deepep").iterdir()
    # The recorded digest is the writer's word: a wrong one over the same bytes changes nothing.
    (obj / "sha256").write_text("f" * 64 + "\n")
    assert store_build.publish(local, store.LocalStore(remote), rels, echo=lambda _: None) == sha
    # Other bytes under a recorded digest that claims this build's: judged by the bytes, refused.
    (obj / "data").write_bytes(b"someone else's")
    (obj / "sha256").write_text(local.digest(f"artifacts/deepep/{obj.name}") + "\n")
    with pytest.raises(click.ClickException, match="written elsewhere"):
        store_build.publish(local, store.LocalStore(remote), rels, echo=lambda _: None)


def test_the_builder_hashes_what_it_uploads_and_refuses_a_stale_work_folder(tmp_path: Path, built: Built) -> None:
    del built  # the build left its work folder under tmp_path
    local = store.LocalStore(tmp_path / "work" / "store")
    rels = store_build.built(cfg_of(), tmp_path / "work")
    [obj] = (local.root / "artifacts" / "nvshmem").iterdir()
    (obj / "data").write_bytes(b"an older build's bytes")  # its recorded sha256 is still this build's
    with pytest.raises(click.ClickException, match="stale or altered"):
        store_build.publish(local, store.LocalStore(tmp_path / "fresh"), rels, echo=lambda _: None)


def test_deepep_from_the_store_must_be_the_pinned_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(installer, "CHECKSUMS", {})
    cfg = cfg_of()
    m = Machine(tmp_path / "m")
    with_cuda(m, cfg.versions.cuda)
    work = tmp_path / "work"
    src = sources_dir(tmp_path, cfg, deepep_commit="1" * 40)
    with pytest.raises(click.ClickException, match="the build failed"):
        store_build.build(cfg, work, store.LocalStore(tmp_path / "remote"), IMAGE, src, machine_runner(m, work, []))
    log = (m.root / "logs/deepep.log").read_text()
    assert f"is of commit '{'1' * 40}', not the pinned {installer.deepep_commit(cfg.versions.deepep_ref)}" in log


@pytest.mark.parametrize("stack", STACKS)
def test_store_build_dry_run_renders_and_names_the_container(
    stack: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A machine that can build here (docker on PATH, x86_64): the local build (test_store_remote.py: the other)
    monkeypatch.setattr(store_remote.shutil, "which", lambda _: "/usr/bin/docker")
    monkeypatch.setattr(store_remote.platform, "machine", lambda: "x86_64")
    store = str(tmp_path / "store")  # the example stacks name no store of ours: the builder is told one
    args = ["store", "build", "--stack", stack, "--store", store, "--work", str(tmp_path), "--dry-run"]
    result = CliRunner().invoke(cli, args)
    if result.exit_code != 0:  # a stack whose CUDA has no image pinned here must say so
        assert "--image NAME@sha256:DIGEST" in result.output
        return
    assert "docker run --rm" in result.output and "@sha256:" in result.output
    conf = (tmp_path / "installer/config.sh").read_text()
    assert "STORE_PUBLISH=1" in conf and "STORE_TRUST_PUBLISHED=1" in conf and "REQUIRE_CHECKSUMS=1" in conf


@pytest.mark.parametrize(("stack", "root"), [("gke-b200", "/home/kubernetes/bin/deepep"), ("gce-b200", "/opt/deepep")])
def test_a_supported_stacks_build_packs_the_staged_parts_at_the_nodes_staged_root(stack: str, root: str) -> None:
    cfg = cfg_of(stack)
    assert store_build.build_phases(cfg)[-1] == store_build.PACK == "pack-userspace"
    assert {"nvshmem", "pytorch", "deepep"} <= set(store_build.build_phases(cfg))
    assert store_build.build_root(cfg) == root == staging.staged_root(cfg, cfg.platform)
    conf = installer.render_profile(cfg, store_build.build_profile(cfg))["config.sh"]
    for part, rel in staging.objects(cfg, cfg.platform).items():
        assert f"  [{part}]={rel}\n" in conf  # the names the nodes compute, to publish under
    assert "NODE_PROFILE=supported" in conf and f"DEEPEP_DEFAULT_ROOT={root}" in conf
    # Its manifest lists the staged parts (and the venv's tar parts, read from its list: not built here), and
    # on GCE gIB's two apt keys, which its VMs still fetch and only the manifest pins.
    keys = (
        [f"sources/{n}" for n in ("google-cloud-packages", "google-artifact-registry")] if stack == "gce-b200" else []
    )
    assert store_build.built(cfg, Path("/nonexistent")) == [*staging.objects(cfg, cfg.platform).values(), *keys]


def test_gce_b200_with_a_manifest_takes_gibs_apt_keys_from_the_store(tmp_path: Path) -> None:
    # gce-b200 (nodeProfile=supported) stages its user space, but its VMs still install nccl-gib from Google's
    # apt repositories, whose two signing keys no project pin covers. With a manifest pinned (no first-up
    # digest then), the nccl-gib phase's own apt_key must find each key in the store, pinned by the manifest
    # the builder writes from `built`; a key the manifest misses is refused, and nccl-gib would fail on every VM.
    cfg = cfg_of("gce-b200")
    phase = (ROOT / "scripts/install/phases/12-nccl-gib.sh").read_text()
    wanted = re.findall(r'apt_key "\$\w+" ([\w-]+)', phase)
    assert wanted == ["google-cloud-packages", "google-artifact-registry"]
    local = store.LocalStore(tmp_path / "store")
    for name in wanted:
        f = tmp_path / name
        f.write_text(f"-----BEGIN PGP PUBLIC KEY BLOCK-----\n{name}\n")
        local.put(f"{store.SOURCES_DIR}/{name}", f)
    rels = [r for r in store_build.built(cfg, tmp_path / "work") if local.has(r)]
    manifest = tmp_path / "manifest.txt"
    manifest.write_text(store_build.manifest_text({r: local.digest(r) for r in rels}))
    sha = store.sha256_file(manifest)
    local.put(f"manifests/{sha}.txt", manifest)
    node = cfg_of("gce-b200", artifactStore=STACK_STORE, artifactStoreManifest=sha)
    d = tmp_path / "installer"
    artifacts.reset()  # the render registers what it publishes; other tests rendered other config.sh files
    for rel, text in installer.render_installer(node, "gce").items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    assert (d / "phases/12-nccl-gib.sh").is_file(), "the supported GCE profile ships the nccl-gib phase"
    script = f"""
set -Eeuo pipefail
source {d}/config.sh
source {d}/lib.sh
PHASE=nccl-gib
source {d}/phases/12-nccl-gib.sh
mkdir -p "$CACHE"
_download() {{ echo "no download here: $1" >&2; return 1; }}
apt_key "$GOOGLE_APT_KEY_URL" google-cloud-packages
apt_key "$GIB_APT_KEY_URL" google-artifact-registry
"""
    env = {
        "PATH": "/usr/bin:/bin",
        "DEEPEP_INSTALL_ROOT": str(tmp_path / "root"),
        "DEEPEP_SYSROOT": str(tmp_path / "sys"),
        "DEEPEP_STORE_URL": str(tmp_path / "store"),
        "DEEPEP_RETRY_BASE_S": "0",
    }
    proc = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stdout.split() == [f"/etc/apt/keyrings/{n}.asc" for n in wanted]
    for name in wanted:
        assert (tmp_path / "sys/etc/apt/keyrings" / f"{name}.asc").read_text().endswith(f"{name}\n")


def test_a_gcs_object_is_judged_by_the_md5_cloud_storage_computed(tmp_path: Path) -> None:
    # `gcloud storage objects describe --format=json` shows md5_hash, the base64 MD5 the service computed of
    # the stored bytes (https://cloud.google.com/storage/docs/hashes-etags); custom metadata is the writer's.
    f = tmp_path / "part.tar"
    f.write_bytes(b"the build's bytes")
    md5 = base64.b64encode(hashlib.md5(f.read_bytes(), usedforsecurity=False).digest()).decode()
    fake = tmp_path / "gcloud"
    for stored, same in ((md5, True), (base64.b64encode(b"x" * 16).decode(), False)):
        meta = {"md5_hash": stored, "custom_fields": {"sha256": hashlib.sha256(f.read_bytes()).hexdigest()}}
        fake.write_text(f"#!/bin/sh\necho '{json.dumps(meta)}'\n")
        fake.chmod(0o755)
        assert store.GcsStore("gs://b/p", gcloud=str(fake)).same_bytes("artifacts/x", f) is same

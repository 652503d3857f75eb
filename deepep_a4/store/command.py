"""`deepep-a4 store build --stack S`: the one writer of the artifact store (docs/store.md).

Nodes that run benchmarks do not publish (artifactStorePublish is off): whoever can write the store decides
what every later node runs as root, and a node's service account is reachable from its privileged pods.
The builder runs on the user's own machine and credentials instead:

1. `store fill` puts the stack's sources, and the signing keys no published pin covers, into a local store
   folder: downloaded here once, over TLS, which is where their digests are learned;
2. the stack's own installer, rendered with only the phases that build an artifact (ARTIFACT_DEPS in
   components/node/installer.py) and those they need (CUDA, PyTorch), runs in a CUDA devel container pinned by
   digest, with the stack's CUDA, GPU arch and the nodes' install root, so its artifact keys are the
   ones the nodes compute; it publishes into the local folder. For a supported stack (nodeProfile=supported)
   it builds at the nodes' staged root and ends with pack-userspace, which packs the staged parts
   (components/node/staging.py: Python, the PyTorch venv, NVSHMEM, DeepEP, rdma-core) from what it built;
3. every source and artifact is copied create-only to the stack's store with the user's gcloud, and a
   manifest of their digests is written there as `manifests/SHA256.txt`;
4. the stack pins the manifest: `pulumi config set deepep-a4:artifactStoreManifest SHA256`. Nodes then
   take only what it lists, each object checked against its digest (scripts/install/store.sh).
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tarfile
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

import click

from components.config import StackConfig
from components.node import installer, staging
from deepep_a4 import options
from deepep_a4.store import estimate as store_estimate
from deepep_a4.store import remote as store_remote
from deepep_a4.store import sources as store

# The container's view: the rendered installer and the local store (the install root is the nodes').
BUILD_DIR = "/deepep-build"
# CUDA devel images by digest, per the stacks' CUDA: Ubuntu 24.04, the nodes' release (the artifact key
# holds it, so another release would only miss). nvidia/cuda:12.9.1-devel-ubuntu24.04 as public projects
# pin it (e.g. a Dockerfile that resolved it with `docker buildx imagetools inspect`).
CUDA_DEVEL_IMAGES = {
    "12.9": "nvidia/cuda:12.9.1-devel-ubuntu24.04"
    "@sha256:020bc241a628776338f4d4053fed4c38f6f7f3d7eb5919fecb8de313bb8ba47c",
}
# Phases that act on a host (GPUs, NICs, kernel modules, reboots): a build needs none of them.
HOST_PHASES = ("preflight", "doca-ofed", "nvidia-driver", "peermapping", "env", "verify", "nccl-gib")
# A supported stack's last build phase: the staged parts (components/node/staging.py) from what the build made.
PACK = "pack-userspace"

Runner = Callable[[Sequence[str], dict[str, str]], int]


def build_phases(cfg: StackConfig) -> tuple[str, ...]:
    """The phases that publish an artifact and every phase they need, in the installer's order; a supported
    stack's build ends with pack-userspace, which packs the staged parts from what they built."""
    deps = installer.phase_deps(cfg)
    wanted: set[str] = set()
    todo = list(installer.ARTIFACT_DEPS)
    while todo:
        p = todo.pop()
        if p not in wanted and p not in HOST_PHASES:
            wanted.add(p)
            todo += deps.get(p, ())
    return tuple(p for p in installer.PHASES if p in wanted) + ((PACK,) if cfg.staged else ())


def build_root(cfg: StackConfig) -> str:
    """The nodes' install root (staged root): the artifact keys and the staged parts' keys hold it."""
    return staging.staged_root(cfg, cfg.platform) if cfg.staged else installer.INSTALL_ROOTS[cfg.platform]


def build_profile(cfg: StackConfig) -> installer.Profile:
    phases = build_phases(cfg)
    return installer.Profile(
        target=cfg.platform,
        root=build_root(cfg),
        phases=phases,
        left_out={
            p: "the store builder runs only the phases whose output the store keeps"
            for p in installer.PHASES
            if p not in phases
        },
        values={
            "STORE_URL": f"{BUILD_DIR}/store",
            "STORE_PUBLISH": True,
            "STORE_ONLY": True,  # the sources are in the local store already (fill)
            "STORE_MANIFEST": "",
            "STORE_TRUST_PUBLISHED": True,  # its own folder, written by this build and fill alone
            "INSTALL_DRIVER": False,
            "USE_DOCA_OFED": False,
            "GDRCOPY_KERNEL_MODULE": False,  # built per node against its driver, never stored
            "ALLOW_REBOOT": False,
            "HAS_RDMA_NICS": False,
            "EXPECTED_GPUS": 0,
            "EXPECTED_NICS": 0,
        },
        stage_objects=staging.objects(cfg, cfg.platform) if cfg.staged else None,
    )


def image_for(cfg: StackConfig, image: str) -> str:
    chosen = image or CUDA_DEVEL_IMAGES.get(cfg.versions.cuda, "")
    if not chosen:
        raise click.UsageError(
            f"no CUDA devel image is pinned here for cudaVersion {cfg.versions.cuda}: "
            "pass --image NAME@sha256:DIGEST (Ubuntu 24.04, CUDA at /usr/local/cuda-VERSION)"
        )
    if "@sha256:" not in chosen:
        raise click.UsageError(f"--image {chosen!r} must be pinned by digest (NAME@sha256:DIGEST)")
    return chosen


def container_command(image: str, work: Path, root: str) -> list[str]:
    """docker run of the rendered installer: no GPU (builds name their arch), no host network or mounts but these."""
    return [
        "docker", "run", "--rm", "--platform", "linux/amd64",
        "-v", f"{work / 'installer'}:{BUILD_DIR}/installer:ro",
        "-v", f"{work / 'store'}:{BUILD_DIR}/store",
        "-v", f"{work / 'root'}:{root}",
        "-e", f"DEEPEP_STORE_URL={BUILD_DIR}/store",
        "-e", f"DEEPEP_INSTALL_ROOT={root}",
        image, "bash", f"{BUILD_DIR}/installer/run.sh",
    ]  # fmt: skip


def render(cfg: StackConfig, work: Path) -> None:
    for rel, text in installer.render_profile(cfg, build_profile(cfg)).items():
        path = work / "installer" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    (work / "store").mkdir(parents=True, exist_ok=True)
    (work / "root").mkdir(parents=True, exist_ok=True)


def _with_parts(work: Path, rel: str) -> list[str]:
    """REL, and for a split object (`.parts`: the PyTorch environment) every tar part its list names."""
    listing = work / "store" / rel / "data"
    if not (rel.endswith(".parts") and listing.is_file()):
        return [rel]
    base = rel.removesuffix(".parts")
    return [rel] + [f"{base}/{line.split()[0]}" for line in listing.read_text().splitlines() if line.strip()]


def built(cfg: StackConfig, work: Path) -> list[str]:
    """What the nodes take from this build, by store name: a supported stack's staged parts, and the signing
    keys its nodes still fetch (gIB's two apt keys on GCE: only the manifest pins them); otherwise the
    sources, the artifact of every build phase and the PyTorch environment. Split objects with their parts."""
    if cfg.staged:
        rels = list(staging.objects(cfg, cfg.platform).values())
        rels += [f"{store.SOURCES_DIR}/{n}" for n in installer.manifest_pinned(cfg, fetched_only=True)]
    else:
        rels = [f"{store.SOURCES_DIR}/{s.name}" for s in store.sources(cfg)]
        for phase in (*installer.ARTIFACT_DEPS, "pytorch"):
            key = work / "root" / "state" / "artifacts" / phase
            if key.is_file():
                suffix = "parts" if phase == "pytorch" else "tar.gz"  # 08-pytorch.sh: ARTIFACT_PARTS
                rels.append(f"artifacts/{phase}/{key.read_text().strip()}.{suffix}")
    return [r for rel in rels for r in _with_parts(work, rel)]


def manifest_text(entries: dict[str, str], unpacked: dict[str, int] | None = None) -> str:
    """sha256sum's format ("SHA256  REL"), sorted: the same build gives the same manifest. An archive's line
    adds the bytes its regular members hold ("SHA256  REL  BYTES"): the nodes unpack no more than that
    (scripts/install/store.sh store_untar), and the user reads it before pinning."""
    unpacked = unpacked or {}
    return "".join(
        f"{digest}  {rel}{f'  {unpacked[rel]}' if rel in unpacked else ''}\n" for rel, digest in sorted(entries.items())
    )


def unpacked_bytes(rel: str, data: Path) -> int | None:
    """What an archive object unpacks to: the sum of its regular members' sizes (tar's own listing, as
    `tar -tv` prints it); None for an object that is no archive."""
    if not rel.endswith((".tar.gz", ".tar")):
        return None
    with tarfile.open(data, "r:*") as tar:
        return sum(m.size for m in tar if m.isreg())


def publish(
    local: store.LocalStore, remote: store.LocalStore | store.GcsStore, rels: list[str], echo=click.echo
) -> str:
    """Copies every REL create-only to the remote store, then the manifest; returns the manifest's sha256.

    Each REL's bytes are hashed here, as uploaded: the manifest lists that sha256, never a recorded one, and a
    local object whose recorded digest is not its bytes (a stale or altered work folder) is refused. An object
    the remote already has with other bytes is not listed: someone else wrote it, and the builder vouches only
    for bytes it made or downloaded itself (delete it there, then build again)."""
    entries: dict[str, str] = {}
    unpacked: dict[str, int] = {}
    for rel in rels:
        data = local.root / rel / "data"
        if not local.digest(rel) or not data.is_file():
            raise click.ClickException(f"the build has no {rel}: see the installer's log under the work folder")
        digest = store.sha256_file(data)
        if digest != local.digest(rel):
            raise click.ClickException(
                f"the work folder's {rel} has sha256 {digest}, not its recorded {local.digest(rel)}: a stale or "
                "altered object; delete the work folder, then run the build again"
            )
        if remote.put(rel, data):
            echo(f"  published {rel}")
        elif not remote.same_bytes(rel, data):
            raise click.ClickException(
                f"the store already has {rel} with other bytes than this build's (sha256 {digest}): it was "
                "written elsewhere; delete it from the store, then run the build again"
            )
        entries[rel] = digest
        if (size := unpacked_bytes(rel, data)) is not None:
            unpacked[rel] = size
    text = manifest_text(entries, unpacked)
    sha = hashlib.sha256(text.encode()).hexdigest()
    with tempfile.TemporaryDirectory(prefix="deepep-manifest-") as tmp:
        f = Path(tmp) / "manifest.txt"
        f.write_text(text)
        remote.put(f"manifests/{sha}.txt", f)
    return sha


def _docker(cmd: Sequence[str], env: dict[str, str]) -> int:
    return subprocess.run(list(cmd), check=False, env=env or None).returncode


def build(
    cfg: StackConfig,
    work: Path,
    remote: store.LocalStore | store.GcsStore,
    image: str,
    from_dir: Path | None,
    runner: Runner = _docker,
    echo=click.echo,
) -> str:
    render(cfg, work)
    local = store.LocalStore((work / "store").resolve())
    store.fill(store.sources(cfg), local, from_dir, echo)
    cmd = container_command(image, work.resolve(), build_root(cfg))
    echo("running: " + " ".join(cmd))
    rc = runner(cmd, {})
    if rc != 0:
        raise click.ClickException(f"the build failed (exit {rc}): logs under {work / 'root' / 'logs'}")
    return publish(local, remote, built(cfg, work), echo)


@click.command("build")
@click.option("--stack", required=True, help="stack name (stacks/Pulumi.NAME.yaml) or a stack file path")
@click.option("--store", "store_url", default="", help="gs://BUCKET/PREFIX or a folder; default: the stack's")
@click.option("--image", default="", help="CUDA devel image NAME@sha256:DIGEST; default: pinned per cudaVersion")
@options.folder("--work", help="build folder, kept between builds (default: ~/.cache/deepep-a4/build/STACK)")
@options.folder(
    "--from",
    "from_dir",
    exists=True,
    help="take the sources from this folder (named as the store names them) instead of downloading",
)
@click.option(
    "--remote",
    is_flag=True,
    help="build on Cloud Build (also chosen when this machine has no docker or is not x86_64)",
)
@click.option("--build-project", default="", help="--remote: the project that runs the build; default: the stack's")
@click.option(
    "--dry-run", is_flag=True, help="render the build and print the container command or the Cloud Build request"
)
def build_command(
    stack: str,
    store_url: str,
    image: str,
    work: Path | None,
    from_dir: Path | None,
    remote: bool,
    build_project: str,
    dry_run: bool,
) -> None:
    """Build the stack's artifacts in a CUDA container and publish them with a manifest to pin."""
    # A dry run renders and prints, and touches no store: it works before the stack names one.
    cfg, url = store.stack_and_store(stack, store_url, required=not dry_run)
    chosen = image_for(cfg, image)
    folder: Path = work or Path.home() / ".cache" / "deepep-a4" / "build" / cfg.stack
    # A dry run starts no container: it shows the local build whether or not the docker daemon answers now.
    why = store_remote.remote_reason(remote, daemon=(lambda: True) if dry_run else None)
    if why:
        sha = remote_build(cfg, url, chosen, folder, from_dir, build_project, why, dry_run)
        if not sha:
            return
    elif dry_run:
        render(cfg, folder)
        click.echo(f"rendered {folder}/installer: phases {' '.join(build_phases(cfg))}")
        click.echo(" ".join(container_command(chosen, folder.resolve(), build_root(cfg))))
        if not url:
            click.echo(
                f"no store yet: the build publishes to the stack's artifactStore (pulumi config set "
                f"deepep-a4:artifactStore gs://BUCKET/PREFIX -s {cfg.stack}) or --store"
            )
        return
    else:
        sha = build(cfg, folder, store.open_store(url), chosen, from_dir)
    click.echo(f"manifest {url}/manifests/{sha}.txt")
    click.echo(f"pin it in the stack: pulumi config set deepep-a4:artifactStoreManifest {sha} -s {cfg.stack}")


def remote_build(
    cfg: StackConfig, url: str, image: str, work: Path, from_dir: Path | None, project: str, why: str, dry_run: bool
) -> str:
    """The build on Cloud Build (store_remote.py); returns the manifest's sha256 ("" after a dry run)."""
    if not url.startswith("gs://"):
        raise click.UsageError(f"--store {url!r}: a build on Cloud Build ({why}) publishes to gs://BUCKET/PREFIX only")
    if project and not re.fullmatch(r"[a-z][a-z0-9-]{4,28}[a-z0-9]", project):
        # https://cloud.google.com/resource-manager/docs/creating-managing-projects (project ID requirements)
        raise click.UsageError(f"--build-project {project!r} is not a project id (6-30 chars: a-z 0-9 -, letter first)")
    target = store_remote.Target(project or cfg.project, cfg.installer.store_build_region, url, build_root(cfg))
    click.echo(f"building on Cloud Build ({why}): {store_estimate.estimate_line(cfg=cfg)}")
    render(cfg, work)
    if not dry_run:
        return store_remote.run(cfg, work, image, target, from_dir)
    _, sha = store_remote.prepare(cfg, work, from_dir, fill=False)
    click.echo(
        f"rendered {work}: phases {' '.join(build_phases(cfg))}; build.tar.gz sha256 {sha} (sources not fetched)"
    )
    click.echo(f"POST https://cloudbuild.googleapis.com/v1/{target.parent}/builds")
    click.echo(store_remote.as_json(store_remote.request(cfg, image, target, sha)))
    return ""


# `deepep-a4 store`: the store's group (fill) with build added here, so that store.py imports nothing of this.
command = store.command
command.add_command(build_command)

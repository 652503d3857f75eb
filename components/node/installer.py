"""The node installer, rendered from the stack's versions: one code path for GKE nodes and GCE VMs.

`scripts/install/` holds the bash runner (`run.sh`), its shared helpers (`lib.sh`) and one file per
phase (`phases/NN-name.sh`). Rendering adds `config.sh`: the stack's versions, options, download URLs,
pinned checksums and the phase dependency graph. The scripts themselves are shipped byte for byte, so
the offline plan's `files/install/<target>/` is exactly what runs on a node.

    render_installer(cfg, "gke" | "gce", resolved)  -> {relative path: text}, entry point "run.sh"
    installer_hash(cfg)                             -> 16 hex digits naming the versions and the rendered text

Pins (docs/installer.md, "What is pinned"): a download is checked against `CHECKSUMS` (name -> sha256, each
as published where the comment says), a signing key against `KEY_FINGERPRINTS`, else against the stack's
store manifest (`artifactStoreManifest`) or, without one, the sha256 resolved at the first `pulumi up` and
kept in the stack's state (`first_up_names`; `resolved`, from components/node/pins.py; a stand-in until then).
`REQUIRE_CHECKSUMS` refuses a download with none of these. DeepEP and PR #466 are pinned by git commit.
"""

from __future__ import annotations

import hashlib
import json
import shlex
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from components import artifacts
from components.config import StackConfig, upstream, versions
from components.node import staging, torch_lock
from scripts import names, payload

INSTALL_ROOTS = names.INSTALL_ROOTS
ENTRYPOINT = "run.sh"
GCE_INSTALLER_DIR = names.install_paths("gce")["installer"]  # where the GCE startup script puts the files
REBOOT_EXIT = names.EXIT_REBOOT
Pins = Mapping[str, str] | None  # name -> sha256 resolved at the first `pulumi up` (components/node/pins.py)
Rendered = tuple[dict[str, str], str]

# nccl-gib: NCCL's gIB plugin on GCE (GKE: components/gke/gib.py); verify does not use it (NVSHMEM), so it comes last.
PHASES: tuple[str, ...] = ("preflight", "doca-ofed", "nvidia-driver", "peermapping", "cuda", "gdrcopy", "nvshmem")
PHASES += ("pytorch", "deepep", "env", "verify", "nccl-gib")

# sha256 of downloads, by the name the phases pass to `fetch`; only digests published for that exact URL.
CHECKSUMS: dict[str, str] = {
    # spack/spack-packages repos/spack_repo/builtin/packages/gdrcopy/package.py (url archive/v{version}.tar.gz).
    "gdrcopy-2.5.1.tar.gz": "c6d5ebb7dabb89d798f27609511735595004da73af28d93ac041bb5290c4cbec",
    # spack/spack-packages repos/spack_repo/builtin/packages/nvshmem/package.py (url_for_version: NVIDIA's redist).
    "nvshmem-3.3.9-source": "ba41e9ad6650cf99c1a60a3e47c19d1d97d814add7d35ea72337520ae13eeb59",
    # cuda-keyring 1.1-1 of repos/ubuntu2404/x86_64 and repos/ubuntu2204/x86_64, as NVIDIA's own NCCL install
    # script (2026, x86_64) and Dockerfiles that pin them check it with sha256sum --check.
    "cuda-keyring_1.1-1_all-ubuntu2404.deb": "d2a6b11c096396d868758b86dab1823b25e14d70333f1dfa74da5ddaf6a06dba",
    "cuda-keyring_1.1-1_all-ubuntu2204.deb": "d93190d50b98ad4699ff40f4f7af50f16a76dac3bb8da1eaaf366d47898ff8df",
}
# Signing keys by fingerprint (gpg reads the file; each primary key must match): a key file may be re-served
# with other bytes, a key keeps its fingerprint. A 16-digit entry is a long key id, where only that is published.
KEY_FINGERPRINTS: dict[str, tuple[str, ...]] = {
    # Mellanox Technologies' signing key of DOCA-OFED's repositories: the id NVIDIA's MLNX_OFED guides import.
    "GPG-KEY-Mellanox": ("A024F6F0E6D6A281",),
}
REQUIRE_CHECKSUMS = True

# The supported profile (nodeProfile=supported): the node image brings the driver, so only the staged user
# space and its checks ship (components/node/staging.py); GCE keeps the gIB plugin's apt package.
STAGED_PHASES: tuple[str, ...] = ("stage", "verify-staged")
_STAGED_LEFT_OUT = (
    "nodeProfile=supported: the driver and the RDMA stack come with the node image; nothing is installed on the host"
)


def node_phases(cfg: StackConfig, target: str) -> tuple[str, ...]:
    """The phases that ship to a stack's node on `target`: the whole host install, or the staged profile's."""
    if not cfg.staged:
        return target_phases(target)[0]
    return STAGED_PHASES + (("nccl-gib",) if target == "gce" else ())


def left_out(cfg: StackConfig, target: str) -> dict[str, str]:
    """The phases a node does not ship, each with the reason (the status shows them)."""
    shipped = node_phases(cfg, target)
    return {p: _STAGED_LEFT_OUT for p in PHASES if p not in shipped} if cfg.staged else target_phases(target)[1]


GPU_PCI_IDS = {"nvidia-b200": ("NVIDIA B200", ("0x2901",))}  # per accelerator, for preflight before any driver

CUDA_REPO_BASE = "https://developer.download.nvidia.com/compute/cuda/repos"
DOCA_REPO_BASE = versions.DOCA_REPO_BASE
PYPI_INDEX_URL = "https://pypi.org/simple"
DEEPEP_REPO = "https://github.com/deepseek-ai/DeepEP.git"
NUMPY_SPEC = "numpy<3"
MIN_FREE_GB = 40
APT_LOCK_TIMEOUT_S = 900
# Google's gIB NCCL plugin for GCE VMs, as cluster-toolkit's A4 blueprints install it
# (examples/machine-learning/a4-highgpu-8g/a4high-slurm-blueprint.yaml pins nccl_gib_version 1.1.0; the
# repositories and keys as there and in a4high-vm.yaml, 1047080375afb). The version is written here only.
NCCL_GIB_VERSION = "1.1.0"
GIB_APT_REPO = "ar+https://us-apt.pkg.dev/projects/gce-ai-infra gpudirect-gib-apt main"
GIB_APT_KEY_URL = "https://us-apt.pkg.dev/doc/repo-signing-key.gpg"
GOOGLE_APT_TRANSPORT_REPO = "https://packages.cloud.google.com/apt apt-transport-artifact-registry-stable main"
GOOGLE_APT_KEY_URL = "https://packages.cloud.google.com/apt/doc/apt-key.gpg"


def deepep_commit(ref: str) -> str:
    """The commit a DeepEP ref must resolve to: the checked one of a known tag, the ref itself if a hash."""
    known = upstream.DEEPEP_REFS.get(ref)
    return known.commit if known else ("" if ref.startswith("v") else ref)


def gdrcopy_url(version: str) -> str:
    # Exactly the URL the published digest is for (CHECKSUMS).
    return f"https://github.com/NVIDIA/gdrcopy/archive/v{version}.tar.gz"


def manifest_pinned(cfg: StackConfig, fetched_only: bool = False) -> list[str]:
    """What the stack's nodes may fetch with no pin in this module: only the store manifest can pin them
    (`deepep-a4 store build` downloads them once, on the user's machine); until then nodes refuse them.
    `fetched_only`: without what a shipped phase skips on this platform (gIB's keys on GKE)."""
    v = cfg.versions
    # A staged node (nodeProfile=supported) downloads nothing but the store's objects, and gIB's keys on GCE.
    names = [] if cfg.staged else [f"gdrcopy-{v.gdrcopy}.tar.gz"]
    if v.nvshmem_source == "source" and not cfg.staged:
        names.append(f"nvshmem-{v.nvshmem}-source")
    if cfg.installer.use_doca_ofed and not cfg.staged:
        names.append("GPG-KEY-Mellanox")
    # The phase ships to every target (it skips itself on GKE), so its keys are listed for both.
    if cfg.installer.nccl_gib and (cfg.platform == "gce" or not fetched_only):
        names += ["google-cloud-packages", "google-artifact-registry"]
    pinned = checksums(cfg)
    return [n for n in names if n not in pinned and n not in KEY_FINGERPRINTS]


def first_up_names(cfg: StackConfig) -> list[str]:
    """What the nodes fetch with no pin here and no store manifest: its sha256 is resolved at the first
    `pulumi up` and kept (components/node/pins.py); until then config.sh carries FIRST_UP_STAND_IN for it."""
    return [] if cfg.installer.store_manifest else manifest_pinned(cfg, fetched_only=True)


FIRST_UP_STAND_IN = "STAND-IN:resolved-at-the-first-pulumi-up"  # never a sha256: lib.sh's fetch refuses it
# The name each overridable download has in the SHA256 table (the NAME the phases pass to `fetch`).
OVERRIDE_FETCH_NAMES = {
    "gdrcopy": "gdrcopy-{version}.tar.gz",
    "nvshmem": "nvshmem-{version}-source",
    "docaOfed": "doca-{version}-GPG-KEY-Mellanox.pub",
}


def checksums(cfg: StackConfig) -> dict[str, str]:
    """The SHA256 table of config.sh: the project's pins and the digest of every versionOverrides download."""
    pins = dict(CHECKSUMS)
    if cfg.versions.deepep_api == "v2":  # the NCCL wheel DeepEP V2 runs with, pinned as PyPI serves it
        _, wheel, sha = versions.nccl_wheel(cfg.versions.nccl, cfg.versions.torch_cuda_variant)
        pins[wheel] = sha
    for o in cfg.versions.overrides:
        if o.component in OVERRIDE_FETCH_NAMES:
            pins[OVERRIDE_FETCH_NAMES[o.component].format(version=o.version)] = o.sha256
    return pins


def deepep_v2_values(cfg: StackConfig) -> dict[str, object]:
    """config.sh's DeepEP V2 values (V1: an empty wheel, and DEEPEP_API unset, read as v1): the NCCL wheel
    that replaces PyTorch's in the venv (one NCCL per process: DeepEP V2 deep_ep/__init__.py check_nccl_so)
    and the fmt submodule commit the V2 tree needs (third-party/fmt)."""
    v = cfg.versions
    if v.deepep_api != "v2":  # nothing to download: the phase's fetch of the wheel names an empty URL
        return {"NCCL_WHEEL_FILE": "", "NCCL_WHEEL_URL": ""}
    package, wheel, _ = versions.nccl_wheel(v.nccl, v.torch_cuda_variant)
    return {
        "DEEPEP_API": "v2",
        "NCCL_VERSION": v.nccl,
        "NCCL_WHEEL": package,
        "NCCL_WHEEL_FILE": wheel,
        "NCCL_WHEEL_URL": nccl_wheel_url(v.nccl, v.torch_cuda_variant),
        "DEEPEP_FMT_COMMIT": upstream.DEEPEP_V2_FMT,
    }


def nccl_wheel_url(version: str, torch_variant: str) -> str:
    """PyPI's path for a wheel by its name (/packages/<python tag>/<first letter>/<project>/<file>), which
    files.pythonhosted.org serves for every uploaded file; the SHA256 table pins the bytes."""
    package, wheel, _ = versions.nccl_wheel(version, torch_variant)
    return f"https://files.pythonhosted.org/packages/py3/{package[0]}/{package}/{wheel}"


def gdrcopy_src_url(cfg: StackConfig) -> str:
    """The GDRCopy source the gdrcopy phase fetches: the override's URL when the stack names one."""
    override = cfg.versions.override("gdrcopy")
    return override.url if override else gdrcopy_url(cfg.versions.gdrcopy)


def nvshmem_src_url(cfg: StackConfig) -> str:
    """The NVSHMEM source a source build fetches ("" for the pip wheel)."""
    if cfg.versions.nvshmem_source != "source":
        return ""
    override = cfg.versions.override("nvshmem")
    return override.url if override else upstream.nvshmem_source_url(cfg.versions.nvshmem)


def phase_deps(cfg: StackConfig) -> dict[str, tuple[str, ...]]:
    """Which phases each phase consumes; a changed key reruns the phase and everything downstream of it."""
    pip = cfg.versions.nvshmem_source == "pip"
    deps: dict[str, tuple[str, ...]] = {
        "preflight": (),
        "doca-ofed": ("preflight",),
        "nvidia-driver": ("preflight",),
        "peermapping": ("doca-ofed", "nvidia-driver"),
        "cuda": ("preflight",),
        "gdrcopy": ("cuda", "nvidia-driver") if cfg.installer.gdrcopy_kernel_module else ("cuda",),
        # The wheel needs no GDRCopy; a source build compiles against it.
        "nvshmem": ("cuda",) if pip else ("cuda", "gdrcopy"),
        # With the wheel, PyTorch is installed under a constraint on the wheel's version.
        "pytorch": ("preflight", "nvshmem") if pip else ("preflight",),
        "deepep": ("cuda", "nvshmem", "pytorch"),
        "env": ("doca-ofed", "peermapping", "cuda", "gdrcopy", "nvshmem", "pytorch", "deepep"),
    }
    # The plugin goes into its own folder and needs nothing else the installer puts on the node.
    deps["nccl-gib"] = ("preflight",)
    deps["verify"] = tuple(p for p in PHASES if p not in ("verify", "nccl-gib"))
    if cfg.staged:
        deps["stage"] = ()
        deps["verify-staged"] = ("stage",)
        deps["pack-userspace"] = ("nvshmem", "pytorch", "deepep")  # the store builder's last phase
    return deps


# The build phases whose output the artifact store keeps, and the artifacts each one builds on: their
# keys are part of its key (store.sh), so a new NVSHMEM build means a new DeepEP artifact and nothing else.
ARTIFACT_DEPS: dict[str, tuple[str, ...]] = {"gdrcopy": (), "nvshmem": ("gdrcopy",), "deepep": ("nvshmem",)}


# Phases a stack's target does not ship, each with why: on GKE the gIB DaemonSet installs NCCL's plugin
# (components/gke/gib.py), so the node's installer neither lists nor runs the phase.
TARGET_LEFT_OUT: dict[str, dict[str, str]] = {
    "gke": {"nccl-gib": "on GKE the gIB DaemonSet installs NCCL's gIB plugin (components/gke/gib.py)"},
}


def target_phases(target: str) -> tuple[tuple[str, ...], dict[str, str]]:
    """The phases a stack's target ships, and the ones it leaves out with their reasons."""
    left_out = TARGET_LEFT_OUT.get(target, {})
    return tuple(p for p in PHASES if p not in left_out), dict(left_out)


@dataclass(frozen=True)
class Profile:
    """A run of the installer that is not a stack's node (the hardware test, docs/store.md).

    Phases outside `phases` are not shipped at all, so they cannot run; `left_out` says why for each.
    `values` replaces config.sh values (the test machine's versions, CUDA, arch); `checksums`, when set, the
    sha256 table (the hardware test's own source files); `stage_objects` names a supported stack's parts.
    """

    target: str
    root: str
    phases: tuple[str, ...]
    left_out: dict[str, str]
    values: dict[str, object]
    checksums: dict[str, str] | None = None
    stage_objects: dict[str, str] | None = None


def _script_files(phases: tuple[str, ...] = PHASES) -> dict[str, str]:
    return payload.installer_files(phases)


def _q(value: object) -> str:
    if isinstance(value, bool):
        return "1" if value else "0"
    return shlex.quote(str(value))


def _config_body(cfg: StackConfig, target: str, profile: Profile | None = None, resolved: Pins = None) -> str:
    if profile is None and target not in INSTALL_ROOTS:
        raise ValueError(f"installer target must be one of {', '.join(INSTALL_ROOTS)}, not {target!r}")
    v, shape = cfg.versions, cfg.shape
    model, pci_ids = GPU_PCI_IDS.get(shape.accelerator, (shape.accelerator, ()))
    # The driver branch the VM's boot image ships ("" for plain Ubuntu and GKE nodes), read once by the model.
    image_branch = cfg.gce.image_ref.driver_branch if target == "gce" else ""
    values: dict[str, object] = {
        "DEEPEP_STACK": cfg.stack,
        "DEEPEP_TARGET": target,
        "DEEPEP_DEFAULT_ROOT": profile.root
        if profile
        else (staging.staged_root(cfg, target) if cfg.staged else INSTALL_ROOTS[target]),
        "NODE_PROFILE": cfg.node_profile,
        # Shared with the DaemonSet and the GCE startup script (scripts/names.py).
        "REBOOT_EXIT": REBOOT_EXIT,
        "DOCA_OFED_VERSION": v.doca_ofed,
        "NVIDIA_DRIVER_VERSION": v.nvidia_driver,
        "CUDA_VERSION": v.cuda,
        "GDRCOPY_VERSION": v.gdrcopy,
        "NVSHMEM_VERSION": v.nvshmem,
        "NVSHMEM_SOURCE": v.nvshmem_source,
        "TORCH_VERSION": v.torch,
        "TORCH_LOCK": torch_lock.lock_path(cfg),  # a locked requirements file with hashes, or ""
        "DEEPEP_REF": v.deepep_ref,
        "DEEPEP_COMMIT": deepep_commit(v.deepep_ref),
        "DEEPEP_PR466": v.deepep_pr466,
        "USE_DOCA_OFED": cfg.installer.use_doca_ofed,
        "GDRCOPY_KERNEL_MODULE": cfg.installer.gdrcopy_kernel_module,
        "ALLOW_REBOOT": cfg.installer.allow_reboot,
        # On GKE the pool's gpu-driver-version decides; with DEFAULT/LATEST GKE installs the driver. A GCE
        # accelerator image ships its own: the driver phase then checks it instead of installing.
        "INSTALL_DRIVER": not image_branch and (target == "gce" or cfg.gke.gpu_driver == "installer"),
        "IMAGE_DRIVER_BRANCH": image_branch,
        "NIC_HANDLER": cfg.nvshmem.nic_handler,
        "HCA_PREFIX": cfg.nvshmem.hca_prefix,
        "GID_INDEX": cfg.nvshmem.gid_index,
        "NVSHMEM_TRAFFIC_CLASS": cfg.nvshmem.traffic_class,
        "NCCL_GIB": cfg.installer.nccl_gib,
        "NCCL_GIB_VERSION": NCCL_GIB_VERSION,
        "GIB_APT_REPO": GIB_APT_REPO,
        "GIB_APT_KEY_URL": GIB_APT_KEY_URL,
        "GOOGLE_APT_TRANSPORT_REPO": GOOGLE_APT_TRANSPORT_REPO,
        "GOOGLE_APT_KEY_URL": GOOGLE_APT_KEY_URL,
        "GPU_MODEL": model,
        "GPU_DEVICE_IDS": " ".join(pci_ids),
        "EXPECTED_GPUS": shape.gpus,
        "EXPECTED_NICS": shape.rdma_nics,
        "TORCH_CUDA_ARCH_LIST": shape.torch_cuda_arch,
        "CUDA_ARCH": shape.cuda_arch,
        "CUDA_REPO_BASE": CUDA_REPO_BASE,
        "DOCA_REPO_BASE": DOCA_REPO_BASE,
        "GDRCOPY_URL": gdrcopy_src_url(cfg),
        # Only a source build fetches it; config validation guarantees a known tag or an override for those.
        "NVSHMEM_SRC_URL": nvshmem_src_url(cfg),
        "TORCH_INDEX_URL": f"https://download.pytorch.org/whl/{v.torch_cuda_variant}",
        "PYPI_INDEX_URL": PYPI_INDEX_URL,
        "NUMPY_SPEC": NUMPY_SPEC,
        "DEEPEP_REPO": DEEPEP_REPO,
        "DEEPEP_PR466_REF": upstream.DEEPEP_PR466_REF,
        "DEEPEP_PR466_BASE": upstream.DEEPEP_PR466_BASE,
        "DEEPEP_PR466_HEAD": upstream.DEEPEP_PR466_HEAD,
        "REQUIRE_CHECKSUMS": REQUIRE_CHECKSUMS,
        "APT_LOCK_TIMEOUT_S": APT_LOCK_TIMEOUT_S,
        # The artifact store (scripts/install/store.sh, docs/store.md).
        "STORE_URL": cfg.installer.store_url,
        "STORE_PUBLISH": cfg.installer.store_publish,
        "STORE_ONLY": cfg.installer.store_only,
        # Nodes take only the store objects this manifest lists (docs/store.md); empty: no artifact.
        "STORE_MANIFEST": cfg.installer.store_manifest,
        # Only the hardware test and the store builder trust their own local store's sha256 files instead.
        "STORE_TRUST_PUBLISHED": False,
        # A machine with RDMA NICs (every stack); the hardware test has none and leaves their checks out.
        "HAS_RDMA_NICS": True,
        # The interpreter a venv is made from (the hardware test names the one that has PyTorch).
        "BASE_PYTHON": "python3",
    }
    values.update(deepep_v2_values(cfg))
    phases = node_phases(cfg, target)
    left: dict[str, str] = left_out(cfg, target)
    stage = profile.stage_objects if profile else (staging.objects(cfg, target) if cfg.staged else None)
    if stage:
        # Where GKE's driver installer puts the driver on COS; the accelerator image's is the system's.
        values["DRIVER_HOME"] = names.GKE_HOST_NVIDIA if target == "gke" and not profile else ""
        values["STAGE_PARTS"] = " ".join(stage)
        values["RDMA_CORE_VERSION"] = staging.RDMA_CORE_VERSION  # what the builder's rdma-core must be
    if profile:
        unknown = sorted(set(profile.values) - set(values))
        if unknown:
            raise ValueError(f"profile sets unknown installer values: {', '.join(unknown)}")
        values.update(profile.values)
        values["DEEPEP_TARGET"] = profile.target
        phases, left = profile.phases, profile.left_out
    lines = [
        "# shellcheck shell=bash disable=SC2034  # read by run.sh, lib.sh and the phases",
        f"# deepep-a4 installer configuration: stack {cfg.stack}, target {target}.",
        "# Rendered by components/node/installer.py from the stack's versions; edit the stack, not this file.",
    ]
    lines += [f"{name}={_q(value)}" for name, value in values.items()]
    lines.append(f'MIN_FREE_GB="${{DEEPEP_MIN_FREE_GB:-{MIN_FREE_GB}}}"')
    lines.append("declare -A SHA256=(")
    first_up = {n: (resolved or {}).get(n, FIRST_UP_STAND_IN) for n in ([] if profile else first_up_names(cfg))}
    table = {**checksums(cfg), **first_up} if profile is None or profile.checksums is None else profile.checksums
    lines += [f"  [{shlex.quote(name)}]={shlex.quote(digest)}" for name, digest in sorted(table.items())]
    lines.append(")")
    if first_up:  # the state: a stand-in (the plan, a first preview) or the kept digests
        state = "kept in the stack's state" if resolved else "STAND-IN until then: nodes refuse it"
        lines.append(f"# sha256 resolved at the first pulumi up ({state}): {' '.join(first_up)}")
    elif unpinned := [n for n in manifest_pinned(cfg) if cfg.installer.store_manifest]:
        lines.append(f"# Pinned only by the store manifest ({cfg.installer.store_manifest}): {' '.join(unpinned)}")
    lines.append("declare -A KEY_FPR=(")
    lines += [f"  [{shlex.quote(n)}]={shlex.quote(' '.join(f))}" for n, f in sorted(KEY_FINGERPRINTS.items())]
    lines.append(")")
    lines.append(f"PHASES=({' '.join(phases)})")
    lines.append("declare -A PHASE_DEPS=(")
    for p, deps in phase_deps(cfg).items():
        if p in phases:
            lines.append(f"  [{p}]={shlex.quote(' '.join(d for d in deps if d in phases))}")
    lines.append(")")
    lines.append("declare -A ARTIFACT_DEPS=(")
    lines += [f"  [{p}]={shlex.quote(' '.join(d))}" for p, d in ARTIFACT_DEPS.items()]
    lines.append(")")
    lines.append("declare -A LEFT_OUT=(")
    lines += [f"  [{p}]={shlex.quote(why)}" for p, why in left.items()]
    lines.append(")")
    if stage:
        lines.append("declare -A STAGE_OBJECTS=(")
        lines += [f"  [{p}]={shlex.quote(rel)}" for p, rel in stage.items()]
        lines.append(")")
    return "\n".join(lines) + "\n"


def _hash(cfg: StackConfig, body: str, scripts: dict[str, str]) -> str:
    named = asdict(cfg.versions)
    if cfg.versions.deepep_api == "v1":  # keys that came with deepepApi leave V1 installers' hashes as they were
        del named["deepep_api"], named["nccl"]
    doc = {
        "versions": named,
        "config": body,
        "files": {k: hashlib.sha256(t.encode()).hexdigest() for k, t in sorted(scripts.items())},
    }
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:16]


def _render(cfg: StackConfig, target: str, profile: Profile | None = None, resolved: Pins = None) -> Rendered:
    scripts = _script_files(profile.phases if profile else node_phases(cfg, target))
    body = _config_body(cfg, target, profile, resolved)
    # Named by the text with the stand-ins: the digests kept at the first `up` never change it (pins.py).
    digest = _hash(cfg, _config_body(cfg, target, profile) if resolved else body, scripts)
    files = {"config.sh": body + f"INSTALLER_HASH={digest}\n", **scripts}
    return files, digest


def render_installer(cfg: StackConfig, target: str, resolved: Pins = None) -> dict[str, str]:
    """The installer for `target` as {relative path: text}; run `bash <dir>/run.sh` from any directory.
    `resolved`: the first-up digests (pins.py); without, stand-ins, as the plan publishes them."""
    files, _ = _render(cfg, target, resolved=resolved)
    for rel, text in files.items() if not resolved else ():
        artifacts.publish(f"install/{target}/{rel}", text)
    return files


def render_profile(cfg: StackConfig, profile: Profile) -> dict[str, str]:
    """The installer for a profile (not published into a plan): {relative path: text}."""
    return _render(cfg, profile.target, profile)[0]


def rendered(cfg: StackConfig, target: str, resolved: Pins = None) -> dict[str, str]:
    """The installer's files for `target`, published nowhere (components/gce/startup.py packs them)."""
    return _render(cfg, target, resolved=resolved)[0]


def installer_hash(cfg: StackConfig, target: str | None = None) -> str:
    """16 hex digits naming the stack's versions and the installer's rendered text (per target)."""
    return _render(cfg, target or cfg.platform)[1]

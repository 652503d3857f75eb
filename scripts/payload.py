"""What ships to a node, byte for byte: the one list both platforms take their node files from.

The Pulumi program reads these files from the installed package (never from a path outside it) and
places them on the node: the installer in one folder (`installer`), the benchmark runner with the
parser and the shared names flat in another (`runner`, imported as plain modules there), and the
GCE stage next to the runner. Stdlib only.
"""

from __future__ import annotations

from pathlib import Path

NODE_DIR = Path(__file__).resolve().parent

# Runner side: every Python file of bench/ (the runner and its parser, however they are split) plus the
# shared names, which the runner imports as `names` when the files lie flat in one folder.
RUNNER_GLOB = "bench/*.py"
RUNNER_EXTRA = ("names.py",)
GCE_STAGE_GLOB = "gce/*.py"


def _read(rel: str) -> str:
    return (NODE_DIR / rel).read_text()


def runner_files() -> dict[str, str]:
    """file name -> text of what the benchmark runner needs next to it on a node."""
    files = {p.name: p.read_text() for p in sorted(NODE_DIR.glob(RUNNER_GLOB)) if p.name != "__init__.py"}
    files.update({Path(rel).name: _read(rel) for rel in RUNNER_EXTRA})
    return files


INSTALLER_LIBS = ("run.sh", "lib.sh", "store.sh")


def phase_script(phase: str) -> str:
    """`phases/NN-<phase>.sh`: the file keeps its number when a profile ships only some phases."""
    found = sorted(NODE_DIR.glob(f"install/phases/[0-9][0-9]-{phase}.sh"))
    if len(found) != 1:
        raise FileNotFoundError(f"expected one installer script for phase {phase!r}, found {len(found)}")
    return f"phases/{found[0].name}"


# Locked requirements files with hashes (PyTorch and what it requires), shipped with the pytorch phase.
TORCH_LOCKS_DIR = "locks"


def torch_locks() -> dict[str, str]:
    """path under the installer folder -> text of every PyTorch lock (locks/<name>.txt)."""
    found = sorted((NODE_DIR / "install" / TORCH_LOCKS_DIR).glob("*.txt"))
    return {f"{TORCH_LOCKS_DIR}/{p.name}": p.read_text() for p in found}


def installer_files(phases: tuple[str, ...]) -> dict[str, str]:
    """path under the installer folder -> text: run.sh and its libraries, one file per phase, in order, and
    the PyTorch locks when the pytorch phase ships."""
    files = {name: _read(f"install/{name}") for name in INSTALLER_LIBS}
    for phase in phases:
        rel = phase_script(phase)
        text = _read(f"install/{rel}")
        files[rel] = with_gib_libs(text) if phase == "nccl-gib" else text
    if "pytorch" in phases:
        files.update(torch_locks())
    return files


def gce_stage_files() -> dict[str, str]:
    """file name -> text of the GCE benchmark stage (bench_stage.py and its helpers) and the shared names,
    which lie next to each other on the VM."""
    files = {p.name: p.read_text() for p in sorted(NODE_DIR.glob(GCE_STAGE_GLOB)) if p.name != "__init__.py"}
    files.update({Path(rel).name: _read(rel) for rel in RUNNER_EXTRA})
    return files


GKE_INSTALLER_INIT = "gke/installer-init.sh"


# The node label's PATCH and its retry, shared by both GKE init scripts where each says `# @label-node.sh`.
LABEL_NODE = "gke/label-node.sh"
LABEL_NODE_MARK = "# @label-node.sh\n"


def with_label_node(text: str) -> str:
    if LABEL_NODE_MARK not in text:
        raise ValueError(f"no '{LABEL_NODE_MARK.strip()}' line to put {LABEL_NODE} at")
    return text.replace(LABEL_NODE_MARK, _read(LABEL_NODE).removeprefix("# shellcheck shell=bash\n"), 1)


def gke_installer_init() -> str:
    """The GKE installer DaemonSet's init-container script (its values come in as environment variables)."""
    return with_label_node(_read(GKE_INSTALLER_INIT))


GKE_STAGE_INIT = "gke/stage-init.sh"


def gke_stage_init() -> str:
    """The supported profile's staging DaemonSet init script: runs the installer in its container, no host namespace."""
    return with_label_node(_read(GKE_STAGE_INIT))


GCE_STARTUP = "gce/startup.sh"


def gce_startup_script() -> str:
    """The GCE startup script's logic; its values and the files it writes are put in front of it."""
    return _read(GCE_STARTUP)


GKE_GIB_INIT = "gke/gib-init.sh"
# The one rule for gIB's libraries (rdma-core set aside, the plugin's verbs needs checked), in each script that
# says `# @gib-libs.sh`: the GKE init, the GCE nccl-gib phase, the GKE benchmark command.
GIB_LIBS = "gib-libs.sh"
GIB_LIBS_MARK = "# @gib-libs.sh\n"


def gib_libs() -> str:
    """The rule's functions, without the file's own shellcheck directive (the scripts that take it have theirs)."""
    return _read(GIB_LIBS).removeprefix("# shellcheck shell=sh\n")


def with_gib_libs(text: str) -> str:
    if GIB_LIBS_MARK not in text:
        raise ValueError(f"no '{GIB_LIBS_MARK.strip()}' line to put {GIB_LIBS} at")
    return text.replace(GIB_LIBS_MARK, gib_libs(), 1)


def gke_gib_init() -> str:
    """The gIB NCCL plugin DaemonSet's init-container script (its values come in as environment variables)."""
    return with_gib_libs(_read(GKE_GIB_INIT))

"""The GCE VMs' startup script: the rendered installer, then the benchmark stage, on every boot.

GCE runs `metadata["startup-script"]` at every boot. Ours is one bash script that

1. writes the rendered installer (`components.gce.startup.render_startup_script(cfg)`, target
   `/opt/deepep`), the benchmark runner (scripts/bench/, as scripts/payload.py lists it) and the stage
   (scripts/gce/) under `/opt/deepep/gce/`, byte for byte as rendered here: they travel as the base64 of a
   gzip'd tar on one line (GCE allows 256 KiB per metadata value; as text they fill most of it; lib.sh and
   store.sh come without comment lines, components/gce/shell_comments.py), unpacked with
   `base64 -d | gzip -d | tar` (all in every Ubuntu image) and checked against the sha256 list that the
   script carries in plain text above the packed files;
2. runs the installer, which resumes at its own markers and may reboot the VM once: it then exits 75
   ("reboot scheduled", not a failure), the script stops, starts again at the next boot and the
   installer carries on where it stopped;
3. with the cpu NIC handler, makes sure `gdrdrv` is loaded and `/dev/gdrdrv` exists (troubleshooting T02: both
   are gone after a reboot); the installer's boot unit normally did it already, this is the check;
4. runs the stage: single-node tests, then the internode test with every VM (see bench_stage.py).

Everything a VM needs to know about itself and its peers comes from metadata keys set per VM by
GceA4Fleet (`deepep-rank`, `deepep-world-size`, `deepep-master-addr`, ...), so the startup script is
the same text on every VM and a change of node count only changes metadata, never the script.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import shlex
import tarfile
from typing import Any

from components.bench_settings import runner_settings
from components.config import StackConfig
from components.gce import startup as gce_startup
from components.node import installer
from scripts import names, payload

_PATHS = names.install_paths("gce")
INSTALL_ROOT = _PATHS["root"]
GCE_DIR = names.GCE_DIR
# What the installer leaves behind on a GCE VM; the runner takes them as arguments.
DEEPEP_DIR = _PATHS["deepep"]
ENV_FILE = _PATHS["env"]
TEST_PYTHONS = (_PATHS["python"], f"{INSTALL_ROOT}/.venv/bin/python", f"{INSTALL_ROOT}/bin/python")
MASTER_PORT = names.MASTER_PORT
RESULTS_DIR = names.GCE_RESULTS_DIR
STARTUP_LOG = names.GCE_STARTUP_LOG
# The installer's exit code for "a reboot was scheduled; run me again after it".
INSTALLER_REBOOT_EXIT = names.EXIT_REBOOT
# GCE limits one metadata value to 256 KiB; the script keeps to half of it, room for the installer to grow.
METADATA_VALUE_LIMIT = 256 * 1024
STARTUP_SCRIPT_BUDGET = METADATA_VALUE_LIMIT // 2


def installer_script(cfg: StackConfig, resolved: installer.Pins = None) -> str:
    """The installer rendered for the GCE target: the same renderer as the GKE DaemonSet's (`resolved`: the
    digests kept at the first `pulumi up`, components/node/pins.py)."""
    return gce_startup.render_startup_script(cfg, resolved)


def run_id(cfg: StackConfig) -> str:
    """Names one benchmark run in the bucket: the stack plus a digest of everything that shapes results.

    The same versions and benchmark settings give the same run id, so a reboot or a recreated VM
    resumes the run; changing a version or a benchmark size starts a new run next to the old one.
    """
    shaping = {
        "machineType": cfg.machine_type,
        "nodeCount": cfg.node_count,
        "versions": cfg.versions.__dict__,
        "nvshmem": cfg.nvshmem.__dict__,
        "installer": cfg.installer.__dict__,
        "image": cfg.gce.image,
        "benchmarks": json.loads(json.dumps(cfg.benchmarks, default=lambda o: o.__dict__)),
    }
    digest = hashlib.sha256(json.dumps(shaping, sort_keys=True, default=str).encode()).hexdigest()[:10]
    return f"{cfg.stack}-{digest}"


def runner_args(cfg: StackConfig) -> list[str]:
    """Where the runner finds DeepEP and the installer's environment; the test settings travel in `runnerEnv`."""
    return ["--deepep-dir", DEEPEP_DIR, "--env-file", ENV_FILE]


def peer_wait_seconds(cfg: StackConfig) -> int:
    """How long a VM waits at the internode barrier: an hour of install skew plus two tests of a peer (each
    with all its repeated starts)."""
    return 3600 + 2 * cfg.benchmarks.test_budget_seconds


def bench_settings(cfg: StackConfig, peers: list[dict[str, Any]]) -> dict[str, Any]:
    """The `deepep-bench` metadata value: what the stage runs and who its peers are (same on every VM)."""
    return {
        "tests": list(cfg.benchmarks.tests),
        "runnerArgs": runner_args(cfg),
        "runnerEnv": runner_settings(cfg).to_env(),
        "runner": f"{GCE_DIR}/bench/run_bench.py",
        "python": ["python3"],
        "testPythons": list(TEST_PYTHONS),
        "peers": peers,
        "peerWaitSeconds": peer_wait_seconds(cfg),
        "resultsDir": RESULTS_DIR,
    }


def shipped_files() -> dict[str, str]:
    """Files the startup script writes under GCE_DIR: the benchmark runner and the stage, as in the repo."""
    files = {f"bench/{name}": text for name, text in payload.runner_files().items()}
    files.update(payload.gce_stage_files())
    return files


def node_files(cfg: StackConfig, resolved: installer.Pins = None) -> dict[str, tuple[str, int]]:
    """Every file the startup script writes, {path under GCE_DIR: (text, mode)}."""
    files = {"install.sh": (installer_script(cfg, resolved), 0o755)}
    files.update({rel: (text, 0o644) for rel, text in shipped_files().items()})
    return files


def pack(files: dict[str, tuple[str, int]]) -> bytes:
    """A gzip'd tar of the files, the same bytes for the same files (fixed times and owners, sorted names), so
    an unchanged stack renders an unchanged script and `pulumi up` updates no VM."""
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.USTAR_FORMAT) as tar:
        for rel in sorted(files):
            text, mode = files[rel]
            data = text.encode()
            info = tarfile.TarInfo(rel)
            info.size, info.mode, info.mtime = len(data), mode, 0
            info.uname = info.gname = "root"
            tar.addfile(info, io.BytesIO(data))
    return gzip.compress(raw.getvalue(), compresslevel=9, mtime=0)


def write_files_function(files: dict[str, tuple[str, int]]) -> str:
    """`write_files`: the list of files with their digests (plain text), then the files packed; it unpacks
    them into $GCE_DIR and stops the script when one does not match its digest."""
    sums = "".join(f"{hashlib.sha256(files[rel][0].encode()).hexdigest()}  {rel}\n" for rel in sorted(files))
    # One line: base64 -d reads it as well as wrapped lines, and 76-character lines add 1.3% (1.6 KiB).
    packed = base64.b64encode(pack(files)).decode() + "\n"
    return "".join(
        [
            "write_files() {\n",
            "  # The files under $GCE_DIR (sha256, path), packed below as the base64 of a gzip'd tar.\n",
            "  local sums\n",
            f"  sums=\"$(cat <<'DEEPEP_A4_SUMS'\n{sums}DEEPEP_A4_SUMS\n)\"\n",
            '  install -d -m 0755 "$GCE_DIR"\n',
            "  if ! base64 -d <<'DEEPEP_A4_PACKED' | gzip -d | tar -x -m --no-same-owner -C \"$GCE_DIR\" -f -; then\n",
            packed,
            "DEEPEP_A4_PACKED\n",
            '    echo "[gce] error: the files of this script do not unpack"\n',
            "    exit 1\n",
            "  fi\n",
            '  if ! (cd "$GCE_DIR" && sha256sum --quiet --strict -c <<<"$sums"); then\n',
            '    echo "[gce] error: a file under $GCE_DIR does not match the digest this script carries"\n',
            "    exit 1\n",
            "  fi\n",
            "}\n",
        ]
    )


def render_startup_script(cfg: StackConfig, resolved: installer.Pins = None) -> str:
    """The whole `startup-script` metadata value of every VM: values and files in front of startup.sh."""
    values = {
        "GCE_DIR": GCE_DIR,
        "RESULTS_DIR": RESULTS_DIR,
        "STARTUP_LOG": STARTUP_LOG,
        "EXIT_REBOOT": str(INSTALLER_REBOOT_EXIT),
        "CPU_NIC_HANDLER": "1" if cfg.nvshmem.nic_handler == "cpu" else "0",
    }
    body = payload.gce_startup_script()
    shebang, _, rest = body.partition("\n")
    return "".join(
        [
            shebang + "\n",
            f"# stack {cfg.stack}: values and files rendered by components/gce/bench.py\n",
            *(f"{k}={shlex.quote(v)}\n" for k, v in values.items()),
            write_files_function(node_files(cfg, resolved)),
            rest,
        ]
    )

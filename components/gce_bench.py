"""The GCE VMs' startup script: the rendered installer, then the benchmark stage, on every boot.

GCE runs `metadata["startup-script"]` at every boot. Ours is one bash script that

1. writes the rendered installer (`components.installer.render_startup_script(cfg)`, target
   `/opt/deepep`), the benchmark runner (scripts/bench/, as scripts/payload.py lists it) and the stage
   (scripts/gce/) under `/opt/deepep/gce/`, byte for byte as rendered here;
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

import hashlib
import json
import shlex
from typing import Any

from components import installer
from components.bench_settings import runner_settings
from components.config import StackConfig
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
# GCE limits one metadata value to 256 KiB.
METADATA_VALUE_LIMIT = 256 * 1024


def installer_script(cfg: StackConfig) -> str:
    """The installer rendered for the GCE target: the same renderer as the GKE DaemonSet's."""
    return installer.render_startup_script(cfg)


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


def _heredoc(path: str, text: str, mode: str) -> str:
    write = installer.heredoc(f"'{path}'", text, "DEEPEP_A4_EOF_")
    return f"install -d -m 0755 \"$(dirname '{path}')\"\n{write}chmod {mode} '{path}'\n"


def render_startup_script(cfg: StackConfig) -> str:
    """The whole `startup-script` metadata value of every VM: values and files in front of startup.sh."""
    values = {
        "GCE_DIR": GCE_DIR,
        "RESULTS_DIR": RESULTS_DIR,
        "STARTUP_LOG": STARTUP_LOG,
        "EXIT_REBOOT": str(INSTALLER_REBOOT_EXIT),
        "CPU_NIC_HANDLER": "1" if cfg.nvshmem.nic_handler == "cpu" else "0",
    }
    files = [_heredoc(f"{GCE_DIR}/install.sh", installer_script(cfg), "0755")]
    files += [_heredoc(f"{GCE_DIR}/{rel}", text, "0644") for rel, text in shipped_files().items()]
    body = payload.gce_startup_script()
    shebang, _, rest = body.partition("\n")
    return "".join(
        [
            shebang + "\n",
            f"# stack {cfg.stack}: values and files rendered by components/gce_bench.py\n",
            *(f"{k}={shlex.quote(v)}\n" for k, v in values.items()),
            "write_files() {\n",
            *files,
            "}\n",
            rest,
        ]
    )

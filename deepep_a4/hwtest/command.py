"""`deepep-a4 hwtest`: the node installer for a GPU machine that is not an A4 (docs/store.md).

    .venv/bin/deepep-a4 hwtest --out /tmp/hwtest --nvshmem-version 3.5.1       here: render
    bash /tmp/hwtest/hwtest.sh --store /srv/deepep-store                      there: run (as root)

The machine: an H100 or H200 (sm_90) with Ubuntu, CUDA and PyTorch already installed, no internet and no
RDMA NICs. The installer that runs there is the real one (run.sh, lib.sh, store.sh and the phase scripts,
byte for byte) with a profile instead of a stack: GDRCopy's library, NVSHMEM from source (or the pip wheel
PyTorch brought), the machine's PyTorch copied into a standalone venv and stored as the PyTorch environment
artifact (restored at another path by later runs), DeepEP built for the machine's arch, the env file and
verify without NIC checks. The phases
that change the machine itself (DOCA-OFED, driver, peer mapping, CUDA from apt, the reboot) are not
shipped at all, and the status file lists them with the reason (`leftOut`). Sources come from the store
only (`deepep-a4 store fill --from DIR --store DIR`); built artifacts are published there, so a second run
with an empty install root measures the warm path. hwtest.sh then runs DeepEP's tests through the installed
environment and parses them, each on as many GPUs as the machine has where that is enough (TESTS: intranode needs
2, low-latency and V2's elastic test run on one); state/tests.json says of each test passed, failed or not run, and why.
"""

from __future__ import annotations

import dataclasses
import shlex
from pathlib import Path

import click

from components.config import StackConfig, upstream, versions
from components.node import installer, staging
from deepep_a4 import options
from scripts import payload

# The stack whose options the profile starts from; the profile then replaces what the machine decides.
BASE_STACK = "gce-b200"
PHASES = ("preflight", "gdrcopy", "nvshmem", "pytorch", "deepep", "env", "verify")
LEFT_OUT = {
    "doca-ofed": "no RDMA NICs here; DOCA-OFED replaces the host's RDMA stack and needs a reboot",
    "nvidia-driver": "the machine's driver is in use; installing one needs the node's own image and a reboot",
    "peermapping": "a driver registry option that takes effect only after a reboot",
    "cuda": "CUDA is installed on the machine; the phase installs it from NVIDIA's apt repository",
}
HWTEST_SH = "hwtest.sh"
# nodeProfile=supported: the store builder's phases (ending with pack-userspace), then a node's (stage, verify-staged)
# at the same root, emptied in between: what a COS node or an accelerator-image VM runs, from the same store.
BUILD_PHASES = ("preflight", "gdrcopy", "nvshmem", "pytorch", "deepep", "pack-userspace")
NODE_PHASES = installer.STAGED_PHASES
NODE_LEFT_OUT = "the staged node takes the user space from the store; the builder run before it made it"


def v2_values(nccl: str, cuda: str) -> dict[str, object]:
    """DeepEP V2's installer values on this machine: the NCCL wheel of its CUDA major (cu13 for CUDA 13.0), taken
    from the store only (no internet), which replaces the machine's PyTorch NCCL in the copied venv."""
    variant = f"cu{cuda.replace('.', '')}"
    package, wheel, _ = versions.nccl_wheel(nccl, variant)
    return {
        "DEEPEP_API": "v2",
        "NCCL_VERSION": nccl,
        "NCCL_WHEEL": package,
        "NCCL_WHEEL_FILE": wheel,
        "NCCL_WHEEL_URL": "store-only",
        "DEEPEP_FMT_COMMIT": upstream.DEEPEP_V2_FMT,
    }


def profile(
    nvshmem: str,
    deepep_ref: str,
    cuda: str,
    arch: str,
    root: str,
    python: str,
    nvshmem_source: str = "source",
    nccl: str = "",
) -> installer.Profile:
    """`nccl`: DeepEP V2 (deepepApi=v2) with this NCCL wheel; empty for V1."""
    commit = installer.deepep_commit(deepep_ref)
    return installer.Profile(
        target="hwtest",
        root=root,
        phases=PHASES,
        left_out=LEFT_OUT,
        values={
            "DEEPEP_STACK": "hwtest",
            "CUDA_VERSION": cuda,
            "CUDA_ARCH": arch,
            "TORCH_CUDA_ARCH_LIST": f"{arch[:-1]}.{arch[-1]}",
            "NVSHMEM_VERSION": nvshmem,
            "NVSHMEM_SOURCE": nvshmem_source,
            "NVSHMEM_SRC_URL": "store-only",
            "DEEPEP_REF": deepep_ref,
            "DEEPEP_COMMIT": commit,
            # PR #466 is fetched from GitHub's pull refs, which source mirrors do not carry.
            "DEEPEP_PR466": False,
            "TORCH_VERSION": "installed",
            "BASE_PYTHON": python,
            "NODE_PROFILE": "host-install",
            "GPU_MODEL": "",
            "GPU_DEVICE_IDS": "",
            "EXPECTED_GPUS": 0,
            "EXPECTED_NICS": 0,
            "HAS_RDMA_NICS": False,
            "INSTALL_DRIVER": False,
            "USE_DOCA_OFED": False,
            "ALLOW_REBOOT": False,
            "GDRCOPY_KERNEL_MODULE": False,
            "STORE_URL": "",
            "STORE_PUBLISH": True,
            "STORE_ONLY": True,
            # Its store is a local folder of the user's own files and builds: no stack manifest to pin them.
            "STORE_TRUST_PUBLISHED": True,
        }
        | (v2_values(nccl, cuda) if nccl else {}),
        # Sources from a mirror, not the archives whose digests are published: the store's own digests hold.
        checksums={},
    )


def staged_profiles(
    cfg: StackConfig, prof: installer.Profile, nvshmem: str, nvshmem_source: str, deepep_ref: str
) -> tuple[installer.Profile, installer.Profile]:
    """The builder and the node of nodeProfile=supported, from the host-install profile `prof`: the parts'
    keys from this machine's versions (PyTorch "installed") and root."""
    v = dataclasses.replace(
        cfg.versions, nvshmem=nvshmem, nvshmem_source=nvshmem_source, torch="installed", deepep_ref=deepep_ref
    )
    objects = staging.objects(dataclasses.replace(cfg, versions=v), "gce", prof.root)
    values = {**prof.values, "NODE_PROFILE": "supported", "RDMA_CORE_VERSION": "installed"}
    build = dataclasses.replace(
        prof,
        phases=BUILD_PHASES,
        left_out={**prof.left_out, **{p: NODE_LEFT_OUT for p in ("env", "verify")}},
        values=values,
        stage_objects=objects,
    )
    left = {p: NODE_LEFT_OUT for p in (*PHASES, "pack-userspace") if p not in NODE_PHASES}
    node = dataclasses.replace(
        prof, phases=NODE_PHASES, left_out={**prof.left_out, **left}, values=values, stage_objects=objects
    )
    return build, node


# The tests hwtest.sh runs, per DeepEP generation: script under DeepEP's tests/, the parser's test name, and the
# fewest GPUs (ranks) it runs on. V2 (dd758ca) moved V1's tests to tests/legacy/ and added tests/elastic/test_ep.py.
# Intranode needs 2: its kernels are instantiated for 2, 4 and 8 ranks only (deepseek-ai/DeepEP 29d31c0
# csrc/kernels/launch.cuh SWITCH_RANKS, any other count is "Unsupported ranks"). Low-latency and V2's elastic test
# take one rank (--num-processes 1).
TESTS: dict[str, tuple[tuple[str, str, int], ...]] = {
    "v1": (("test_intranode", "intranode", 2), ("test_low_latency", "low-latency", 1)),
    "v2": (
        ("legacy/test_intranode", "intranode", 2),
        ("legacy/test_low_latency", "low-latency", 1),
        ("elastic/test_ep", "elastic", 1),
    ),
}


def hwtest_script(root: str, api: str = "v1") -> str:
    """hwtest.sh: runs the installer with the store given at run time, then the tests when GPUs allow. With a
    node/ folder (nodeProfile=supported) the installer is the store builder, and the node stages after it."""
    runner = payload.runner_files()
    parse = "parse.py" if "parse.py" in runner else sorted(runner)[0]
    tests = " ".join(f"{s}:{t}:{n}" for s, t, n in TESTS[api])
    return f"""#!/bin/bash
# deepep-a4 hardware test (rendered by `deepep-a4 hwtest`): install from a local store, then DeepEP's tests.
#   bash hwtest.sh --store DIR [--root DIR] [--pytorch-builder DIR] [--no-tests] [--node-only]
#   exit: the installer's, or 1 if a test failed. --pytorch-builder DIR first runs the pytorch phase alone at
#   the root DIR and publishes the environment (a store builder's part), so the install restores it elsewhere.
#   With node/ (nodeProfile=supported), --node-only skips the builder: the node stages from the store as it is.
#   HWTEST_TEST_TIMEOUT_S bounds each DeepEP test (default 900 s). --collect DIR: at exit, the status files, the
#   installer's own log lines, the env file and the tests' logs and parser summaries are copied into DIR.
set -uo pipefail
HERE="$(cd -- "$(dirname -- "${{BASH_SOURCE[0]}}")" && pwd -P)"
root={shlex.quote(root)} store="" tests=1 builder="" node_only=0 collect=""
while (($#)); do
  case $1 in
    --store) store=$2 && shift ;;
    --collect) collect=$2 && shift ;;
    --root) root=$2 && shift ;;
    --pytorch-builder) builder=$2 && shift ;;
    --no-tests) tests=0 ;;
    --node-only) node_only=1 ;;
    *) echo "unknown argument $1" >&2 && exit 2 ;;
  esac
  shift
done
if [[ -z $store ]]; then
  echo "hwtest.sh: --store DIR is required (deepep-a4 hwtest --sources fills OUT/store)" >&2
  exit 2
fi
mkdir -p "$store"
store="$(cd "$store" && pwd -P)"
# shellcheck disable=SC2329  # run by the EXIT trap
collect_files() {{
  [[ -n $collect ]] || return 0
  mkdir -p "$collect"
  local f
  [[ -f $HERE/builder/status.json ]] && cp "$HERE/builder/status.json" "$collect/builder.status.json"
  grep -h '^\\[deepep ' "$HERE"/builder/logs/*.log >"$collect/builder.log" 2>/dev/null
  grep -h '^\\[deepep ' "$root"/logs/*.log >"$collect/node.log" 2>/dev/null
  [[ -f $root/state/status.json ]] && cp "$root/state/status.json" "$collect/node.status.json"
  for f in state/node.json state/tests.txt state/test_intranode.json state/test_low_latency.json \
    state/test_elastic.json state/tests.json \\
    logs/test_intranode.log logs/test_low_latency.log logs/test_elastic.log unified-env.sh; do
    [[ -f $root/$f ]] && cp "$root/$f" "$collect/"
  done
  [[ -f $root/nvshmem/.build-checks ]] && cp "$root/nvshmem/.build-checks" "$collect/nvshmem.build-checks"
  return 0
}}
trap collect_files EXIT
export DEEPEP_STORE_URL="$store" DEEPEP_INSTALL_ROOT="$root"
# The lent GPU machines' image points CXX and CC at a g++ wrapper (/opt/gcc, its own -B runtime files) whose
# extensions turn any C++ exception into SIGSEGV (measured: tests/fixtures/bench/v2_exception_probe_h100.txt):
# DeepEP builds with the system compiler, as it does in the store builder's CUDA image, which sets neither.
if [[ -x /usr/bin/g++ && -x /usr/bin/gcc ]]; then export CC=/usr/bin/gcc CXX=/usr/bin/g++; fi
if [[ -n $builder ]]; then
  (
    set -Eeuo pipefail
    export DEEPEP_INSTALL_ROOT="$builder" PHASE=pytorch
    cd "$HERE/installer"
    # shellcheck source=/dev/null
    source ./config.sh
    # shellcheck source=/dev/null
    source ./lib.sh
    PHASE_SCRIPT="$(ls "$PWD"/phases/*-pytorch.sh)"
    export PHASE_SCRIPT
    mkdir -p "$STATE/phases" "$CACHE" "$LOGS"
    # shellcheck source=/dev/null
    source "$PHASE_SCRIPT"
    phase_run
    echo "hwtest: pytorch phase at $builder: $(<"$STATE/phases/pytorch.note")"
  ) || exit 1
fi
t0=$SECONDS rc=0
if ((!node_only)); then
  bash "$HERE/installer/run.sh"
  rc=$?
  echo "hwtest: installer exit $rc after $((SECONDS - t0)) s; status: $root/state/status.json"
fi
if ((rc == 0)) && [[ -d $HERE/node ]]; then
  # A fresh node: nothing at the root but what stage takes from the store (the builder's record kept aside).
  if ((!node_only)); then
    rm -rf "$HERE/builder" && mkdir -p "$HERE/builder"
    cp -r "$root/state/status.json" "$root/logs" "$HERE/builder/" 2>/dev/null || true
  fi
  rm -rf "$root"
  t0=$SECONDS
  bash "$HERE/node/run.sh"
  rc=$?
  echo "hwtest: node (stage, verify-staged) exit $rc after $((SECONDS - t0)) s; status: $root/state/status.json"
fi
((rc == 0 && tests)) || exit "$rc"
gpus="$(nvidia-smi -L | grep -c '^GPU ')"
# A machine without any RDMA NIC (the kernel lists none under /sys/class/infiniband): DeepEP's low-latency test still
# asks NVSHMEM for IBGDA, whose init fails there ("init failed for transport: IBGDA") before NVLink carries the test.
# The parser is told so (--no-rdma-nics: its RDMA checks n/a); on a machine with NICs it judges them as on an A4.
# V2's elastic test asks NCCL for Gin, which needs a NIC: without one DeepEP throws "NCCL GIN is unavailable"
# (dd758ca csrc/kernels/backend/nccl.cu) unless EP_DISABLE_GIN=1 (DeepEP PR #630), which it then gets.
nics="$(find /sys/class/infiniband -mindepth 1 -maxdepth 1 2>/dev/null | wc -l)"
nic_args=() no_gin=()
if ((nics == 0)); then
  nic_args=(--no-rdma-nics) no_gin=(EP_DISABLE_GIN=1)
  echo "hwtest: no RDMA NIC under /sys/class/infiniband: NVSHMEM's IBGDA init failure is expected; RDMA checks n/a"
fi
# shellcheck source=/dev/null
source "$root/unified-env.sh"
cd "$root/DeepEP" || exit 1
echo "GPUs $gpus, RDMA NICs $nics" >"$root/state/tests.txt"
# state/tests.json: every test of this DeepEP, passed, failed or not run (with why), one JSON object a line.
: >"$root/state/tests.json"
record() {{ # TEST STATUS WHY
  printf '{{"test": "%s", "status": "%s", "why": "%s"}}\\n' "$1" "$2" "$3" >>"$root/state/tests.json"
}}
for each in {tests}; do
  IFS=: read -r script t need <<<"$each"
  f=test_${{t//-/_}}
  if ((gpus < need)); then
    echo "$script: not run: it needs $need GPUs, this machine has $gpus" | tee -a "$root/state/tests.txt"
    record "$t" "not run" "needs $need GPUs, this machine has $gpus"
    continue
  fi
  env_args=()
  [[ $t == elastic ]] && env_args=("${{no_gin[@]}}")
  log="$root/logs/$f.log"
  echo "hwtest: $script --num-processes $gpus ${{env_args[*]}}"
  env "${{env_args[@]}}" timeout "${{HWTEST_TEST_TIMEOUT_S:-900}}" python "tests/$script.py" --num-processes "$gpus" \\
    >"$log" 2>&1
  trc=$?
  python "$HERE/runner/{parse}" "$log" --test "$t" --processes "$gpus" --summary "${{nic_args[@]}}" \\
    >"$root/state/$f.json"
  prc=$?
  echo "$script: exit $trc, parser exit $prc" | tee -a "$root/state/tests.txt"
  if ((trc == 0 && prc == 0)); then
    record "$t" passed "exit 0, parser exit 0"
  else
    rc=1
    record "$t" failed "exit $trc, parser exit $prc"
  fi
done
exit "$rc"
"""


@click.command()
@options.folder("--out", required=True, help="folder to render into")
@click.option("--nvshmem-version", default="3.5.1", show_default=True, help="NVSHMEM source version")
@click.option("--deepep-ref", default=upstream.DEEPEP_NVSHMEM35_FIXES, show_default=True, help="DeepEP tag or commit")
@click.option("--cuda", default="13.0", show_default=True, help="CUDA installed at /usr/local/cuda-VERSION")
@click.option("--arch", default="90", show_default=True, help="GPU arch (90: H100/H200)")
@click.option("--root", default="/opt/deepep-hwtest", show_default=True, help="install root on the machine")
@click.option("--python", default="python3", show_default=True, help="the interpreter that has PyTorch")
@options.choice(
    "--nvshmem-source",
    ["source", "pip"],
    "source",
    "source: build NVSHMEM; pip: the nvidia-nvshmem wheel PyTorch brought (its version must match)",
)
@options.folder(
    "--sources",
    help="folder of source files named as the store names them (created if absent): OUT/store is filled from it",
)
@options.choice(
    "--deepep-api",
    ["v1", "v2"],
    "v1",
    "v2: DeepEP V2 (deepepRef defaults to its commit) with --nccl-version's wheel in place of PyTorch's NCCL",
)
@click.option("--nccl-version", default=versions.NCCL_V2_DEFAULT, show_default=True, help="NCCL wheel for v2")
@options.choice(
    "--node-profile",
    ["host-install", "supported"],
    "host-install",
    "supported: the store builder (ending with pack-userspace), then a node staging its user space from the store",
)
def command(
    out: Path,
    nvshmem_version: str,
    deepep_ref: str,
    cuda: str,
    arch: str,
    root: str,
    python: str,
    nvshmem_source: str,
    sources: Path | None,
    node_profile: str,
    deepep_api: str = "v1",
    nccl_version: str = versions.NCCL_V2_DEFAULT,
) -> None:
    """Render the installer for a GPU machine that is not an A4 (no NICs, no internet)."""
    from deepep_a4 import stackfile
    from deepep_a4.store import sources as store

    _, _, cfg = stackfile.load_stack(BASE_STACK)
    nccl = ""
    if deepep_api == "v2":
        if deepep_ref == upstream.DEEPEP_NVSHMEM35_FIXES:
            deepep_ref = upstream.DEEPEP_V2
        nccl = nccl_version
        v = dataclasses.replace(cfg.versions, deepep_api="v2", nccl=nccl, deepep_ref=deepep_ref, deepep_pr466=False)
        cfg = dataclasses.replace(cfg, versions=v)
    wanted: list[store.Source] = []
    if sources is not None:
        # Checked before anything is written: every missing file is named at once, with where to get it.
        wanted = store.sources_of(
            cfg.versions.gdrcopy, nvshmem_version if nvshmem_source == "source" else "", deepep_ref, pr466=False
        )
        if nccl:
            wheel, variant = str(v2_values(nccl, cuda)["NCCL_WHEEL_FILE"]), f"cu{cuda.replace('.', '')}"
            wanted.append(store.Source(wheel, installer.nccl_wheel_url(nccl, variant)))
        sources.mkdir(parents=True, exist_ok=True)
        (out / "store").mkdir(parents=True, exist_ok=True)
        missing = store.missing_in(wanted, store.LocalStore((out / "store").resolve()), sources, "--sources")
        if missing:
            raise click.ClickException("\n".join(missing))
    prof = profile(nvshmem_version, deepep_ref, cuda, arch, root, python, nvshmem_source, nccl)
    renders = {"installer": prof}
    if node_profile == "supported":
        renders["installer"], renders["node"] = staged_profiles(cfg, prof, nvshmem_version, nvshmem_source, deepep_ref)
    for folder, each in renders.items():
        files = installer.render_profile(cfg, each)
        for rel, text in files.items():
            path = out / folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    for name, text in payload.runner_files().items():
        (out / "runner").mkdir(parents=True, exist_ok=True)
        (out / "runner" / name).write_text(text)
    (out / HWTEST_SH).write_text(hwtest_script(root, deepep_api))
    (out / HWTEST_SH).chmod(0o755)
    if sources is not None:
        store.fill(wanted, store.LocalStore((out / "store").resolve()), sources, option="--sources")
    for folder, each in renders.items():
        click.echo(f"wrote {out}/{folder}: phases {' '.join(each.phases)}")
    click.echo(f"wrote {out}/{HWTEST_SH}")
    click.echo(f"left out: {', '.join(LEFT_OUT)}; run as root there: bash {out}/{HWTEST_SH} --store DIR")

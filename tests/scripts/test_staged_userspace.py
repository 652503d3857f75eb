"""The staged user space end to end on a stub machine: the store builder's real pack-userspace phase packs what
the build phases left at the staged root, `store build`'s publish copies it with a manifest, and a fresh node
(the same root, emptied) stages it with the real stage and verify-staged phases, taking only what the manifest
pins (components/node/staging.py, scripts/install/phases/13-stage.sh, 14-verify-staged.sh, 15-pack-userspace.sh).

The libraries are gcc-built stand-ins with the sonames and layout of Ubuntu 24.04's rdma-core packages
(libibverbs1, ibverbs-providers, librdmacm1t64: lib/libibverbs.so.1, libmlx5.so.1, librdmacm.so.1,
libibverbs/libmlx5-rdmav34.so); the interpreter is this machine's Python behind a wrapper that, like a venv's
interpreter, sees the venv's site-packages. What the real ones do was run on a GPU machine (docs/store.md).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shutil
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from components import config
from components.node import installer, staging
from deepep_a4.plan import engine as plan_engine
from deepep_a4.store import command as store_build
from deepep_a4.store import sources as store
from tests.components.node.test_installer import Machine
from tests.conftest import stack_config
from tests.deepep_a4.store.test_sources import FakeGcs

GKE, GCE = "gke-b200", "gce-b200"
# Commands that touch the host: none may run in the supported profile's node phases.
HOST_COMMANDS = re.compile(r"\b(nsenter|apt-get|apt_get|need_packages|modprobe|insmod|dpkg|ldconfig|shutdown)\b")
SITE = "lib/python3.12/site-packages"
# libibverbs prints its provider warnings while it lists the devices (load_drivers): STUB_VERBS_WARNING stands in.
_VERBS = """
#include <stdio.h>
#include <stdlib.h>
void **ibv_get_device_list(int *n) {
  const char *w = getenv("STUB_VERBS_WARNING");
  if (w) fprintf(stderr, "%s\\n", w);
  *n = 8; return calloc(9, sizeof(void *));
}
void ibv_free_device_list(void **l) { free(l); }
"""


def cfg_of(stack: str = GCE, **overrides: Any) -> config.StackConfig:
    overrides.setdefault("ncclGib", "false")
    return config.parse(plan_engine.project_keys(stack_config(stack, **overrides)), stack)


def _gcc(src: str, out: Path, tmp: Path) -> None:
    gcc = shutil.which("gcc")
    if not gcc:
        pytest.skip("gcc is needed to build the stand-in libraries")
    c = tmp / f"{out.name}.c"
    c.write_text(src)
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([gcc, "-shared", "-fPIC", f"-Wl,-soname,{out.name}", "-o", str(out), str(c)], check=True)


def _built_root(m: Machine) -> None:
    """What the build phases leave at R: the copied interpreter, the venv, NVSHMEM's prefix, DeepEP's tree."""
    r = m.root
    py = r / "python/bin/python3"
    py.parent.mkdir(parents=True)
    py.write_text(f'#!/bin/sh\nPYTHONPATH="{r}/venv/{SITE}${{PYTHONPATH:+:$PYTHONPATH}}" exec {sys.executable} "$@"\n')
    py.chmod(0o755)
    (r / "python/lib/python3.12/encodings").mkdir(parents=True)
    venv = r / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin/python").symlink_to(py)  # a venv's interpreter link: an absolute path into R
    (venv / "pyvenv.cfg").write_text(f"home = {r}/python/bin\ninclude-system-site-packages = false\n")
    for i in range(40):  # enough files for several tar parts
        d = venv / SITE / f"nvidia/pkg{i}"
        d.mkdir(parents=True)
        (d / "lib.so").write_bytes(bytes([i]) * (1000 + 37 * i))
    (venv / SITE / "torch").mkdir(parents=True)
    (venv / SITE / "torch/__init__.py").write_text("__version__ = '2.10.0+cu129'\n")
    (r / "nvshmem/lib").mkdir(parents=True)
    (r / "nvshmem/lib/libnvshmem_host.so.3").write_bytes(b"")
    (r / "DeepEP/deep_ep").mkdir(parents=True)
    (r / "DeepEP/deep_ep/__init__.py").write_text("")
    (r / "DeepEP/.git").mkdir()
    (r / "DeepEP/.git/HEAD").write_text("ref: refs/heads/main\n")


def _rdma_libs(tmp: Path) -> Path:
    lib = tmp / "image-lib"
    _gcc(_VERBS, lib / "libibverbs.so.1", tmp)
    _gcc("int mlx5dv_query_device(void) { return 0; }\n", lib / "libmlx5.so.1", tmp)
    _gcc("int rdma_create_id(void) { return 0; }\n", lib / "librdmacm.so.1", tmp)
    _gcc("int mlx5_provider(void) { return 0; }\n", lib / "libibverbs/libmlx5-rdmav34.so", tmp)
    return lib


def _build(m: Machine, tmp: Path, cfg: config.StackConfig) -> tuple[subprocess.CompletedProcess[str], Path]:
    """The builder's last phase, as `store build` renders it, over a built root; its local store under work/."""
    _built_root(m)
    work = tmp / "work"
    prof = store_build.build_profile(cfg)
    prof = dataclasses.replace(
        prof, phases=(store_build.PACK,), values={**prof.values, "RDMA_CORE_VERSION": "installed"}
    )
    out = tmp / "builder"
    for rel, text in installer.render_profile(cfg, prof).items():
        (out / rel).parent.mkdir(parents=True, exist_ok=True)
        (out / rel).write_text(text)
    (m.bin / "ldd").symlink_to(shutil.which("ldd") or "/usr/bin/ldd")
    (work / "store").mkdir(parents=True)
    proc = m.run(out, DEEPEP_STORE_URL=str(work / "store"), DEEPEP_RDMA_LIB_DIR=str(_rdma_libs(tmp)))
    return proc, work


def _node_store(m: Machine, tmp: Path, skip: tuple[str, ...] = (), stack: str = GCE) -> tuple[Path, str]:
    """A store as `store build` leaves it (the parts and the manifest it prints), and the node's root emptied."""
    proc, work = _build(m, tmp, cfg_of(stack))
    assert proc.returncode == 0, proc.stderr + proc.stdout
    remote = tmp / "store"
    rels = [r for r in store_build.built(cfg_of(stack), work) if r.split("/")[1] not in skip]
    sha = store_build.publish(store.LocalStore(work / "store"), store.LocalStore(remote), rels, echo=lambda _: None)
    shutil.rmtree(m.root)
    m.root.mkdir()
    return remote, sha


# /proc/net/route as the kernel prints it (net/ipv4/fib_trie.c, fib_route_seq_show): the default route has
# Destination 00000000; a GCE VM's goes through nic0 (here named as cluster-toolkit's A4 NCCL test names it).
PROC_NET_ROUTE = (
    "Iface\tDestination\tGateway \tFlags\tRefCnt\tUse\tMetric\tMask\t\tMTU\tWindow\tIRTT\n"
    "enp0s19\t00000000\t0100000A\t0003\t0\t0\t100\t00000000\t0\t0\t0\n"
    "enp0s19\t0000000A\t00000000\t0001\t0\t0\t100\t00FFFFFF\t0\t0\t0\n"
)


def _node(tmp: Path) -> Machine:
    m = Machine(tmp, hca="rocep", driver_loaded="580.95.05")
    for i in range(8):  # what the driver lists once loaded, one folder per GPU
        (m.sys / f"proc/driver/nvidia/gpus/0000:{i:02x}:00.0").mkdir(parents=True)
    (m.sys / "proc/net").mkdir(parents=True, exist_ok=True)
    (m.sys / "proc/net/route").write_text(PROC_NET_ROUTE)
    return m


def _run_node(m: Machine, store_dir: Path, sha: str, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    out = m.render(cfg_of(artifactStore="gs://bucket/deepep", artifactStoreManifest=sha), "gce")
    return m.run(out, *args, DEEPEP_STORE_URL=str(store_dir), DEEPEP_DRIVER_WAIT_S="0", **env)


def test_the_builder_packs_every_part_under_the_name_the_nodes_compute(tmp_path: Path) -> None:
    m = _node(tmp_path)
    proc, work = _build(m, tmp_path, cfg_of())
    assert proc.returncode == 0, proc.stderr + proc.stdout
    local = store.LocalStore(work / "store")
    objects = staging.objects(cfg_of(), "gce")
    assert all(local.has(rel) for rel in objects.values())
    listing = (work / "store" / objects["pytorch"] / "data").read_text().splitlines()
    assert len(listing) == 16  # the venv as 16 tar parts, each one pinned by the manifest like the list
    built = store_build.built(cfg_of(), work)
    assert len(built) == len(staging.PARTS) + 16 and all(local.has(rel) for rel in built)
    # rdma-core: the sonames and the provider where libibverbs' RDMAV_DRIVERS name points.
    names = subprocess.run(
        ["tar", "-tzf", str(work / "store" / objects["rdma-core"] / "data")], capture_output=True, text=True, check=True
    ).stdout
    for so in ("lib/libibverbs.so.1", "lib/libmlx5.so.1", "lib/librdmacm.so.1", "lib/libibverbs/libmlx5-rdmav34.so"):
        assert f"./{so}" in names.split()
    deepep = subprocess.run(
        ["tar", "-tzf", str(work / "store" / objects["deepep"] / "data")], capture_output=True, text=True, check=True
    ).stdout
    assert "./deep_ep/__init__.py" in deepep and ".git" not in deepep


def test_a_node_stages_what_the_builder_packed_and_verifies_it(tmp_path: Path) -> None:
    m = _node(tmp_path)
    (m.sys / "proc/kallsyms").write_text("0000000000000000 T ib_umem_dmabuf_get\n")  # as a 6.8 kernel lists it
    store_dir, sha = _node_store(m, tmp_path)
    proc = _run_node(m, store_dir, sha)
    assert proc.returncode == 0, proc.stderr
    assert (m.root / "venv/bin/python").resolve() == (m.root / "python/bin/python3").resolve()
    assert (m.root / f"venv/{SITE}/torch/__init__.py").is_file() and (m.root / "DeepEP/deep_ep").is_dir()
    node = json.loads((m.root / "state/node.json").read_text())
    assert node["driver"] == "580.95.05" and node["module"] == "open"
    assert node["hcaPrefix"] == "rocep" and node["verbsDevices"] == 8
    assert node["nvidiaPeermem"] == "absent" and node["dmabuf"] == "kernel"
    assert node["deviceToHca"].startswith("0:rocep")
    env = (m.root / "unified-env.sh").read_text()
    assert "NVSHMEM_HCA_PREFIX=rocep" in env and "NVSHMEM_DISABLE_GDRCOPY=1" in env
    assert f"export RDMAV_DRIVERS='{m.root}/rdma-core/lib/libibverbs/libmlx5'" in env
    # NVSHMEM's UID bootstrap on nic0: the default route's interface in the kernel's table (stub: PROC_NET_ROUTE).
    assert "export NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=enp0s19" in env
    status = json.loads((m.root / "state/status.json").read_text())
    assert status["ready"] is True and "peermapping" in status["leftOut"]
    calls = m.log.read_text() if m.log.exists() else ""
    assert not HOST_COMMANDS.search(calls) and "python3" not in calls  # no host tool, no host interpreter


def test_a_part_the_manifest_does_not_pin_fails_the_node_with_the_command_that_fills_it(tmp_path: Path) -> None:
    m = _node(tmp_path)
    store_dir, sha = _node_store(m, tmp_path, skip=("pytorch",))
    proc = _run_node(m, store_dir, sha)
    assert proc.returncode == 1
    assert "deepep-a4 store build --stack gce-b200" in proc.stderr and "userspace/pytorch/" in proc.stderr


def test_a_part_with_other_bytes_than_the_manifest_pins_is_refused(tmp_path: Path) -> None:
    m = _node(tmp_path)
    store_dir, sha = _node_store(m, tmp_path)
    rel = staging.objects(cfg_of(), "gce")["deepep"]
    (store_dir / rel / "data").write_bytes(b"tampered")
    # Its uploader's word matches the new bytes: only the stack's manifest tells them apart.
    (store_dir / rel / "sha256").write_text(hashlib.sha256(b"tampered").hexdigest() + "\n")
    proc = _run_node(m, store_dir, sha)
    assert proc.returncode == 1
    assert f"{rel} is not the object the stack's manifest pins" in proc.stderr
    assert not (m.root / "DeepEP").exists()


def test_a_staged_root_that_cannot_execute_fails_verify(tmp_path: Path) -> None:
    """What a noexec mount does to the staged interpreter: verify-staged fails, the benchmark never starts."""
    m = _node(tmp_path)
    store_dir, sha = _node_store(m, tmp_path)
    assert _run_node(m, store_dir, sha).returncode == 0
    (m.root / "python/bin/python3").chmod(0o644)
    proc = _run_node(m, store_dir, sha, "--redo", "verify-staged")
    assert proc.returncode == 1 and "noexec" in proc.stderr


def test_a_provider_that_does_not_load_fails_verify(tmp_path: Path) -> None:
    m = _node(tmp_path)
    store_dir, sha = _node_store(m, tmp_path)
    assert _run_node(m, store_dir, sha).returncode == 0
    (m.root / "rdma-core/lib/libibverbs/libmlx5-rdmav34.so").write_bytes(b"not an ELF object")
    proc = _run_node(m, store_dir, sha, "--redo", "verify-staged")
    assert proc.returncode == 1 and "mlx5 provider" in proc.stderr


def test_only_the_staged_providers_load_failure_fails_verify(tmp_path: Path) -> None:
    """libibverbs also loads what the host's /etc/libibverbs.d names and warns "couldn't load driver '<so>': <dlerror>"
    for each that fails (rdma-core v50.0 libibverbs/dynamic_driver.c, load_driver); the so name of an RDMAV_DRIVERS
    entry is its absolute path plus -rdmav<ABI>.so. A GCE host's folder may be another rdma-core's."""
    m = _node(tmp_path)
    store_dir, sha = _node_store(m, tmp_path)
    assert _run_node(m, store_dir, sha).returncode == 0
    other = "libibverbs: Warning: couldn't load driver 'libefa-rdmav34.so': libefa-rdmav34.so: cannot open shared"
    proc = _run_node(m, store_dir, sha, "--redo", "verify-staged", STUB_VERBS_WARNING=other)
    assert proc.returncode == 0, proc.stderr
    assert other in (m.root / "state/verify-staged.out").read_text()  # kept for the record, not counted
    staged = f"{m.root}/rdma-core/lib/libibverbs/libmlx5-rdmav34.so"
    ours = f"libibverbs: Warning: couldn't load driver '{staged}': {staged}: undefined symbol: verbs_init_cq"
    proc = _run_node(m, store_dir, sha, "--redo", "verify-staged", STUB_VERBS_WARNING=ours)
    assert proc.returncode == 1 and "the staged libibverbs loads the staged mlx5 provider" in proc.stderr


def test_verify_waits_for_the_driver_and_says_whose_it_is(tmp_path: Path) -> None:
    m = _node(tmp_path)
    store_dir, sha = _node_store(m, tmp_path)
    shutil.rmtree(m.sys / "proc/driver")
    proc = _run_node(m, store_dir, sha)
    assert proc.returncode == 1 and "no NVIDIA driver after 0s" in proc.stderr


def test_the_gke_staging_container_stages_from_cloud_storage_with_no_python3_on_path(tmp_path: Path) -> None:
    """What the staging image (keys.STAGING_IMAGE: bash, curl, coreutils, tar; no Python) runs: the rendered GKE
    installer, stage and verify-staged, against a fake Cloud Storage holding what `store build` published (the
    manifest included); only the staged interpreter runs Python."""
    m = _node(tmp_path)
    folder, sha = _node_store(m, tmp_path, stack=GKE)
    (m.bin / "python3").unlink()  # the stub machine's python3 (a logging stand-in) is gone: none on PATH
    real_curl = shutil.which("curl")
    assert real_curl, "curl is needed for this test"
    (m.bin / "curl").unlink()
    (m.bin / "curl").symlink_to(real_curl)
    assert shutil.which("python3", path=str(m.bin)) is None
    FakeGcs.objects, FakeGcs.sessions, FakeGcs.seen_auth = {}, {}, set()
    for data_file in folder.rglob("data"):
        rel = str(data_file.parent.relative_to(folder))
        data = data_file.read_bytes()
        FakeGcs.objects[f"team/{rel}"] = (data, {"sha256": hashlib.sha256(data).hexdigest()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeGcs)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    out = m.render(cfg_of(GKE, artifactStore="gs://bucket/team", artifactStoreManifest=sha), "gke")
    try:
        env = dict(DEEPEP_STORE_URL="gs://bucket/team", DEEPEP_GCS_API=url, DEEPEP_METADATA_URL=url)
        proc = m.run(out, **env, DEEPEP_DRIVER_WAIT_S="0")
    finally:
        server.shutdown()
    assert proc.returncode == 0, proc.stderr
    assert "command not found" not in proc.stdout + proc.stderr
    assert json.loads((m.root / "state/status.json").read_text())["ready"] is True
    assert FakeGcs.seen_auth == {"Bearer tok"}
    assert (m.root / f"venv/{SITE}/torch/__init__.py").is_file()

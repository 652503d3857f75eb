"""gIB's libraries, one rule on both platforms (issue 42, item 4): scripts/gib-libs.sh in the GKE init, the GCE
nccl-gib phase and the GKE benchmark command; rdma-core that gIB bundles is set aside on both; the plugin's verbs
needs are printed and a missing one fails, checked with gcc-built stand-ins.

The stand-ins are built as rdma-core builds its libraries: versioned symbols from a linker version script
(linux-rdma/rdma-core libibverbs/libibverbs.map.in: `IBVERBS_1.1 { ibv_get_device_list; ... }`, later nodes
such as `IBVERBS_1.14 { ibv_query_ece; ... } IBVERBS_1.13;`). A plugin linked against a newer libibverbs records
the version node it needs (DT_VERNEED); the dynamic loader, and `ldd -r`, refuse a libibverbs without it
("version `IBVERBS_1.14' not found")."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from components import config
from components.gke import bench as gke_bench
from components.node import installer
from deepep_a4.plan import engine as plan_engine
from scripts import payload
from tests.conftest import stack_config

GCC = shutil.which("gcc")
OLD_MAP = "IBVERBS_1.1 { global: ibv_get_device_list; local: *; };\n"
NEW_MAP = OLD_MAP + "IBVERBS_1.14 { global: ibv_query_ece; } IBVERBS_1.1;\n"
VERBS_C = "int ibv_get_device_list(void) { return 8; }\n"
NEW_VERBS_C = VERBS_C + "int ibv_query_ece(void) { return 0; }\n"
PLUGIN_C = "int ibv_get_device_list(void); int ibv_query_ece(void);\nint net(void) { return ibv_query_ece(); }\n"


def _so(tmp: Path, out: Path, src: str, vmap: str = "", link: Path | None = None) -> None:
    if GCC is None:
        pytest.skip("gcc is needed to build the stand-in libraries")
    c = tmp / f"{out.name}.c"
    c.write_text(src)
    args = [GCC, "-shared", "-fPIC", f"-Wl,-soname,{out.name}", "-o", str(out), str(c)]
    if vmap:
        (tmp / f"{out.name}.map").write_text(vmap)
        args.append(f"-Wl,--version-script={tmp / f'{out.name}.map'}")
    if link:
        args += [f"-L{link}", "-l:libibverbs.so.1"]
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(args, check=True, capture_output=True)


@pytest.fixture
def libs(tmp_path: Path) -> dict[str, Path]:
    """rdma-core 50's libibverbs (IBVERBS_1.1 only here), a newer one (IBVERBS_1.14) and a plugin built against
    the newer one."""
    old, new, gib = tmp_path / "rdma50", tmp_path / "rdma-new", tmp_path / "gib/lib64"
    _so(tmp_path, old / "libibverbs.so.1", VERBS_C, OLD_MAP)
    _so(tmp_path, new / "libibverbs.so.1", NEW_VERBS_C, NEW_MAP)
    _so(tmp_path, gib / "libnccl-net.so", PLUGIN_C, link=new)
    return {"old": old, "new": new, "gib": gib}


def gib_verbs(plugin: Path, library_path: Path) -> subprocess.CompletedProcess[str]:
    script = payload.gib_libs() + 'gib_verbs "$1"\n'
    env = {"PATH": "/usr/bin:/bin", "LD_LIBRARY_PATH": str(library_path)}
    return subprocess.run(["/bin/sh", "-c", script, "sh", str(plugin)], env=env, capture_output=True, text=True)


def test_the_plugin_against_an_rdma_core_with_its_verbs_passes_and_prints_its_needs(libs: dict[str, Path]) -> None:
    proc = gib_verbs(libs["gib"] / "libnccl-net.so", libs["new"])
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # `ldd -v`'s version information: what the plugin needs, and from where (the first real run records it).
    assert "[gib] libnccl-net.so: " in proc.stdout and "(IBVERBS_1.14)" in proc.stdout
    assert str(libs["new"] / "libibverbs.so.1") in proc.stdout


def test_the_plugin_against_an_rdma_core_without_its_verbs_fails_naming_the_version(libs: dict[str, Path]) -> None:
    proc = gib_verbs(libs["gib"] / "libnccl-net.so", libs["old"])
    assert proc.returncode == 1
    assert "libnccl-net.so needs verbs this rdma-core lacks" in proc.stdout and "IBVERBS_1.14" in proc.stdout


def test_one_rule_sorts_gibs_files_on_both_platforms() -> None:
    script = payload.gib_libs() + 'for n in "$@"; do echo "$n $(gib_kind "$n")"; done\n'
    names = ["libnccl-net.so", "libibverbs.so.1", "libmlx5.so.1", "librdmacm.so.1", "libnl-3.so.200", "x.txt"]
    out = subprocess.run(["/bin/sh", "-c", script, "sh", *names], capture_output=True, text=True, check=True).stdout
    assert out.split("\n")[:6] == [
        "libnccl-net.so nccl",
        "libibverbs.so.1 rdma-core",
        "libmlx5.so.1 rdma-core",
        "librdmacm.so.1 rdma-core",
        "libnl-3.so.200 rdma-core",
        "x.txt other",
    ]
    # The same text in each script that ships it: the GKE init, the GCE phase, the GKE benchmark command.
    gce = installer.render_installer(_cfg("gce-b200"), "gce")
    assert payload.gib_libs() in gce["phases/12-nccl-gib.sh"]
    assert payload.gib_libs() in payload.gke_gib_init()
    assert payload.gib_libs() in gke_bench.bench_command(_cfg("gke-b200"))[2]
    assert "gib_verbs" not in gke_bench.bench_command(_cfg("gke-b200", ncclGib="false"))[2]


def _cfg(stack: str, **overrides: str) -> config.StackConfig:
    return config.parse(plan_engine.project_keys(stack_config(stack, **overrides)), stack)

"""NVSHMEM's source build cannot leave IBGDA degraded: dma-buf UMEM support found by CMake, ah_attr cleared.

Both checks follow NVSHMEM's own source (NVIDIA/nvshmem, the 3.5 head 2d7d25f and v3.4.5-0):
- src/CMakeLists.txt runs `check_source_compiles(C "... MLX5DV_UMEM_MASK_DMABUF ..." HAVE_MLX5DV_UMEM_MASK_DMABUF)`
  and compiles the IBGDA transport with HAVE_MLX5DV_UMEM_MASK_DMABUF only when it passed; CMake caches the result
  as `HAVE_MLX5DV_UMEM_MASK_DMABUF:INTERNAL=1` (or empty) in CMakeCache.txt (CMake's
  Modules/Internal/CheckSourceCompiles.cmake: `set(${_var} 1 CACHE INTERNAL ...)`). Without it
  src/modules/transport/ibgda/ibgda.cpp's ibgda_mobject_nic_map answers NVSHMEMX_ERROR_NOT_SUPPORTED for dma-buf
  and registers GPU memory through nvidia-peermem, which COS does not have: NIC buffers in host memory.
- ibgda_create_dct_shared_objects declares `struct ibv_ah_attr ah_attr;` and hands it to create_ah with
  static_rate never set (NVIDIA/nvshmem#21, at 2d7d25f ibgda.cpp line 2336; v3.4.5-0 the same); llm-d patches it
  (llm-d/llm-d#407, patches/nvshmem_nvshmem_zero_ib_ah_attr_3.3.20.patch). The phase adds its own memset where the
  function clears nothing, then reads the function back.

The stub machine's NVSHMEM tarball carries a stand-in of that function's shape (tests/fixtures/install/stub.sh).
"""

from __future__ import annotations

from pathlib import Path

from tests.components.node.test_installer import Machine, cfg_of, install

IBGDA_CPP = "src/modules/transport/ibgda/ibgda.cpp"
MEMSET = "memset(&ah_attr, 0, sizeof(ah_attr));"


def _dct_function(text: str) -> list[str]:
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("static int ibgda_create_dct_shared_objects("))
    end = next(i for i in range(start, len(lines)) if lines[i] == "}")
    return lines[start : end + 1]


def test_the_build_clears_ah_attr_before_create_ah_and_records_both_checks(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    cfg = cfg_of()  # gce-b200-ubuntu: NVSHMEM 3.5.19 from source
    install(m, m.render(cfg))
    body = _dct_function((m.root / f"src/nvshmem-{cfg.versions.nvshmem}" / IBGDA_CPP).read_text())
    decl = next(i for i, line in enumerate(body) if line.strip() == "struct ibv_ah_attr ah_attr;")
    zero = next(i for i, line in enumerate(body) if MEMSET in line)
    call = next(i for i, line in enumerate(body) if "create_ah(" in line)
    assert decl < zero < call, body
    assert sum(MEMSET in line for line in body) == 1
    checks = (m.root / "nvshmem/.build-checks").read_text().split()
    assert checks == ["dmabuf_umem=1", "ah_attr=patched"]
    log = (m.root / "logs/nvshmem.log").read_text()
    assert "patched to clear ah_attr" in log and "dmabuf_umem=1 ah_attr=patched" in log


def test_a_source_that_clears_ah_attr_itself_is_left_as_it_is(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    cfg = cfg_of()
    d = m.render(cfg)
    assert m.run(d, STUB_NVSHMEM_AH_INIT=" = {}").returncode == 75
    m.reboot()
    assert m.run(d, STUB_NVSHMEM_AH_INIT=" = {}").returncode == 0
    body = _dct_function((m.root / f"src/nvshmem-{cfg.versions.nvshmem}" / IBGDA_CPP).read_text())
    assert not any(MEMSET in line for line in body)
    assert "ah_attr=upstream" in (m.root / "nvshmem/.build-checks").read_text().split()


def test_no_dmabuf_umem_in_cmakes_check_fails_the_phase_before_compiling(tmp_path: Path) -> None:
    m = Machine(tmp_path)
    d = m.render(cfg_of())
    assert m.run(d, STUB_NVSHMEM_DMABUF="0").returncode == 75
    m.reboot()
    proc = m.run(d, STUB_NVSHMEM_DMABUF="0")
    assert proc.returncode == 1
    assert "phase 'nvshmem' failed" in proc.stderr and "HAVE_MLX5DV_UMEM_MASK_DMABUF is not 1" in proc.stderr
    assert not [c for c in m.calls("cmake") if c.startswith("cmake --build")]

# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase nvshmem: NVSHMEM with IBGDA.
# pip (default): NVIDIA's wheel, which ships nvshmem_transport_ibgda; DeepEP finds it with NVSHMEM_DIR
#   unset and links its versioned libnvshmem_host.so.3 (DeepEP's setup.py). No LD_PRELOAD needed. This is
#   the NVSHMEM PyTorch bundles, which timed out in internode dispatch on A4 (troubleshooting T12): the
#   config model allows it only without the internode test.
# source: for versions no wheel has. IBGDA and GDRCopy on, MPI/SHMEM off (troubleshooting T04), sm_100 only,
#   nvcc named explicitly (troubleshooting T05); the env file then preloads it over PyTorch's bundled copy.

phase_inputs() {
  echo "source=$NVSHMEM_SOURCE version=$NVSHMEM_VERSION cuda=$CUDA_VERSION arch=$CUDA_ARCH"
}

from_wheel() {
  ensure_venv
  if [[ $TORCH_VERSION == installed ]] && nvshmem_home >/dev/null 2>&1; then
    # The hardware test (no internet): the machine's PyTorch brought the wheel; the pytorch phase's
    # environment carries it on.
    log "$(nvshmem_wheel) as installed with the machine's PyTorch"
  elif locked_wheel "$(nvshmem_wheel)==$NVSHMEM_VERSION" >"$STATE/nvshmem-wheel.txt"; then
    # The stack's PyTorch lock pins this wheel at this version: by its sha256 there, as PyTorch's own.
    pip_install --no-deps --require-hashes --only-binary :all: -r "$STATE/nvshmem-wheel.txt"
  else
    # No lock pins this version (docs/security.md: accepted, nvshmemSource=pip is opt-in): exact version only.
    warn "$(nvshmem_wheel)==$NVSHMEM_VERSION is pinned by no lock's sha256: pip installs it by version only"
    pip_install --no-deps --only-binary :all: "$(nvshmem_wheel)==$NVSHMEM_VERSION"
  fi
  local home
  home="$(nvshmem_home)" || die "$(nvshmem_wheel) installed but 'import nvidia.nvshmem' fails"
  ls "$home"/lib/libnvshmem_host.so.3* >/dev/null 2>&1 || die "the wheel has no lib/libnvshmem_host.so.3 ($home)"
  ls "$home"/lib/nvshmem_transport_ibgda.so* >/dev/null 2>&1 ||
    die "the $(nvshmem_wheel) $NVSHMEM_VERSION wheel has no nvshmem_transport_ibgda: IBGDA needs nvshmemSource=source"
  log "NVSHMEM $NVSHMEM_VERSION from the pip wheel at $home (IBGDA transport present)"
}

# locked_wheel NAME==VERSION: that requirement with its --hash lines from the stack's PyTorch lock (1: none).
locked_wheel() {
  local lock="$HERE/${TORCH_LOCK:-}"
  [[ -n ${TORCH_LOCK:-} && -f $lock ]] || return 1
  awk -v w="$1" 'index($0, w " ") == 1 || $0 == w { on = 1; found = 1 } on { print } on && !/\\$/ { on = 0 }
    END { exit !found }' "$lock"
}

# A source build's artifact (the installed tree): its version; GDRCopy's key comes through ARTIFACT_DEPS.
artifact_inputs() { echo "nvshmem=$NVSHMEM_VERSION source=$NVSHMEM_SOURCE"; }

NV_SRC="$SRC/nvshmem-$NVSHMEM_VERSION"
# What the build must have checked; the installed tree records it (.build-checks), so a restored artifact is read too.
BUILD_CHECKS=".build-checks"

# NVIDIA/nvshmem#21: ibgda_create_dct_shared_objects hands a stack `struct ibv_ah_attr` to ibv_create_ah without
# clearing it, so static_rate (and dlid on RoCE) hold garbage; a kernel that validates static_rate answers EINVAL
# ("Unable to create ah.") on RoCE. llm-d patches it (llm-d/llm-d#407). Our own fix, one line, checked by content:
# where the function clears nothing before create_ah, this memset follows the declaration.
IBGDA_CPP="src/modules/transport/ibgda/ibgda.cpp"
AH_ATTR_ZERO='memset(&ah_attr, 0, sizeof(ah_attr));'
dct_function() { awk '/^static int ibgda_create_dct_shared_objects\(/, /^}/' "$1"; }
# Zeroed before create_ah: the memset, or an initialiser at the declaration (`= {}`, `= {0}`, `{}`).
ah_attr_zeroed() {
  dct_function "$1" | awk -v zero="$AH_ATTR_ZERO" '
    index($0, zero) || /struct ibv_ah_attr ah_attr[[:space:]]*(=[[:space:]]*)?\{/ { zeroed = 1 }
    /create_ah\(/ { called = 1; exit }
    END { exit !(called && zeroed) }'
}
zero_ah_attr() {
  local cpp="$1/$IBGDA_CPP"
  [[ -n "$(dct_function "$cpp" 2>/dev/null)" ]] ||
    die "NVSHMEM $NVSHMEM_VERSION: no ibgda_create_dct_shared_objects in $IBGDA_CPP (the ah_attr check of NVIDIA/nvshmem#21 reads it)"
  if ah_attr_zeroed "$cpp"; then
    AH_ATTR_CHECK="ah_attr=upstream"
    return 0
  fi
  sed -i '/^static int ibgda_create_dct_shared_objects(/,/^}/ s/^\([[:space:]]*\)struct ibv_ah_attr ah_attr;$/&\n\1memset(\&ah_attr, 0, sizeof(ah_attr));  \/\/ deepep-a4: NVIDIA\/nvshmem#21/' "$cpp"
  ah_attr_zeroed "$cpp" ||
    die "NVSHMEM $NVSHMEM_VERSION: ibgda_create_dct_shared_objects still passes an uncleared ibv_ah_attr to create_ah after the patch (NVIDIA/nvshmem#21)"
  AH_ATTR_CHECK="ah_attr=patched"
  log "NVSHMEM $NVSHMEM_VERSION: $IBGDA_CPP patched to clear ah_attr in ibgda_create_dct_shared_objects (NVIDIA/nvshmem#21)"
}

# IBGDA registers GPU memory with the NIC through dma-buf (mlx5dv_devx_umem_reg_ex, MLX5DV_UMEM_MASK_DMABUF) only
# where CMake's check_source_compiles found MLX5DV_UMEM_MASK_DMABUF in mlx5dv.h (src/CMakeLists.txt; it caches the
# result as HAVE_MLX5DV_UMEM_MASK_DMABUF:INTERNAL=1, or empty). Without it ibgda.cpp's ibgda_mobject_nic_map
# refuses dma-buf and falls back to nvidia-peermem, which neither COS nor the accelerator image loads: the NIC
# buffers land in host memory (troubleshooting T09).
dmabuf_umem_found() { grep -qx 'HAVE_MLX5DV_UMEM_MASK_DMABUF:INTERNAL=1' "$1/CMakeCache.txt"; }

build_source() {
  local tarball="$CACHE/nvshmem-$NVSHMEM_VERSION.src" src=$NV_SRC cccl
  # IBGDA compiles against the verbs headers (mlx5dv.h); with DOCA-OFED apt takes DOCA's libibverbs-dev.
  need_packages build-essential cmake ninja-build libibverbs-dev
  fetch "$NVSHMEM_SRC_URL" "$tarball" "nvshmem-$NVSHMEM_VERSION-source"
  rm -rf "$src" "$R/nvshmem" && mkdir -p "$src"
  tar -xf "$tarball" -C "$src" --strip-components=1 "${TAR_X[@]}"
  zero_ah_attr "$src"
  cccl="$(cuda_include_flags)"
  export CUDA_HOME CUDACXX="$CUDA_HOME/bin/nvcc"
  export NVSHMEM_IBGDA_SUPPORT=1 NVSHMEM_USE_GDRCOPY=1 NVSHMEM_MPI_SUPPORT=0 NVSHMEM_SHMEM_SUPPORT=0
  export NVSHMEM_PMIX_SUPPORT=0 NVSHMEM_UCX_SUPPORT=0 NVSHMEM_LIBFABRIC_SUPPORT=0 GDRCOPY_HOME="$R/gdrcopy"
  cmake -G Ninja -S "$src" -B "$src/build" \
    -DCMAKE_INSTALL_PREFIX="$R/nvshmem" \
    -DCMAKE_CUDA_COMPILER="$CUDACXX" \
    -DCMAKE_CUDA_ARCHITECTURES="$CUDA_ARCH" \
    -DCUDA_HOME="$CUDA_HOME" \
    -DNVSHMEM_IBGDA_SUPPORT=ON \
    -DNVSHMEM_USE_GDRCOPY=ON \
    -DGDRCOPY_HOME="$R/gdrcopy" \
    -DGDRCOPY_INCLUDE="$R/gdrcopy/include" \
    -DNVSHMEM_MPI_SUPPORT=OFF \
    -DNVSHMEM_SHMEM_SUPPORT=OFF \
    -DNVSHMEM_PMIX_SUPPORT=OFF \
    -DNVSHMEM_UCX_SUPPORT=OFF \
    -DNVSHMEM_BUILD_TESTS=OFF \
    -DNVSHMEM_BUILD_EXAMPLES=OFF \
    -DNVSHMEM_BUILD_PYTHON_LIB=OFF \
    ${cccl:+-DCMAKE_CXX_FLAGS=-I$cccl -DCMAKE_CUDA_FLAGS=-I$cccl}
  dmabuf_umem_found "$src/build" ||
    die "NVSHMEM's CMake did not find MLX5DV_UMEM_MASK_DMABUF in infiniband/mlx5dv.h (HAVE_MLX5DV_UMEM_MASK_DMABUF is not 1 in $src/build/CMakeCache.txt): IBGDA would register no GPU memory through dma-buf, and COS has no nvidia-peermem; the build needs the libibverbs-dev of rdma-core 43 or later (linux-rdma/rdma-core providers/mlx5/mlx5dv.h has it from v43.0)"
  cmake --build "$src/build" -j "$(nproc)"
  cmake --install "$src/build"
  transport_major >"$R/nvshmem/.transport-major"
  printf '%s\n' "dmabuf_umem=1" "$AH_ATTR_CHECK" >"$R/nvshmem/$BUILD_CHECKS"
}

# NVSHMEM loads its IBGDA transport by the ABI major its source declares (4 from 3.5, 3 before:
# troubleshooting T07), so the file to check comes from the source, not from a fixed name.
transport_major() {
  local major
  major="$(sed -n 's/^[[:space:]]*set([[:space:]]*TRANSPORT_VERSION_MAJOR[[:space:]]\+\([0-9]\+\).*/\1/p' "$NV_SRC/src/CMakeLists.txt" | head -n1)"
  [[ -n $major ]] || die "NVSHMEM $NVSHMEM_VERSION: no TRANSPORT_VERSION_MAJOR in $NV_SRC/src/CMakeLists.txt"
  echo "$major"
}

# Built here or restored from the store, the tree must hold what DeepEP and NVSHMEM's loader need.
from_source() {
  with_artifact "$R/nvshmem" build_source
  local f major info
  major="$(cat "$R/nvshmem/.transport-major" 2>/dev/null)" || die "$R/nvshmem has no .transport-major: an incomplete build"
  if ! grep -qx dmabuf_umem=1 "$R/nvshmem/$BUILD_CHECKS" 2>/dev/null ||
    ! grep -Eqx 'ah_attr=(upstream|patched)' "$R/nvshmem/$BUILD_CHECKS"; then
    die "$R/nvshmem/$BUILD_CHECKS does not record dma-buf UMEM support and the ah_attr fix: a build that skipped them"
  fi
  for f in lib/libnvshmem_host.so "lib/nvshmem_transport_ibgda.so.$major" bin/nvshmem-info; do
    [[ -e $R/nvshmem/$f ]] || die "NVSHMEM built but $R/nvshmem/$f is missing"
  done
  # 3.5's nvshmem-info finds libnvshmem_host only through the library path (RUNPATH is \$ORIGIN, bin/).
  info="$(LD_LIBRARY_PATH="$R/nvshmem/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$R/nvshmem/bin/nvshmem-info" -a)" ||
    die "$R/nvshmem/bin/nvshmem-info -a failed (exit $?): the install is incomplete"
  # nvshmem-info prints every build variable with its value: only =ON proves IBGDA was built in.
  [[ $info =~ (^|[[:space:]])NVSHMEM_IBGDA_SUPPORT=ON([[:space:]]|$) ]] ||
    die "nvshmem-info -a does not say NVSHMEM_IBGDA_SUPPORT=ON: the build did not enable IBGDA"
  log "NVSHMEM $NVSHMEM_VERSION built from source into $R/nvshmem (IBGDA transport ABI $major, GDRCopy, sm_$CUDA_ARCH; $(tr '\n' ' ' <"$R/nvshmem/$BUILD_CHECKS"))"
}

phase_run() {
  if [[ $NVSHMEM_SOURCE == source ]]; then from_source; else from_wheel; fi
}

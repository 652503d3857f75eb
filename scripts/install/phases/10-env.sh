# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase env: the unified environment file of the field reports (R/unified-env.sh), made from what is on this
# node: NVSHMEM transport and NIC handler, HCA prefix, GID index, DEEP_EP_DEVICE_TO_HCA_MAPPING from the
# GPU<->NIC PCI topology, and one consistent rdma-core (troubleshooting T16).

phase_inputs() {
  echo "handler=$NIC_HANDLER prefix=$HCA_PREFIX gid=$GID_INDEX tc=$NVSHMEM_TRAFFIC_CLASS source=$NVSHMEM_SOURCE target=$DEEPEP_TARGET"
  if [[ ${DEEPEP_API:-v1} == v2 ]]; then echo "deepep=v2 nccl=$NCCL_VERSION"; fi
}

# hca_port and device_to_hca_mapping: lib.sh (the staged profile's verify uses them too).

# The rdma-core userspace of the host: libibverbs and the mlx5 provider of the same private ABI in
# libibverbs' default provider folder, so no process depends on RDMAV_DRIVERS being inherited
# (troubleshooting T16: rdmav57 vs rdmav34, spawned children without RDMAV_DRIVERS).
RDMA_LIBDIR=/usr/lib/x86_64-linux-gnu
check_rdma_core() {
  local lib pabi provider other
  lib="$(readlink -f "$SYS$RDMA_LIBDIR/libibverbs.so.1" 2>/dev/null || true)"
  [[ -f $lib ]] || die "no libibverbs.so.1 in $RDMA_LIBDIR: install rdma-core/ibverbs-providers (or DOCA-OFED)"
  pabi="$(grep -ao 'IBVERBS_PRIVATE_[0-9]*' "$lib" | sed -n '1s/.*_//p')"
  [[ -n $pabi ]] || die "cannot read the provider ABI (IBVERBS_PRIVATE_*) of $lib"
  provider="$SYS$RDMA_LIBDIR/libibverbs/libmlx5-rdmav$pabi.so"
  [[ -e $provider ]] ||
    die "libibverbs $(basename "$lib") loads providers of ABI $pabi, but $provider is missing: two rdma-core versions are mixed (troubleshooting T16)"
  # A second libibverbs in the folder GKE mounts into GPU containers shadows theirs (troubleshooting T16).
  for other in "$SYS"/home/kubernetes/bin/nvidia/lib64/libibverbs.so* "$SYS"/home/kubernetes/bin/nvidia/lib64/libmlx5.so*; do
    [[ -e $other ]] || continue
    mkdir -p "$STATE/quarantine"
    mv "$other" "$STATE/quarantine/"
    warn "moved $other to $STATE/quarantine: a second rdma-core there breaks provider loading in pods"
  done
  echo "$pabi"
}

# For the GKE target, pods get the host's rdma-core as one set under R/rdma-core (same ABI everywhere):
# libibverbs, the mlx5 provider and what libibverbs itself links (libnl-3, libnl-route-3: an ubuntu image
# has neither), and the provider's config (etc/libibverbs.d/mlx5.driver, mounted read-only at
# /etc/libibverbs.d: libibverbs loads only providers named there or in RDMAV_DRIVERS; troubleshooting T21).
ship_rdma_core() {
  local pabi=$1 dst="$R/rdma-core/lib" f lib
  rm -rf "$R/rdma-core" && mkdir -p "$dst/libibverbs" "$R/rdma-core/etc/libibverbs.d"
  for lib in libnl-3.so.200 libnl-route-3.so.200; do
    [[ -e $SYS$RDMA_LIBDIR/$lib ]] || die "$RDMA_LIBDIR/$lib is missing on the host: libibverbs needs it (apt install $([[ $lib == libnl-3* ]] && echo libnl-3-200 || echo libnl-route-3-200))"
  done
  for f in "$SYS$RDMA_LIBDIR"/libibverbs.so.1* "$SYS$RDMA_LIBDIR"/libmlx5.so.1* "$SYS$RDMA_LIBDIR"/libnl-3.so.200* "$SYS$RDMA_LIBDIR"/libnl-route-3.so.200*; do
    [[ -e $f ]] && cp -a "$f" "$dst/"
  done
  cp -L "$SYS$RDMA_LIBDIR/libibverbs/libmlx5-rdmav$pabi.so" "$dst/libibverbs/"
  echo "driver mlx5" >"$R/rdma-core/etc/libibverbs.d/mlx5.driver"
}

# The host's dynamic linker finds the source NVSHMEM and GDRCopy without the env file too (field report R2:
# /etc/ld.so.conf.d/nvshmem.conf); processes that source the env file still preload our NVSHMEM first.
LDCONF=/etc/ld.so.conf.d/deepep-a4.conf
register_libraries() {
  mkdir -p "$SYS${LDCONF%/*}"
  if [[ $NVSHMEM_SOURCE == source ]]; then
    printf '%s\n' "$R/nvshmem/lib" "$R/gdrcopy/lib" >"$SYS$LDCONF"
  else
    # The wheel's copy stays inside the venv, where PyTorch expects it.
    printf '%s\n' "$R/gdrcopy/lib" >"$SYS$LDCONF"
  fi
  ldconfig
}

phase_run() {
  local mapping="" first pabi="none" nv_home cuda_home="$SYS/usr/local/cuda-$CUDA_VERSION" ld=() preload=""
  if ((HAS_RDMA_NICS)); then
    # Without DOCA-OFED the userspace is Ubuntu's inbox rdma-core (rdmav34 in troubleshooting T16), its mlx5
    # provider in the same default folder; a fresh image may lack it, and the pip NVSHMEM needs no -dev.
    if ((!USE_DOCA_OFED)); then need_packages libibverbs1 ibverbs-providers; fi
    first="$(first_hca)"
    [[ $first == "$HCA_PREFIX"* ]] || die "the HCAs are ${first:-absent}, but the stack's hcaPrefix is $HCA_PREFIX"
    mapping="$(device_to_hca_mapping)"
    pabi="$(check_rdma_core | tail -n1)"
  fi
  nv_home="$(nvshmem_home)"
  ld+=("$nv_home/lib")
  [[ $NVSHMEM_SOURCE == source ]] && preload="$nv_home/lib/libnvshmem_host.so.3"
  ld+=("$R/gdrcopy/lib" "$cuda_home/lib64")
  if [[ $DEEPEP_TARGET == gke ]]; then
    ship_rdma_core "$pabi"
    ld=("$R/rdma-core/lib" "${ld[@]}" "$R/python/lib")
  fi
  local ldpath
  ldpath="$(
    IFS=:
    echo "${ld[*]}"
  )"
  cat >"$ENV_FILE.tmp" <<ENV
# deepep-a4 unified environment ($DEEPEP_STACK, $DEEPEP_TARGET), written by the installer's env phase.
# Usage: source $ENV_FILE
export DEEPEP_ROOT='$R'
export CUDA_HOME='$cuda_home'
export GDRCOPY_HOME='$R/gdrcopy'
export PATH='$VENV/bin':'$cuda_home/bin':"\${PATH:-/usr/bin:/bin}"
export LD_LIBRARY_PATH='$ldpath'"\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PYTHONPATH='$R/DeepEP'"\${PYTHONPATH:+:\$PYTHONPATH}"
ENV
  if [[ $NVSHMEM_SOURCE == source ]]; then
    cat >>"$ENV_FILE.tmp" <<ENV
# NVSHMEM $NVSHMEM_VERSION built from source: preload it over PyTorch's bundled copy (troubleshooting T03).
export NVSHMEM_HOME='$nv_home'
export LD_PRELOAD='$preload'"\${LD_PRELOAD:+:\$LD_PRELOAD}"
ENV
  else
    cat >>"$ENV_FILE.tmp" <<ENV
# NVSHMEM $NVSHMEM_VERSION from the pip wheel ($nv_home); NVSHMEM_DIR stays unset, no LD_PRELOAD.
unset NVSHMEM_DIR
ENV
  fi
  deepep_v2_env
  if ((!HAS_RDMA_NICS)); then
    # The hardware test's machine has no NICs: NVSHMEM runs over NVLink (P2P) only.
    remote_transport_env "$HCA_PREFIX" >>"$ENV_FILE.tmp"
  else
    nvshmem_ibgda_env "$HCA_PREFIX" >>"$ENV_FILE.tmp"
    cat >>"$ENV_FILE.tmp" <<ENV
# GPU -> nearest NIC from this node's PCI topology (PR #466 reads it; see $STATE/topology.txt).
export DEEP_EP_DEVICE_TO_HCA_MAPPING=$mapping
# One rdma-core (libibverbs ABI $pabi): providers come from libibverbs' default folder, never from an
# inherited RDMAV_DRIVERS (troubleshooting T16).
unset RDMAV_DRIVERS
ENV
  fi
  if [[ $DEEPEP_TARGET == gke ]]; then
    cat >>"$ENV_FILE.tmp" <<ENV
# In a container the image's provider folder lacks this ABI's mlx5 provider: copy the host's into
# libibverbs' default folder, which every spawned process searches (troubleshooting T16's fix; RDMAV_DRIVERS is
# not inherited reliably). The benchmark pods mount a writable emptyDir there over a read-only root.
if [ ! -e $RDMA_LIBDIR/libibverbs/libmlx5-rdmav$pabi.so ]; then
  { mkdir -p $RDMA_LIBDIR/libibverbs && cp '$R/rdma-core/lib/libibverbs/libmlx5-rdmav$pabi.so' $RDMA_LIBDIR/libibverbs/; } 2>/dev/null ||
    echo "deepep-a4: cannot add the mlx5 provider to $RDMA_LIBDIR/libibverbs (not writable): RDMA will not load" >&2
fi
ENV
  fi
  chmod 0644 "$ENV_FILE.tmp"
  mv "$ENV_FILE.tmp" "$ENV_FILE"
  register_libraries
  log "wrote $ENV_FILE; DEEP_EP_DEVICE_TO_HCA_MAPPING=$mapping"
}

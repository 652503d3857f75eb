# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase pack-userspace: the store builder's last phase for a nodeProfile=supported stack (`deepep-a4 store
# build`, the hardware test); it never ships to a node. It packs what the phases before it made at the staged
# root R into the parts the nodes stage (components/node/staging.py) and publishes each under the name
# STAGE_OBJECTS gives it, into the builder's own local store; the builder then lists them in the manifest.

# Where the build image's rdma-core lies (Ubuntu's multiarch folder); SYS prefixes it in the tests.
RDMA_LIB_DIR="${DEEPEP_RDMA_LIB_DIR:-$SYS/usr/lib/x86_64-linux-gnu}"
RDMA_LIBS=(libibverbs.so.1 libmlx5.so.1 librdmacm.so.1)
# glibc's own libraries: the pods' image (Ubuntu 24.04, as the build image) has them.
GLIBC_LIBS='^(libc|libm|libpthread|libdl|librt|libresolv|ld-linux-x86-64)\.so'

phase_inputs() {
  echo "root=$R rdma-core=$RDMA_CORE_VERSION"
  for p in $STAGE_PARTS; do echo "$p ${STAGE_OBJECTS[$p]}"; done
}

# rdma-core's user space as the build image's packages hold it (COS has none): libibverbs, libmlx5, librdmacm,
# the mlx5 provider under lib/libibverbs/, and what they link beyond glibc (libnl-3, libnl-route-3).
pack_rdma_core() {
  local dest=$1 lib provider so got
  if [[ ! -e $RDMA_LIB_DIR/libibverbs.so.1 || ! -e $RDMA_LIB_DIR/librdmacm.so.1 ]]; then
    need_packages libibverbs1 ibverbs-providers librdmacm1t64
  fi
  got="$(installed_version libibverbs1)"
  if [[ $RDMA_CORE_VERSION != installed && $got != "$RDMA_CORE_VERSION"* ]]; then
    die "the build image has rdma-core ${got:-(none)}, but the part's key says $RDMA_CORE_VERSION (components/node/staging.py RDMA_CORE_VERSION): use the pinned Ubuntu 24.04 image"
  fi
  mkdir -p "$dest/lib/libibverbs"
  for lib in "${RDMA_LIBS[@]}"; do
    [[ -e $RDMA_LIB_DIR/$lib ]] || die "no $RDMA_LIB_DIR/$lib: the build image lacks rdma-core's $lib"
    cp -L "$RDMA_LIB_DIR/$lib" "$dest/lib/$lib"
  done
  provider="$(compgen -G "$RDMA_LIB_DIR/libibverbs/libmlx5-rdmav*.so" | head -n1)"
  [[ -n $provider ]] || die "no mlx5 provider ($RDMA_LIB_DIR/libibverbs/libmlx5-rdmav*.so): install ibverbs-providers"
  cp -L "$provider" "$dest/lib/libibverbs/"
  ldd "$dest"/lib/*.so.1 "$dest"/lib/libibverbs/*.so | awk '$2 == "=>" && $3 ~ /^\// {print $3}' | sort -u |
    while read -r so; do
      [[ $(basename "$so") =~ $GLIBC_LIBS || -e $dest/lib/$(basename "$so") ]] || cp -L "$so" "$dest/lib/"
    done
  echo "${got:-installed}" >"$dest/VERSION"
}

# The folder a part is packed from: what the phases before made at R.
part_source() {
  case $1 in
    python) echo "$R/python" ;;
    pytorch) echo "$VENV" ;;
    nvshmem) nvshmem_home ;;
    deepep) echo "$R/DeepEP" ;;
    rdma-core) echo "$CACHE/pack-rdma-core" ;;
  esac
}

pack_part() {
  local part=$1 rel=${STAGE_OBJECTS[$1]} src tarball key
  if [[ -e $STORE_URL/$rel/data ]]; then
    log "store: $rel is there already (the same key: the same bytes)"
    return 0
  fi
  src="$(part_source "$part")"
  [[ -d $src ]] || die "nothing to pack for $part: $src is missing (did the phases before this one run?)"
  if [[ $rel == *.parts ]]; then
    key="$(basename "$rel" .parts)"
    # 16 uncompressed parts of about equal bytes: the node unpacks them side by side (store.sh).
    PHASE="pack-$part" ARTIFACT_PARTS=16 ARTIFACT_EXCLUDE=() _publish_parts "$rel" "$src" "$key"
  else
    tarball="$CACHE/pack-$part.tar.gz"
    tar -czf "$tarball" --exclude=./.git -C "$src" .
    store_put "$rel" "$tarball" || log "store: $rel was there already"
    rm -f "$tarball"
  fi
  log "packed $part into $STORE_URL/$rel"
}

phase_run() {
  local part t0=$SECONDS out=()
  if ! store_enabled || store_is_gcs; then
    die "pack-userspace publishes into the builder's local store (a folder), not '${STORE_URL:-}'"
  fi
  [[ -d $R/python ]] || die "no staged interpreter at $R/python: the pytorch phase makes it from the image's python3"
  rm -rf "$CACHE/pack-rdma-core"
  pack_rdma_core "$CACHE/pack-rdma-core"
  for part in $STAGE_PARTS; do
    pack_part "$part"
    out+=("$part")
  done
  rm -rf "$CACHE/pack-rdma-core"
  phase_note "packed ${out[*]} in $((SECONDS - t0)) s"
}

# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase stage (nodeProfile=supported): the user space from the artifact store, unpacked under R, nothing else.
# The node image brings the kernel, the NVIDIA driver and the in-kernel mlx5 driver; this phase enters no host
# namespace, installs no package, loads no kernel module and runs no interpreter of the host
# (components/staging.py names the parts).

phase_inputs() {
  local p
  echo "root=$R parts=$STAGE_PARTS"
  for p in $STAGE_PARTS; do echo "$p ${STAGE_OBJECTS[$p]}"; done
}

# stage_dir PART: where a part lies under R (DeepEP where the host install puts it, for the runner).
stage_dir() { if [[ $1 == deepep ]]; then echo "$R/DeepEP"; else echo "$R/$1"; fi; }

# stage_part PART: downloads (digest checked by store_get) and unpacks one part into its folder, atomically.
stage_part() {
  local part=$1 rel=${STAGE_OBJECTS[$1]} tarball="$CACHE/stage-$1.tar.gz" t0=$SECONDS dir
  dir="$(stage_dir "$1")"
  if ! store_get "$rel" "$tarball"; then
    echo "missing $part $rel" >"$STATE/stage-$part.result"
    return 0
  fi
  rm -rf "$dir.new" && mkdir -p "$dir.new"
  tar -xf "$tarball" -C "$dir.new"
  rm -f "$tarball"
  rm -rf "${dir:?}" && mv "$dir.new" "$dir"
  echo "ok $part $((SECONDS - t0))s" >"$STATE/stage-$part.result"
}

phase_run() {
  local part pids=() missing=() notes=() line
  store_enabled || die "nodeProfile=supported stages the user space from the artifact store, but artifactStore is empty: set it (docs/store.md)"
  rm -f "$STATE"/stage-*.result
  # The parts are independent: fetched and unpacked side by side.
  for part in $STAGE_PARTS; do
    stage_part "$part" &
    pids+=($!)
  done
  for part in "${pids[@]}"; do wait "$part" || die "staging failed (see above)"; done
  for part in $STAGE_PARTS; do
    line="$(cat "$STATE/stage-$part.result" 2>/dev/null || echo "missing $part ${STAGE_OBJECTS[$part]}")"
    case $line in
      ok*) notes+=("${line#ok }") ;;
      *) missing+=("$STORE_URL/${STAGE_OBJECTS[$part]}") ;;
    esac
  done
  ((${#missing[@]} == 0)) ||
    die "the store lacks the user space of this stack: ${missing[*]}; fill it with 'deepep-a4 store build --stack $DEEPEP_STACK' (docs/store.md), then restart the installer pod"
  # libibverbs loads the providers its configuration folder names; an absolute name is loaded as is (rdma-core
  # libibverbs/dynamic_driver.c: name + "-rdmav<ABI>.so"), so no provider folder of the container matters.
  mkdir -p "$R/rdma-core/etc/libibverbs.d"
  echo "driver $R/rdma-core/lib/libibverbs/libmlx5" >"$R/rdma-core/etc/libibverbs.d/mlx5.driver"
  # The benchmark command runs R/venv/bin/python: the staged interpreter, its packages on PYTHONPATH (env file).
  mkdir -p "$R/venv/bin"
  ln -sfn "$R/python/bin/python3" "$R/venv/bin/python"
  phase_note "staged ${notes[*]}"
}

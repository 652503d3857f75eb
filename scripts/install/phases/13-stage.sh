# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase stage (nodeProfile=supported): the user space from the artifact store, unpacked under R, nothing else.
# The node image brings the kernel, the NVIDIA driver and the in-kernel mlx5 driver; this phase enters no host
# namespace, installs no package, loads no kernel module and runs no interpreter of the host
# (components/node/staging.py names the parts). Only objects the stack's store manifest pins are taken.

phase_inputs() {
  echo "root=$R parts=$STAGE_PARTS manifest=$STORE_MANIFEST"
  for p in $STAGE_PARTS; do echo "$p ${STAGE_OBJECTS[$p]}"; done
}

# stage_dir PART: where a part lies under R (DeepEP where the host install puts it, the venv at R/venv).
stage_dir() {
  case $1 in
    deepep) echo "$R/DeepEP" ;;
    pytorch) echo "$VENV" ;;
    *) echo "$R/$1" ;;
  esac
}

# stage_part PART: downloads (each object checked against the manifest's digest) and unpacks one part into its
# folder, atomically; a split part (.parts: the venv's 4.5 GB) comes as tar parts unpacked side by side.
stage_part() {
  local part=$1 rel=${STAGE_OBJECTS[$1]} tarball="$CACHE/stage-$1.tar.gz" t0=$SECONDS dir want="" rc=0
  dir="$(stage_dir "$1")"
  if ((!STORE_TRUST_PUBLISHED)); then
    want="$(_pinned_digest "$rel")" || rc=$?
    ((rc != 2)) || exit 1
    if ((rc)); then
      echo "unpinned $part $rel" >"$STATE/stage-$part.result"
      return 0
    fi
  fi
  rm -rf "$dir.new"
  if [[ $rel == *.parts ]]; then
    if ! PHASE="stage-$part" _restore_parts "$rel" "$dir.new" "$want"; then
      echo "missing $part $rel" >"$STATE/stage-$part.result"
      return 0
    fi
  else
    if ! store_get "$rel" "$tarball"; then
      echo "missing $part $rel" >"$STATE/stage-$part.result"
      return 0
    fi
    _check_pinned "$tarball" "$rel" "$want"
    mkdir -p "$dir.new"
    store_untar "$tarball" "$dir.new" "$rel"
    rm -f "$tarball"
  fi
  rm -rf "${dir:?}" && mv "$dir.new" "$dir"
  echo "ok $part $((SECONDS - t0))s" >"$STATE/stage-$part.result"
}

phase_run() {
  local part pids=() missing=() unpinned=() notes=() line
  store_enabled || die "nodeProfile=supported stages the user space from the artifact store, but artifactStore is empty: set it (docs/store.md)"
  rm -f "$STATE"/stage-*.result
  mkdir -p "$CACHE"
  # The manifest once, before the parts are fetched and unpacked side by side (they are independent).
  if ((!STORE_TRUST_PUBLISHED)) && [[ -n $STORE_MANIFEST ]]; then _manifest_file >/dev/null || exit 1; fi
  for part in $STAGE_PARTS; do
    stage_part "$part" &
    pids+=($!)
  done
  for part in "${pids[@]}"; do wait "$part" || die "staging failed (see above)"; done
  for part in $STAGE_PARTS; do
    line="$(cat "$STATE/stage-$part.result" 2>/dev/null || echo "missing $part ${STAGE_OBJECTS[$part]}")"
    case $line in
      ok*) notes+=("${line#ok }") ;;
      unpinned*) unpinned+=("${STAGE_OBJECTS[$part]}") ;;
      *) missing+=("$STORE_URL/${STAGE_OBJECTS[$part]}") ;;
    esac
  done
  ((${#unpinned[@]} == 0)) ||
    die "the stack's store manifest (artifactStoreManifest=${STORE_MANIFEST:-none}) does not pin ${unpinned[*]}: run 'deepep-a4 store build --stack $DEEPEP_STACK', then 'pulumi config set deepep-a4:artifactStoreManifest SHA256' as it prints, and 'pulumi up' (docs/store.md)"
  ((${#missing[@]} == 0)) ||
    die "the store lacks the user space of this stack: ${missing[*]}; fill it with 'deepep-a4 store build --stack $DEEPEP_STACK' (docs/store.md), then restart the installer pod"
  phase_note "staged ${notes[*]}"
}

# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase nccl-gib: gIB's plugin on GCE as cluster-toolkit installs it (examples/machine-learning/a4-highgpu-8g/
# a4high-{vm,slurm-blueprint}.yaml): apt nccl-gib (ar+https), pinned, held, not in ld.so.conf (bench_env.py).

phase_inputs() {
  echo "gib=$NCCL_GIB version=$NCCL_GIB_VERSION target=$DEEPEP_TARGET repo=$GIB_APT_REPO"
}

GIB_ROOT=/usr/local/gib
# apt_key URL NAME: a key in /etc/apt/keyrings, .asc when armored (apt reads both by suffix).
apt_key() {
  local url=$1 name=$2 tmp="$CACHE/$2.key" dest
  fetch_key "$url" "$tmp" "$name" >&2
  if grep -q -- '-----BEGIN PGP PUBLIC KEY BLOCK-----' "$tmp"; then dest="/etc/apt/keyrings/$name.asc"; else dest="/etc/apt/keyrings/$name.gpg"; fi
  mkdir -p "$SYS/etc/apt/keyrings"
  cp "$tmp" "$SYS$dest"
  echo "$dest"
}

# @gib-libs.sh
check_gib_lib64() {
  local lib="$SYS$GIB_ROOT/lib64" f
  [[ -d $lib ]] || die "nccl-gib $NCCL_GIB_VERSION installed but $GIB_ROOT/lib64 is missing: the package layout changed"
  compgen -G "$lib/libnccl-net*" >/dev/null ||
    die "nccl-gib $NCCL_GIB_VERSION installed but $GIB_ROOT/lib64 holds no libnccl-net*: no NCCL plugin to use"
  for f in "$lib"/*; do
    [[ $(gib_kind "${f##*/}") == rdma-core ]] || continue
    mkdir -p "$lib.rdma-core"
    mv -f "$f" "$lib.rdma-core/" || die "cannot move $f"
    log "set aside lib64/${f##*/}: rdma-core (T16/T17)"
  done
  log "$GIB_ROOT/lib64: $(cd "$lib" && echo *)"
  for f in "$lib"/libnccl-net*.so; do
    (
      # shellcheck source=/dev/null
      [[ -f $ENV_FILE ]] && . "$ENV_FILE"
      LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" gib_verbs "$f"
    ) || die "the gIB plugin cannot use this rdma-core (above): set ncclGib=false"
  done
}

phase_run() {
  [[ $DEEPEP_TARGET == gce ]] || phase_skip "target $DEEPEP_TARGET: on GKE the gIB DaemonSet installs the plugin"
  ((NCCL_GIB)) || phase_skip "ncclGib=false: NCCL uses its own transport"
  local have ar_key pkg_key
  have="$(installed_version nccl-gib)"
  if [[ $have != "$NCCL_GIB_VERSION" ]]; then
    # The AR transport (packages.cloud.google.com), then the plugin's repository: each with its own key.
    pkg_key="$(apt_key "$GOOGLE_APT_KEY_URL" google-cloud-packages)"
    ar_key="$(apt_key "$GIB_APT_KEY_URL" google-artifact-registry)"
    mkdir -p "$SYS/etc/apt/sources.list.d"
    echo "deb [signed-by=$pkg_key] $GOOGLE_APT_TRANSPORT_REPO" >"$SYS/etc/apt/sources.list.d/artifact-registry-transport.list"
    apt_get update || die "apt-get update failed with the transport repository $GOOGLE_APT_TRANSPORT_REPO (see above)"
    apt_get install apt-transport-artifact-registry ||
      die "apt-transport-artifact-registry did not install (see above): apt cannot read $GIB_APT_REPO without it"
    echo "deb [signed-by=$ar_key] $GIB_APT_REPO" >"$SYS/etc/apt/sources.list.d/nccl-gib.list"
    apt_get update ||
      die "apt-get update failed on $GIB_APT_REPO (see above): ar+https sends the VM's service-account token, whose scopes must allow Artifact Registry reads"
    apt-mark unhold nccl-gib >/dev/null 2>&1 || true
    apt_get install --allow-change-held-packages "nccl-gib=$NCCL_GIB_VERSION" ||
      die "nccl-gib=$NCCL_GIB_VERSION did not install from $GIB_APT_REPO (see above)"
    have="$(installed_version nccl-gib)"
    [[ $have == "$NCCL_GIB_VERSION" ]] ||
      die "apt installed nccl-gib but dpkg lists ${have:-no installed version}, not $NCCL_GIB_VERSION"
  fi
  # Held as Google's blueprints do: an upgrade would move the plugin under a pinned NCCL.
  apt-mark hold nccl-gib >/dev/null || die "apt-mark hold nccl-gib failed"
  check_gib_lib64
  phase_note "nccl-gib $have, held"
}

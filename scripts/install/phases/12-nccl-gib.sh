# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase nccl-gib: Google's gIB NCCL plugin on a GCE VM, as GoogleCloudPlatform/cluster-toolkit's A4 VM and
# Slurm blueprints install it (examples/machine-learning/a4-highgpu-8g/a4high-vm.yaml and
# a4high-slurm-blueprint.yaml): the apt package nccl-gib from Google's Artifact Registry apt repository
# (through its ar+https transport), pinned to the Slurm blueprint's version and held. It lands in
# /usr/local/gib; as in the Slurm blueprint, nothing adds it to ld.so.conf: the benchmark runner puts
# /usr/local/gib/lib64 on the tests' LD_LIBRARY_PATH (scripts/bench/bench_env.py), so no other process on the
# VM loads it. On GKE the gIB DaemonSet installs the plugin (components/gke/gib.py); ncclGib=false skips it.
# NCCL uses it; verify does not (NVSHMEM), hence its place after verify.

phase_inputs() {
  echo "gib=$NCCL_GIB version=$NCCL_GIB_VERSION target=$DEEPEP_TARGET repo=$GIB_APT_REPO"
}

GIB_ROOT=/usr/local/gib
# rdma-core libraries that must not come from the plugin's folder: on LD_LIBRARY_PATH they would shadow the
# node's own (DOCA-OFED's or the image's) in every test process (troubleshooting T16/T17).
GIB_RDMA_CORE_GLOB='libibverbs* librdmacm* libmlx4* libmlx5* libibumad*'

# apt_key URL NAME: a signing key under /etc/apt/keyrings, as .asc when armored (apt reads both by suffix).
apt_key() {
  local url=$1 name=$2 tmp="$CACHE/$2.key" dest
  fetch_key "$url" "$tmp" "$name" >&2
  if grep -q -- '-----BEGIN PGP PUBLIC KEY BLOCK-----' "$tmp"; then dest="/etc/apt/keyrings/$name.asc"; else dest="/etc/apt/keyrings/$name.gpg"; fi
  mkdir -p "$SYS/etc/apt/keyrings"
  cp "$tmp" "$SYS$dest"
  echo "$dest"
}

check_gib_lib64() {
  local lib="$SYS$GIB_ROOT/lib64" f pattern shadow=()
  [[ -d $lib ]] || die "nccl-gib $NCCL_GIB_VERSION installed but $GIB_ROOT/lib64 is missing: the package layout changed"
  compgen -G "$lib/libnccl-net*" >/dev/null ||
    die "nccl-gib $NCCL_GIB_VERSION installed but $GIB_ROOT/lib64 holds no libnccl-net*: no NCCL plugin to use"
  for pattern in $GIB_RDMA_CORE_GLOB; do
    for f in "$lib"/$pattern; do [[ -e $f ]] && shadow+=("${f##*/}"); done
  done
  ((${#shadow[@]} == 0)) ||
    die "nccl-gib $NCCL_GIB_VERSION ships rdma-core in $GIB_ROOT/lib64 (${shadow[*]}): on the tests' LD_LIBRARY_PATH it would shadow the node's (troubleshooting T16/T17); set ncclGib=false"
  log "$GIB_ROOT/lib64: $(cd "$lib" && echo *)"
}

phase_run() {
  [[ $DEEPEP_TARGET == gce ]] || phase_skip "target $DEEPEP_TARGET: on GKE the gIB DaemonSet installs the plugin"
  ((NCCL_GIB)) || phase_skip "ncclGib=false: NCCL uses its own transport"
  local have ar_key pkg_key
  have="$(installed_version nccl-gib)"
  if [[ $have != "$NCCL_GIB_VERSION" ]]; then
    # The transport package (apt-transport-artifact-registry) comes from packages.cloud.google.com, the
    # plugin from the Artifact Registry repository the transport reads; each signed by its own key.
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
  # Held, as both Google blueprints freeze it: an unattended upgrade would move the plugin under a pinned NCCL.
  apt-mark hold nccl-gib >/dev/null || die "apt-mark hold nccl-gib failed"
  check_gib_lib64
  phase_note "nccl-gib $have, held"
}

# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase doca-ofed: NVIDIA DOCA-OFED turns the inbox rocep* HCAs into mlx5_* (field report R1 Phase 2) and
# brings the rdma-core userspace every process uses. Its new kernel modules take effect after the
# one reboot of the peermapping phase. It is a choice (useDocaOfed): without it the inbox rdma-core keeps
# the rocep* names, which NVSHMEM 3.4.5 and later take from NVSHMEM_HCA_PREFIX; Google's accelerator
# images ship that inbox stack and neither of Google's x86 A4 blueprints installs DOCA-OFED.

phase_inputs() {
  # DOCA-OFED's kernel modules are built for the running kernel: a new kernel reruns the phase.
  echo "use=$USE_DOCA_OFED version=$DOCA_OFED_VERSION want=$HCA_PREFIX kernel=$(uname -r)"
}

phase_run() {
  if ((!USE_DOCA_OFED)); then
    local inbox="" first
    first="$(first_hca)"
    [[ -n $IMAGE_DRIVER_BRANCH ]] && inbox=" the accelerator image's"
    phase_skip "useDocaOfed=false: keeping$inbox inbox rdma-core, first HCA ${first:-none} (NVSHMEM_HCA_PREFIX=$HCA_PREFIX)"
  fi
  local installed os repo key
  installed="$(installed_version doca-ofed)"
  # Newer GCP B200 images ship DOCA-OFED already (field report R1, 2026-02): mlx5_* names mean nothing to do.
  if [[ "$(first_hca)" == mlx5* ]]; then
    phase_skip "HCAs are already mlx5_* (doca-ofed ${installed:-from the image})"
  fi
  if [[ $installed == "$DOCA_OFED_VERSION"* ]]; then
    log "DOCA-OFED $installed is installed but HCAs are not renamed yet: the reboot of the peermapping phase does it"
    return 0
  fi
  os="$(os_version)"
  repo="$DOCA_REPO_BASE/$DOCA_OFED_VERSION/ubuntu$os/x86_64"
  key="$SYS/etc/apt/keyrings/doca.asc"
  mkdir -p "$SYS/etc/apt/keyrings" "$SYS/etc/apt/sources.list.d"
  # Checked by its key's fingerprint (config.sh KEY_FPR), not trusted on first use.
  fetch_key "$repo/GPG-KEY-Mellanox.pub" "$CACHE/doca-$DOCA_OFED_VERSION-GPG-KEY-Mellanox.pub" GPG-KEY-Mellanox
  cp "$CACHE/doca-$DOCA_OFED_VERSION-GPG-KEY-Mellanox.pub" "$key"
  # signed-by instead of the deprecated apt-key of field report R1.
  echo "deb [signed-by=/etc/apt/keyrings/doca.asc] $repo ./" >"$SYS/etc/apt/sources.list.d/doca.list"
  apt_get update
  apt_get install "linux-headers-$(uname -r)" doca-ofed
  installed="$(installed_version doca-ofed)"
  [[ -n $installed ]] || die "apt installed doca-ofed but dpkg does not list it as installed (ii): see the apt output above"
  log "DOCA-OFED $installed installed; HCAs become mlx5_* after the reboot"
}

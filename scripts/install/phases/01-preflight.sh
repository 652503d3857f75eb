# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase preflight: fail early, with a clear message, on a machine this stack cannot install.

phase_inputs() {
  echo "gpus=$EXPECTED_GPUS nics=$EXPECTED_NICS rdma=$HAS_RDMA_NICS min_free_gb=$MIN_FREE_GB"
}

phase_run() {
  local uid os kernel gpus
  uid="$(id -u)"
  [[ $uid == 0 ]] || die "run as root (uid is $uid): the installer loads kernel modules and writes to $R"
  os="$(os_version)"
  kernel="$(uname -r)"
  log "Ubuntu $os, kernel $kernel, install root $R"

  mapfile -t gpus < <(gpu_pci_addresses)
  # EXPECTED_GPUS=0 (the hardware test): whatever the machine has, at least one.
  if ((EXPECTED_GPUS == 0 && ${#gpus[@]} == 0)) || ((EXPECTED_GPUS > 0 && ${#gpus[@]} != EXPECTED_GPUS)); then
    die "expected $EXPECTED_GPUS NVIDIA GPUs on the PCI bus, found ${#gpus[@]} (${gpus[*]:-none}): wrong machine type or a GPU missing"
  fi
  local dev name
  [[ -n $GPU_DEVICE_IDS ]] && for dev in "${gpus[@]}"; do
    # PCI ids are a hint (a new board revision may differ); a loaded driver's name is authoritative.
    [[ " $GPU_DEVICE_IDS " == *" $(<"$SYS/sys/bus/pci/devices/$dev/device") "* ]] ||
      warn "GPU $dev has PCI device id $(<"$SYS/sys/bus/pci/devices/$dev/device"), not one of $GPU_MODEL's ($GPU_DEVICE_IDS)"
  done
  if command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1; then
    name="$(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader)"
    name="${name%%$'\n'*}"
    [[ -z $GPU_MODEL || $name == "$GPU_MODEL"* ]] || die "nvidia-smi reports '$name', but this stack's machine type has $GPU_MODEL GPUs"
    log "driver already loaded: $name"
  fi
  log "GPUs: ${#gpus[@]} x ${GPU_MODEL:-any model} (${gpus[*]})"

  if ((HAS_RDMA_NICS)); then check_hcas; fi
  check_disk
}

check_hcas() {
  local hcas prefix
  mapfile -t hcas < <(hca_names)
  ((${#hcas[@]} > 0)) || die "no RDMA devices under /sys/class/infiniband: the VM/node needs its 8 MRDMA NICs"
  prefix="${hcas[0]%%[0-9_]*}"
  [[ $prefix == mlx5 ]] || prefix=rocep
  log "HCAs: ${#hcas[@]} (${hcas[*]}), prefix $prefix; the stack wants $HCA_PREFIX"
  ((${#hcas[@]} >= EXPECTED_NICS)) || warn "expected $EXPECTED_NICS RDMA NICs, found ${#hcas[@]}"
  if [[ $prefix == rocep && $HCA_PREFIX == mlx5 ]] && ((!USE_DOCA_OFED)); then
    die "the node shows rocep* HCAs and the stack wants mlx5 names, which only DOCA-OFED gives: set useDocaOfed=true or hcaPrefix=rocep"
  fi
  echo "$prefix" >"$STATE/hca-prefix-at-preflight"
}

check_disk() {
  local kernel free_kb need_kb
  kernel="$(uname -r)"
  if [[ -d $SYS/lib/modules/$kernel/build ]]; then
    log "kernel headers: present for $kernel"
  else
    log "kernel headers for $kernel: missing; the driver phase installs linux-headers-$kernel"
  fi
  free_kb="$(df -Pk "$R" | awk 'NR == 2 { print $4 }')"
  need_kb=$((MIN_FREE_GB * 1024 * 1024))
  ((free_kb >= need_kb)) ||
    die "only $((free_kb / 1024 / 1024)) GB free under $R; the builds need $MIN_FREE_GB GB (bootDiskGb)"
  log "free disk under $R: $((free_kb / 1024 / 1024)) GB"
}

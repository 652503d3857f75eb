# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase verify: the checks of R0's verification list and field report R1, each with its own message; all are run, and
# the phase fails listing every check that did not pass.

phase_inputs() {
  echo "gpus=$EXPECTED_GPUS nics=$EXPECTED_NICS handler=$NIC_HANDLER pr466=$DEEPEP_PR466"
}

FAILED=()
check() {
  local what=$1
  shift
  if "$@" >>"$STATE/verify.out" 2>&1; then
    log "ok: $what"
  else
    log "FAILED: $what"
    FAILED+=("$what")
  fi
}

# Outputs are captured before matching: `cmd | grep -q` fails under pipefail when grep exits first.
nvcc_ok() { [[ "$("$SYS/usr/local/cuda-$CUDA_VERSION/bin/nvcc" --version)" == *"release $CUDA_VERSION,"* ]]; }
gpus_ok() {
  local n
  n="$(nvidia-smi -L | grep -c '^GPU ')"
  ((EXPECTED_GPUS ? n == EXPECTED_GPUS : n > 0))
}
hca_names_ok() {
  local n
  n="$(hca_names | grep -c "^$HCA_PREFIX")"
  ((n >= EXPECTED_NICS)) && [[ "$(hca_names | grep -vc "^$HCA_PREFIX")" == 0 ]]
}
# Every HCA PORT_ACTIVE, with the provider loaded from the default folder (no RDMAV_DRIVERS).
ports_ok() {
  local out h
  out="$(env -u RDMAV_DRIVERS ibv_devinfo 2>&1)"
  if grep -q "couldn't load driver" <<<"$out"; then
    echo "$out"
    return 1
  fi
  for h in $(hca_names); do
    awk -v h="$h" '/^hca_id:/ { cur = $2 } cur == h && /state:/ && /PORT_ACTIVE/ { found = 1 } END { exit !found }' <<<"$out" ||
      {
        echo "$h: not PORT_ACTIVE"
        return 1
      }
  done
}
# dma-buf registration instead of nvidia_peermem: the override in the loaded driver's registry
# parameters (troubleshooting T09). DmaRemapPeerMmio is 1 by default and proves nothing, so it is not asked.
peermapping_ok() {
  driver_params_have_peermapping && grep -E '^RegistryDwords' "$SYS/proc/driver/nvidia/params"
}
ibgda_ok() {
  local info
  if [[ $NVSHMEM_SOURCE == source ]]; then
    # 3.5's nvshmem-info finds libnvshmem_host only through the library path (troubleshooting T07); it
    # prints every build variable with its value, so only =ON proves IBGDA was built in.
    info="$(LD_LIBRARY_PATH="$R/nvshmem/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$R/nvshmem/bin/nvshmem-info" -a)" || return 1
    grep -oE '(^|[[:space:]])NVSHMEM_IBGDA_SUPPORT=ON([[:space:]]|$)' <<<"$info"
  else
    ls "$(nvshmem_home)"/lib/nvshmem_transport_ibgda.so*
  fi
}
device_nodes_ok() {
  local n
  for n in nvidiactl nvidia-uvm; do
    [[ -e $SYS/dev/$n ]] || {
      echo "/dev/$n missing: is deepep-nvidia-devices.service enabled (nvidia-modprobe -c0 -u)?"
      return 1
    }
  done
}
import_ok() {
  env -u RDMAV_DRIVERS bash -c "source '$ENV_FILE' && '$(venv_python)' -c 'import torch, deep_ep; print(\"deep_ep\", deep_ep.__file__)'"
}
mapping_ok() {
  local m
  m="$(bash -c "source '$ENV_FILE' && echo \"\$DEEP_EP_DEVICE_TO_HCA_MAPPING\"")"
  [[ "$(tr ',' '\n' <<<"$m" | grep -c ":$HCA_PREFIX")" == "$EXPECTED_GPUS" ]]
}
pr466_ok() { grep -q _setup_device_hca_mapping "$R/DeepEP/deep_ep/buffer.py"; }
gdrdrv_ok() { [[ "$(lsmod)" =~ (^|$'\n')gdrdrv[[:space:]] && -c $SYS/dev/gdrdrv ]]; }

phase_run() {
  if ((HAS_RDMA_NICS)); then need_packages ibverbs-utils; fi # ibv_devinfo (field report R1 phase 0)
  : >"$STATE/verify.out"
  check "nvcc reports CUDA $CUDA_VERSION" nvcc_ok
  check "nvidia-smi lists $EXPECTED_GPUS GPUs" gpus_ok
  check "/dev/nvidiactl and /dev/nvidia-uvm exist (GKE's device plugin waits for them)" device_nodes_ok
  if ((HAS_RDMA_NICS)); then
    check "$EXPECTED_NICS HCAs named $HCA_PREFIX*" hca_names_ok
    check "every HCA PORT_ACTIVE, mlx5 provider loads without RDMAV_DRIVERS" ports_ok
    check "PeerMappingOverride active in the driver (dma-buf)" peermapping_ok
  else
    phase_note "no RDMA NICs on this machine (hardware test): HCA, port, peer-mapping and GPU-to-NIC checks left out"
  fi
  check "NVSHMEM has IBGDA" ibgda_ok
  check "import deep_ep with the env file" import_ok
  if ((HAS_RDMA_NICS)); then check "DEEP_EP_DEVICE_TO_HCA_MAPPING maps $EXPECTED_GPUS GPUs" mapping_ok; fi
  if ((DEEPEP_PR466)); then check "DeepEP has PR #466" pr466_ok; fi
  if ((GDRCOPY_KERNEL_MODULE)); then check "gdrdrv loaded and /dev/gdrdrv present" gdrdrv_ok; fi
  if ((${#FAILED[@]})); then
    echo "--- check output ($STATE/verify.out) ---"
    tail -n 20 "$STATE/verify.out"
    local IFS=';'
    die "verify: ${#FAILED[@]} check(s) failed: ${FAILED[*]}"
  fi
  log "verify: every check passed"
}

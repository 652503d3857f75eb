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
gpu_count() { nvidia-smi -L 2>/dev/null | grep -c '^GPU '; }
gpus_ok() {
  local n
  n="$(gpu_count)"
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
# The env file's GPU -> NIC mapping (what DeepEP with PR #466 uses) against the PCI topology in sysfs:
# every GPU gets a NIC no farther than its nearest one, and no NIC serves two GPUs (troubleshooting
# T10: every GPU on one NIC gives ~6.5 GB/s RDMA).
mapping_ok() {
  local m entry gpu hca gpath d best h used=" " ok=0
  local -a gpus
  m="$(bash -c "source '$ENV_FILE' && echo \"\$DEEP_EP_DEVICE_TO_HCA_MAPPING\"")"
  mapfile -t gpus < <(gpu_pci_addresses)
  [[ "$(tr ',' '\n' <<<"$m" | grep -c ":$HCA_PREFIX")" == "$EXPECTED_GPUS" ]] || {
    echo "DEEP_EP_DEVICE_TO_HCA_MAPPING='$m' does not name $EXPECTED_GPUS GPUs"
    return 1
  }
  for entry in ${m//,/ }; do
    IFS=: read -r gpu hca _ <<<"$entry"
    gpath="$(readlink -f "$SYS/sys/bus/pci/devices/${gpus[$gpu]}")"
    d="$(pci_distance "$gpath" "$(readlink -f "$SYS/sys/class/infiniband/$hca/device")")"
    best=999
    for h in $(hca_names); do
      h="$(pci_distance "$gpath" "$(readlink -f "$SYS/sys/class/infiniband/$h/device")")"
      ((h < best)) && best=$h
    done
    if ((d > best)); then
      echo "GPU $gpu (${gpus[$gpu]}) is mapped to $hca, $d PCI hops away; its nearest NIC is $best hops away"
      ok=1
    fi
    if [[ $used == *" $hca "* ]]; then
      echo "$hca serves more than one GPU (GPU $gpu too)"
      ok=1
    fi
    used+="$hca "
  done
  return "$ok"
}
# The RDMA path DeepEP's internode and low-latency kernels use, on this node's own NICs: DeepEP's
# low-latency test with NVLink off (NVSHMEM P2P disabled, so every token goes GPU -> NIC -> NIC -> GPU
# over IBGDA; with NVLink on, one node's traffic never touches a NIC). It must finish within
# RDMA_CHECK_TIMEOUT_S, every rank must report its bandwidth, and every NIC's transmit counter must move.
RDMA_CHECK_TIMEOUT_S="${DEEPEP_RDMA_CHECK_TIMEOUT_S:-90}"
RDMA_NOTE=""
nic_tx() {
  local h
  for h in $(hca_names); do
    echo "$h $(cat "$SYS/sys/class/infiniband/$h/ports/1/counters/port_xmit_data" 2>/dev/null || echo none)"
  done
}
rdma_path_ok() {
  local before after out rc t0=$SECONDS n figure idle
  before="$(nic_tx)"
  out="$(cd "$R/DeepEP" && env -u RDMAV_DRIVERS bash -c "source '$ENV_FILE' && exec timeout --kill-after=10 $RDMA_CHECK_TIMEOUT_S '$(venv_python)' tests/test_low_latency.py --num-processes $EXPECTED_GPUS --disable-nvlink" 2>&1)"
  rc=$?
  after="$(nic_tx)"
  if ((rc != 0)); then
    tail -n 15 <<<"$out"
    echo "DeepEP's low-latency test with NVLink off exited $rc after $((SECONDS - t0)) s (124: over ${RDMA_CHECK_TIMEOUT_S}s)"
    return 1
  fi
  n="$(grep -o 'Dispatch + combine bandwidth: [0-9.]* GB/s' <<<"$out" | wc -l)"
  figure="$(grep -o 'Dispatch + combine bandwidth: [0-9.]* GB/s' <<<"$out" | awk '{ s += $(NF - 1) } END { if (NR) printf "%.1f", s / NR }')"
  if ((n < EXPECTED_GPUS)); then
    echo "only $n of $EXPECTED_GPUS ranks reported a bandwidth over RDMA"
    return 1
  fi
  idle="$(join <(sort <<<"$before") <(sort <<<"$after") | awk '$2 == "none" || $3 == "none" || $3 <= $2 { printf "%s ", $1 }')"
  if [[ -n $idle ]]; then
    echo "no RDMA traffic counted on: $idle(port_xmit_data did not move)"
    return 1
  fi
  RDMA_NOTE="RDMA path: DeepEP low-latency with NVLink off, $n ranks, mean $figure GB/s, $((SECONDS - t0)) s, traffic on every NIC"
  echo "$RDMA_NOTE"
}
pr466_ok() { grep -q _setup_device_hca_mapping "$R/DeepEP/deep_ep/buffer.py"; }
gdrdrv_ok() { [[ "$(lsmod)" =~ (^|$'\n')gdrdrv[[:space:]] && -c $SYS/dev/gdrdrv ]]; }

phase_run() {
  if ((HAS_RDMA_NICS)); then need_packages ibverbs-utils; fi # ibv_devinfo (field report R1 phase 0)
  : >"$STATE/verify.out"
  check "nvcc reports CUDA $CUDA_VERSION" nvcc_ok
  check "nvidia-smi lists $(gpu_count) GPUs (expected ${EXPECTED_GPUS/#0/at least 1})" gpus_ok
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
  if ((HAS_RDMA_NICS)); then
    check "DEEP_EP_DEVICE_TO_HCA_MAPPING gives each GPU its nearest NIC (PCI topology)" mapping_ok
    check "RDMA through this node's NICs (DeepEP low-latency, NVLink off)" rdma_path_ok
  fi
  if ((DEEPEP_PR466)); then check "DeepEP has PR #466" pr466_ok; fi
  if ((GDRCOPY_KERNEL_MODULE)); then check "gdrdrv loaded and /dev/gdrdrv present" gdrdrv_ok; fi
  if ((${#FAILED[@]})); then
    echo "--- check output ($STATE/verify.out) ---"
    tail -n 20 "$STATE/verify.out"
    local IFS=';'
    die "verify: ${#FAILED[@]} check(s) failed: ${FAILED[*]}"
  fi
  [[ -n $RDMA_NOTE ]] && phase_note "$RDMA_NOTE"
  log "verify: every check passed"
}

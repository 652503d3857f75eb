# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase verify-staged (nodeProfile=supported): what the node image brings and what stage unpacked, checked from
# where this phase runs (GKE: the staging container, no host namespace, no GPU requested; GCE: the VM).
# It waits for the driver the image or GKE installs, records what the node holds (driver build and module
# flavour, rdma-core on the host, nvidia-peermem, HCA names) in R/state/node.json, loads staged libraries with
# the staged interpreter (a noexec mount fails here, not in the benchmark), and writes the env file.

phase_inputs() {
  echo "gpus=$EXPECTED_GPUS nics=$EXPECTED_NICS handler=$NIC_HANDLER gid=$GID_INDEX tc=$NVSHMEM_TRAFFIC_CLASS"
  echo "source=$NVSHMEM_SOURCE driver_home=$DRIVER_HOME branch=$IMAGE_DRIVER_BRANCH target=$DEEPEP_TARGET"
}

DRIVER_WAIT_S="${DEEPEP_DRIVER_WAIT_S:-900}"
DRIVER_POLL_S="${DEEPEP_DRIVER_POLL_S:-10}"
NV_VERSION_FILE="$SYS/proc/driver/nvidia/version"

# GKE's driver installer (a DaemonSet of GKE's own) loads the module some time after the node joins.
wait_for_driver() {
  local waited=0
  until [[ -r $NV_VERSION_FILE ]]; do
    ((waited < DRIVER_WAIT_S)) ||
      die "no NVIDIA driver after ${waited}s ($NV_VERSION_FILE absent): GKE's driver installer (kube-system, nvidia-gpu-device-plugin / nvidia-driver-installer) or the image's driver did not load"
    sleep "$DRIVER_POLL_S"
    waited=$((waited + DRIVER_POLL_S))
  done
  echo "$waited"
}

# "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build ..." -> 580.95.05 open
driver_build() { grep -o '[0-9]\{3\}\.[0-9]\+\(\.[0-9]\+\)\?' "$NV_VERSION_FILE" | head -n1; }
driver_flavour() { if grep -q 'Open Kernel Module' "$NV_VERSION_FILE"; then echo open; else echo proprietary; fi; }

# The staged interpreter loads staged shared objects: both fail on a noexec mount ("failed to map segment").
# Ubuntu's rdma-core libraries carry no RPATH: what they link (libnl-3, libnl-route-3) is found next to them.
staged_load() {
  LD_LIBRARY_PATH="$R/rdma-core/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" "$R/venv/bin/python" - "$@" <<'PY'
import ctypes, sys
for path in sys.argv[1:]:
    ctypes.CDLL(path)
    print("loaded", path)
PY
}

# The staged mlx5 provider, by the absolute name libibverbs loads it from RDMAV_DRIVERS (path + "-rdmav<ABI>.so").
PROVIDER="$R/rdma-core/lib/libibverbs/libmlx5"
provider_file() { compgen -G "$PROVIDER-rdmav*.so" | head -n1; }

# The staged libibverbs lists the devices with the staged provider (RDMAV_DRIVERS, as the env file sets it).
verbs_devices() {
  RDMAV_DRIVERS="$PROVIDER" LD_LIBRARY_PATH="$R/rdma-core/lib" "$R/venv/bin/python" - "$R/rdma-core/lib/libibverbs.so.1" <<'PY'
import ctypes, sys
lib = ctypes.CDLL(sys.argv[1])
n = ctypes.c_int(0)
lib.ibv_get_device_list.restype = ctypes.c_void_p
devs = lib.ibv_get_device_list(ctypes.byref(n))
print(n.value)
if devs:
    lib.ibv_free_device_list(ctypes.c_void_p(devs))
PY
}

FAILED=()
check() {
  local what=$1
  shift
  if "$@" >>"$STATE/verify-staged.out" 2>&1; then log "ok: $what"; else
    log "FAILED: $what"
    FAILED+=("$what")
  fi
}

# The naming scheme of an HCA: mlx5 (mlx5_0..) or rocep (rocep145s0..: udev's stable names on the inbox stack).
hca_scheme() {
  case $1 in
    mlx5*) echo mlx5 ;;
    rocep*) echo rocep ;;
    *) echo "${1%%[0-9]*}" ;;
  esac
}

gpu_dirs() { find "$SYS/proc/driver/nvidia/gpus" -mindepth 1 -maxdepth 1 2>/dev/null | wc -l; }
# The check's line says what it counted and what it expected (EXPECTED_GPUS=0, the hardware test: any, at least one).
gpus_wanted() { if ((EXPECTED_GPUS)); then echo "expected $EXPECTED_GPUS"; else echo "expected at least 1"; fi; }
gpus_present() {
  local n
  n="$(gpu_dirs)"
  ((EXPECTED_GPUS ? n == EXPECTED_GPUS : n > 0))
}
hcas_ok() {
  local -a hcas
  mapfile -t hcas < <(hca_names)
  ((${#hcas[@]} >= EXPECTED_NICS)) || return 1
  ((${#hcas[@]})) || return 0 # a machine without NICs (the hardware test: EXPECTED_NICS=0)
  # One naming scheme on the node: all mlx5_* or all rocep*, never both.
  [[ "$(printf '%s\n' "${hcas[@]}" | grep -vc "^$(hca_scheme "${hcas[0]}")")" == 0 ]]
}
provider_loads() {
  local out file
  file="$(provider_file)"
  [[ -n $file ]] || { echo "no $PROVIDER-rdmav*.so" && return 1; }
  # Loaded by itself first: without HCAs libibverbs lists no device and so never loads a provider.
  staged_load "$file" || return 1
  out="$(verbs_devices 2>&1)" || return 1
  echo "$out"
  # libibverbs also loads every provider its config folder (/etc/libibverbs.d) names, and warns "couldn't load
  # driver '<so name>': <dlerror>" for each that fails (rdma-core libibverbs/dynamic_driver.c, load_driver). A GCE
  # host's folder may belong to another rdma-core, so only a warning that names the staged provider counts.
  ! grep -qF "couldn't load driver '$PROVIDER-rdmav" <<<"$out"
}
imports_ok() {
  LD_LIBRARY_PATH="$1" PYTHONPATH="$R/DeepEP" "$R/venv/bin/python" -c \
    'import torch, deep_ep; print(torch.__version__, deep_ep.__file__)'
}

phase_run() {
  local waited build flavour prefix mapping="" hcas peermem dmabuf host_rdma params ldpath devices
  : >"$STATE/verify-staged.out"
  waited="$(wait_for_driver)"
  build="$(driver_build)" flavour="$(driver_flavour)"
  log "NVIDIA driver $build ($flavour kernel module), loaded after ${waited}s of waiting"
  if [[ -n $IMAGE_DRIVER_BRANCH && $build != "$IMAGE_DRIVER_BRANCH".* ]]; then
    FAILED+=("the image's driver $build is not of branch $IMAGE_DRIVER_BRANCH that its name promises")
  fi
  hcas="$(hca_names | tr '\n' ' ')"
  prefix="$(hca_scheme "$(first_hca)")"
  [[ -e $SYS/sys/module/nvidia_peermem ]] && peermem=loaded || peermem=absent
  # GPU memory registration without nvidia-peermem goes through dma-buf: the RDMA core's ib_umem_dmabuf_get
  # (kernel 5.12+) with the open module; the kernel's symbol table says whether the running kernel has it.
  if grep -qw ib_umem_dmabuf_get "$SYS/proc/kallsyms" 2>/dev/null; then dmabuf=kernel; else dmabuf=unknown; fi
  [[ -e $SYS/usr/lib/x86_64-linux-gnu/libibverbs.so.1 ]] && host_rdma=present || host_rdma=absent
  params="$(grep -ao 'RegistryDwords: .*' "$SYS/proc/driver/nvidia/params" 2>/dev/null || true)"
  params="${params//[\"\\]/}" # into a JSON string as it is: no quotes, no backslashes
  check "$(gpu_dirs) GPUs under /proc/driver/nvidia/gpus ($(gpus_wanted))" gpus_present
  check "$EXPECTED_NICS HCAs of one naming scheme (found: ${hcas:-none})" hcas_ok
  check "the staged interpreter runs and loads staged libraries from $R (a noexec mount fails this)" \
    staged_load "$R/rdma-core/lib/libibverbs.so.1" "$R/rdma-core/lib/libmlx5.so.1"
  check "the staged libibverbs loads the staged mlx5 provider" provider_loads
  ldpath="$R/rdma-core/lib:$R/nvshmem/lib:$R/python/lib${DRIVER_HOME:+:$DRIVER_HOME/lib64}"
  check "the staged Python imports torch and deep_ep" imports_ok "$ldpath"
  devices="$(verbs_devices 2>/dev/null | tail -n1 || echo 0)"
  if [[ -n $prefix ]] && hcas_ok; then mapping="$(device_to_hca_mapping)"; fi
  cat >"$STATE/node.json.tmp" <<JSON
{"driver": "$build", "module": "$flavour", "driverWaitSeconds": $waited, "hcaPrefix": "$prefix", "hcas": "${hcas% }",
 "verbsDevices": ${devices:-0}, "nvidiaPeermem": "$peermem", "dmabuf": "$dmabuf", "hostRdmaCore": "$host_rdma", "registryDwords": "${params#RegistryDwords: }",
 "deviceToHca": "$mapping", "profile": "$NODE_PROFILE", "target": "$DEEPEP_TARGET"}
JSON
  mv "$STATE/node.json.tmp" "$STATE/node.json"
  phase_note "driver $build $flavour; HCAs ${prefix:-none}* x$(wc -w <<<"$hcas"); nvidia-peermem $peermem; dma-buf $dmabuf; host rdma-core $host_rdma"
  if ((${#FAILED[@]})); then
    die "$(printf '%s; ' "${FAILED[@]}")(details: $STATE/verify-staged.out)"
  fi
  write_staged_env "$prefix" "$mapping" "$ldpath"
}

write_staged_env() {
  local prefix=$1 mapping=$2 ldpath=$3 preload=""
  [[ $NVSHMEM_SOURCE == source ]] && preload="$R/nvshmem/lib/libnvshmem_host.so.3"
  cat >"$ENV_FILE.tmp" <<ENV
# deepep-a4 environment ($DEEPEP_STACK, $DEEPEP_TARGET, nodeProfile $NODE_PROFILE), written by verify-staged.
# Usage: source $ENV_FILE
export DEEPEP_ROOT='$R'
export PATH='$VENV/bin':'$R/python/bin':"\${PATH:-/usr/bin:/bin}"
export LD_LIBRARY_PATH='$ldpath'"\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}"
export PYTHONPATH='$R/DeepEP'"\${PYTHONPATH:+:\$PYTHONPATH}"
export NVSHMEM_HOME='$R/nvshmem'
export LD_PRELOAD='$preload'"\${LD_PRELOAD:+:\$LD_PRELOAD}"
$(remote_transport_env "$prefix")
# No gdrdrv module on this node image: NVSHMEM must not try GDRCopy (troubleshooting T09).
export NVSHMEM_DISABLE_GDRCOPY=1
# GPU -> nearest NIC from this node's PCI topology (PR #466 reads it; see $STATE/topology.txt).
export DEEP_EP_DEVICE_TO_HCA_MAPPING=$mapping
# The staged libibverbs loads the staged mlx5 provider by absolute name (rdma-core dynamic_driver.c load_drivers);
# its built-in provider folder (/etc/libibverbs.d) is not in the pods' image.
export RDMAV_DRIVERS='$PROVIDER'
ENV
  deepep_v2_env
  chmod 0644 "$ENV_FILE.tmp"
  mv "$ENV_FILE.tmp" "$ENV_FILE"
  log "wrote $ENV_FILE; NVSHMEM_HCA_PREFIX=$prefix DEEP_EP_DEVICE_TO_HCA_MAPPING=$mapping"
}

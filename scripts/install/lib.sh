# shellcheck shell=bash
# Shared helpers of the deepep-a4 node installer, sourced by run.sh and by every phase (after config.sh).
#
# Every path on the machine goes through SYS (empty on a node; a fixture tree in tests) and every tool
# is called by name, so tests run these very scripts with stub commands first on PATH.

# Shared by the phases (shellcheck sees each file alone).
# shellcheck disable=SC2034
SYS="${DEEPEP_SYSROOT:-}"
R="${DEEPEP_INSTALL_ROOT:-$DEEPEP_DEFAULT_ROOT}"
STATE="$R/state"
LOGS="$R/logs"
CACHE="$R/cache"
SRC="$R/src"
VENV="$R/venv"
BASE_PYTHON="${DEEPEP_BASE_PYTHON:-${BASE_PYTHON:-python3}}"
ENV_FILE="$R/unified-env.sh"
CUDA_HOME="$SYS/usr/local/cuda-$CUDA_VERSION"
CUDA_MAJOR="${CUDA_VERSION%%.*}"
: "${REBOOT_EXIT:?config.sh sets it}"
# No download may hang a node's install: each one (curl, git over the network) ends within this bound.
DOWNLOAD_TIMEOUT_S="${DEEPEP_DOWNLOAD_TIMEOUT_S:-1800}"
export DEBIAN_FRONTEND=noninteractive
export TZ=UTC

log() { printf '[deepep %(%H:%M:%S)T] %s\n' -1 "$*"; }
warn() { log "warning: $*" >&2; }
die() {
  log "error: $*" >&2
  exit 1
}

# retry ATTEMPTS CMD...: exponential backoff from DEEPEP_RETRY_BASE_S (2 s; tests set 0).
# A scheduled reboot that has not come this long after its time has failed or was cancelled.
REBOOT_GRACE_S="${DEEPEP_REBOOT_GRACE_S:-600}"

# reboot_scheduled: systemd keeps a pending `shutdown -r` in /run/systemd/shutdown/scheduled (MODE=reboot);
# `shutdown -c` or a failed shutdown removes it.
reboot_scheduled() { grep -qs '^MODE=reboot' "$SYS/run/systemd/shutdown/scheduled"; }

# net CMD...: a network command (git clone/fetch) bounded like every download.
net() { timeout --kill-after=30 "$DOWNLOAD_TIMEOUT_S" "$@"; }

retry() {
  local attempts=$1 n=1 delay="${DEEPEP_RETRY_BASE_S:-2}"
  shift
  until "$@"; do
    if ((n >= attempts)); then
      log "gave up after $n attempts: $*"
      return 1
    fi
    log "attempt $n/$attempts failed: $*; retrying in ${delay}s"
    sleep "$delay"
    n=$((n + 1))
    delay=$((delay * 2))
  done
}

sha256_of() { sha256sum "$1" | cut -d' ' -f1; }

# The stack's sha256 pin for download NAME: the installer's table (config.sh SHA256), else the entry
# sources/NAME of the store manifest the stack pins (store.sh). Empty: not pinned.
pinned_sha256() {
  local want="${SHA256[$1]:-}"
  if [[ -z $want ]]; then want="$(manifest_digest "sources/$1")" || exit 1; fi
  echo "$want"
}

_download() {
  retry 5 curl -fsSL --connect-timeout 30 --max-time "$DOWNLOAD_TIMEOUT_S" --retry 2 -o "$2" "$1" ||
    die "download failed: $1"
}

# fetch URL DEST NAME: download with retries and check it against NAME's pin (pinned_sha256).
# Without a pin REQUIRE_CHECKSUMS=1 refuses it (every stack); otherwise it is trusted on first use and its
# digest recorded (state/downloads.tsv). With a store (store.sh), sources/NAME there comes first, and a
# store object is used only when its digest is pinned (the hardware test's own store excepted).
fetch() {
  local url=$1 dest=$2 name=$3 want got
  want="$(pinned_sha256 "$name")" || exit 1
  # A digest the stack resolves at its first `pulumi up` is a stand-in in the plan and a first preview only.
  if [[ -n $want && ! $want =~ ^[0-9a-f]{64}$ ]]; then
    die "the pin of $name is \"$want\", not a sha256: this config.sh was rendered before the stack's first pulumi up resolved it (the plan's stand-in); deploy it with pulumi up, or pin $name with versionOverrides or the store manifest"
  fi
  if [[ -s $dest && -n $want && "$(sha256_of "$dest")" == "$want" ]]; then
    log "fetch: $name already downloaded and verified"
    return 0
  fi
  mkdir -p "$(dirname "$dest")"
  if store_enabled && store_get "sources/$name" "$dest"; then
    got="$(sha256_of "$dest")"
    if [[ -n $want && $got != "$want" ]]; then
      rm -f "$dest"
      die "checksum mismatch for $name from the store $STORE_URL: got $got, pinned $want"
    elif [[ -z $want ]] && ((!STORE_TRUST_PUBLISHED)); then
      rm -f "$dest"
      die "the store's sources/$name (sha256 $got) is pinned neither by the installer nor by the stack's store manifest: refused (run 'deepep-a4 store build', then set artifactStoreManifest)"
    fi
    log "fetch: $name from the store (sha256 $got)"
    return 0
  fi
  if ((STORE_ONLY)); then
    die "the store $STORE_URL has no sources/$name and this node does not download (storeOnly): fill it with 'deepep-a4 store fill'"
  fi
  _download "$url" "$dest.part"
  got="$(sha256_of "$dest.part")"
  if [[ -n $want && $got != "$want" ]]; then
    rm -f "$dest.part"
    die "checksum mismatch for $name from $url: got $got, pinned $want"
  elif [[ -z $want ]] && ((REQUIRE_CHECKSUMS)); then
    rm -f "$dest.part"
    die "no sha256 pinned for $name (REQUIRE_CHECKSUMS=1); got $got from $url: pin it with the stack's store manifest (deepep-a4 store build, artifactStoreManifest)"
  elif [[ -z $want ]]; then
    warn "no sha256 pinned for $name: recorded $got (pin it to make later installs verify it)"
  fi
  printf '%s\t%s\t%s\n' "$name" "$got" "$url" >>"$STATE/downloads.tsv"
  mv "$dest.part" "$dest"
  if store_enabled && ((STORE_PUBLISH)); then store_put "sources/$name" "$dest" || true; fi
}

# key_fingerprints FILE: the fingerprint of every primary key in an OpenPGP key file (armored or not).
key_fingerprints() {
  gpg --batch --no-options --with-colons --show-keys "$1" 2>/dev/null |
    awk -F: '$1 == "pub" { want = 1; next } want && $1 == "fpr" { print toupper($10); want = 0 }'
}

# fetch_key URL DEST NAME: a signing key. With fingerprints pinned for NAME (config.sh KEY_FPR), every
# primary key in the file must be one of them (a 16-digit pin is a long key id: the fingerprint's tail);
# without, the file goes through fetch and its sha256 pin.
fetch_key() {
  local url=$1 dest=$2 name=$3 pins="${KEY_FPR[$3]:-}" fpr pin ok found=0
  if [[ -z $pins ]]; then
    fetch "$url" "$dest" "$name"
    return 0
  fi
  mkdir -p "$(dirname "$dest")"
  if ! { store_enabled && store_get "sources/$name" "$dest.part"; }; then
    ((!STORE_ONLY)) || die "the store $STORE_URL has no sources/$name (storeOnly): fill it with 'deepep-a4 store fill'"
    _download "$url" "$dest.part"
  fi
  command -v gpg >/dev/null || need_packages gpg
  while read -r fpr; do
    [[ -n $fpr ]] || continue
    found=1 ok=0
    for pin in $pins; do [[ $fpr == *"${pin^^}" ]] && ok=1; done
    if ((!ok)); then
      rm -f "$dest.part"
      die "signing key $name from $url holds key $fpr, which is not pinned ($pins): refused"
    fi
  done < <(key_fingerprints "$dest.part")
  if ((!found)); then
    rm -f "$dest.part"
    die "signing key $name from $url holds no OpenPGP public key gpg can read"
  fi
  mv "$dest.part" "$dest"
  log "fetch: signing key $name matches its pinned fingerprint ($pins)"
}

# Waits for other apt/dpkg users (unattended-upgrades, cloud-init) instead of failing on their lock.
wait_apt_lock() {
  local waited=0 lock
  command -v fuser >/dev/null || return 0
  for lock in "$SYS/var/lib/dpkg/lock-frontend" "$SYS/var/lib/dpkg/lock" "$SYS/var/lib/apt/lists/lock"; do
    while [[ -e $lock ]] && fuser "$lock" >/dev/null 2>&1; do
      ((waited >= APT_LOCK_TIMEOUT_S)) && die "apt lock $lock still held after ${waited}s"
      ((waited % 30 == 0)) && log "waiting for the apt lock $lock (${waited}s)"
      sleep 5
      waited=$((waited + 5))
    done
  done
}

apt_get() {
  wait_apt_lock
  # An apt killed mid-run (a preempted node, a reboot) leaves "dpkg was interrupted": every later apt call
  # fails until the half-done packages are configured.
  dpkg --configure -a || die "dpkg --configure -a failed: the package database needs repair (see above)"
  retry 3 apt-get -y -q -o DPkg::Lock::Timeout="$APT_LOCK_TIMEOUT_S" -o Acquire::http::Timeout=60 -o Acquire::Retries=3 \
    -o Dpkg::Options::=--force-confdef -o Dpkg::Options::=--force-confold "$@"
}

# installed_version PKG: the version of PKG if dpkg has it fully installed ("install ok installed", ii),
# else nothing. dpkg-query prints a version for half-configured and removed-but-configured (rc) packages
# too, so the version alone would count a failed install as done.
installed_version() {
  local line
  line="$(dpkg-query -W -f='${Status}|${Version}' "$1" 2>/dev/null || true)"
  [[ $line == "install ok installed|"* ]] && echo "${line#*|}"
  return 0
}

# need_packages PKG...: installs, in one apt transaction, those of the Ubuntu packages PKG... that are
# missing. The field reports installed build tools by hand first (field report R1 phase 0: cmake ninja-build
# python3-venv libibverbs-dev ibverbs-utils; field report R2: git python3.12-dev build-essential); a fresh image
# has none of them, and a build that finds no ninja or Python.h fails deep inside cmake or setup.py.
# The hardware test uses the machine's own build tools (GPU images carry pip-installed cmake and ninja);
# an A4 node's fresh Ubuntu has none outside apt.
declare -A PKG_COMMAND=([cmake]=cmake [ninja-build]=ninja [git]=git)
need_packages() {
  local pkg missing=()
  for pkg in "$@"; do
    [[ $DEEPEP_TARGET == hwtest && -n ${PKG_COMMAND[$pkg]:-} ]] && command -v "${PKG_COMMAND[$pkg]}" >/dev/null && continue
    [[ -n "$(installed_version "$pkg")" ]] || missing+=("$pkg")
  done
  ((${#missing[@]})) || return 0
  log "installing ${missing[*]}"
  apt_get update
  apt_get install --no-install-recommends "${missing[@]}"
}

# The CUDA network repository (driver and toolkit), installed once through NVIDIA's keyring package.
ensure_cuda_repo() {
  local deb="$CACHE/cuda-keyring_1.1-1_all.deb"
  local os
  os="$(os_version)"
  if [[ "$(dpkg-query -W -f='${Status}' cuda-keyring 2>/dev/null || true)" != *"ok installed"* ]]; then
    # One name per release: each repository's keyring package has its own digest (config.sh SHA256).
    fetch "$CUDA_REPO_BASE/ubuntu${os//./}/x86_64/cuda-keyring_1.1-1_all.deb" "$deb" "cuda-keyring_1.1-1_all-ubuntu${os//./}.deb"
    dpkg -i "$deb"
    apt_get update
  fi
}

# Ubuntu release of the node, as DOCA and CUDA name their repositories (24.04 / ubuntu2404).
os_version() {
  local id="" version_id=""
  # shellcheck disable=SC1091  # the machine's own os-release, not a file of this repository
  [[ -r $SYS/etc/os-release ]] && id="$(. "$SYS/etc/os-release" && echo "${ID:-}")" &&
    version_id="$(. "$SYS/etc/os-release" && echo "${VERSION_ID:-}")"
  [[ $id == ubuntu ]] || die "unsupported OS '${id:-unknown}': the installer targets Ubuntu 22.04/24.04"
  echo "$version_id"
}

# HCA names in natural order (mlx5_0..mlx5_7 or rocep145s0..), from sysfs.
hca_names() {
  local d
  for d in "$SYS"/sys/class/infiniband/*; do
    [[ -e $d ]] || continue # no HCA at all: the glob stays as it is, and the list is empty (not a failure)
    basename "$d"
  done | sort -V
}

# The first HCA name (no pipe into head: with pipefail an early-closing reader fails the writer).
first_hca() {
  local -a names
  mapfile -t names < <(hca_names)
  echo "${names[0]:-}"
}

# PCI addresses of NVIDIA GPUs (vendor 0x10de, class 0x0302 3D controller) in bus order = CUDA's order.
gpu_pci_addresses() {
  local d
  for d in "$SYS"/sys/bus/pci/devices/*; do
    [[ -r $d/vendor && -r $d/class ]] || continue
    [[ "$(<"$d/vendor")" == 0x10de && "$(<"$d/class")" == 0x0302* ]] && basename "$d"
  done | sort
}

# pci_distance A B: hops between two sysfs device paths through their deepest common PCI ancestor.
pci_distance() {
  local IFS=/ i=0
  local -a a b
  read -ra a <<<"$1"
  read -ra b <<<"$2"
  while ((i < ${#a[@]} && i < ${#b[@]})) && [[ ${a[$i]} == "${b[$i]}" ]]; do i=$((i + 1)); done
  echo $((${#a[@]} - i + ${#b[@]} - i))
}

hca_port() {
  local p
  for p in "$SYS/sys/class/infiniband/$1/ports"/*; do
    [[ -e $p ]] && basename "$p" && return 0
  done
  echo 1
}

# GPU i -> its nearest NIC (fewest PCI hops; a NIC not yet taken wins a tie, then NIC order).
# Falls back to GPU i -> NIC i when the PCI paths of GPUs or NICs cannot be read.
device_to_hca_mapping() {
  local -a gpus hcas gpath hpath
  local -A taken=()
  local i j d best best_d best_used used entries=() fallback=0
  mapfile -t gpus < <(gpu_pci_addresses)
  mapfile -t hcas < <(hca_names)
  ((${#hcas[@]} > 0)) || die "no HCAs under /sys/class/infiniband"
  for i in "${!gpus[@]}"; do
    gpath[i]="$(readlink -f "$SYS/sys/bus/pci/devices/${gpus[$i]}")" || fallback=1
  done
  for j in "${!hcas[@]}"; do
    hpath[j]="$(readlink -f "$SYS/sys/class/infiniband/${hcas[$j]}/device" 2>/dev/null)" || fallback=1
    [[ -n ${hpath[$j]} && -e ${hpath[$j]} ]] || fallback=1
  done
  ((${#gpus[@]} > 0)) || fallback=1
  : >"$STATE/topology.txt"
  if ((fallback)); then
    warn "GPU/NIC PCI paths unreadable: mapping GPU i to NIC i"
    for ((i = 0; i < EXPECTED_GPUS; i++)); do
      j=$((i % ${#hcas[@]}))
      entries+=("$i:${hcas[$j]}:$(hca_port "${hcas[$j]}")")
    done
  else
    for i in "${!gpus[@]}"; do
      best=-1 best_d=999999 best_used=1
      for j in "${!hcas[@]}"; do
        d="$(pci_distance "${gpath[$i]}" "${hpath[$j]}")"
        used=${taken[$j]:-0}
        if ((d < best_d || (d == best_d && used < best_used))); then
          best=$j best_d=$d best_used=$used
        fi
      done
      taken[$best]=1
      entries+=("$i:${hcas[$best]}:$(hca_port "${hcas[$best]}")")
      echo "GPU $i ${gpus[$i]} -> ${hcas[$best]} ($best_d PCI hops)" >>"$STATE/topology.txt"
    done
  fi
  local IFS=,
  echo "${entries[*]}"
}

# The loaded driver satisfies the stack: the same build, or any build of the branch nvidiaDriverVersion names.
driver_matches() { [[ -n $1 && ($1 == "$NVIDIA_DRIVER_VERSION" || ($NVIDIA_DRIVER_VERSION != *.* && $1 == "$NVIDIA_DRIVER_VERSION".*)) ]]; }

driver_params_have_peermapping() {
  grep -Eqi 'PeerMappingOverride=(1|0x0*1)' "$SYS/proc/driver/nvidia/params" 2>/dev/null
}

venv_python() { echo "$VENV/bin/python"; }

# The venv's interpreter is a copy inside R where the host's /usr is not there to run it: GKE's host install
# (the pods mount R only) and the supported profile's staged user space (COS has no Python).
copies_python() { [[ $DEEPEP_TARGET == gke || ${NODE_PROFILE:-} == supported ]]; }

# The venv PyTorch, NVSHMEM's wheel and DeepEP live in (never the system Python). On GKE the benchmark
# pods mount the install root but not the host's /usr, so the venv's interpreter is a copy inside R.
ensure_venv() {
  local base=python3
  if [[ $TORCH_VERSION == installed ]]; then
    # The hardware test: PyTorch as the machine has it, seen through the venv; nothing from the internet.
    if [[ ! -x $VENV/bin/python ]]; then
      "$BASE_PYTHON" -m venv "$VENV" || die "$BASE_PYTHON -m venv failed"
      # --system-site-packages would reach the base install only, not a venv BASE_PYTHON lives in (as
      # on GPU images with PyTorch in /opt/*/.venv): name its site folders in a .pth instead.
      "$BASE_PYTHON" -c 'import site; print("\n".join(site.getsitepackages()))' \
        >"$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/base-python.pth"
    fi
    return 0
  fi
  # python3-dev: DeepEP's extension build includes Python.h.
  need_packages python3-venv python3-dev
  if [[ ! -x $VENV/bin/python ]]; then
    if copies_python; then
      copy_python python3 "$R/python"
      base="$R/python/bin/python3"
    fi
    "$base" -m venv "$VENV" || die "$base -m venv failed (python3-venv missing?)"
  fi
  # With a PyTorch lock every wheel comes from it, by hash (phases/08-pytorch.sh): nothing unpinned before it.
  # Without one only the store builder installs PyTorch (its manifest pins the result): only it upgrades pip;
  # a node keeps the venv's own (ensurepip's, from the Python it runs) and downloads nothing unhashed here.
  if [[ -z ${TORCH_LOCK:-} ]] && ((${STORE_TRUST_PUBLISHED:-0})); then pip_install --upgrade pip setuptools wheel; fi
}

# copy_python PYTHON DEST: a self-contained copy of PYTHON under DEST: bin/pythonX.Y, its standard library
# as lib/pythonX.Y (Python finds its prefix from that landmark next to the binary), its C headers as
# include/pythonX.Y (where a copied prefix's sysconfig looks for Python.h) and, in lib/, the
# shared libraries it and its extension modules link beyond glibc (libssl, libffi, ...), which a slim
# container image lacks. The pod's image is the node's Ubuntu release, so glibc itself matches.
copy_python() {
  local py=$1 dest=$2 new="$2.new" info ver src stdlib include so
  info="$("$py" -c 'import os, sys, sysconfig
print("%d.%d" % sys.version_info[:2]); print(os.path.realpath(sys.executable)); print(sysconfig.get_path("stdlib"))
print(sysconfig.get_path("include"))')" ||
    die "$py cannot describe itself: is python3 installed?"
  { read -r ver && read -r src && read -r stdlib && read -r include; } <<<"$info"
  [[ -n $ver && -e $src && -d $stdlib ]] || die "$py reported version '$ver', binary '$src', stdlib '$stdlib'"
  [[ -f $include/Python.h ]] || die "no Python.h under '$include': python3-dev is missing"
  rm -rf "$new"
  mkdir -p "$new/bin" "$new/lib" "$new/include"
  cp -a "$src" "$new/bin/python$ver"
  ln -s "python$ver" "$new/bin/python3"
  cp -a "$stdlib" "$new/lib/python$ver"
  cp -a "$include" "$new/include/python$ver"
  rm -rf "$new/lib/python$ver/test" "$new/lib/python$ver/site-packages"
  { ldd "$new/bin/python$ver" "$new/lib/python$ver/lib-dynload/"*.so 2>/dev/null || true; } |
    awk '$2 == "=>" && $3 ~ /^\// && $3 !~ /\/(libc|libm|libpthread|libdl|librt|libresolv)\.so|\/ld-linux/ {print $3}' |
    sort -u | while read -r so; do cp -L "$so" "$new/lib/"; done
  rm -rf "$dest"
  mv "$new" "$dest"
  log "python $ver copied to $dest ($(du -sh "$dest" | cut -f1)): the benchmark pods run it"
}

pip_install() {
  retry 3 "$(venv_python)" -m pip install --disable-pip-version-check --retries 5 --timeout 60 "$@"
}

# nvidia-nvshmem-cu12 / -cu13: the wheel that matches the CUDA major of PyTorch's variant.
nvshmem_wheel() { echo "nvidia-nvshmem-cu${CUDA_MAJOR}"; }

# The NVSHMEM tree DeepEP builds against: the source install, or the wheel's package folder.
nvshmem_home() {
  if [[ $NVSHMEM_SOURCE == source ]]; then
    echo "$R/nvshmem"
  else
    "$(venv_python)" -c 'import nvidia.nvshmem as m; print(list(m.__path__)[0])'
  fi
}

# CUDA 13 moved cuda/std/* (included by NVSHMEM's headers) under include/cccl.
cuda_include_flags() {
  if ((CUDA_MAJOR >= 13)); then
    echo "$CUDA_HOME/include/cccl"
  fi
}

# phase_skip REASON: ends the phase successfully and records why nothing was done.
phase_skip() {
  log "skipped: $*"
  printf '%s\n' "$*" >"$STATE/phases/$PHASE.note"
  : >"$STATE/phases/$PHASE.skipped"
  exit 0
}

phase_note() { printf '%s\n' "$*" >"$STATE/phases/$PHASE.note"; }

# The script of the running phase (run.sh exports it): part of the phase's artifact key.
phase_script() { echo "${PHASE_SCRIPT:?run.sh sets PHASE_SCRIPT}"; }

# shellcheck source=scripts/install/store.sh
source "$(dirname -- "${BASH_SOURCE[0]}")/store.sh"

# nvshmem_ibgda_env HCA_PREFIX: the env-file lines of NVSHMEM's IBGDA over GCP RoCE, the one list both
# node profiles write (10-env.sh on the host, 14-verify-staged.sh for the staged user space).
nvshmem_ibgda_env() {
  cat <<ENV
# NVSHMEM IBGDA over GCP RoCE, on HCAs named $1*.
export NVSHMEM_REMOTE_TRANSPORT=ibgda
export NVSHMEM_IB_ENABLE_IBGDA=1
export NVSHMEM_IBGDA_NIC_HANDLER=$NIC_HANDLER
export NVSHMEM_HCA_PREFIX=$1
export NVSHMEM_IB_GID_INDEX=$GID_INDEX
# RoCE traffic class of NVSHMEM's QPs (DSCP = class >> 2); 52 is the class Google's NCCL data uses on A4.
export NVSHMEM_IB_TRAFFIC_CLASS=$NVSHMEM_TRAFFIC_CLASS
export NVSHMEM_DISABLE_CUDA_VMM=1
export NVSHMEM_ENABLE_NIC_PE_MAPPING=1
ENV
  nvshmem_bootstrap_env
}

# nvshmem_bootstrap_env: the one interface NVSHMEM's UID bootstrap (DeepEP's nvshmemx_get_uniqueid and
# NVSHMEMX_INIT_WITH_UNIQUEID) uses. Unset, NVSHMEM takes the first ib* interface, else the first that is neither
# docker nor lo (NVIDIA/nvshmem src/modules/bootstrap/uid/ncclSocket/ncclsocket_socket.cpp, ncclFindInterfaces;
# NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME in src/modules/bootstrap/common/env_defs.h): on an A4 that can be a gVNIC or
# an RDMA NIC's netdev that other nodes' ranks cannot reach. GKE: eth0 (a multi-network pod's default interface,
# the node's nic0 for host-network pods); elsewhere (GCE, the hardware test) the default route's interface, read
# here from the kernel's routing table (/proc/net/route): a GCE VM's nic0, whatever name its image gives it.
nvshmem_bootstrap_env() {
  local ifname=eth0
  if [[ $DEEPEP_TARGET != gke ]]; then
    ifname="$(awk '$2 == "00000000" { print $1; exit }' "$SYS/proc/net/route" 2>/dev/null || true)"
  fi
  if [[ -z $ifname ]]; then
    echo "# No default route on this machine: NVSHMEM picks its UID bootstrap interface itself."
    return 0
  fi
  echo "# NVSHMEM's UID bootstrap on nic0 only: $ifname (the default route's interface; eth0 in GKE pods)."
  echo "export NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=$ifname"
}

# remote_transport_env HCA_PREFIX: nvshmem_ibgda_env's lines; on a machine without RDMA NICs (the hardware test)
# no remote transport instead: IBGDA asked for with no HCA fails DeepEP's buffer ("init failed for transport:
# IBGDA", then deep_ep.cpp "invalid argument": tests/fixtures/install/hw/h200x2_test_low_latency_ibgda_env_without_nics.log).
remote_transport_env() {
  if ((HAS_RDMA_NICS)); then
    nvshmem_ibgda_env "$1"
    return 0
  fi
  echo "# No RDMA NICs on this machine (hardware test): no remote transport; NVSHMEM uses NVLink only."
  echo "export NVSHMEM_REMOTE_TRANSPORT=none"
  nvshmem_bootstrap_env
}

# DeepEP V2 (DEEPEP_API=v2) in the env file being written ($ENV_FILE.tmp): its JIT kernels compile at first use into
# EP_JIT_CACHE_DIR (csrc/jit/compiler.hpp; default $HOME/.deep_ep, per pod), one folder on the node's root so they
# compile once per node (the GKE benchmark pods mount it writable, components/gke/bench.py; they run as root, so
# the folder is root's alone: no other user on the node can plant a kernel that the pods then run); NCCL is the
# venv's one (the pytorch phase's NCCL_VERSION), which V2 compiles against.
deepep_v2_env() {
  [[ ${DEEPEP_API:-v1} == v2 ]] || return 0
  install -d -m 0755 "$R/deepep-jit"
  cat >>"$ENV_FILE.tmp" <<ENV
# DeepEP V2: JIT kernel cache on the install root, and the venv's one NCCL it compiles against.
export EP_JIT_CACHE_DIR='$R/deepep-jit'
export EP_NCCL_ROOT_DIR='$("$(venv_python)" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])')'
ENV
}

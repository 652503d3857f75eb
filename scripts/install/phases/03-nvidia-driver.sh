# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase nvidia-driver: the open kernel modules at the pinned version (field reports: 575 on GKE, 580 on GCE),
# unless the platform already provides exactly that version. On a GCE accelerator image, which ships the
# driver (IMAGE_DRIVER_BRANCH), the phase checks that driver instead of installing one.

phase_inputs() {
  # The driver's modules are built for the running kernel: a new kernel reruns the phase.
  echo "install=$INSTALL_DRIVER image=$IMAGE_DRIVER_BRANCH version=$NVIDIA_DRIVER_VERSION target=$DEEPEP_TARGET kernel=$(uname -r)"
}

loaded_driver_version() {
  if [[ -r $SYS/proc/driver/nvidia/version ]]; then
    grep -Eo 'Kernel Module( for x86_64)? +[0-9.]+' "$SYS/proc/driver/nvidia/version" | awk '{ print $NF }'
  else
    modinfo -F version nvidia 2>/dev/null || true
  fi
}

# GKE's device plugin hands containers /home/kubernetes/bin/nvidia as /usr/local/nvidia: the driver's
# userspace has to be there (field report R2). rdma-core is deliberately not copied (troubleshooting T16: a second
# libibverbs there shadows the container's and breaks provider loading).
publish_for_gke_device_plugin() {
  local dst="$SYS/home/kubernetes/bin/nvidia" lib
  mkdir -p "$dst/lib64" "$dst/bin"
  for lib in "$SYS"/usr/lib/x86_64-linux-gnu/{libcuda.so*,libnvidia-*.so*,libcudadebugger.so*,libnvcuvid.so*}; do
    [[ -e $lib ]] && cp -a "$lib" "$dst/lib64/"
  done
  local bin
  for bin in nvidia-smi nvidia-debugdump nvidia-persistenced; do
    command -v "$bin" >/dev/null && cp -L "$(command -v "$bin")" "$dst/bin/" 2>/dev/null || true
  done
  log "driver userspace copied to $dst/{lib64,bin} for GKE's device plugin"
}

# GKE's device plugin waits until /dev/nvidiactl and /dev/nvidia-uvm exist; nothing creates them on a
# node without X, so GKE's own Ubuntu driver installer runs `nvidia-modprobe -c0 -u`. So does this unit,
# at every boot (and the phase once now).
DEVICES_UNIT=/etc/systemd/system/deepep-nvidia-devices.service
ensure_device_nodes() {
  mkdir -p "$SYS/etc/systemd/system"
  cat >"$SYS$DEVICES_UNIT" <<UNIT
[Unit]
Description=deepep-a4: create /dev/nvidiactl and /dev/nvidia-uvm (GKE's device plugin waits for them)
After=systemd-modules-load.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=/usr/bin/nvidia-modprobe -c0 -u

[Install]
WantedBy=multi-user.target
UNIT
  systemctl daemon-reload
  systemctl enable deepep-nvidia-devices.service
  nvidia-modprobe -c0 -u || log "nvidia-modprobe could not create the device nodes yet: the boot unit does after the reboot"
}

# The driver's packages depend on each other at exact versions (libnvidia-gl, -common, -compute, -decode,
# -encode, -extra, -fbc1, -cfg1, nvidia-kernel-common, nvidia-kernel-source-open, nvidia-compute-utils,
# nvidia-firmware-...). Pinning four of them to V-* lets apt resolve the others to the newest build, which
# breaks as soon as the repository carries one. NVIDIA's driver installation guide ("Version locking")
# locks the whole set with the distribution's own mechanism: for apt, one preferences entry.
DRIVER_PREFERENCES=/etc/apt/preferences.d/deepep-nvidia-driver
lock_driver_version() {
  mkdir -p "$SYS/etc/apt/preferences.d"
  cat >"$SYS$DRIVER_PREFERENCES" <<PREF
# deepep-a4: every NVIDIA driver package at $1 (stack key nvidiaDriverVersion: $NVIDIA_DRIVER_VERSION)
Package: nvidia-* libnvidia-* xserver-xorg-video-nvidia-*
Pin: version $1-*
Pin-Priority: 1001
PREF
}

# driver_build MAJOR: the build to install. nvidiaDriverVersion names a build (580.126.09: exactly that,
# or a failure naming the newest of its branch when the repository no longer has it) or only a branch
# (580: the newest build of the branch in the repository when this phase runs; the lock then holds it).
driver_build() {
  local major=$1 builds newest
  builds="$(apt-cache madison "nvidia-driver-$major-open" 2>/dev/null | awk -F'|' '{ gsub(/ /, "", $2); print $2 }')"
  newest="$(cut -d- -f1 <<<"$builds" | sort -V | tail -n1)"
  if [[ $NVIDIA_DRIVER_VERSION != *.* ]]; then
    [[ -n $newest ]] || die "the repository has no build of NVIDIA driver branch $major (nvidia-driver-$major-open)"
    echo "$newest"
    return 0
  fi
  grep -q "^$NVIDIA_DRIVER_VERSION-" <<<"$builds" && echo "$NVIDIA_DRIVER_VERSION" && return 0
  die "NVIDIA driver $NVIDIA_DRIVER_VERSION is not in the repository (nvidia-driver-$major-open); the newest $major build there is ${newest:-none}: set nvidiaDriverVersion to it, or to $major to follow the branch"
}

# The module's license tells the open kernel module (B200 runs only on it) from the proprietary one:
# "Dual MIT/GPL" against "NVIDIA" (modinfo); without modinfo, the loaded module's banner says "Open Kernel Module".
driver_is_open() {
  local license
  license="$(modinfo -F license nvidia 2>/dev/null || true)"
  if [[ -n $license ]]; then
    [[ $license == "Dual MIT/GPL" ]]
  else
    grep -qs 'Open Kernel Module' "$SYS/proc/driver/nvidia/version"
  fi
}

# The image's driver packages, installed (ii): the driver userspace and modules (Ubuntu's *-server builds
# and their precompiled linux-modules-nvidia-*), and the kernel meta packages those modules are built for.
IMAGE_HOLD_PATTERNS=('nvidia-*' 'libnvidia-*' 'linux-modules-nvidia-*' 'linux-objects-nvidia-*'
  'linux-signatures-nvidia-*' 'linux-gcp' 'linux-image-gcp' 'linux-headers-gcp')
image_driver_packages() {
  dpkg-query -W -f='${Package}\t${Status}\n' "${IMAGE_HOLD_PATTERNS[@]}" 2>/dev/null |
    awk -F'\t' '$2 == "install ok installed" { print $1 }' || true
}

# check_image_driver LOADED: the accelerator image's driver is the branch its name says and the open module;
# its packages are held, so neither unattended-upgrades nor the CUDA repository's same-named packages
# (libnvidia-compute-580, ...) swap the driver or the kernel it was built for under a run. Google's A4
# Slurm blueprint holds the image's driver packages the same way (GoogleCloudPlatform/cluster-toolkit,
# examples/machine-learning/a4-highgpu-8g/a4high-slurm-blueprint.yaml, "Hold nvidia packages").
check_image_driver() {
  local have=$1 branch fix
  local -a held
  if [[ -z $have ]]; then
    modprobe nvidia || true
    have="$(loaded_driver_version)"
  fi
  branch="${have%%.*}"
  fix="use an accelerator image of branch ${branch:-N} with nvidiaDriverVersion=${branch:-N}, or the plain Ubuntu image (gceImage=projects/ubuntu-os-cloud/global/images/family/ubuntu-2404-lts-amd64) where the installer brings driver $IMAGE_DRIVER_BRANCH"
  [[ -n $have && $branch == "$IMAGE_DRIVER_BRANCH" ]] ||
    die "nvidia-driver: the image's driver is ${have:-not loaded (modprobe nvidia failed)}, expected branch $IMAGE_DRIVER_BRANCH (gceImage, nvidiaDriverVersion): $fix"
  driver_is_open ||
    die "nvidia-driver: the image's driver $have is the proprietary kernel module (license '$(modinfo -F license nvidia 2>/dev/null || echo unknown)'), expected the open one (Dual MIT/GPL) that B200 needs: $fix"
  mapfile -t held < <(image_driver_packages)
  if ((${#held[@]})); then
    apt-mark hold "${held[@]}" >/dev/null
    log "held the image's packages: ${held[*]}"
  else
    warn "no NVIDIA driver package of the image is installed through dpkg: nothing to hold"
  fi
  command -v nvidia-modprobe >/dev/null && ensure_device_nodes
  phase_note "image driver $have (branch $IMAGE_DRIVER_BRANCH, open module), ${#held[@]} packages held"
  log "the image's NVIDIA open driver $have is branch $IMAGE_DRIVER_BRANCH; not installing one"
}

phase_run() {
  local have major build
  have="$(loaded_driver_version)"
  if [[ -n $IMAGE_DRIVER_BRANCH ]]; then
    check_image_driver "$have"
    return 0
  fi
  if ((!INSTALL_DRIVER)); then
    phase_skip "the platform installs the GPU driver (gkeGpuDriver); found ${have:-none loaded yet}"
  fi
  if driver_matches "$have"; then
    [[ $DEEPEP_TARGET == gke ]] && publish_for_gke_device_plugin
    ensure_device_nodes
    phase_skip "driver $have already present"
  fi
  [[ -n $have ]] && log "found driver $have; installing the stack's $NVIDIA_DRIVER_VERSION"
  major="${NVIDIA_DRIVER_VERSION%%.*}"
  ensure_cuda_repo
  build="$(driver_build "$major")"
  lock_driver_version "$build"
  apt_get install "linux-headers-$(uname -r)" \
    "nvidia-driver-$major-open" "nvidia-dkms-$major-open" "nvidia-utils-$major" "libnvidia-compute-$major"
  # Unattended upgrades must not swap the driver under a running benchmark.
  apt-mark hold "nvidia-driver-$major-open" "nvidia-dkms-$major-open" "nvidia-utils-$major" "libnvidia-compute-$major"
  if ! modprobe nvidia; then
    log "the new driver does not load next to the old one: it loads after the reboot"
  fi
  [[ $DEEPEP_TARGET == gke ]] && publish_for_gke_device_plugin
  ensure_device_nodes
  [[ $build == "$NVIDIA_DRIVER_VERSION" ]] || phase_note "branch $NVIDIA_DRIVER_VERSION: newest build $build, locked"
  log "NVIDIA open driver $build installed"
}

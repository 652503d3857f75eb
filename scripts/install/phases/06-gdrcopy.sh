# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase gdrcopy: the GDRCopy library always (NVSHMEM's build needs its headers, troubleshooting T06);
# the gdrdrv kernel module, /dev/gdrdrv and a boot unit that restores both after every reboot only
# for the cpu NIC handler (field report R0 §2.2, §5.1, §7: insmod creates no device node, a reboot loses both).

GDRDRV_UNIT=/etc/systemd/system/deepep-gdrdrv.service

phase_inputs() {
  echo "gdrcopy=$GDRCOPY_VERSION cuda=$CUDA_VERSION kmod=$GDRCOPY_KERNEL_MODULE"
  # A new kernel needs a new gdrdrv.ko: the phase reruns after a kernel upgrade.
  if ((GDRCOPY_KERNEL_MODULE)); then echo "kernel=$(uname -r) driver=$NVIDIA_DRIVER_VERSION"; fi
}

nvidia_src_dir() {
  local d
  for d in "$SYS/usr/src/nvidia-$NVIDIA_DRIVER_VERSION" "$SYS"/usr/src/nvidia-*; do
    [[ -f $d/nvidia/nv-p2p.h ]] && echo "$d/nvidia" && return 0
  done
  return 1
}

write_boot_unit() {
  local loader="$R/bin/gdrdrv-load.sh"
  mkdir -p "$R/bin" "$SYS/etc/systemd/system"
  cat >"$loader" <<LOADER
#!/bin/bash
# Loads gdrdrv and (re)creates /dev/gdrdrv: insmod makes no device node (troubleshooting T01).
set -euo pipefail
grep -qw gdrdrv /proc/devices || modprobe gdrdrv || insmod '$R/gdrcopy/gdrdrv.ko'
major="\$(awk '\$2 == "gdrdrv" { print \$1 }' /proc/devices)"
[ -c /dev/gdrdrv ] || mknod /dev/gdrdrv c "\$major" 0
chmod 0666 /dev/gdrdrv
echo "gdrdrv loaded (major \$major), /dev/gdrdrv present"
LOADER
  chmod 0755 "$loader"
  cat >"$SYS$GDRDRV_UNIT" <<UNIT
[Unit]
Description=deepep-a4: load gdrdrv and create /dev/gdrdrv (NVSHMEM cpu NIC handler)
After=systemd-modules-load.service nvidia-persistenced.service

[Service]
Type=oneshot
RemainAfterExit=yes
ExecStart=$loader

[Install]
WantedBy=multi-user.target
UNIT
  systemctl daemon-reload
  systemctl enable deepep-gdrdrv.service
  systemctl restart deepep-gdrdrv.service
}

# The library's artifact: its versions (the kernel module is built per node, never stored).
artifact_inputs() { echo "gdrcopy=$GDRCOPY_VERSION"; }

GDR_SRC="$SRC/gdrcopy-$GDRCOPY_VERSION"

unpack_source() {
  local tarball="$CACHE/gdrcopy-$GDRCOPY_VERSION.tar.gz"
  fetch "$GDRCOPY_URL" "$tarball" "gdrcopy-$GDRCOPY_VERSION.tar.gz"
  rm -rf "$GDR_SRC" && mkdir -p "$GDR_SRC"
  tar -xzf "$tarball" -C "$GDR_SRC" --strip-components=1 "${TAR_X[@]}"
}

build_lib() {
  need_packages build-essential
  unpack_source
  make -C "$GDR_SRC" -j"$(nproc)" prefix="$R/gdrcopy" CUDA="$CUDA_HOME" lib lib_install
}

phase_run() {
  with_artifact "$R/gdrcopy" build_lib
  [[ -e $R/gdrcopy/include/gdrapi.h ]] || die "GDRCopy built but $R/gdrcopy/include/gdrapi.h is missing"
  ls "$R"/gdrcopy/lib/libgdrapi.so.2* >/dev/null 2>&1 || die "GDRCopy built but $R/gdrcopy/lib has no libgdrapi.so.2"
  log "GDRCopy $GDRCOPY_VERSION library in $R/gdrcopy"
  if ((!GDRCOPY_KERNEL_MODULE)); then
    return 0
  fi
  local nv_src kernel
  nv_src="$(nvidia_src_dir)" || die "no NVIDIA driver sources with nv-p2p.h under /usr/src/nvidia-*: gdrdrv cannot be built"
  kernel="$(uname -r)"
  [[ -f $GDR_SRC/Makefile ]] || unpack_source
  make -C "$GDR_SRC" driver NVIDIA_SRC_DIR="$nv_src" CUDA="$CUDA_HOME"
  install -D -m 0644 "$GDR_SRC/src/gdrdrv/gdrdrv.ko" "$R/gdrcopy/gdrdrv.ko"
  install -D -m 0644 "$GDR_SRC/src/gdrdrv/gdrdrv.ko" "$SYS/lib/modules/$kernel/extra/gdrdrv.ko"
  depmod -a "$kernel"
  write_boot_unit
  log "gdrdrv for $kernel built with $nv_src; deepep-gdrdrv.service loads it and creates /dev/gdrdrv at every boot"
}

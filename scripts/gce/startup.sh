#!/bin/bash
# deepep-a4 GCE startup script: runs on every boot of every VM of the stack.
# 1. writes the installer, the benchmark runner and the stage; 2. installs (resumes at the installer's
# markers, may reboot once); 3. checks gdrdrv (cpu NIC handler); 4. runs the benchmarks (resumes too).
# components/gce/bench.py puts in front of this file the values below and `write_files`, which
# writes the node files; per-VM values come from metadata (deepep-rank, ...).
set -Euo pipefail
umask 022
: "${GCE_DIR:?}" "${RESULTS_DIR:?}" "${STARTUP_LOG:?}" "${EXIT_REBOOT:?}" "${CPU_NIC_HANDLER:?}"
install -d -m 0755 "$GCE_DIR" "$RESULTS_DIR" "$(dirname "$STARTUP_LOG")"
exec > >(tee -a "$STARTUP_LOG") 2>&1
echo "[gce] boot $(date -u +%FT%TZ) $(hostname): startup script begins"

write_files

# After any reboot gdrdrv must be loaded again and /dev/gdrdrv recreated, or the cpu NIC handler fails
# with "NVSHMEM_IBGDA_NIC_HANDLER=cpu requires GDRCopy" (docs/troubleshooting.md T01, T02). The
# installer's boot unit does this at boot; this is the check before the benchmarks, and the repair.
ensure_gdrdrv() {
  local ko major
  if ! grep -qw gdrdrv /proc/devices; then
    if ! modprobe gdrdrv 2>/dev/null; then
      ko="$(find /opt/deepep /lib/modules/"$(uname -r)" -name gdrdrv.ko -print -quit 2>/dev/null || true)"
      if [ -z "$ko" ] || ! insmod "$ko"; then
        echo "[gce] error: gdrdrv is not loaded and no gdrdrv.ko was found (the installer's gdrcopy phase builds it)"
        return 1
      fi
    fi
  fi
  major="$(awk '$2 == "gdrdrv" { print $1 }' /proc/devices)"
  if [ ! -c /dev/gdrdrv ] || [ "$(stat -c '%t' /dev/gdrdrv)" != "$(printf '%x' "$major")" ]; then
    rm -f /dev/gdrdrv
    mknod /dev/gdrdrv c "$major" 0
  fi
  chmod 0666 /dev/gdrdrv
  echo "[gce] gdrdrv loaded (major $major), /dev/gdrdrv present"
}

# -- install ------------------------------------------------------------------------------------------
export DEEPEP_GCE_STARTUP_LOG="$STARTUP_LOG"
if bash "$GCE_DIR/install.sh"; then rc=0; else rc=$?; fi
# The installer reboots the VM once (DOCA-OFED, PeerMappingOverride) and then exits $EXIT_REBOOT: not a
# failure; this script starts again at the next boot and the installer resumes there.
if [ "$rc" -eq "$EXIT_REBOOT" ] ||
  [ "$(systemctl is-system-running 2>/dev/null || true)" = stopping ]; then
  echo "[gce] a reboot is under way: the startup script resumes after it"
  exit 0
fi
if [ "$rc" -ne 0 ]; then
  echo "[gce] the installer failed (exit $rc): see above; it resumes at the failed phase on the next boot"
  python3 "$GCE_DIR/bench_stage.py" --install-failed "$rc" || true
  exit "$rc"
fi
if [ "$CPU_NIC_HANDLER" = 1 ] && ! ensure_gdrdrv; then
  python3 "$GCE_DIR/bench_stage.py" --install-failed 1 || true
  exit 1
fi

# -- benchmarks ---------------------------------------------------------------------------------------
exec python3 "$GCE_DIR/bench_stage.py"

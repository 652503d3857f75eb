# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase peermapping: NVSHMEM registers GPU memory through dma-buf (ibv_reg_dmabuf_mr) instead of
# nvidia_peermem, which needs the driver's PeerMappingOverride (troubleshooting T09, field report R1 Phase 3).
# The module options and DOCA-OFED's modules take effect at the next boot: this phase reboots at most
# once (allowReboot) and exits 75; the rerun after the boot checks that both are live.

MODPROBE_CONF=/etc/modprobe.d/deepep-peermapping.conf
MODPROBE_LINE='options nvidia NVreg_EnableStreamMemOPs=1 NVreg_RegistryDwords="PeerMappingOverride=1;"'

phase_inputs() {
  echo "$MODPROBE_LINE allow_reboot=$ALLOW_REBOOT want=$HCA_PREFIX"
}

boot_id() { cat "$SYS/proc/sys/kernel/random/boot_id"; }

# What is still missing on the running kernel, one item per line (empty: nothing).
missing_live() {
  driver_params_have_peermapping || echo "PeerMappingOverride is not active in /proc/driver/nvidia/params"
  if [[ $HCA_PREFIX == mlx5 && "$(first_hca)" != mlx5* ]]; then
    echo "HCAs are still $(first_hca | sed 's/[0-9].*//')* (DOCA-OFED's mlx5 names come after a reboot)"
  fi
  local loaded=""
  [[ -r $SYS/proc/driver/nvidia/version ]] &&
    loaded="$(grep -Eo 'Kernel Module( for x86_64)? +[0-9.]+' "$SYS/proc/driver/nvidia/version" | awk '{ print $NF }')"
  if ((INSTALL_DRIVER)) && ! driver_matches "$loaded"; then
    echo "the loaded NVIDIA driver is ${loaded:-none}, not $NVIDIA_DRIVER_VERSION"
  fi
  return 0
}

phase_run() {
  mkdir -p "$SYS/etc/modprobe.d"
  if [[ "$(cat "$SYS$MODPROBE_CONF" 2>/dev/null)" != "$MODPROBE_LINE" ]]; then
    echo "$MODPROBE_LINE" >"$SYS$MODPROBE_CONF"
    log "wrote $MODPROBE_CONF: $MODPROBE_LINE"
    # The initramfs may load nvidia before /etc is read.
    command -v update-initramfs >/dev/null && update-initramfs -u || true
  fi
  local missing requested=""
  missing="$(missing_live)"
  if [[ -z $missing ]]; then
    rm -f "$STATE/reboot-requested"
    log "PeerMappingOverride active (dma-buf registration); HCAs: $(hca_names | tr '\n' ' ')"
    return 0
  fi
  [[ -f $STATE/reboot-requested ]] && requested="$(<"$STATE/reboot-requested")"
  if [[ -n $requested && ${requested%% *} == "$(boot_id)" ]]; then
    # Scheduled in this boot. Waiting is right only while the reboot is still scheduled and due: a
    # cancelled or failed shutdown would otherwise make every rerun wait forever.
    if reboot_scheduled && (($(date +%s) < ${requested##* })); then
      log "a reboot was already scheduled in this boot; waiting for it"
      exit "$REBOOT_EXIT"
    fi
    rm -f "$STATE/reboot-requested"
    die "the reboot scheduled in this boot did not happen (cancelled, or not done by $(date -u -d "@${requested##* }" +%FT%TZ)); still missing: $missing. Rerun the installer to schedule it again"
  fi
  if [[ -n $requested ]]; then
    die "after the installer's one reboot still missing: $missing. Check $MODPROBE_CONF, dmesg and 'dpkg -l doca-ofed'; the installer does not reboot twice (delete $STATE/reboot-requested to allow one more)"
  fi
  if ((!ALLOW_REBOOT)); then
    die "missing: $missing. The settings are written ($MODPROBE_CONF) but need a reboot and allowReboot=false: reboot the node yourself, then rerun"
  fi
  log "missing: $missing"
  log "scheduling the installer's one reboot; rerun the installer after the boot to resume"
  shutdown -r +1 "deepep-a4 installer: reboot for PeerMappingOverride / DOCA-OFED" ||
    die "could not schedule the reboot (shutdown -r +1 failed): reboot the node yourself, then rerun"
  reboot_scheduled || die "shutdown -r +1 returned 0 but systemd has no reboot scheduled: reboot the node yourself, then rerun"
  # Only now, with the reboot really scheduled: this boot's id and when the reboot is overdue.
  echo "$(boot_id) $(($(date +%s) + 60 + REBOOT_GRACE_S))" >"$STATE/reboot-requested"
  exit "$REBOOT_EXIT"
}


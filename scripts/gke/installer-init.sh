#!/bin/bash
# deepep-a4 installer DaemonSet, init container: copies the rendered installer to the host, runs it there,
# checks the status file, records the installed version set and labels the node with it.
# The DaemonSet sets every variable below (components/gke/installer.py); the host is mounted at /host.
set -Eeuo pipefail
: "${VERSIONS_HASH:?}" "${NODE_NAME:?}" "${INSTALL_ROOT:?}" "${STATE_DIR:?}" "${STATUS_FILE:?}"
: "${INSTALLER_ENTRY:?}" "${EXIT_REBOOT:?}" "${REBOOT_WAIT_SECONDS:?}" "${INSTALLED_LABEL:?}"
# @label-node.sh
host=/host
r=$INSTALL_ROOT
echo "deepep-a4: installer for version set $VERSIONS_HASH on node $NODE_NAME"
mkdir -p "$host$r" "$host$STATE_DIR"
# The ConfigMap's files live under ..data (the other entries are symlinks into it).
rm -rf "$host$r/installer.new" && mkdir -p "$host$r/installer.new"
cp -rL /installer/..data/. "$host$r/installer.new/"
rm -rf "$host$r/installer" && mv "$host$r/installer.new" "$host$r/installer"
# Into the host's namespaces (hostPID: PID 1 is the host's init): systemd, apt, modprobe, reboot all work.
rc=0
nsenter --target 1 --mount --uts --ipc --net --pid -- bash "$r/installer/$INSTALLER_ENTRY" || rc=$?
if [ "$rc" -eq "$EXIT_REBOOT" ]; then
  # Not a failure: the node goes down, this pod starts again after boot and the installer resumes.
  echo "deepep-a4: the installer scheduled a reboot of $NODE_NAME; waiting for the node to go down"
  trap 'exit 0' TERM
  sleep "$REBOOT_WAIT_SECONDS" &
  wait $!
  echo "deepep-a4: $NODE_NAME did not reboot within $REBOOT_WAIT_SECONDS s; exiting to run the installer again" >&2
  exit 1
elif [ "$rc" -ne 0 ]; then
  echo "deepep-a4: the installer failed with exit code $rc on $NODE_NAME (the phase, its log tail and how to" >&2
  echo "  retry are above; logs in $r/logs on the node). The pod retries it with back-off and it resumes." >&2
  exit "$rc"
fi
if ! grep -Eq '"ready"[[:space:]]*:[[:space:]]*true' "$host$STATUS_FILE"; then
  echo "deepep-a4: the installer finished but $STATUS_FILE does not say ready" >&2
  cat "$host$STATUS_FILE" >&2 || true
  exit 1
fi
echo "$VERSIONS_HASH" >"$host$STATE_DIR/installed-hash"
# Label the node with the installed version set (RBAC: get/patch nodes only), with the host's curl.
sa=/var/run/secrets/kubernetes.io/serviceaccount
cp "$sa/ca.crt" "$host$STATE_DIR/k8s-ca.crt"
label_node "$STATE_DIR/k8s-ca.crt" nsenter --target 1 --mount --net --
echo "deepep-a4: node $NODE_NAME installed and labelled $INSTALLED_LABEL=$VERSIONS_HASH"

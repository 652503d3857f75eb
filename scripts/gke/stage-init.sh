#!/bin/bash
# deepep-a4 staging DaemonSet (nodeProfile=supported), init container: runs the rendered installer (stage,
# verify-staged) in this container against the node's staged root, mounted at the same path, then records the
# installed version set and labels the node with it. It enters no host namespace: the node image (COS) brings
# the driver and the RDMA stack, and everything else comes from the artifact store.
# The DaemonSet sets every variable below (components/gke/stage.py).
set -Eeuo pipefail
: "${VERSIONS_HASH:?}" "${NODE_NAME:?}" "${INSTALL_ROOT:?}" "${STATE_DIR:?}" "${STATUS_FILE:?}"
: "${INSTALLER_ENTRY:?}" "${INSTALLED_LABEL:?}"
# @label-node.sh
r=$INSTALL_ROOT
echo "deepep-a4: staging version set $VERSIONS_HASH on node $NODE_NAME into $r"
mkdir -p "$r" "$STATE_DIR"
# The ConfigMap's files live under ..data (the other entries are symlinks into it).
rm -rf "$r/installer.new" && mkdir -p "$r/installer.new"
cp -rL /installer/..data/. "$r/installer.new/"
rm -rf "$r/installer" && mv "$r/installer.new" "$r/installer"
rc=0
bash "$r/installer/$INSTALLER_ENTRY" || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "deepep-a4: staging failed with exit code $rc on $NODE_NAME (the phase, its log tail and how to retry" >&2
  echo "  are above; logs in $r/logs on the node). The pod retries it with back-off and it resumes." >&2
  exit "$rc"
fi
if ! grep -Eq '"ready"[[:space:]]*:[[:space:]]*true' "$STATUS_FILE"; then
  echo "deepep-a4: the installer finished but $STATUS_FILE does not say ready" >&2
  cat "$STATUS_FILE" >&2 || true
  exit 1
fi
echo "$VERSIONS_HASH" >"$STATE_DIR/installed-hash"
# Label the node with the installed version set (RBAC: get/patch nodes only), with this image's curl.
sa=/var/run/secrets/kubernetes.io/serviceaccount
label_node "$sa/ca.crt"
echo "deepep-a4: node $NODE_NAME staged and labelled $INSTALLED_LABEL=$VERSIONS_HASH"
# GKE's multi-network resources this node advertises (networking.gke.io.networks/<network> and <network>.IP,
# which GKE requests for every network a pod names): a pod asking for one the node lacks stays Pending
# (docs/troubleshooting.md T27). Recorded in node.json and the log; a failed read changes nothing.
advertised_networks() { # the node's JSON on stdin -> "network=quantity ..." of its networking.gke.io.networks/*
  tr -d '\n' | grep -o '"networking\.gke\.io\.networks/[^"]*"[[:space:]]*:[[:space:]]*"[^"]*"' |
    sed -E 's|^"networking\.gke\.io\.networks/([^"]*)"[[:space:]]*:[[:space:]]*"([^"]*)"$|\1=\2|' |
    tr -cd 'A-Za-z0-9._=\n-' | sort -u | tr '\n' ' ' || true
}
node_json=$(printf 'Authorization: Bearer %s\n' "$(cat "$sa/token")" |
  curl -sS --fail --max-time 30 --cacert "$sa/ca.crt" -H @- \
    "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/api/v1/nodes/$NODE_NAME") || node_json=""
nets=$(advertised_networks <<<"$node_json")
nets=${nets% }
if [ -f "$STATE_DIR/node.json" ]; then
  sed -i -E '$ s/\}[[:space:]]*$/, "advertisedNetworks": "'"$nets"'"}/' "$STATE_DIR/node.json" || true
fi
echo "deepep-a4: node $NODE_NAME advertises multi-network resources: ${nets:-none}"

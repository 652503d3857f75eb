# shellcheck shell=bash
# The node's installed-version label, one PATCH for both GKE init scripts (installer-init.sh, stage-init.sh), put
# in each where it says `# @label-node.sh` (scripts/payload.py). RBAC: get/patch nodes only.
# label_node CA [RUNNER...]: PATCHes node $NODE_NAME's label $INSTALLED_LABEL=$VERSIONS_HASH through the API server,
# the service account's token on curl's stdin (never in argv), CA the API server's CA as curl sees it, curl run
# under RUNNER: the installer's runs the host's curl, the staging container passes none and uses its own.
label_node() {
  local ca=$1 sa=/var/run/secrets/kubernetes.io/serviceaccount patch
  shift
  patch=$(printf '{"metadata":{"labels":{"%s":"%s"}}}' "$INSTALLED_LABEL" "$VERSIONS_HASH")
  printf 'Authorization: Bearer %s\n' "$(cat "$sa/token")" | "$@" \
    curl -sS --fail --retry 5 --max-time 30 --cacert "$ca" -H @- \
    -H 'Content-Type: application/merge-patch+json' -X PATCH \
    "https://$KUBERNETES_SERVICE_HOST:$KUBERNETES_SERVICE_PORT/api/v1/nodes/$NODE_NAME" \
    -d "$patch" >/dev/null
}

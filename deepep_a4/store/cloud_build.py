"""The two step scripts of the remote store build (store_remote.py). They travel inside build.tar.gz, whose
sha256 the request names and the first step checks, so nothing in the request's own steps needs a `$`
(Cloud Build substitutes `$NAME` in a step's args)."""

BUILD_SH = """#!/bin/bash
# Cloud Build step "build": the rendered installer, as `docker run` runs it locally (store_build.py).
set -uo pipefail
bash /deepep-build/installer/run.sh
rc=$?
# The install root lives in this step's container; the next step needs the artifact keys, the user the logs.
mkdir -p /deepep-build/root
cp -a "$DEEPEP_INSTALL_ROOT/state" "$DEEPEP_INSTALL_ROOT/logs" /deepep-build/root/ 2>/dev/null || true
exit "$rc"
"""

PUBLISH_SH = """#!/bin/bash
# Cloud Build step "publish": what store_build.publish does locally, with the nodes' store.sh. Every object
# named in publish.list goes create-only to STORE_URL with its sha256; an object that is there with another
# digest stops it (written elsewhere); then the manifest, whose sha256 goes to $BUILDER_OUTPUT/output.
set -euo pipefail
LOCAL=/deepep-build/store
# shellcheck disable=SC2034  # store.sh's curl reads it
DOWNLOAD_TIMEOUT_S=600
die() { echo "publish: $*" >&2; exit 1; }
log() { echo "publish: $*"; }
sha256_of() { sha256sum "$1" | cut -d' ' -f1; }
if [[ $STORE_URL == gs://* ]] && ! command -v curl >/dev/null; then
  apt-get update -q >/dev/null && apt-get install -y -q --no-install-recommends curl ca-certificates >/dev/null
fi
# shellcheck source=/dev/null
source /deepep-build/installer/store.sh
remote_digest() {
  if ! store_is_gcs; then cat "$STORE_URL/$1/sha256" 2>/dev/null || true; return; fi
  local meta code
  meta="$(mktemp)"
  code="$(_gcs_curl "$meta" "$GCS_API/storage/v1/b/$(_gcs_bucket)/o/$(_urlenc "$(_gcs_name "$1")")")"
  [[ $code == 200 ]] && _gcs_meta_sha256 <"$meta"
  rm -f "$meta"
}
rels=()
while read -r kind a b; do
  case $kind in
    object) rels+=("$a") ;;
    artifact)
      key=/deepep-build/root/state/artifacts/$a
      if [[ -f $key ]]; then rels+=("artifacts/$a/$(<"$key").$b"); fi
      ;;
  esac
done </deepep-build/steps/publish.list
entries="$(mktemp)"
# The bytes an archive's regular members hold, from `tar -tv` (type -, size the third field).
# shellcheck disable=SC2016  # an awk program: its $3 is awk's
SUM_FILES='/^-/ { s += $3 } END { printf "%.0f\\n", s }'
for rel in "${rels[@]}"; do
  list=("$rel")
  if [[ $rel == *.parts && -f $LOCAL/$rel/data ]]; then
    while read -r part _; do [[ -n $part ]] && list+=("${rel%.parts}/$part"); done <"$LOCAL/$rel/data"
  fi
  for r in "${list[@]}"; do
    [[ -f $LOCAL/$r/sha256 ]] || die "the build has no $r: see the build step's log"
    digest="$(<"$LOCAL/$r/sha256")"
    if store_put "$r" "$LOCAL/$r/data"; then
      log "published $r"
    elif [[ "$(remote_digest "$r")" != "$digest" ]]; then
      die "the store has $r with another sha256 than this build's $digest: written elsewhere; delete it, build again"
    fi
    # An archive's line carries the bytes its regular members hold (store_build.unpacked_bytes).
    bytes=""
    case $r in
      *.tar.gz | *.tar) bytes="$(tar -tvf "$LOCAL/$r/data" --numeric-owner | awk "$SUM_FILES")" ;;
    esac
    printf '%s\\t%s\\t%s\\n' "$r" "$digest" "$bytes" >>"$entries"
  done
done
manifest="$(mktemp)"
LC_ALL=C sort -u "$entries" | awk -F'\\t' '{ print $2 "  " $1 ($3 != "" ? "  " $3 : "") }' >"$manifest"
sha="$(sha256_of "$manifest")"
store_put "manifests/$sha.txt" "$manifest" || true
log "manifest $STORE_URL/manifests/$sha.txt"
if [[ -n ${BUILDER_OUTPUT:-} ]]; then echo "$sha" >"$BUILDER_OUTPUT/output"; fi
"""

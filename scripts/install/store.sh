# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# The artifact store (docs/store.md): sources and prebuilt build outputs, shared by every node of every
# stack that names the same store. Sourced by lib.sh.
#
# STORE_URL  gs://BUCKET/PREFIX (Cloud Storage, the node's service account through the metadata server),
#            a local folder (hardware test, offline), or empty (no store: download and build as before).
# Layout under the store: sources/NAME (what `fetch` downloads, by its name), artifacts/PHASE/KEY.tar.gz
# (a build phase's output, KEY from what determines its bytes), locks/PHASE/KEY (a builder's claim).
#
# Objects are write-once: created only if absent (GCS ifGenerationMatch=0; a folder's atomic rename), so
# the first writer wins and nothing a node reads can change under it. Each object carries its sha256 (GCS
# custom metadata `sha256`; a folder's `sha256` file), checked after every download.

STORE_URL="${DEEPEP_STORE_URL:-${STORE_URL:-}}"
STORE_URL="${STORE_URL%/}"
: "${STORE_PUBLISH:=0}" "${STORE_ONLY:=0}" "${STORE_MANIFEST:=}" "${STORE_TRUST_PUBLISHED:=0}" "${ARTIFACT_PARTS:=0}" "${ARTIFACT_RELOCATABLE:=0}"
STORE_LOCK_WAIT_S="${DEEPEP_STORE_LOCK_WAIT_S:-${STORE_LOCK_WAIT_S:-1200}}"
STORE_POLL_S="${DEEPEP_STORE_POLL_S:-15}"
GCS_API="${DEEPEP_GCS_API:-https://storage.googleapis.com}"
METADATA_URL="${DEEPEP_METADATA_URL:-http://metadata.google.internal}"

store_enabled() { [[ -n ${STORE_URL:-} ]]; }
store_is_gcs() { [[ $STORE_URL == gs://* ]]; }

# GCS: bucket and object name of REL.
_gcs_bucket() {
  local rest=${STORE_URL#gs://}
  echo "${rest%%/*}"
}
_gcs_name() {
  local rest=${STORE_URL#gs://} prefix=""
  [[ $rest == */* ]] && prefix="${rest#*/}"
  prefix="${prefix%/}"
  echo "${prefix:+$prefix/}$1"
}
# _urlenc NAME: NAME as one path segment of the JSON API, every byte outside A-Za-z0-9._~- as %XX ('/'
# included). Bash alone: the staging container has no python3 (docs/security.md).
_urlenc() {
  local LC_ALL=C s=$1 out="" c i
  for ((i = 0; i < ${#s}; i++)); do
    c=${s:i:1}
    case $c in
      [A-Za-z0-9._~-]) out+=$c ;;
      *) printf -v c '%%%02X' "'$c" && out+=$c ;;
    esac
  done
  echo "$out"
}

# _json_value KEY: the value of field KEY in the JSON on stdin: a string without escapes (a token, a digest)
# or an integer; empty when absent. Whitespace and line breaks between tokens are allowed. sed, no python3.
_json_value() {
  local re='"'"$1"'"[[:space:]]*:[[:space:]]*("([^"\\]*)"|(-?[0-9]+))'
  { tr -d '\r\n' && echo; } | sed -nE "s/^.*$re.*\$/\\2\\3/p"
}

# _gcs_meta_sha256: the custom metadata `sha256` of the GCS object resource (JSON) on stdin, or empty.
_gcs_meta_sha256() {
  local str='"([^"\\]|\\.)*"'
  { tr -d '\r\n' && echo; } | sed -nE "s/^.*\"metadata\"[[:space:]]*:[[:space:]]*\\{(($str|[^\"}])*)\\}.*\$/\\1/p" | _json_value sha256
}

# An access token of the machine's service account (cached until a minute before it expires).
_GCS_TOKEN="" _GCS_TOKEN_UNTIL=0
_gcs_token() {
  if ((SECONDS < _GCS_TOKEN_UNTIL)) && [[ -n $_GCS_TOKEN ]]; then
    echo "$_GCS_TOKEN"
    return 0
  fi
  local body ttl
  body="$(curl -fsS --max-time 30 -H 'Metadata-Flavor: Google' \
    "$METADATA_URL/computeMetadata/v1/instance/service-accounts/default/token")" ||
    die "store: no access token from the metadata server: is this a GCE VM or GKE node with a service account?"
  _GCS_TOKEN="$(_json_value access_token <<<"$body")"
  ttl="$(_json_value expires_in <<<"$body")"
  [[ -n $_GCS_TOKEN ]] || die "store: the metadata server answered no access_token (a JSON string field) for the default service account"
  _GCS_TOKEN_UNTIL=$((SECONDS + ${ttl:-300} - 60))
  echo "$_GCS_TOKEN"
}

# _gcs_curl OUT ARGS...: prints the HTTP status; the body goes to OUT.
# The token reaches curl on its stdin (`-H @-`), never in its argv: a node's process list (ps, /proc/PID/
# cmdline) is readable by every user and every host-PID container on it.
_gcs_curl() {
  local out=$1 token
  shift
  token="$(_gcs_token)" || exit 1
  printf 'Authorization: Bearer %s\n' "$token" |
    curl -sS --connect-timeout 30 --max-time "$DOWNLOAD_TIMEOUT_S" -o "$out" -w '%{http_code}' -H @- "$@" ||
    echo 000
}

# store_get REL DEST: 0 with DEST downloaded and its digest checked; 1 when the store has no REL.
store_get() {
  local rel=$1 dest=$2 want got code meta
  mkdir -p "$(dirname "$dest")"
  if ! store_is_gcs; then
    [[ -f $STORE_URL/$rel/data && -f $STORE_URL/$rel/sha256 ]] || return 1
    want="$(<"$STORE_URL/$rel/sha256")"
    cp "$STORE_URL/$rel/data" "$dest.part"
  else
    meta="$(mktemp)"
    code="$(_gcs_curl "$meta" "$GCS_API/storage/v1/b/$(_gcs_bucket)/o/$(_urlenc "$(_gcs_name "$rel")")")"
    case $code in
      200) ;;
      404)
        rm -f "$meta"
        return 1
        ;;
      *) die "store: reading $STORE_URL/$rel failed with HTTP $code: $(head -c 300 "$meta")" ;;
    esac
    want="$(_gcs_meta_sha256 <"$meta")"
    rm -f "$meta"
    code="$(_gcs_curl "$dest.part" "$GCS_API/storage/v1/b/$(_gcs_bucket)/o/$(_urlenc "$(_gcs_name "$rel")")?alt=media")"
    [[ $code == 200 ]] || die "store: downloading $STORE_URL/$rel failed with HTTP $code"
  fi
  got="$(sha256_of "$dest.part")"
  if [[ -z $want || $got != "$want" ]]; then
    rm -f "$dest.part"
    die "store: $STORE_URL/$rel has sha256 $got, but its published digest is '${want:-missing}': a corrupt or tampered object (delete it, then rerun)"
  fi
  mv "$dest.part" "$dest"
}

# store_put REL FILE: publishes FILE as REL if absent. 0 created, 1 already there (another writer won).
store_put() {
  local rel=$1 file=$2 digest code out stage
  digest="$(sha256_of "$file")"
  if ! store_is_gcs; then
    [[ -e $STORE_URL/$rel ]] && return 1
    mkdir -p "$(dirname "$STORE_URL/$rel")"
    stage="$(mktemp -d "$STORE_URL/.stage.XXXXXX")"
    cp "$file" "$stage/data"
    echo "$digest" >"$stage/sha256"
    chmod 0644 "$stage/data" "$stage/sha256" && chmod 0755 "$stage"
    # rename(2) of a folder onto an existing non-empty folder fails: the first writer wins.
    if mv -T "$stage" "$STORE_URL/$rel" 2>/dev/null; then return 0; fi
    rm -rf "$stage"
    return 1
  fi
  out="$(mktemp)"
  # A resumable upload: its first request carries the name, the digest and the create-only condition.
  code="$(_gcs_curl "$out" -D "$out.h" -X POST -H 'Content-Type: application/json' \
    --data "{\"name\": \"$(_gcs_name "$rel")\", \"metadata\": {\"sha256\": \"$digest\"}}" \
    "$GCS_API/upload/storage/v1/b/$(_gcs_bucket)/o?uploadType=resumable&ifGenerationMatch=0")"
  if [[ $code == 200 ]]; then
    local session
    session="$(sed -n 's/^[Ll]ocation: *//p' "$out.h" | tr -d '\r')"
    code="$(_gcs_curl "$out" -X PUT --upload-file "$file" "$session")"
  fi
  rm -f "$out.h"
  case $code in
    200 | 201) rm -f "$out" && return 0 ;;
    412) rm -f "$out" && return 1 ;;
    403) die "store: the node may not write $STORE_URL/$rel (HTTP 403): grant it roles/storage.objectCreator on the prefix, or set artifactStorePublish=false" ;;
    *) die "store: publishing $STORE_URL/$rel failed with HTTP $code: $(head -c 300 "$out")" ;;
  esac
}

# The store manifest the stack pins (STORE_MANIFEST, docs/store.md): "SHA256  REL" lines that
# `deepep-a4 store build` wrote from the user's own builds and downloads, at manifests/SHA256.txt. Only what
# it lists is taken from the store, and each object must have the digest it lists: the sha256 in an
# object's metadata is its uploader's word, the manifest is the stack's.
_manifest_file() {
  local f="$STATE/store-manifest.txt" got
  [[ -n $STORE_MANIFEST ]] && store_enabled || return 2
  if [[ ! -s $f || "$(sha256_of "$f")" != "$STORE_MANIFEST" ]]; then
    mkdir -p "$STATE"
    store_get "manifests/$STORE_MANIFEST.txt" "$f.part" ||
      die "store: the stack pins manifest $STORE_MANIFEST, but $STORE_URL has no manifests/$STORE_MANIFEST.txt: run 'deepep-a4 store build'"
    got="$(sha256_of "$f.part")"
    if [[ $got != "$STORE_MANIFEST" ]]; then
      rm -f "$f.part"
      die "store: manifests/$STORE_MANIFEST.txt has sha256 $got, not the pinned $STORE_MANIFEST: refused"
    fi
    mv "$f.part" "$f"
  fi
  echo "$f"
}

# manifest_digest REL: the sha256 the pinned manifest lists for REL; empty when not listed or no manifest.
# A manifest that cannot be read ends the process (exit: callers run it in $(...), often inside conditions).
manifest_digest() {
  local f sum rel rc=0
  f="$(_manifest_file)" || rc=$?
  ((rc != 2)) || return 0
  ((rc == 0)) || exit 1
  while read -r sum rel _; do
    [[ $rel == "$1" ]] && echo "$sum" && return 0
  done <"$f"
  return 0
}

# manifest_bytes REL: an archive's third manifest field, the bytes its files hold ("" when none).
manifest_bytes() {
  local f sum rel bytes
  [[ -n $STORE_MANIFEST ]] && ((!STORE_TRUST_PUBLISHED)) || return 0
  f="$(_manifest_file)" || return 0
  while read -r sum rel bytes; do
    [[ $rel == "$1" ]] && echo "${bytes:-}" && return 0
  done <"$f"
  return 0
}

# Locks: a create-only object holding the epoch second it expires; nodes cannot delete it (write-once),
# so an expired lock is ignored instead of removed (the bucket's lifecycle rule clears old ones).
_lock_expiry() {
  local f
  f="$(mktemp)"
  if store_get "$1" "$f" 2>/dev/null; then cat "$f"; else echo 0; fi
  rm -f "$f"
}

# store_claim REL SECONDS: 0 when this node now holds the build lock REL for SECONDS.
store_claim() {
  local f rc=0
  f="$(mktemp)"
  echo $(($(date +%s) + $2)) >"$f"
  store_put "$1" "$f" || rc=$?
  rm -f "$f"
  return "$rc"
}

# artifact_key: 24 hex digits from exactly what determines the bytes of this phase's artifact: the
# phase's script text and artifact_inputs (its versions), the keys of the artifacts it builds on
# (ARTIFACT_DEPS), CUDA, GPU arch, OS release and the install root (DeepEP links NVSHMEM by absolute RPATH).
artifact_key() {
  local d
  {
    echo "artifact $PHASE"
    sha256_of "$(phase_script)"
    artifact_inputs
    for d in ${ARTIFACT_DEPS[$PHASE]:-}; do echo "dep $d $(cat "$STATE/artifacts/$d" 2>/dev/null || echo missing)"; done
    # A relocatable artifact (the PyTorch environment) names its platform in artifact_inputs instead.
    ((ARTIFACT_RELOCATABLE)) || echo "cuda=$CUDA_VERSION arch=$CUDA_ARCH os=$(os_version) root=$R"
  } | sha256sum | cut -c1-24
}

# with_artifact DIR BUILD_FUNCTION [EXCLUDE...]: DIR from the store when it has this phase's artifact; otherwise
# BUILD_FUNCTION builds DIR and the result is published (one builder at a time per key, others wait for it).
# Records the key in STATE/artifacts/PHASE (the dependents' keys include it) and how DIR came (a note).
# ARTIFACT_PARTS=N (a phase sets it) stores DIR as N uncompressed tar parts of about equal size, fetched
# and unpacked in parallel, then KEY.parts naming them, published last: gigabytes of shared libraries
# (PyTorch) unpack in seconds that way, where one gzip stream takes most of a minute (docs/store.md).
with_artifact() {
  local dir=$1 build=$2 key rel lock tarball waited=0 t0=$SECONDS
  shift 2
  ARTIFACT_EXCLUDE=("$@")
  key="$(artifact_key)"
  mkdir -p "$STATE/artifacts"
  if ! store_enabled; then
    "$build"
    echo "$key" >"$STATE/artifacts/$PHASE"
    return 0
  fi
  rel="artifacts/$PHASE/$key.tar.gz" lock="locks/$PHASE/$key" tarball="$CACHE/$PHASE-$key.tar.gz"
  ((ARTIFACT_PARTS)) && rel="artifacts/$PHASE/$key.parts"
  if _restore "$rel" "$tarball" "$dir"; then
    phase_note "artifact $key from the store in $((SECONDS - t0)) s"
  elif ((!STORE_PUBLISH || !STORE_TRUST_PUBLISHED)); then
    # A node's artifact would be taken by no other node (only the manifest's are): it neither waits for
    # other builders nor publishes. Publishing artifacts is the builder's (deepep-a4 store build).
    "$build"
    phase_note "artifact $key built here (store miss; this node does not publish artifacts)"
  elif store_claim "$lock" "$STORE_LOCK_WAIT_S"; then
    "$build"
    _publish "$rel" "$tarball" "$dir" "$key"
  else
    # Another node builds this key: wait for its artifact until the lock expires or the bound runs out.
    log "store: another node is building $PHASE $key; waiting up to ${STORE_LOCK_WAIT_S}s"
    while ((waited < STORE_LOCK_WAIT_S)) && (($(date +%s) < $(_lock_expiry "$lock"))); do
      sleep "$STORE_POLL_S"
      waited=$((waited + STORE_POLL_S))
      if _restore "$rel" "$tarball" "$dir"; then
        phase_note "artifact $key from the store after waiting ${waited}s for its builder"
        echo "$key" >"$STATE/artifacts/$PHASE"
        return 0
      fi
    done
    log "store: no artifact after ${waited}s (the other builder failed or is slow): building here"
    "$build"
    _publish "$rel" "$tarball" "$dir" "$key"
  fi
  echo "$key" >"$STATE/artifacts/$PHASE"
}

# _pinned_digest REL: the sha256 the stack's store manifest lists for REL; 1 (logged) when it lists none,
# 2 when the manifest itself is refused (manifest_digest said why).
_pinned_digest() {
  local want
  want="$(manifest_digest "$1")" || return 2
  if [[ -z $want ]]; then
    log "store: $1 is not in the stack's store manifest (${STORE_MANIFEST:-none pinned}): not taken" >&2
    return 1
  fi
  echo "$want"
}

# _check_pinned FILE REL WANT: FILE is the object the manifest pins for REL (no WANT: a trusted local store).
_check_pinned() {
  if [[ -n $3 && "$(sha256_of "$1")" != "$3" ]]; then
    rm -f "$1"
    die "store: $STORE_URL/$2 is not the object the stack's manifest pins (sha256 $3): refused"
  fi
}

_restore() {
  local rel=$1 tarball=$2 dir=$3 want=""
  # The hardware test and the store builder read a local store only they wrote; nodes need the manifest.
  if ((!STORE_TRUST_PUBLISHED)); then
    want="$(_pinned_digest "$rel")" || { (($? == 2)) && exit 1; return 1; }
  fi
  if ((ARTIFACT_PARTS)); then
    _restore_parts "$rel" "$dir" "$want"
    return
  fi
  store_get "$rel" "$tarball" || return 1
  _check_pinned "$tarball" "$rel" "$want"
  rm -rf "$dir" && mkdir -p "$dir"
  store_untar "$tarball" "$dir" "$rel"
  rm -f "$tarball"
  log "store: $PHASE restored from $STORE_URL/$rel"
}

# Every tar -x: as root GNU tar keeps owners and setuid bits unless told not to (docs/store.md).
TAR_X=(--no-same-owner --no-same-permissions)

# store_untar TARBALL DIR REL: a store archive into DIR, its members checked first (_check_members).
store_untar() {
  local tarball=$1 dir=$2 rel=$3 listing="$1.members"  # per archive: 13-stage.sh unpacks parts side by side
  mkdir -p "$CACHE"
  tar -tvzf "$tarball" --numeric-owner --quoting-style=escape | sed "s|^|${rel//|/-} |" >"$listing" ||
    die "store: listing $STORE_URL/$rel failed"
  # Bound: the bytes the pinned manifest records.
  local bytes sizes=/dev/null
  bytes="$(manifest_bytes "$rel")"
  if [[ -n $bytes ]]; then sizes="$1.sizes" && echo "${rel//|/-} $bytes" >"$sizes"; fi
  if ! _check_members "$listing" "$sizes"; then
    rm -f "$tarball" "$1.sizes"
    die "store: $STORE_URL/$rel would write through a link, outside the folder or beyond its size, refused: $_MEMBERS_BAD"
  fi
  rm -f "$1.sizes"
  tar -xzf "$tarball" -C "$dir" "${TAR_X[@]}" || die "store: unpacking $STORE_URL/$rel failed"
}

_publish() {
  local rel=$1 tarball=$2 dir=$3 key=$4
  local x excludes=()
  if ((ARTIFACT_PARTS)); then
    _publish_parts "$rel" "$dir" "$key"
    return
  fi
  for x in "${ARTIFACT_EXCLUDE[@]}"; do excludes+=("--exclude=./$x"); done
  tar -czf "$tarball" "${excludes[@]}" -C "$dir" .
  if store_put "$rel" "$tarball"; then
    phase_note "artifact $key built and published ($(du -m "$tarball" | cut -f1) MB)"
    log "store: published $STORE_URL/$rel"
  else
    phase_note "artifact $key built; another node published it first"
  fi
  rm -f "$tarball"
}

# _parallel FUNCTION ARG...: FUNCTION ARG for every ARG at once; fails if any of them failed.
_parallel() {
  local fn=$1 pid a rc=0
  shift
  local -a pids=()
  for a in "$@"; do
    "$fn" "$a" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
  return "$rc"
}

# KEY.parts lists one part a line ("BUILD/NN.tar BYTES"); the parts are artifacts/PHASE/KEY/BUILD/NN.tar.
# Every part, like the list itself, must be what the stack's store manifest pins.
_restore_parts() {
  local rel=$1 dir=$2 want=$3 manifest="$CACHE/$PHASE.parts" t0=$SECONDS
  store_get "$rel" "$manifest" || return 1
  _check_pinned "$manifest" "$rel" "$want"
  local -a names
  mapfile -t names < <(cut -d' ' -f1 "$manifest")
  ((${#names[@]})) || die "store: $STORE_URL/$rel names no parts"
  rm -rf "$dir" && mkdir -p "$dir"
  _PART_BASE="${rel%.parts}" _PART_DIR=$dir
  _parallel _fetch_part "${names[@]}" || die "store: fetching $PHASE from $STORE_URL/${rel%.parts}/ failed (see above)"
  _check_part_members "$manifest" "${names[@]}"
  _parallel _unpack_part "${names[@]}" || die "store: restoring $PHASE from $STORE_URL/${rel%.parts}/ failed (see above)"
  rm -f "$CACHE/$PHASE-parts.dirs"
  log "store: $PHASE restored from $STORE_URL/$rel: ${#names[@]} parts, $(awk '{ s += $2 } END { print int(s / 1048576) }' "$manifest") MB in $((SECONDS - t0)) s"
  rm -f "$manifest"
}

_part_file() { echo "$CACHE/$PHASE-part-${1//\//-}"; }

_fetch_part() {
  local part want=""
  part="$(_part_file "$1")"
  if ((!STORE_TRUST_PUBLISHED)); then
    want="$(_pinned_digest "$_PART_BASE/$1")" || die "store: part $_PART_BASE/$1 is not pinned by the store manifest"
  fi
  store_get "$_PART_BASE/$1" "$part" || die "store: $STORE_URL/$_PART_BASE/$1 is missing although the manifest names it"
  _check_pinned "$part" "$_PART_BASE/$1" "$want"
}

_unpack_part() {
  local part d
  part="$(_part_file "$1")"
  # The part's folders first, from the checked listing: parallel tars making the same parents race (issue 37,
  # tests/scripts/test_store_parts_race.py); mkdir -p takes a folder made meanwhile as made.
  local -a dirs=()
  while IFS=$'\t' read -r p d; do
    [[ $p == "$1" ]] || continue
    [[ -n $d && $d != /* && $d != .. && $d != ../* && $d != */.. && $d != */../* ]] ||
      die "store: part $_PART_BASE/$1 names a folder outside the staged root: $d"
    dirs+=("$d")
  done <"$CACHE/$PHASE-parts.dirs"
  if ((${#dirs[@]})); then
    (cd "$_PART_DIR" && mkdir -p -- "${dirs[@]}") || die "store: making the folders of $_PART_BASE/$1 failed"
  fi
  tar -xf "$part" -C "$_PART_DIR" "${TAR_X[@]}" || die "store: unpacking $_PART_BASE/$1 failed"
  rm -f "$part"
}

# _check_part_members LIST PART...: the parts unpack at once into one folder, so one part's symlink could carry
# another part's file out of it (GNU tar's guard, extract.c create_placeholder_file, covers one archive only).
# Each part is held to the bytes LIST (KEY.parts, pinned) records for it.
_check_part_members() {
  local list=$1 x listing="$CACHE/$PHASE-parts.members"
  shift
  for x in "$@"; do
    tar -tvf "$(_part_file "$x")" --numeric-owner --quoting-style=escape | sed "s|^|$x |" ||
      die "store: listing part $_PART_BASE/$x failed"
  done >"$listing"
  if ! _check_members "$listing" "$list" "$CACHE/$PHASE-parts.dirs"; then
    for x in "$@"; do rm -f "$(_part_file "$x")"; done
    die "store: $PHASE's parts under $STORE_URL/$_PART_BASE/ would write through a link, outside the folder or beyond their size, refused: $_MEMBERS_BAD"
  fi
}

# _check_members LISTING [SIZES [DIRS]]: LISTING is `tar -tv --numeric-owner --quoting-style=escape` with the
# archive's name first on each line. Returns 1 (why: _MEMBERS_BAD) on a member other than - d l h (a device,
# fifo), a name below a link, absolute, with "..", or escaped (a control character), or an archive whose files
# hold more bytes than SIZES ("ARCHIVE BYTES") records. DIRS gets "ARCHIVE<TAB>FOLDER" per needed folder.
_check_members() {
  local listing=$1 sizes=${2:-/dev/null} dirs_file=${3:-/dev/null} bad
  bad="$(awk -v dirs="$dirs_file" '
    function clean(p) { sub(/^(\.\/)+/, "", p); return p }
    function unsafe(p) { return p ~ /^\// || p ~ /(^|\/)\.\.(\/|$)/ }
    FNR == NR && FILENAME != "-" && sizing { want[$1] = $2; next }
    {
      part = $1; type = substr($2, 1, 1); size = $4; rest = $0
      sub(/^[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +/, "", rest)
      if (index(rest, "\\") > 0) { print part ": " rest ": a name with a control character or backslash"; next }
      target = ""; probe = rest
      if (gsub(/ -> | link to /, "", probe) > (type == "l" || type == "h")) { print part ": " rest ": a name holding -> or link to"; next }
      if (type == "l") { i = index(rest, " -> "); name = substr(rest, 1, i - 1); target = substr(rest, i + 4) }
      else if (type == "h") { i = index(rest, " link to "); name = substr(rest, 1, i - 1); target = clean(substr(rest, i + 9)) }
      else if (type == "-" || type == "d") name = rest
      else { print part ": " rest ": a member of type " type " (not a file, link or folder)"; next }
      name = clean(name); sub(/\/$/, "", name)
      if (type == "d" && (name == "" || name == ".")) next  # the root itself (`tar -C DIR .` packs ./)
      if (name == "" || unsafe(name)) { print part ": " name ": an absolute name or one with .."; next }
      if (type == "h" && unsafe(target)) { print part ": " name ": a hard link to " target; next }
      if (type != "d" && (name in seen)) print part ": " name ": also in part " seen[name]
      if (type != "d") seen[name] = part
      if (type == "l" || type == "h") link[name] = 1
      if (type == "-") total[part] += size
      folder = name; if (type != "d") { if (!sub(/\/[^\/]*$/, "", folder)) folder = "" }
      if (folder != "") printf "%s\t%s\n", part, folder > dirs
      n++; names[n] = name; parts[n] = part
      if (type == "h") { n++; names[n] = target; parts[n] = part " (its link target)" }
    }
    END {
      for (j = 1; j <= n; j++) {
        p = names[j]
        while ((k = match(p, /\/[^\/]*$/)) > 0) {
          p = substr(p, 1, k - 1)
          if (p in link) { print parts[j] ": " names[j] ": below the link " p " of part " seen[p]; break }
        }
      }
      for (p in total) if ((p in want) && total[p] > want[p]) print p ": its members hold " total[p] " bytes, more than the " want[p] " its list records"
    }' sizing="$([[ $sizes != /dev/null ]] && echo 1)" "$sizes" "$listing")"
  rm -f "$listing"
  _MEMBERS_BAD="$(head -3 <<<"$bad" | tr '\n' ';')"
  [[ -z $bad ]]
}

# Splits DIR's files (and links) into ARTIFACT_PARTS lists of about equal bytes, largest first into the
# emptiest part; the excluded paths stay out. Then packs and publishes the parts, and the manifest last.
_publish_parts() {
  local rel=$1 dir=$2 key=$3 base="${1%.parts}" lists="$CACHE/$PHASE-$3.lists" t0=$SECONDS x
  rm -rf "$lists" && mkdir -p "$lists"
  (cd "$dir" && find . \( -type f -o -type l \) -printf '%s %P\n') | sort -rn |
    awk -v n="$ARTIFACT_PARTS" -v out="$lists" -v ex="${ARTIFACT_EXCLUDE[*]}" '
      BEGIN { k = split(ex, skip, " ") }
      {
        path = substr($0, index($0, " ") + 1)
        for (i = 1; i <= k; i++) if (path == skip[i] || index(path, skip[i] "/") == 1) next
        best = 0
        for (i = 1; i < n; i++) if (size[i] < size[best]) best = i
        size[best] += $1
        printf "%s\n", path > sprintf("%s/%02d", out, best)
      }'
  _PART_DIR=$dir _PART_LISTS=$lists
  local -a names=()
  for x in "$lists"/*; do names+=("$(basename "$x")"); done
  _parallel _pack_part "${names[@]}" || die "store: packing $PHASE failed (see above)"
  local mb
  mb="$(stat -c %s "$lists"/*.tar | awk '{ s += $1 } END { print int(s / 1048576) }')"
  # The parts go under a folder of this build's own, so a manifest never mixes two builders' parts.
  local build_id
  build_id="$(date +%s)-$RANDOM$RANDOM"
  for x in "${names[@]}"; do
    store_put "$base/$build_id/$x.tar" "$lists/$x.tar" || die "store: $base/$build_id/$x.tar exists already"
  done
  for x in "${names[@]}"; do echo "$build_id/$x.tar $(stat -c %s "$lists/$x.tar")"; done >"$lists/manifest"
  if store_put "$rel" "$lists/manifest"; then
    phase_note "artifact $key built and published (${#names[@]} parts, $mb MB, packed in $((SECONDS - t0)) s)"
    log "store: published $STORE_URL/$rel"
  else
    phase_note "artifact $key built; another node published it first"
  fi
  rm -rf "$lists"
}

_pack_part() { tar -cf "$_PART_LISTS/$1.tar" -C "$_PART_DIR" --no-recursion -T "$_PART_LISTS/$1"; }

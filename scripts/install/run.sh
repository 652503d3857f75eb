#!/bin/bash
# deepep-a4 node installer: runs the phases of config.sh in order, each in its own process and log.
#
#   bash run.sh            install (resume); exit 0 ready, 75 reboot scheduled (rerun after boot), else failed
#   bash run.sh --status   print R/state/status.json
#   bash run.sh --plan     list each phase and whether a run would execute it
#   bash run.sh --redo P   forget phase P (and what depends on it), then install
#
# A phase is skipped when its marker holds the key of the same inputs: the phase's own inputs, its
# script's text and the keys of the phases it depends on (PHASE_DEPS). So a changed version reruns that
# phase and its dependents, nothing else; a failed phase has no marker, and the rerun starts there.
set -Eeuo pipefail
HERE="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" && pwd -P)"
# shellcheck source=/dev/null
source "$HERE/config.sh"
# shellcheck source=scripts/install/lib.sh source-path=SCRIPTDIR
source "$HERE/lib.sh"

MARKERS="$STATE/markers"
PSTATE="$STATE/phases"
STATUS="$STATE/status.json"
declare -A KEY=()

# A profile may ship a subset of the phases (the hardware test): files keep their numbers.
phase_file() {
  local f
  for f in "$HERE"/phases/[0-9][0-9]-"$1".sh; do
    [[ -f $f ]] && echo "$f" && return 0
  done
  die "no script for phase '$1' under $HERE/phases"
}
phase_index() {
  local i
  # PHASES is an array of config.sh, which shellcheck cannot follow (it is rendered per stack).
  # shellcheck disable=SC2153
  for i in "${!PHASES[@]}"; do
    [[ ${PHASES[$i]} == "$1" ]] && echo $((i + 1)) && return 0
  done
  return 1
}

phase_key() {
  local p=$1 f d
  f="$(phase_file "$p")"
  {
    echo "phase $p"
    sha256_of "$f"
    # PHASE is set in a subshell on purpose: each phase script sees its own name and nothing leaks back.
    # shellcheck source=/dev/null disable=SC2030
    (export PHASE=$p PHASE_SCRIPT=$f && source "$f" && phase_inputs)
    for d in ${PHASE_DEPS[$p]:-}; do echo "dep $d ${KEY[$d]}"; done
  } | sha256sum | cut -c1-16
}

is_current() { [[ -f $MARKERS/$1 && "$(<"$MARKERS/$1")" == "${KEY[$1]}" ]]; }

# js VALUE: sets REPLY to VALUE as a JSON string (no subshells: the status is rewritten often).
js() {
  local s=$1
  s=${s//\\/\\\\}
  s=${s//\"/\\\"}
  s=${s//$'\n'/\\n}
  s=${s//$'\t'/\\t}
  s=${s//[[:cntrl:]]/}
  REPLY="\"$s\""
}

# write_status READY PHASE [ERROR_JSON]: the whole file, rewritten atomically.
write_status() {
  local ready=$1 current=$2 error=${3:-null} p sep="" st secs note phases="" jp jst jkey jnote now
  for p in "${PHASES[@]}"; do
    st="pending" secs=null note=""
    [[ -f $PSTATE/$p.state ]] && st="$(<"$PSTATE/$p.state")"
    is_current "$p" && [[ $st != skipped ]] && st="done"
    [[ -f $PSTATE/$p.seconds ]] && secs="$(<"$PSTATE/$p.seconds")"
    [[ -f $PSTATE/$p.note ]] && note="$(<"$PSTATE/$p.note")"
    js "$p" && jp=$REPLY
    js "$st" && jst=$REPLY
    js "${KEY[$p]}" && jkey=$REPLY
    js "$note" && jnote=$REPLY
    phases+="$sep    $jp: {\"state\": $jst, \"seconds\": $secs, \"key\": $jkey, \"note\": $jnote}"
    sep=$',\n'
  done
  if [[ $current != null ]]; then js "$current" && current=$REPLY; fi
  printf -v now '%(%Y-%m-%dT%H:%M:%SZ)T' -1
  js "$DEEPEP_STACK" && local jstack=$REPLY
  js "$DEEPEP_TARGET" && local jtarget=$REPLY
  # Phases this target or profile does not ship at all (GKE: nccl-gib; the hardware test), each with the reason.
  local left="" lsep="" jr
  for p in "${!LEFT_OUT[@]}"; do
    js "$p" && jp=$REPLY
    js "${LEFT_OUT[$p]}" && jr=$REPLY
    left+="$lsep$jp: $jr"
    lsep=", "
  done
  printf '{\n  "ready": %s,\n  "stack": %s,\n  "target": %s,\n  "installerHash": "%s",\n  "updated": "%s",\n  "phase": %s,\n  "phases": {\n%s\n  },\n  "leftOut": {%s},\n  "error": %s\n}\n' \
    "$ready" "$jstack" "$jtarget" "$INSTALLER_HASH" "$now" "$current" "$phases" "$left" "$error" >"$STATUS.tmp"
  mv "$STATUS.tmp" "$STATUS"
}

now_us() { echo "${EPOCHREALTIME/./}"; }
fmt_s() { printf '%d.%02d' $(($1 / 1000000)) $((($1 % 1000000) / 10000)); }

# Dependents of P, transitively (for --redo).
dependents() {
  local p q changed=1
  local -A hit=([$1]=1)
  while ((changed)); do
    changed=0
    for q in "${PHASES[@]}"; do
      [[ -n ${hit[$q]:-} ]] && continue
      for p in ${PHASE_DEPS[$q]:-}; do
        if [[ -n ${hit[$p]:-} ]]; then
          hit[$q]=1
          changed=1
        fi
      done
    done
  done
  for q in "${PHASES[@]}"; do [[ -n ${hit[$q]:-} ]] && echo "$q"; done
  return 0
}

run_phase() {
  local p=$1 f log="$LOGS/$1.log" t0 us rc tail_text error
  f="$(phase_file "$p")"
  rm -f "$PSTATE/$p.note" "$PSTATE/$p.skipped"
  echo running >"$PSTATE/$p.state"
  write_status false "$p"
  log "phase $p: start (key ${KEY[$p]})"
  printf '\n=== %(%Y-%m-%dT%H:%M:%SZ)T phase %s, key %s ===\n' -1 "$p" "${KEY[$p]}" >>"$log"
  t0="$(now_us)"
  set +e
  (
    set -Eeuo pipefail
    # shellcheck disable=SC2031 # the subshell's own PHASE, as in phase_key
    export PHASE=$p PHASE_SCRIPT=$f
    # shellcheck source=/dev/null
    source "$f"
    phase_run
  ) </dev/null 2>&1 | if [[ ${DEEPEP_QUIET:-0} == 1 ]]; then cat >>"$log"; else tee -a "$log"; fi
  rc=${PIPESTATUS[0]}
  set -e
  us=$(($(now_us) - t0))
  fmt_s "$us" >"$PSTATE/$p.seconds"
  if ((rc == 0)); then
    local outcome="done" note=""
    [[ -f $PSTATE/$p.skipped ]] && outcome=skipped
    [[ -f $PSTATE/$p.note ]] && note=" ($(<"$PSTATE/$p.note"))"
    echo "$outcome" >"$PSTATE/$p.state"
    echo "${KEY[$p]}" >"$MARKERS/$p"
    log "phase $p: end, $outcome in $(fmt_s "$us") s$note"
    return 0
  fi
  if ((rc == REBOOT_EXIT)); then
    echo reboot-pending >"$PSTATE/$p.state"
    js "$p"
    write_status false "$p" "{\"phase\": $REPLY, \"exitCode\": $rc, \"message\": \"a reboot was scheduled; the installer resumes after it\"}"
    log "phase $p: a reboot was scheduled; after the boot, run $HERE/run.sh again (it resumes at $p)"
    exit "$REBOOT_EXIT"
  fi
  echo failed >"$PSTATE/$p.state"
  tail_text="$(tail -n "${DEEPEP_TAIL_LINES:-25}" "$log")"
  local jp jlog jtail jretry
  js "$p" && jp=$REPLY
  js "$log" && jlog=$REPLY
  js "$tail_text" && jtail=$REPLY
  js "bash $HERE/run.sh" && jretry=$REPLY
  error="{\"phase\": $jp, \"exitCode\": $rc, \"log\": $jlog, \"tail\": $jtail, \"retry\": $jretry}"
  write_status false "$p" "$error"
  {
    echo "deepep-a4 installer: phase '$p' failed with exit code $rc after $(fmt_s "$us") s."
    echo "--- last lines of $log ---"
    echo "$tail_text"
    echo "---"
    echo "Fix the cause above, then retry with: bash $HERE/run.sh"
    echo "(finished phases are skipped; the run resumes at phase '$p'; status: $STATUS)"
  } >&2
  exit "$rc"
}

main() {
  local mode=install redo="" p first=""
  while (($#)); do
    case $1 in
      --status) mode=status ;;
      --plan) mode=plan ;;
      --redo)
        (($# >= 2)) || die "--redo needs a phase; phases: ${PHASES[*]}"
        redo=$2
        shift
        ;;
      -h | --help)
        sed -n '2,11p' "${BASH_SOURCE[0]}"
        return 0
        ;;
      *) die "unknown argument '$1' (see --help)" ;;
    esac
    shift
  done
  if [[ -n $redo ]]; then
    phase_index "$redo" >/dev/null || die "unknown phase '$redo'; phases: ${PHASES[*]}"
  fi
  if [[ $mode == status ]]; then
    [[ -f $STATUS ]] || die "no install has run under $R yet (no $STATUS)"
    cat "$STATUS"
    return 0
  fi
  if [[ $mode == plan ]]; then
    # Read only: no folders, no lock, and --redo only shows what it would rerun.
    local again=" "
    [[ -n $redo ]] && again+="$(dependents "$redo" | tr '\n' ' ') "
    for p in "${PHASES[@]}"; do
      KEY[$p]="$(phase_key "$p")"
      if [[ $again != *" $p "* ]] && is_current "$p"; then echo "$p ${KEY[$p]} current"; else echo "$p ${KEY[$p]} run"; fi
    done
    return 0
  fi
  mkdir -p "$MARKERS" "$PSTATE" "$LOGS" "$CACHE" "$SRC"
  # One run at a time: the DaemonSet's restarts and the VM's startup script can overlap.
  exec 9>"$STATE/run.lock"
  flock -w "${DEEPEP_LOCK_WAIT_S:-7200}" 9 || die "another installer run holds $STATE/run.lock"
  if [[ -n $redo ]]; then
    for p in $(dependents "$redo"); do rm -f "$MARKERS/$p"; done
  fi
  for p in "${PHASES[@]}"; do KEY[$p]="$(phase_key "$p")"; done
  for p in "${PHASES[@]}"; do
    if ! is_current "$p"; then
      first=$p
      break
    fi
  done
  log "deepep-a4 installer, stack $DEEPEP_STACK, target $DEEPEP_TARGET, root $R, installer $INSTALLER_HASH"
  if [[ -z $first ]]; then
    log "every phase is current: nothing to do"
    write_status true null
    return 0
  fi
  write_status false "$first"
  for p in "${PHASES[@]}"; do
    if is_current "$p"; then
      log "phase $p: current, skipped"
      continue
    fi
    run_phase "$p"
  done
  write_status true null
  log "installed: source $ENV_FILE; python: $(venv_python)"
}

main "$@"

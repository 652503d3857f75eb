#!/usr/bin/env bash
# The README's test command and CI's entry point (.ci/run): installs every tool it needs from the
# package registries with uv (pinned in ci/requirements-uv.txt, bootstrapped with python3's pip): .venv
# from requirements-dev.txt, checkov in its own venv (build/tools/checkov). Then runs the quality gates,
# side by side where they don't depend on each other (docs/development.md); each gate's output is printed
# in the gates' order with its time; every gate runs even when an earlier one failed, and the script
# exits 1 if any failed, naming them.
#
#   bash ci/test.sh                    all gates
#   bash ci/test.sh ruff-lint pytest   only the gates named (plan runs first when a gate needs it)
#   bash ci/test.sh --list             the gates
#   bash ci/test.sh --help             this text
set -Euo pipefail
cd "$(dirname "$0")/.." || exit 1

GATES=(plan pyright ruff-lint ruff-format shellcheck k8s-schemas security pytest)
NEEDS_PLAN=" shellcheck k8s-schemas security "
PY=.venv/bin/python
UV_DIR=build/tools/uv
UV=$UV_DIR/bin/uv
UV_REQS=ci/requirements-uv.txt
CHECKOV_VENV=build/tools/checkov
CHECKOV_REQS=ci/gates/requirements-checkov.txt
JOBS=$(nproc 2>/dev/null || echo 2)
# uv installs without compiling bytecode: let Python cache each module at its first import (else every
# process compiles the pulumi_gcp modules it imports again, seconds each time).
unset PYTHONDONTWRITEBYTECODE
# uv never fetches a Python of its own: the venvs use python3 as found on PATH.
export UV_PYTHON_DOWNLOADS=never

stacks() {
  local f
  for f in stacks/Pulumi.*.yaml; do
    f=${f#stacks/Pulumi.}
    echo "${f%.yaml}"
  done
}

plans() {
  local s
  for s in $(stacks); do echo "build/plan/$s"; done
}

# Every shell script of the repo (tracked or new, not ignored) and every one a plan rendered.
shell_scripts() {
  local f
  {
    git ls-files --cached --others --exclude-standard 2>/dev/null || find . -path ./.venv -prune -o -path ./build -prune -o -type f -print
    for s in $(stacks); do [[ -d build/plan/$s/files ]] && find "build/plan/$s/files" -type f; done
  } | sort -u | while IFS= read -r f; do
    [[ -f $f ]] || continue
    case $f in
      *.sh) echo "$f" ;;
      *.py | *.yaml | *.yml | *.json | *.md | *.txt | *.toml) ;;
      *) head -n1 "$f" 2>/dev/null | grep -qE '^#!.*[/ ](ba|da)?sh([[:space:]]|$)' && echo "$f" ;;
    esac
  done
}

plan_one() {
  rm -rf "build/plan/$1" # a failed plan must not leave the last good one for the next gates
  .venv/bin/deepep-a4 plan --stack "$1" >"build/plan-$1.log" 2>&1
  echo $? >"build/plan-$1.rc"
}

gate_plan() {
  local s rc=0
  local -a all
  mapfile -t all < <(stacks)
  # The stacks plan side by side, one per core; each writes its own log, printed in order.
  for s in "${all[@]}"; do
    rm -f "build/plan-$s.rc"
    while [[ $(jobs -rp | wc -l) -ge $JOBS ]]; do wait -n; done
    plan_one "$s" &
  done
  wait
  for s in "${all[@]}"; do
    echo "plan $s"
    if [[ $(cat "build/plan-$s.rc" 2>/dev/null) == 0 ]]; then
      tail -n1 "build/plan-$s.log"
    else
      rc=1
      cat "build/plan-$s.log"
    fi
  done
  return "$rc"
}

gate_pyright() { PYRIGHT_PYTHON_IGNORE_WARNINGS=1 .venv/bin/pyright; }
gate_ruff-lint() { .venv/bin/ruff check --output-format concise .; }
gate_ruff-format() { .venv/bin/ruff format --check .; }

gate_shellcheck() {
  local -a files distinct
  # The repository's own scripts first, so that a byte-identical copy a plan rendered is named by its source.
  mapfile -t files < <(shell_scripts | awk '/^build\// { later[n++] = $0; next } { print } END { for (i = 0; i < n; i++) print later[i] }')
  # What shellcheck finds depends on a script's text alone (no .shellcheckrc; a sourced file is followed when
  # it is among the inputs, which it still is): each distinct text is checked once, under its first name.
  mapfile -t distinct < <(sha256sum -- "${files[@]}" | awk '!seen[$1]++ { sub(/^[0-9a-f]+  /, ""); print }')
  echo "${#files[@]} scripts, ${#distinct[@]} distinct: ${distinct[*]}"
  .venv/bin/shellcheck --format gcc "${distinct[@]}"
}

gate_k8s-schemas() {
  local -a dirs
  mapfile -t dirs < <(plans)
  "$PY" ci/gates/k8s_schemas.py "${dirs[@]}"
}

gate_security() {
  local -a dirs
  mapfile -t dirs < <(plans)
  "$PY" ci/gates/security.py --checkov "$CHECKOV_VENV/bin/checkov" "${dirs[@]}"
}

gate_pytest() {
  local rc=0
  # One worker per core (pytest-xdist): the suite is mostly subprocesses and mock plans, which run side by side.
  "$PY" -m pytest --tb=native -q -n auto tests 2>&1 | tee build/pytest.log || rc=$?
  [[ $rc -eq 5 ]] && echo "pytest ran no test"
  return "$rc"
}

# installed DIR REQS: whether DIR holds what REQS asks for (its stamp, written after a good install).
stamp() { sha256sum "$1" | cut -c1-16; }
installed() { [[ -f $1/.installed && $(cat "$1/.installed") == "$(stamp "$2")" ]]; }

setup_uv() {
  installed "$UV_DIR" "$UV_REQS" && [[ -x $UV ]] && return 0
  rm -rf "$UV_DIR"
  mkdir -p "$UV_DIR"
  if python3 -m pip --version >/dev/null 2>&1; then
    PIP_ROOT_USER_ACTION=ignore python3 -m pip install -q --disable-pip-version-check --no-warn-script-location \
      --target "$UV_DIR" -r "$UV_REQS" >build/setup-uv.log 2>&1
  else # a python3 without pip of its own: a venv's
    python3 -m venv "$UV_DIR" && "$UV_DIR/bin/pip" install -q --disable-pip-version-check -r "$UV_REQS" >build/setup-uv.log 2>&1
  fi
  [[ -x $UV ]] || { cat build/setup-uv.log; return 1; }
  stamp "$UV_REQS" >"$UV_DIR/.installed"
}

setup_venv() {
  # --seed: pip (and setuptools, wheel) in the venv as python3 -m venv would put them, for whoever needs pip.
  [[ -x .venv/bin/python ]] || "$UV" venv -q --seed --python "$1" .venv || return 1
  "$UV" pip install -q --python .venv/bin/python -r requirements-dev.txt
}

setup_checkov() {
  # checkov pins much of its own world (boto3, networkx, ...): its own venv keeps it away from pulumi's.
  installed "$CHECKOV_VENV" "$CHECKOV_REQS" && return 0
  rm -rf "$CHECKOV_VENV"
  "$UV" venv -q --seed --python "$1" "$CHECKOV_VENV" &&
    "$UV" pip install -q --python "$CHECKOV_VENV/bin/python" -r "$CHECKOV_REQS" &&
    stamp "$CHECKOV_REQS" >"$CHECKOV_VENV/.installed"
}

setup() {
  local py3 rc=0 venv checkov
  mkdir -p build/tools
  setup_uv || { echo "could not install uv ($UV_REQS) with python3's pip"; return 1; }
  py3=$(python3 -c 'import sys; print(sys.executable)') || return 1
  # Both venvs at once: mostly downloads.
  setup_venv "$py3" >build/setup-venv.log 2>&1 &
  venv=$!
  setup_checkov "$py3" >build/setup-checkov.log 2>&1 &
  checkov=$!
  wait "$venv" || { rc=1; echo ".venv (requirements-dev.txt) failed:"; }
  cat build/setup-venv.log
  wait "$checkov" || { rc=1; echo "$CHECKOV_VENV ($CHECKOV_REQS) failed:"; }
  cat build/setup-checkov.log
  return "$rc"
}

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# run_gate G: runs gate G, then writes "EXIT SECONDS" to build/gates/G.done.
run_gate() {
  local t0 rc=0
  t0=$(now)
  "gate_$1" </dev/null || rc=$?
  echo "$rc $(secs "$t0" "$(now)")" >"build/gates/$1.done"
}

# start_gate G: run_gate G in the background, its output in build/gates/G.log.
start_gate() {
  run_gate "$1" >"build/gates/$1.log" 2>&1 &
  GATE_PID[$1]=$!
}

main() {
  local -a want=() failed=() summary=()
  local g t0 rc all0
  if [[ ${1:-} == --list ]]; then printf '%s\n' "${GATES[@]}"; return 0; fi
  if [[ ${1:-} == -h || ${1:-} == --help ]]; then sed -n '2,/^set -/p' "$0" | sed '$d; s/^# \{0,1\}//'; return 0; fi
  for g in "$@"; do
    [[ " ${GATES[*]} " == *" $g "* ]] || { echo "unknown gate '$g' (gates: ${GATES[*]})" >&2; return 2; }
  done
  # In the gates' own order; a gate that reads the rendered files brings this run's plans.
  local asked=" $* "
  for g in "$@"; do [[ $NEEDS_PLAN == *" $g "* ]] && asked+="plan "; done
  for g in "${GATES[@]}"; do
    if [[ $# -eq 0 || $asked == *" $g "* ]]; then want+=("$g"); fi
  done

  all0=$(now)
  echo "== setup"
  t0=$(now)
  setup || { echo "-- setup FAILED after $(secs "$t0" "$(now)") s: no gate ran"; return 1; }
  echo "-- setup done in $(secs "$t0" "$(now)") s"

  # Side by side where they share nothing (docs/development.md): plan, pyright and ruff at once; the gates
  # that read the plans once it is done; then pytest, whose workers take every core (pyright, the longest,
  # may still be running). Each gate's output is printed in the gates' order, the running one's as it comes.
  local -A GATE_PID=()
  local took
  rm -rf build/gates
  mkdir -p build/gates
  for g in "${want[@]}"; do
    [[ $g == pytest || $NEEDS_PLAN == *" $g "* ]] || start_gate "$g"
  done
  [[ -n ${GATE_PID[plan]:-} ]] && wait "${GATE_PID[plan]}"
  for g in "${want[@]}"; do
    [[ $NEEDS_PLAN == *" $g "* ]] && start_gate "$g"
  done
  if [[ " ${want[*]} " == *" pytest "* ]]; then
    for g in "${!GATE_PID[@]}"; do [[ $g == pyright ]] || wait "${GATE_PID[$g]}"; done
    start_gate pytest
  fi

  for g in "${want[@]}"; do
    echo
    echo "== gate $g"
    if [[ -f build/gates/$g.done ]]; then
      cat "build/gates/$g.log"
    else
      tail -n +1 -s 0.2 -f --pid="${GATE_PID[$g]}" "build/gates/$g.log"
    fi
    wait "${GATE_PID[$g]}" 2>/dev/null # reaped already when a later gate waited for it
    rc=1 took="?"
    read -r rc took <"build/gates/$g.done"
    if [[ $rc -eq 0 ]]; then
      echo "-- gate $g passed in $took s"
      summary+=("$(printf '  %-12s passed  %6s s' "$g" "$took")")
    else
      echo "-- gate $g FAILED (exit $rc) in $took s"
      summary+=("$(printf '  %-12s FAILED  %6s s' "$g" "$took")")
      failed+=("$g")
    fi
  done

  echo
  echo "== summary ($(secs "$all0" "$(now)") s in all)"
  printf '%s\n' "${summary[@]}"
  [[ ${#failed[@]} -eq 0 ]] || echo "failed gates: ${failed[*]}"
  echo "gates: $((${#want[@]} - ${#failed[@]})) passed, ${#failed[@]} failed"
  # pytest's own closing line last, so CI reads the test count from it.
  if [[ " ${want[*]} " == *" pytest "* && -f build/pytest.log ]]; then tail -n1 build/pytest.log; fi
  [[ ${#failed[@]} -eq 0 ]]
}

main "$@"

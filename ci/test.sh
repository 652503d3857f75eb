#!/usr/bin/env bash
# The README's test command and CI's entry point (.ci/run): installs every tool it needs from the
# package registries (.venv from requirements-dev.txt; checkov in its own venv, build/tools/checkov),
# then runs the quality gates. Each gate prints its name and time; every gate runs even when an
# earlier one failed, and the script exits 1 if any failed, naming them.
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
CHECKOV_VENV=build/tools/checkov
CHECKOV_REQS=ci/gates/requirements-checkov.txt

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

gate_plan() {
  local s rc=0
  for s in $(stacks); do
    echo "plan $s"
    rm -rf "build/plan/$s" # a failed plan must not leave the last good one for the next gates
    if .venv/bin/deepep-a4 plan --stack "$s" >"build/plan-$s.log" 2>&1; then
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
  local -a files
  mapfile -t files < <(shell_scripts)
  echo "${#files[@]} scripts: ${files[*]}"
  .venv/bin/shellcheck --format gcc "${files[@]}"
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

setup() {
  mkdir -p build
  [[ -x .venv/bin/python ]] || python3 -m venv .venv
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-dev.txt || return 1
  # checkov pins much of its own world (boto3, networkx, ...): its own venv keeps it away from pulumi's.
  local want have=""
  want=$(sha256sum "$CHECKOV_REQS" | cut -c1-16)
  [[ -f $CHECKOV_VENV/.installed ]] && have=$(cat "$CHECKOV_VENV/.installed")
  if [[ $want != "$have" ]]; then
    rm -rf "$CHECKOV_VENV"
    python3 -m venv "$CHECKOV_VENV" &&
      "$CHECKOV_VENV/bin/python" -m pip install -q --disable-pip-version-check -r "$CHECKOV_REQS" &&
      echo "$want" >"$CHECKOV_VENV/.installed" || return 1
  fi
}

now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

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

  for g in "${want[@]}"; do
    echo
    echo "== gate $g"
    t0=$(now)
    rc=0
    "gate_$g" || rc=$?
    local took
    took=$(secs "$t0" "$(now)")
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

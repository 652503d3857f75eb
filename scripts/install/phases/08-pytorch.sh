# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase pytorch: PyTorch and NumPy in R/venv, never in the system Python (field report R1 Phase 8 used
# --break-system-packages; field report R0 ended up in ~/.local). With the pip NVSHMEM, the wheel version is a
# constraint, so PyTorch's own dependency cannot silently replace it (this phase depends on nvshmem then).
#
# With a store, the environment is an artifact (docs/store.md, "The PyTorch environment"): a venv is not
# relocatable (its scripts' shebangs and pyvenv.cfg name its path), so the artifact holds the venv's files
# without its interpreter links, and a restore makes a fresh venv at this node's path with the same
# Python, unpacks the files into it and points the scripts' shebangs at it. Its key is what decides the
# bytes, never the path: PyTorch version and CUDA tag, the CPython ABI, the platform (glibc's manylinux tag).

# Read by store.sh's with_artifact: 16 parts unpack in parallel; the key leaves out the install root.
# shellcheck disable=SC2034
ARTIFACT_PARTS="${DEEPEP_PYTORCH_PARTS:-16}" ARTIFACT_RELOCATABLE=1
ORIGIN_FILE=.deepep-venv-origin

phase_inputs() {
  echo "torch=$TORCH_VERSION index=$TORCH_INDEX_URL numpy=$NUMPY_SPEC"
  if [[ -n ${TORCH_LOCK:-} ]]; then echo "lock=$TORCH_LOCK $(sha256_of "$HERE/$TORCH_LOCK")"; fi
  if [[ $NVSHMEM_SOURCE == pip ]]; then echo "constraint=$(nvshmem_wheel)==$NVSHMEM_VERSION"; fi
  if [[ ${DEEPEP_API:-v1} == v2 ]]; then echo "nccl=$NCCL_WHEEL_FILE ${SHA256[$NCCL_WHEEL_FILE]:-}"; fi
}

# The interpreter the venv is made from (the pods' copy inside R on GKE is made from it too).
base_python() { if [[ $TORCH_VERSION == installed ]]; then echo "$BASE_PYTHON"; else echo python3; fi; }

artifact_inputs() {
  phase_inputs
  if [[ $TORCH_VERSION == installed ]]; then
    # The hardware test: the machine's own PyTorch stands in for the wheels, by its version.
    echo "installed torch=$("$BASE_PYTHON" -c 'import importlib.metadata as m; print(m.version("torch"))')"
  fi
  "$(base_python)" -c 'import platform, sys, sysconfig
libc, ver = platform.libc_ver()
print("python", sys.implementation.cache_tag, sysconfig.get_config_var("SOABI"))
print("platform", "manylinux_%s_%s" % (ver.replace(".", "_"), platform.machine()) if libc == "glibc" else sysconfig.get_platform())'
  echo "target=$DEEPEP_TARGET"
}

# The hardware test (no internet): the machine's PyTorch and what it requires, copied file by file from
# its site-packages as pip would have installed them, with their scripts; the venv is then standalone.
copy_installed() {
  local base=$BASE_PYTHON
  rm -rf "$VENV"
  if copies_python; then
    copy_python "$BASE_PYTHON" "$R/python"
    base="$R/python/bin/python3"
  fi
  "$base" -m venv --without-pip "$VENV" || die "$base -m venv failed"
  "$BASE_PYTHON" - "$VENV" <<'PY' || die "copying the machine's PyTorch into $VENV failed"
import importlib.metadata as md, os, re, shutil, sys, sysconfig
from packaging.requirements import Requirement
venv = sys.argv[1]
site = sysconfig.get_paths(vars={"base": venv, "platbase": venv})["purelib"]
seen, done, todo = {}, set(), [("torch", ()), ("numpy", ()), ("ninja", ()), ("packaging", ()), ("setuptools", ())]
while todo:
    name, extras = todo.pop()
    key = re.sub(r"[-_.]+", "-", name).lower()
    if (key, extras) in done:
        continue
    done.add((key, extras))
    try:
        dist = seen.get(key) or md.distribution(key)
    except md.PackageNotFoundError:
        continue
    seen[key] = dist
    for text in dist.requires or []:
        req = Requirement(text)
        wanted = ("",) + tuple(extras)
        if req.marker is None or any(req.marker.evaluate({"extra": e}) for e in wanted):
            todo.append((req.name, tuple(req.extras)))
n = 0
for dist in seen.values():
    for f in dist.files or []:
        src = os.path.normpath(dist.locate_file(f))
        if not os.path.isfile(src) or "__pycache__" in src:
            continue
        if f.parts[0] == ".." or str(f).startswith("/"):
            rel = os.path.join("bin", os.path.basename(src)) if os.sep + "bin" + os.sep in src else None
            if rel is None:
                continue
            dest = os.path.join(venv, rel)
        else:
            dest = os.path.join(site, str(f))
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        shutil.copy2(src, dest)
        n += 1
print(f"copied {len(seen)} distributions, {n} files")
PY
  # The copied scripts name the machine's interpreter: they are this venv's now.
  fix_shebangs "$(dirname "$(dirname "$BASE_PYTHON")")"
}

# The environment is checked before with_artifact publishes it: a broken one must not reach other nodes.
build_env() {
  if [[ $TORCH_VERSION == installed ]]; then
    copy_installed
    "$VENV/bin/python" -c 'import torch' || die "the copy of the machine's PyTorch in $VENV does not import torch"
    install_nccl_v2
    return 0
  fi
  ensure_venv
  echo "$VENV" >"$VENV/$ORIGIN_FILE"
  local constraints=()
  if [[ $NVSHMEM_SOURCE == pip ]]; then
    echo "$(nvshmem_wheel)==$NVSHMEM_VERSION" >"$STATE/pip-constraints.txt"
    constraints=(-c "$STATE/pip-constraints.txt")
  fi
  if [[ -n ${TORCH_LOCK:-} ]]; then
    install_locked "${constraints[@]}"
  else
    # No lock for this torchVersion: only the store builder (and the hardware test's own store) installs it
    # with pip, and the manifest then pins what it built; a stack's node takes that artifact instead.
    ((STORE_TRUST_PUBLISHED)) ||
      die "torchVersion $TORCH_VERSION has no lock (scripts/install/locks/) and the store has no PyTorch artifact for it: run deepep-a4 store build for this stack and pin its manifest (artifactStoreManifest)"
    warn "no lock for torch $TORCH_VERSION: pip installs it unhashed (the store's manifest pins the result)"
    pip_install "${constraints[@]}" --index-url "$TORCH_INDEX_URL" --extra-index-url "$PYPI_INDEX_URL" \
      "torch==$TORCH_VERSION" "$NUMPY_SPEC" ninja packaging
  fi
  local got
  got="$("$(venv_python)" -c 'import torch; print(torch.__version__)')"
  [[ $got == "$TORCH_VERSION" ]] || die "the venv has torch $got, not $TORCH_VERSION"
  install_nccl_v2
}

# DeepEP V2 runs with one NCCL, the stack's (deepepApi=v2, ncclVersion): its wheel, checked against the SHA256
# table, replaces PyTorch's nvidia-nccl-cuXX in the venv after PyTorch is in. Not with pip: torch pins its NCCL
# exactly (2.10: nvidia-nccl-cu12==2.27.5, 2.11: nvidia-nccl-cu13==2.28.9, tests/fixtures/pytorch/), so pip would
# put that one back or refuse; the old distribution's files go (its RECORD), the wheel's are unpacked as pip
# would. `pip check` then names exactly one conflict, torch's pin, which is the point. deep_ep refuses two NCCL
# runtimes in one process (deep_ep/__init__.py check_nccl_so), and dd758ca does not build against 2.28.9.
install_nccl_v2() {
  [[ ${DEEPEP_API:-v1} == v2 ]] || return 0
  local file="$CACHE/$NCCL_WHEEL_FILE" lib
  fetch "$NCCL_WHEEL_URL" "$file" "$NCCL_WHEEL_FILE"
  "$(venv_python)" - "$file" "$NCCL_WHEEL" <<'PY' || die "replacing PyTorch's NCCL with $NCCL_WHEEL_FILE failed"
import importlib.metadata as md, os, shutil, sys, sysconfig, zipfile
wheel, name = sys.argv[1:]
try:
    old = md.distribution(name)
    for f in old.files or []:
        path = old.locate_file(f)
        if os.path.isfile(path):
            os.remove(path)
    shutil.rmtree(str(old._path), ignore_errors=True)  # its .dist-info
except md.PackageNotFoundError:
    pass
zipfile.ZipFile(wheel).extractall(sysconfig.get_paths()["purelib"])
PY
  lib="$(check_one_nccl)" || die "the PyTorch environment does not have exactly one NCCL $NCCL_VERSION"
  log "NCCL $NCCL_VERSION ($NCCL_WHEEL_FILE, sha256 pinned) replaces PyTorch's in $VENV: $lib"
}

# One libnccl in the venv, of the stack's version, and the one PyTorch loads (no GPU needed to ask it): after
# `import torch` the process has mapped the libnccl that libtorch_cuda links, and that library's own
# ncclGetVersion answers. torch.cuda.nccl.version() cannot: it returns the NCCL_MAJOR/MINOR/PATCH macros of the
# header PyTorch was compiled against (pytorch/pytorch e6f159a3 torch/csrc/cuda/nccl.cpp `version()`), so a
# torch 2.11 wheel says 2.28.9 whichever library it loaded (measured: tests/fixtures/pytorch/nccl-loaded-h200.txt).
check_one_nccl() {
  "$(venv_python)" - "$NCCL_VERSION" <<'PY'
import ctypes, glob, importlib.metadata as md, os, sys, sysconfig


def mapped_nccl(maps):
    """The libnccl files a /proc/PID/maps text names (proc(5): the path is the 6th field), each once."""
    out = []
    for line in maps.splitlines():
        fields = line.split(None, 5)
        if len(fields) == 6 and os.path.basename(fields[5]).startswith("libnccl.so"):
            path = os.path.realpath(fields[5])
            if path not in out:
                out.append(path)
    return out


def version_text(code):
    """ncclGetVersion's integer as X.Y.Z: NVIDIA/nccl 5d3ab08 src/nccl.h.in NCCL_VERSION(X,Y,Z) is
    X*1000+Y*100+Z up to 2.8 and X*10000+Y*100+Z after."""
    if code < 2900:
        return "%d.%d.%d" % (code // 1000, code % 1000 // 100, code % 100)
    return "%d.%d.%d" % (code // 10000, code % 10000 // 100, code % 100)


def loaded_version(path):
    code = ctypes.c_int(0)
    rc = ctypes.CDLL(path).ncclGetVersion(ctypes.byref(code))  # already mapped: dlopen returns that handle
    assert rc == 0, f"ncclGetVersion of {path} returned {rc}"
    return version_text(code.value)


def main(want):
    site = sysconfig.get_paths()["purelib"]
    libs = sorted(os.path.realpath(p) for p in glob.glob(site + "/**/libnccl.so*", recursive=True))
    dists = [d for d in md.distributions() if (d.metadata["Name"] or "").lower().startswith("nvidia-nccl")]
    assert len(libs) == 1 and len(dists) == 1, f"NCCL libraries {libs}, distributions {[d.metadata['Name'] for d in dists]}"
    assert dists[0].version == want, f"{dists[0].metadata['Name']} {dists[0].version}, not {want}"
    import torch  # noqa: F401  (maps libtorch_cuda and the libnccl it links)

    with open("/proc/self/maps") as f:
        mapped = mapped_nccl(f.read())
    assert mapped == libs, f"after import torch the process maps NCCL {mapped or 'none'}, not only the venv's {libs[0]}"
    got = loaded_version(mapped[0])
    assert got == want, f"the loaded {mapped[0]} is NCCL {got} (its ncclGetVersion), not {want}"
    print(libs[0])


if __name__ == "__main__":
    main(sys.argv[1])
PY
}

# install_locked [-c CONSTRAINTS]: PyTorch and everything it needs from the stack's lock (config.sh TORCH_LOCK,
# shipped next to the phases), every wheel checked against its sha256 there; the lock is for one CPython.
install_locked() {
  local lock="$HERE/$TORCH_LOCK" abi want
  if [[ $NVSHMEM_SOURCE == pip ]]; then
    # The nvshmem phase installed the wheel of NVSHMEM_VERSION (under the constraint): the lock's own pin of it
    # is left out, and pip then requires the installed one to be what torch requires.
    awk -v w="$(nvshmem_wheel)==" 'index($0, w) == 1 { skip = 1 } !skip { print } skip && !/\\$/ { skip = 0 }' \
      "$lock" >"$STATE/torch-lock.txt"
    lock="$STATE/torch-lock.txt"
  fi
  [[ -s $lock ]] || die "the PyTorch lock $TORCH_LOCK is missing from the installer ($lock)"
  abi="$("$(venv_python)" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')"
  want="$(basename "$TORCH_LOCK" | grep -o -- '-cp[0-9]*-' | tr -d -)"
  [[ $abi == "$want" ]] ||
    die "the PyTorch lock $TORCH_LOCK is for $want; this node's venv runs $abi: use the store's PyTorch, or add a lock for $abi"
  pip_install "$@" --require-hashes --only-binary :all: --index-url "$TORCH_INDEX_URL" \
    --extra-index-url "$PYPI_INDEX_URL" -r "$lock" || die "pip could not install the locked PyTorch ($TORCH_LOCK)"
  log "PyTorch and its requirements from $TORCH_LOCK, every wheel checked by sha256"
}

# fix_shebangs OLD_PREFIX: scripts in R/venv/bin whose first line runs OLD_PREFIX/bin/python* run this
# venv's python instead (pip writes absolute shebangs). Links (the interpreter) are left alone.
fix_shebangs() {
  local old=$1 f first n=0
  for f in "$VENV"/bin/*; do
    [[ -f $f && ! -L $f ]] || continue
    first=""
    read -r first <"$f" || true
    if [[ $first == "#!$old/bin/python"* ]]; then
      sed -i "1s|^#!$old/bin/python[0-9.]*|#!$VENV/bin/python|" "$f"
      n=$((n + 1))
    fi
  done
  echo "$VENV" >"$VENV/$ORIGIN_FILE"
  log "venv at $VENV: $n scripts now run $VENV/bin/python"
}

# After a restore: a fresh venv at this path around the restored files, with the interpreter it was built
# with (the key holds its ABI), then the shebangs that named the builder's path.
relocate() {
  local origin base
  origin="$(cat "$VENV/$ORIGIN_FILE" 2>/dev/null)" || die "the PyTorch artifact has no $ORIGIN_FILE: not made by this phase"
  [[ $origin == "$VENV" && -x $VENV/bin/python ]] && return 0
  base="$(base_python)"
  [[ $TORCH_VERSION == installed ]] || need_packages python3-venv python3-dev
  if copies_python; then
    copy_python "$base" "$R/python"
    base="$R/python/bin/python3"
  fi
  "$base" -m venv "$VENV" --without-pip || die "$base -m venv failed around the restored PyTorch environment"
  fix_shebangs "$origin"
  log "PyTorch environment built at $origin, restored at $VENV"
}

phase_run() {
  local got t0=$SECONDS
  if store_enabled; then
    # The venv's own interpreter links, activate scripts and pyvenv.cfg are made where it is restored.
    with_artifact "$VENV" build_env pyvenv.cfg lib64 bin/python bin/python3 bin/python3.12 bin/activate \
      bin/activate.csh bin/activate.fish bin/Activate.ps1
    relocate
  elif [[ $TORCH_VERSION == installed ]]; then
    ensure_venv
  else
    build_env
  fi
  if [[ $TORCH_VERSION == installed ]]; then
    "$(venv_python)" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device"' ||
      die "$VENV has no working PyTorch with CUDA: the hardware test uses the machine's own"
    got="$("$(venv_python)" -c 'import torch; print(torch.__version__)')"
    store_enabled || phase_note "PyTorch as installed: $got"
    log "PyTorch $got in $VENV ($((SECONDS - t0)) s)"
  else
    got="$("$(venv_python)" -c 'import torch; print(torch.__version__)')"
    [[ $got == "$TORCH_VERSION" ]] || die "the venv has torch $got, not $TORCH_VERSION"
    log "PyTorch $got (CUDA $("$(venv_python)" -c 'import torch; print(torch.version.cuda)')) in $VENV"
  fi
  if [[ $NVSHMEM_SOURCE == pip ]]; then
    [[ -d "$(nvshmem_home)" ]] || die "the PyTorch environment has no $(nvshmem_wheel): DeepEP needs it (nvshmemSource=pip)"
  fi
  if [[ ${DEEPEP_API:-v1} == v2 ]]; then
    check_one_nccl >/dev/null || die "the PyTorch environment does not have exactly one NCCL $NCCL_VERSION (DeepEP V2)"
  fi
}

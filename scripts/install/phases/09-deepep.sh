# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase deepep: DeepEP at a pinned tag or commit (never a moving HEAD), optionally with PR #466
# (explicit GPU-to-NIC mapping), built in place for this GPU (TORCH_CUDA_ARCH_LIST, troubleshooting T13)
# against the NVSHMEM of the nvshmem phase. The build summary's "NVSHMEM path" must name that NVSHMEM:
# a build against PyTorch's bundled copy times out in internode dispatch (troubleshooting T12).

# DeepEP V2 (DEEPEP_API=v2, EPv2): the same build, plus its fmt submodule, against the venv's one NCCL (the
# pytorch phase put NCCL_VERSION there); its extension is deep_ep/_C*.so, its kernels compile at run time.
is_v2() { [[ ${DEEPEP_API:-v1} == v2 ]]; }

# The NCCL V2 compiles and links against: the wheel's package folder in the venv (EP_NCCL_ROOT_DIR).
nccl_home() { "$(venv_python)" -c 'import nvidia.nccl as m; print(list(m.__path__)[0])'; }

phase_inputs() {
  echo "ref=$DEEPEP_REF commit=$DEEPEP_COMMIT pr466=$DEEPEP_PR466@$DEEPEP_PR466_HEAD arch=$TORCH_CUDA_ARCH_LIST nvshmem=$NVSHMEM_SOURCE"
  if is_v2; then echo "api=v2 fmt=$DEEPEP_FMT_COMMIT nccl=$NCCL_WHEEL_FILE"; fi
}

# The built tree's artifact: the commit, PR #466, arch, and the PyTorch and Python ABI it compiled
# against; NVSHMEM's artifact key comes through ARTIFACT_DEPS (a wheel NVSHMEM by its version).
artifact_inputs() {
  echo "commit=$DEEPEP_COMMIT ref=$DEEPEP_REF pr466=$DEEPEP_PR466@$DEEPEP_PR466_HEAD arch=$TORCH_CUDA_ARCH_LIST"
  echo "nvshmem=$NVSHMEM_SOURCE $([[ $NVSHMEM_SOURCE == pip ]] && echo "$(nvshmem_wheel)==$NVSHMEM_VERSION")"
  if is_v2; then echo "api=v2 fmt=$DEEPEP_FMT_COMMIT nccl=$NCCL_WHEEL_FILE"; fi
  "$(venv_python)" -c 'import sys, sysconfig, torch; print("torch", torch.__version__, torch.version.cuda, sys.implementation.cache_tag, sysconfig.get_config_var("SOABI"))'
}

# store_source NAME DEST: sources/NAME from the store, only with a pinned digest it matches (fetch's rule:
# the installer's table or the stack's store manifest). 1 when the store has none or it is not pinned.
store_source() {
  local name=$1 dest=$2 want
  want="$(pinned_sha256 "$name")" || exit 1
  if [[ -z $want ]] && ((!STORE_TRUST_PUBLISHED)); then
    log "store: sources/$name is not pinned by the stack's store manifest: not taken"
    return 1
  fi
  store_get "sources/$name" "$dest" || return 1
  if [[ -n $want && "$(sha256_of "$dest")" != "$want" ]]; then
    rm -f "$dest"
    die "store: sources/$name is not the object the stack's store manifest pins (sha256 $want): refused"
  fi
}

# From the store: the source tree at the pinned commit and PR #466's diff, by name (deepep-a4 store fill).
# The archive must say it is the pinned commit: git archive (GitHub's too) writes the commit id into the
# tar's pax header, which git get-tar-commit-id reads.
checkout_from_store() {
  local dir="$R/DeepEP" tarball="$CACHE/deepep-$DEEPEP_COMMIT.tar.gz" diff="$CACHE/deepep-pr466.diff" id
  [[ -n $DEEPEP_COMMIT ]] && store_enabled || return 1
  store_source "deepep-$DEEPEP_COMMIT.tar.gz" "$tarball" || return 1
  if ((DEEPEP_PR466)); then store_source "deepep-pr466-$DEEPEP_PR466_HEAD.diff" "$diff" || return 1; fi
  need_packages git
  # git reads only the first header block: gzip may then die of SIGPIPE, which is no failure here.
  id="$({ gzip -dc "$tarball" 2>/dev/null || true; } | git get-tar-commit-id 2>/dev/null || true)"
  [[ $id == "$DEEPEP_COMMIT" ]] ||
    die "the store's DeepEP archive is of commit '${id:-none recorded}', not the pinned $DEEPEP_COMMIT: refused"
  rm -rf "$dir" && mkdir -p "$dir"
  tar -xzf "$tarball" -C "$dir" --strip-components=1 "${TAR_X[@]}"
  log "DeepEP $DEEPEP_REF at $DEEPEP_COMMIT from the store (archive of that commit, sha256 pinned)"
  if is_v2; then fmt_from_store "$dir" || return 1; fi
  if ((DEEPEP_PR466)); then apply_pr466 "$dir" "$diff"; fi
}

# V2's third-party/fmt: a git archive of the submodule's commit (.gitmodules; the DeepEP archive has an empty
# folder there), checked like the DeepEP archive by the commit id git archive writes into it.
fmt_from_store() {
  local dir=$1 tarball="$CACHE/fmt-$DEEPEP_FMT_COMMIT.tar.gz" id
  store_source "fmt-$DEEPEP_FMT_COMMIT.tar.gz" "$tarball" || return 1
  id="$({ gzip -dc "$tarball" 2>/dev/null || true; } | git get-tar-commit-id 2>/dev/null || true)"
  [[ $id == "$DEEPEP_FMT_COMMIT" ]] ||
    die "the store's fmt archive is of commit '${id:-none recorded}', not DeepEP V2's submodule $DEEPEP_FMT_COMMIT: refused"
  rm -rf "$dir/third-party/fmt" && mkdir -p "$dir/third-party/fmt"
  tar -xzf "$tarball" -C "$dir/third-party/fmt" --strip-components=1 "${TAR_X[@]}"
}

apply_pr466() {
  local dir=$1 diff=$2
  (cd "$dir" && git apply --whitespace=nowarn "$diff") ||
    die "PR #466 does not apply to DeepEP $DEEPEP_REF: pick a ref it applies to, or set deepepPr466=false"
  grep -q _setup_device_hca_mapping "$dir/deep_ep/buffer.py" ||
    die "PR #466 applied but deep_ep/buffer.py has no _setup_device_hca_mapping"
  log "PR #466 applied (GPU-to-NIC mapping through DEEP_EP_DEVICE_TO_HCA_MAPPING)"
}

checkout() {
  local dir="$R/DeepEP" head
  checkout_from_store && return 0
  ((!STORE_ONLY)) || die "the store $STORE_URL has no DeepEP $DEEPEP_COMMIT sources (storeOnly): fill it with 'deepep-a4 store fill'"
  need_packages git
  if [[ ! -d $dir/.git ]]; then
    rm -rf "$dir"
    retry 3 net git clone --quiet "$DEEPEP_REPO" "$dir"
  fi
  retry 3 net git -C "$dir" fetch --quiet --tags origin "$DEEPEP_REF"
  git -C "$dir" checkout --quiet --force --detach FETCH_HEAD
  git -C "$dir" clean -fdxq
  head="$(git -C "$dir" rev-parse HEAD)"
  if [[ -n $DEEPEP_COMMIT && $head != "$DEEPEP_COMMIT"* ]]; then
    die "DeepEP $DEEPEP_REF resolved to $head, but the stack pins $DEEPEP_COMMIT: the tag moved or the pin is wrong"
  fi
  log "DeepEP $DEEPEP_REF at $head"
  if is_v2; then
    # The submodule at the commit DeepEP's tree records (a gitlink), never fmt's moving HEAD.
    retry 3 net git -C "$dir" submodule update --init --quiet third-party/fmt
    head="$(git -C "$dir/third-party/fmt" rev-parse HEAD)"
    [[ $head == "$DEEPEP_FMT_COMMIT" ]] || die "DeepEP V2's third-party/fmt is at $head, not the checked $DEEPEP_FMT_COMMIT"
  fi
  if ((DEEPEP_PR466)); then
    # Pinned by commit: a force-push to the PR is refused here instead of built.
    retry 3 net git -C "$dir" fetch --quiet origin "$DEEPEP_PR466_REF"
    head="$(git -C "$dir" rev-parse FETCH_HEAD)"
    [[ $head == "$DEEPEP_PR466_HEAD" ]] ||
      die "PR #466 ($DEEPEP_PR466_REF) is now at $head, not the checked $DEEPEP_PR466_HEAD: review it, then update components/config/upstream.py, or set deepepPr466=false"
    git -C "$dir" diff "$DEEPEP_PR466_BASE" "$DEEPEP_PR466_HEAD" >"$CACHE/deepep-pr466.diff"
    apply_pr466 "$dir" "$CACHE/deepep-pr466.diff"
  fi
}

build() {
  need_packages ninja-build
  checkout
  local dir="$R/DeepEP" want cccl used build_log="$LOGS/deepep-build.log" nccl=""
  want="$(nvshmem_home)"
  if is_v2; then nccl="$(nccl_home)" || die "the PyTorch environment has no $NCCL_WHEEL: DeepEP V2 builds against it"; fi
  cccl="$(cuda_include_flags)"
  (
    cd "$dir" || exit
    export CUDA_HOME PATH="$CUDA_HOME/bin:$PATH" TORCH_CUDA_ARCH_LIST
    if [[ $NVSHMEM_SOURCE == source ]]; then
      export NVSHMEM_DIR="$want"
    else
      # The wheel has only the versioned libnvshmem_host.so.3: NVSHMEM_DIR pointing at it fails to link.
      unset NVSHMEM_DIR
    fi
    [[ -n $cccl ]] && export CPATH="$cccl${CPATH:+:$CPATH}"
    # V2 finds NCCL by EP_NCCL_ROOT_DIR first (deep_ep/utils/find_pkgs.py); setup.py prints "NCCL path".
    if is_v2; then export EP_NCCL_ROOT_DIR="$nccl"; fi
    "$(venv_python)" setup.py build_ext --inplace
  ) 2>&1 | tee "$build_log"
  grep -q "Arch list: $TORCH_CUDA_ARCH_LIST\$" "$build_log" ||
    die "the DeepEP build log ($build_log) does not say 'Arch list: $TORCH_CUDA_ARCH_LIST': kernels for another GPU fail with 'named symbol not found' (troubleshooting T13)"
  used="$(sed -n 's/.*NVSHMEM path: *//p' "$build_log" | tail -n1)"
  [[ -n $used ]] || die "the DeepEP build log ($build_log) does not show the NVSHMEM path it used"
  [[ $used == "$want" || "$(readlink -f "$used")" == "$(readlink -f "$want")" ]] ||
    die "DeepEP was built against NVSHMEM at $used, not $want (troubleshooting T12: internode dispatch would time out)"
  log "DeepEP built: Arch list $TORCH_CUDA_ARCH_LIST, NVSHMEM path $used"
  if is_v2; then
    used="$(sed -n 's/.*NCCL path: *//p' "$build_log" | tail -n1)"
    [[ $used == "$nccl" ]] || die "DeepEP V2 was built against NCCL at '${used:-?}', not the venv's $nccl (NCCL $NCCL_VERSION)"
    log "DeepEP V2 built against NCCL $NCCL_VERSION at $used"
  fi
}

phase_run() {
  local site
  # Object files and git history are not needed to run: the artifact leaves them out.
  with_artifact "$R/DeepEP" build build .git
  if is_v2; then
    ls "$R"/DeepEP/deep_ep/_C*.so >/dev/null 2>&1 || die "$R/DeepEP has no deep_ep/_C*.so: the V2 build did not finish"
  else
    ls "$R"/DeepEP/deep_ep_cpp*.so >/dev/null 2>&1 || die "$R/DeepEP has no deep_ep_cpp*.so: the build did not finish"
  fi
  # R/venv/bin/python imports deep_ep without PYTHONPATH; the checkout keeps tests/ runnable.
  site="$("$(venv_python)" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$R/DeepEP" >"$site/deepep-a4.pth"
}

# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase deepep: DeepEP at a pinned tag or commit (never a moving HEAD), optionally with PR #466
# (explicit GPU-to-NIC mapping), built in place for this GPU (TORCH_CUDA_ARCH_LIST, troubleshooting T13)
# against the NVSHMEM of the nvshmem phase. The build summary's "NVSHMEM path" must name that NVSHMEM:
# a build against PyTorch's bundled copy times out in internode dispatch (troubleshooting T12).

phase_inputs() {
  echo "ref=$DEEPEP_REF commit=$DEEPEP_COMMIT pr466=$DEEPEP_PR466@$DEEPEP_PR466_HEAD arch=$TORCH_CUDA_ARCH_LIST nvshmem=$NVSHMEM_SOURCE"
}

checkout() {
  local dir="$R/DeepEP" head
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
  if ((DEEPEP_PR466)); then
    # Pinned by commit: a force-push to the PR is refused here instead of built.
    retry 3 net git -C "$dir" fetch --quiet origin "$DEEPEP_PR466_REF"
    head="$(git -C "$dir" rev-parse FETCH_HEAD)"
    [[ $head == "$DEEPEP_PR466_HEAD" ]] ||
      die "PR #466 ($DEEPEP_PR466_REF) is now at $head, not the checked $DEEPEP_PR466_HEAD: review it, then update deepep_a4/upstream.py, or set deepepPr466=false"
    git -C "$dir" diff "$DEEPEP_PR466_BASE" "$DEEPEP_PR466_HEAD" >"$CACHE/deepep-pr466.diff"
    git -C "$dir" apply --whitespace=nowarn "$CACHE/deepep-pr466.diff" ||
      die "PR #466 does not apply to DeepEP $DEEPEP_REF: pick a ref it applies to, or set deepepPr466=false"
    grep -q _setup_device_hca_mapping "$dir/deep_ep/buffer.py" ||
      die "PR #466 applied but deep_ep/buffer.py has no _setup_device_hca_mapping"
    log "PR #466 applied (GPU-to-NIC mapping through DEEP_EP_DEVICE_TO_HCA_MAPPING)"
  fi
}

phase_run() {
  need_packages git ninja-build
  checkout
  local dir="$R/DeepEP" want cccl used site build_log="$LOGS/deepep-build.log"
  want="$(nvshmem_home)"
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
    "$(venv_python)" setup.py build_ext --inplace
  ) 2>&1 | tee "$build_log"
  grep -q "Arch list: $TORCH_CUDA_ARCH_LIST\$" "$build_log" ||
    die "the DeepEP build log ($build_log) does not say 'Arch list: $TORCH_CUDA_ARCH_LIST': kernels for another GPU fail with 'named symbol not found' (troubleshooting T13)"
  used="$(sed -n 's/.*NVSHMEM path: *//p' "$build_log" | tail -n1)"
  [[ -n $used ]] || die "the DeepEP build log ($build_log) does not show the NVSHMEM path it used"
  [[ $used == "$want" || "$(readlink -f "$used")" == "$(readlink -f "$want")" ]] ||
    die "DeepEP was built against NVSHMEM at $used, not $want (troubleshooting T12: internode dispatch would time out)"
  log "DeepEP built: Arch list $TORCH_CUDA_ARCH_LIST, NVSHMEM path $used"
  # R/venv/bin/python imports deep_ep without PYTHONPATH; the checkout keeps tests/ runnable.
  site="$("$(venv_python)" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
  echo "$dir" >"$site/deepep-a4.pth"
}

# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase pytorch: PyTorch and NumPy in R/venv, never in the system Python (field report R1 Phase 8 used
# --break-system-packages; field report R0 ended up in ~/.local). With the pip NVSHMEM, the wheel version is a
# constraint, so PyTorch's own dependency cannot silently replace it (this phase depends on nvshmem then).

phase_inputs() {
  echo "torch=$TORCH_VERSION index=$TORCH_INDEX_URL numpy=$NUMPY_SPEC"
  if [[ $NVSHMEM_SOURCE == pip ]]; then echo "constraint=$(nvshmem_wheel)==$NVSHMEM_VERSION"; fi
}

phase_run() {
  ensure_venv
  if [[ $TORCH_VERSION == installed ]]; then
    "$(venv_python)" -c 'import torch; assert torch.cuda.is_available(), "no CUDA device"' ||
      die "$BASE_PYTHON has no working PyTorch with CUDA: the hardware test uses the machine's own"
    phase_note "PyTorch as installed: $("$(venv_python)" -c 'import torch; print(torch.__version__)')"
    return 0
  fi
  local constraints=() got
  if [[ $NVSHMEM_SOURCE == pip ]]; then
    echo "$(nvshmem_wheel)==$NVSHMEM_VERSION" >"$STATE/pip-constraints.txt"
    constraints=(-c "$STATE/pip-constraints.txt")
  fi
  pip_install "${constraints[@]}" --index-url "$TORCH_INDEX_URL" --extra-index-url "$PYPI_INDEX_URL" \
    "torch==$TORCH_VERSION" "$NUMPY_SPEC" ninja packaging
  got="$("$(venv_python)" -c 'import torch; print(torch.__version__)')"
  [[ $got == "$TORCH_VERSION" ]] || die "the venv has torch $got, not $TORCH_VERSION"
  log "PyTorch $got (CUDA $("$(venv_python)" -c 'import torch; print(torch.version.cuda)')) in $VENV"
}

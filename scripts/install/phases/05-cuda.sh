# shellcheck shell=bash disable=SC2154  # the variables come from config.sh and lib.sh
# Phase cuda: the CUDA toolkit from NVIDIA's apt repository (R0, field report R1 Phase 1).

phase_inputs() {
  echo "cuda=$CUDA_VERSION"
}

nvcc_release() {
  [[ -x $CUDA_HOME/bin/nvcc ]] || return 0
  "$CUDA_HOME/bin/nvcc" --version | sed -n 's/.*release \([0-9][0-9.]*\),.*/\1/p'
}

phase_run() {
  if [[ "$(nvcc_release)" == "$CUDA_VERSION" ]]; then
    ln -sfn "cuda-$CUDA_VERSION" "$SYS/usr/local/cuda"
    phase_skip "CUDA $CUDA_VERSION already present ($CUDA_HOME)"
  fi
  ensure_cuda_repo
  apt_get install "cuda-toolkit-${CUDA_VERSION//./-}"
  [[ "$(nvcc_release)" == "$CUDA_VERSION" ]] ||
    die "cuda-toolkit-${CUDA_VERSION//./-} installed but $CUDA_HOME/bin/nvcc does not report release $CUDA_VERSION"
  ln -sfn "cuda-$CUDA_VERSION" "$SYS/usr/local/cuda"
  log "CUDA $CUDA_VERSION at $CUDA_HOME: $("$CUDA_HOME/bin/nvcc" --version | tail -n1)"
}

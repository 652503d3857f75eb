# shellcheck shell=sh
# gIB's libraries, one rule on GKE and GCE: rdma-core is set aside (T16/T17).
gib_kind() {
  case $1 in
    libnccl*) echo nccl ;;
    libibverbs* | librdmacm* | libmlx4* | libmlx5* | libibumad* | libnl-*) echo rdma-core ;;
    *) echo other ;;
  esac
}
# gib_verbs PLUGIN: its verbs needs (ldd -r -v); fails on one this rdma-core lacks.
gib_verbs() {
  o=$(ldd -r -v "$1" 2>&1) || true
  printf '%s\n' "$o" | sed "s|^|[gib] ${1##*/}: |"
  m=$(printf '%s\n' "$o" | grep -E "(IBVERBS|MLX5|RDMACM|IBUMAD)_[A-Z0-9_.]*' not found|undefined symbol: (ibv|mlx5dv|rdma|umad)_" | tr '\n' ' ')
  [ -z "$m" ] || { echo "${1##*/} needs verbs this rdma-core lacks: $m"; return 1; }
}

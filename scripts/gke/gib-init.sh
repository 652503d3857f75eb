#!/bin/sh
# The gIB NCCL plugin DaemonSet's init container (components/gke/gib.py), in Google's plugin image.
#
# Google's NCCL RDMA installer (container-engine-accelerators gpudirect-rdma/nccl-rdma-installer.yaml) runs
# `/scripts/container_entry.sh install`, then copies /var/lib/gib/lib64 into the driver's
# /home/kubernetes/bin/nvidia/lib64 and /var/lib/gib into /home/kubernetes/bin/gib. This does the first and
# the last, and never the copy beside the driver: GKE mounts that folder into every GPU container, and a
# second rdma-core there broke RDMA in pods (docs/troubleshooting.md T16, T17).
#
# Of lib64 only the gIB/NCCL libraries (libnccl*) are copied. The image may carry its own rdma-core
# (libibverbs, librdmacm, libmlx5, libibumad): on the LD_LIBRARY_PATH of a benchmark it would meet the
# node's libibverbs in one process (T17), so it is listed and left out, like anything else not NCCL's;
# the plugin then uses the node's rdma-core, the one that matches its kernel driver. Everything the image
# ships is listed first, so a plugin that fails to load later can be traced to what was left out here.
# POSIX sh: the image's shell is /bin/sh, as Google's manifest uses it.
set -eu
SRC="${GIB_SRC:-/var/lib/gib}"
DST="${GIB_DST:?GIB_DST names the mounted host folder}"
IMAGE="${GIB_IMAGE:?GIB_IMAGE names the plugin image}"
ENTRY="${GIB_ENTRY:-/scripts/container_entry.sh}"
VERSION_FILE="${GIB_VERSION_FILE:?GIB_VERSION_FILE names the version file the runner reads}"

# @gib-libs.sh
say() { echo "[gib] $*"; }
fail() {
  echo "[gib] error: $*" >&2
  exit 1
}

"$ENTRY" install || fail "$ENTRY install failed (exit $?) in $IMAGE: see above; ncclGib=false turns gIB off"
[ -d "$SRC/lib64" ] || fail "$SRC/lib64 is missing: $IMAGE is not laid out as Google's installer expects"
say "$IMAGE ships, under $SRC:"
ls -lR "$SRC"
found=0
for f in "$SRC"/lib64/libnccl-net*; do
  [ -e "$f" ] && found=1
done
[ "$found" = 1 ] || fail "no libnccl-net* in $SRC/lib64: $IMAGE holds no NCCL net plugin to install"

stage="$DST/.incoming"
rm -rf "$stage"
mkdir -p "$stage/lib64"
for f in "$SRC"/lib64/*; do
  name=${f##*/}
  case $(gib_kind "$name") in
    nccl) cp -RP "$f" "$stage/lib64/" ;;
    rdma-core) say "left out lib64/$name: rdma-core; the node's own stays the only one a process loads (T16/T17)" ;;
    *) say "left out lib64/$name: not a gIB/NCCL library" ;;
  esac
done
for d in "$SRC"/*; do
  [ "${d##*/}" = lib64 ] || cp -RP "$d" "$stage/"
done
echo "$IMAGE" >"$stage/$VERSION_FILE"
# The previous install goes as a whole: no file of an older plugin stays behind.
for old in "$DST"/*; do
  [ -e "$old" ] && rm -rf "$old"
done
mv "$stage"/* "$DST"/
rmdir "$stage"
names=""
for f in "$DST"/lib64/*; do names="$names ${f##*/}"; done
say "installed $IMAGE into the host's gIB folder; lib64:$names"

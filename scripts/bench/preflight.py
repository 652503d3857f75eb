"""Before a test that uses RDMA: this process sees the node's HCAs and GPUs (troubleshooting T21).

A pod can start with no usable HCA and still run for minutes before NVSHMEM fails deep inside DeepEP:
libibverbs loads a provider only if /etc/libibverbs.d names it, and itself needs libnl-3 and libnl-route-3,
which a slim image lacks. So the runner asks the same libraries the ranks will use, in a child with the
env file's environment (LD_LIBRARY_PATH is read at process start):

    python preflight.py --gpus 8 --hcas 8 --prefix mlx5    exit 0 and one JSON line, or exit 1 and the reason

`ibv_get_device_list` lists only devices whose provider loaded, so the count proves the provider works.
Stdlib only: shipped next to run_bench.py.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

Loader = Callable[[str], Any]
# Tests whose traffic goes through the NICs (NVSHMEM IBGDA, RDMA, V2's NCCL Gin).
RDMA_TESTS = ("low-latency", "internode", "elastic")


def hca_names(load: Loader = ctypes.CDLL) -> list[str]:
    """The RDMA devices libibverbs lists (OSError when the library or one it needs cannot load)."""
    verbs = load("libibverbs.so.1")
    verbs.ibv_get_device_list.restype = ctypes.POINTER(ctypes.c_void_p)
    verbs.ibv_get_device_name.restype = ctypes.c_char_p
    count = ctypes.c_int(0)
    devices = verbs.ibv_get_device_list(ctypes.byref(count))
    if not devices:
        return []
    try:
        return [verbs.ibv_get_device_name(ctypes.c_void_p(devices[i])).decode() for i in range(count.value)]
    finally:
        verbs.ibv_free_device_list(devices)


def gpu_count(load: Loader = ctypes.CDLL) -> int:
    """CUDA devices the driver API reports (0 when cuInit fails)."""
    cuda = load("libcuda.so.1")
    if cuda.cuInit(0) != 0:
        return 0
    count = ctypes.c_int(0)
    if cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return 0
    return count.value


def check(gpus: int, hcas: int, prefix: str, load: Loader = ctypes.CDLL) -> tuple[dict[str, Any], str]:
    """(what was seen, "" or the reason the test cannot use RDMA here)."""
    seen: dict[str, Any] = {"gpus": None, "hcas": None}
    try:
        names = hca_names(load)
    except OSError as err:
        return seen, (
            f"libibverbs cannot load here ({err}): the image needs libnl-3.so.200 and libnl-route-3.so.200 "
            "(the installer ships them in its rdma-core folder on LD_LIBRARY_PATH)"
        )
    seen["hcas"] = names
    if len(names) < hcas:
        return seen, (
            f"libibverbs lists {len(names)} RDMA device(s) {names}, the machine type has {hcas}: the mlx5 "
            "provider did not load (is /etc/libibverbs.d/mlx5.driver mounted? are the NICs attached?)"
        )
    wrong = [n for n in names if prefix and not n.startswith(prefix)]
    if wrong:
        return seen, f"RDMA devices {wrong} do not start with {prefix} (NVSHMEM_HCA_PREFIX): DOCA-OFED missing?"
    try:
        seen["gpus"] = gpu_count(load)
    except OSError as err:
        return seen, f"libcuda.so.1 cannot load here ({err}): the pod does not see the node's driver"
    if seen["gpus"] != gpus:
        return seen, f"CUDA sees {seen['gpus']} GPU(s), the test needs {gpus}: is nvidia.com/gpu requested?"
    return seen, ""


def device_problem(python: str, gpus: int, hcas: int, prefix: str, env: dict[str, str]) -> tuple[str, str]:
    """(what the child saw, "" or the reason): this file run by `python` in the tests' environment."""
    cmd = [python, str(Path(__file__).resolve()), "--gpus", str(gpus), "--hcas", str(hcas), "--prefix", prefix]
    try:
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        return "", f"the device check could not run: {err}"
    seen = proc.stdout.strip() or proc.stderr.strip()
    if proc.returncode == 0:
        return seen, ""
    return seen, proc.stderr.strip().removeprefix("preflight: ") or f"the device check failed (exit {proc.returncode})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--gpus", type=int, required=True)
    ap.add_argument("--hcas", type=int, required=True)
    ap.add_argument("--prefix", default="")
    args = ap.parse_args(argv)
    seen, problem = check(args.gpus, args.hcas, args.prefix)
    print(json.dumps({**seen, "ok": not problem, "problem": problem}, sort_keys=True))
    if problem:
        print(f"preflight: {problem}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

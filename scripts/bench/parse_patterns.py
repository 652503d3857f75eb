"""What DeepEP's tests and the runner print: one regular expression per kind of line, units, and
the known failures with their fixes (docs/troubleshooting.md). Stdlib only: shipped next to run_bench.py."""

from __future__ import annotations

import re
from collections.abc import Iterable

TESTS = ("nccl", "intranode", "low-latency", "internode", "elastic")
DEEPEP_TESTS = ("intranode", "low-latency", "internode", "elastic")  # elastic: DeepEP V2 (parse_elastic.py)

_N = r"[-+]?(?:\d+(?:\.\d+)?(?:[eE][-+]?\d+)?|inf|nan)"
_TAG_SPLIT = re.compile(r"(?=\[(?:rank \d+|config|layout|testing|tuning|nccl)\] )")
_TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d) ")

RE_CONFIG = re.compile(r"^\[config\] (?P<body>\w+=\d+(?:, \w+=\d+)*)$")
RE_LAYOUT = re.compile(rf"^\[layout\] Kernel performance: (?P<ms>{_N}) ms$")
RE_CASE = re.compile(
    r"^\[testing\] Running with (?P<dtype>BF16|FP8), (?P<topk>with|without) top-k "
    r"\(async=(?P<async>True|False), previous=(?P<previous>True|False)\) \.\.\.(?P<rest>.*)$"
)
# Intranode: "[tuning] SMs 24, NVL chunk 4: 287.42 GB/s (NVL), avg_t: 405.99 us" (chunk may be "default").
# From 1.2.1+29d31c0 (the default ref) the sweep line drops "avg_t: ": "... 287.42 GB/s (NVL), 405.99 us".
RE_INTRA_SWEEP = re.compile(
    rf"^\[tuning\] SMs (?P<sms>\d+), NVL chunk (?P<nvl>\d+|default): (?P<nvl_bw>{_N}) GB/s \(NVL\), "
    rf"(?:avg_t: )?(?P<t>{_N}) us$"
)
RE_INTRA_BEST_DISPATCH = re.compile(
    rf"^\[tuning\] Best dispatch \((?P<dtype>FP8|BF16)\): SMs (?P<sms>\d+), NVL chunk (?P<nvl>\d+), "
    rf"(?P<nvl_bw>{_N}) GB/s \(NVL\), t: (?P<t>{_N}) us$"
)
RE_INTRA_BEST_COMBINE = re.compile(
    rf"^\[tuning\] Best combine: SMs (?P<sms>\d+), NVL chunk (?P<nvl>\d+): (?P<nvl_bw>{_N}) GB/s \(NVL\), "
    rf"t: (?P<t>{_N}) us$"
)
# Internode, v1.2.1: "SMs S, NVL chunk N, RDMA chunk R, transmit: T us, notify: U us, BW: A GB/s (RDMA), B GB/s (NVL)";
# older builds (field report R2's sample) and 1.2.1+29d31c0 again: "SMs S, NVL chunk N, RDMA chunk R: U + T us,
# A GB/s (RDMA), B GB/s (NVL)" and, for the best combine, "RDMA chunk R, U + T us, ...".
_INTER_BODY = (
    rf"SMs (?P<sms>\d+), NVL chunk (?P<nvl>\d+), RDMA chunk (?P<rdma>\d+)"
    rf"(?:, transmit: (?P<t>{_N}) us, notify: (?P<notify>{_N}) us, BW: "
    rf"|[:,] (?P<notify_old>{_N}) \+ (?P<t_old>{_N}) us, )"
    rf"(?P<rdma_bw>{_N}) GB/s \(RDMA\), (?P<nvl_bw>{_N}) GB/s \(NVL\)$"
)
RE_INTER_SWEEP = re.compile(r"^\[tuning\] " + _INTER_BODY)
RE_INTER_BEST = re.compile(r"^\[tuning\] Best (?P<op>dispatch|combine)(?: \((?P<dtype>FP8|BF16)\))?: " + _INTER_BODY)


def _rank_line(what: str) -> re.Pattern[str]:
    """A low-latency test's per-rank line: `[rank R] <what>`."""
    return re.compile(rf"^\[rank (?P<rank>\d+)\] {what}$")


def _dispatch_combine(what: str, body: str) -> re.Pattern[str]:
    """`[rank R] Dispatch <what>: <body> | Combine <what>: <body>`, the groups of each side named d_* and c_*."""
    side = {op: body.replace("(?P<", f"(?P<{op}_") for op in ("d", "c")}
    return _rank_line(rf"Dispatch {what}: {side['d']} \| Combine {what}: {side['c']}")


RE_LL_BOTH = _rank_line(
    rf"Dispatch \+ combine bandwidth: (?P<bw>{_N}) GB/s, avg_t=(?P<avg>{_N}) us, "
    rf"min_t=(?P<min>{_N}) us, max_t=(?P<max>{_N}) us"
)
RE_LL_SPLIT = _dispatch_combine("bandwidth", rf"(?P<bw>{_N}) GB/s, avg_t=(?P<t>{_N}) us")
RE_LL_SENDRECV = _dispatch_combine("send/recv time", rf"(?P<send>{_N}) \+ (?P<recv>{_N}) us")
RE_ALLOC = re.compile(rf"^Allocating buffer size: (?P<mb>{_N}) MB \.\.\.$")
RE_SEED = re.compile(r"^Testing with seed (?P<seed>\d+) \.\.\.$")
RE_REF_HASH = re.compile(r"^ref_hash=-?\d+$")
# This runner's NCCL all-to-all check (run_bench.py prints exactly these).
RE_NCCL = re.compile(
    rf"^\[nccl\] all-to-all: ranks (?P<ranks>\d+), size (?P<bytes>\d+) B per rank, avg_t: (?P<t>{_N}) us, "
    rf"algbw: (?P<algbw>{_N}) GB/s, busbw: (?P<busbw>{_N}) GB/s$"
)
RE_NCCL_CHECK = re.compile(r"^\[nccl\] all-to-all check: (?P<result>passed|FAILED.*)$")
RE_NCCL_INFO = re.compile(r"^\[nccl\] (?:backend|init|env)\b.*$")
RE_RUNNER = re.compile(r"^\[runner\] (?P<what>begin|end|result|info|env|error) ?(?P<body>.*)$")
RE_KNOWN_TAG = re.compile(r"^\[(?:rank \d+|config|layout|testing|tuning|nccl)\]")

# Lines that mean the run broke, whatever else it printed.
RE_ERROR = re.compile(
    r"(?:^Traceback \(most recent call last\):"
    r"|^(?:[\w.]+\.)?\w*(?:Error|Exception)(?::|$)"
    r"|DeepEP error:|CUDA error:|NCCL error|terminate called after throwing"
    r"|process \d+ terminated with (?:exit code|signal)"
    r"|Segmentation fault|core dumped|Killed$)"
)
RE_WARNING = re.compile(r"\bWARN(?:ING)?\b|\bWarning\b|init failed for transport")

UNITS = {
    "nvl_bw": "GB/s",
    "rdma_bw": "GB/s",
    "bw": "GB/s",
    "algbw": "GB/s",
    "busbw": "GB/s",
    "time": "us",
    "notify": "us",
    "avg_t": "us",
    "min_t": "us",
    "max_t": "us",
    "send": "us",
    "recv": "us",
    "kernel": "ms",
    "buffer": "MB",
    "size": "B",
    # DeepEP V2's elastic test (parse_elastic.py): scale-out / scale-up bandwidth, bytes, the copy/reduce epilogue.
    "so_bw": "GB/s",
    "su_bw": "GB/s",
    "bytes": "B",
    "post_bw": "GB/s",
    "post_time": "us",
}

# Failures the field reports hit, by the test that printed them and what its log shows, with the fix that
# worked there. A failed run whose log matches gets the fix added to its reasons (a passed run is never
# failed by these). `tests` None: the hint applies whatever the test; otherwise only to those tests, so a
# message two tests share (a dispatch timeout) gets the fix of the test that printed it.
ANY_TEST = None
KNOWN_FAILURES: tuple[tuple[tuple[str, ...] | None, re.Pattern[str], str], ...] = (
    (
        ("internode",),
        re.compile(r"timeout \(dispatch CPU\)|num_recv_tokens: -1"),
        "internode dispatch timed out: DeepEP was built against PyTorch's NVSHMEM, not the IBGDA build "
        "(troubleshooting T12): nvshmemSource=source, and the build log must say 'NVSHMEM path: <root>/nvshmem'",
    ),
    (
        # DeepEP's intranode dispatch prints "CPU recv timeout" (csrc/deep_ep.cpp, v1.2.1 and 29d31c0); "timeout
        # (dispatch CPU)" is its internode message, matched here too in case a build reuses it.
        ("intranode",),
        re.compile(r"CPU recv timeout|timeout \(dispatch CPU\)"),
        "intranode dispatch timed out: a rank never reached the NVLink barrier within DeepEP's CPU timeout "
        "(100 s). No NVSHMEM or NIC is involved here: look for an earlier error of another rank, check that no "
        "other process holds the GPUs (nvidia-smi) and that every GPU pair shows NV# in `nvidia-smi topo -m` "
        "(docs/benchmarks.md, known failures)",
    ),
    (
        ANY_TEST,
        re.compile(r"NVSHMEM device library version does not match"),
        "two NVSHMEM copies loaded (troubleshooting T03): run with the installer's env file, which preloads "
        "the source build's libnvshmem_host.so.3 over PyTorch's",
    ),
    (
        ANY_TEST,
        re.compile(r"named symbol not found"),
        "DeepEP was compiled for another GPU arch (troubleshooting T13): rebuild with TORCH_CUDA_ARCH_LIST=10.0 "
        "on B200 (the installer's deepep phase does: run.sh --redo deepep)",
    ),
    (
        ANY_TEST,
        re.compile(r"IBVERBS_PRIVATE_\d+' not found|IBVERBS_PRIVATE_\d+ not found"),
        "libibverbs and libmlx5 come from different rdma-core releases (troubleshooting T16): use the env file's "
        "RDMAV_DRIVERS/LD_LIBRARY_PATH from one install, never the image's and DOCA's mixed",
    ),
    (
        ANY_TEST,
        re.compile(r"Failed to initialize any NET plugin|NET/\w+ : .*mismatch|shim.*mismatch", re.IGNORECASE),
        "NCCL found no usable network plugin (troubleshooting T16): on GKE the gIB plugin must match NCCL; without it "
        "unset NCCL_NET and let NCCL use IB verbs",
    ),
    (
        ANY_TEST,
        re.compile(r"couldn't load driver 'libmlx5|unable to load driver.*mlx5", re.IGNORECASE),
        "the mlx5 verbs provider did not load (troubleshooting T16): the env file's RDMAV_DRIVERS must point at the "
        "provider of the same rdma-core as libibverbs",
    ),
    (
        # NCCL 2.32's socket RMA backend (libnccl.so.2 of nvidia-nccl-cu13 2.32.3 prints exactly this), the Gin
        # proxy NCCL falls back to where no RDMA NIC is (issue 36: then a SIGSEGV in ElasticBuffer on H100).
        ("elastic",),
        re.compile(r"rma_socket requires GDRCopy"),
        "NCCL found no RDMA NIC and took its socket RMA/Gin proxy, which needs GDRCopy, absent here: on A4 the "
        "test's pod must see the NICs; on a machine without NICs see docs/benchmarks.md, 'DeepEP V2' "
        "(EP_DISABLE_GIN=1, or NCCL_GDRCOPY_ENABLE=1 with NCCL's DMA-BUF backend)",
    ),
    (
        # deep_ep csrc/kernels/backend/nccl.cu (dd758ca): the assertion when ncclCommQueryProperties has no Gin type.
        ("elastic",),
        re.compile(r"NCCL GIN is unavailable"),
        "NCCL offers no Gin transport to DeepEP V2 (DeepEP issue #628): on A4 the pod must see the RDMA NICs and "
        "NCCL must load its IB transport (not gIB's NET plugin alone); on one node EP_DISABLE_GIN=1 skips Gin",
    ),
)
HINT_PREFIX = "known failure: "


def known_failure_hints(lines: Iterable[str], test: str | None = None) -> list[str]:
    """The fix of every known failure the lines of `test` show, each once, in table order. A hint kept for
    some tests is given only when `test` is one of them (never to a log whose test is unknown)."""
    text = "\n".join(lines)
    return [
        HINT_PREFIX + fix
        for tests, pattern, fix in KNOWN_FAILURES
        if (tests is None or test in tests) and pattern.search(text)
    ]


# NVSHMEM names the transport it could not start: "...nvshmemi_transport_init:282: init failed for transport: IBGDA".
RE_TRANSPORT_FAILED = re.compile(r"init failed for transport: (?P<transport>\w+)")

# The lines below are NVSHMEM's own (NVIDIA/nvshmem src/modules/transport/ibgda/ibgda.cpp, nvshmemt_init and
# ibgda_check_gpu_mapping_nic_uar at the 3.5 head 2d7d25f; ibgda_alloc_and_map_qp_uar in v3.4.5-0). Note that
# NVSHMEM_IBGDA_NIC_HANDLER=gpu is not enforced: "gpu" and "auto" both fall back to a CPU handler when the mapping
# fails.
# With NVSHMEM_DEBUG=INFO the IBGDA transport says which path it took: "NIC handler will be GPU ..." (the GPU
# rings the NIC's doorbell itself) or "NIC handler will be CPU with host memory backend" (CPU-assisted IBGDA: the
# GPU writes the work requests, a CPU thread rings the doorbell), e.g. when the GPU may not map the NIC
# ("cudaHostRegister with IoMemory failed"; troubleshooting T09).
RE_IBGDA_HANDLER = re.compile(r"NIC handler will be (?P<handler>[^.\n]*)")
# Where NVSHMEM put the NIC's control buffers (INFO): "NIC buffer will be on GPU memory." or "... on host memory."
# (host memory when the NIC cannot register GPU memory: no dma-buf UMEM, no nvidia-peermem).
RE_NIC_BUF = re.compile(r"NIC buffer will be on (?P<where>GPU|host) memory")
# Printed whatever NVSHMEM_DEBUG says (NVSHMEMI_WARN_PRINT: "WARN: ..." on stdout) when the GPU cannot map the NIC's
# doorbell and NVSHMEM takes the CPU handler instead: 3.4.5 "ibgda_nic_mem_gpu_map failed. We may need to use the
# CPU fallback path.", 3.5 also "ibgda_alloc_and_map_qp_uar with GPU as handler failed. We may need to enter the
# CPU fallback path.", after "cudaHostRegister with IoMemory failed with error=N. We may need to use a fallback
# path."
RE_CPU_FALLBACK = re.compile(
    r"We may need to (?:use|enter) the CPU fallback path|cudaHostRegister with IoMemory failed"
)

"""DeepEP's benchmark shapes, checked against the asserts of DeepEP's own tests and kernels at the pinned commit:
a shape they refuse is refused at plan time, in one line, instead of on paid A4s.
"""

from __future__ import annotations

from typing import Any

from components.config.keys import Problem

# -- DeepEP's benchmark shapes ------------------------------------------------------------------------
# deepseek-ai/DeepEP at the pinned commit (components/config/upstream.py DEEPEP_NVSHMEM35_FIXES, 29d31c0):
# - tests/test_intranode.py, test_low_latency.py: `assert num_experts % num_ranks == 0` (rules.py), one node;
# - tests/test_internode.py: `assert num_experts % num_ranks == 0 and num_local_ranks == 8`, num_ranks = 8 * nodes;
# - csrc/kernels/launch.cuh SWITCH_RANKS: intranode runs 2, 4 or 8 ranks; SWITCH_RDMA_RANKS: internode runs 2, 3,
#   4, 6, 8, 12, 16, 18 or 20 nodes; SWITCH_HIDDEN: the low-latency kernels take only these hidden sizes;
# - csrc/kernels/internode_ll.cu: `kNumMaxTopK = 11` and `EP_HOST_ASSERT(num_topk <= kNumMaxTopK)` (low latency);
#   intranode.cu, internode.cu: `EP_DEVICE_ASSERT(num_topk <= 32)`;
# - csrc/deep_ep.cpp: `(hidden * x.element_size()) % sizeof(int4) == 0` (the tests also dispatch FP8, one byte
#   per value: hidden a multiple of 16); low latency `(num_ranks * num_max_dispatch_tokens_per_rank) % 4 == 0`
#   ("TMA requires the number of tokens to be multiple of 4"); configs.cuh NUM_MAX_LOCAL_EXPERTS 1024.
DEEPEP_INTRANODE_RANKS = (2, 4, 8)
DEEPEP_INTERNODE_NODES = (2, 3, 4, 6, 8, 12, 16, 18, 20)
DEEPEP_INTERNODE_LOCAL_RANKS = 8
DEEPEP_LL_HIDDEN = (2048, 2560, 3072, 4096, 5120, 6144, 7168, 8192)
DEEPEP_LL_MAX_TOPK = 11
DEEPEP_MAX_TOPK = 32
DEEPEP_MAX_LOCAL_EXPERTS = 1024


def _known(values: tuple[int, ...]) -> str:
    return ", ".join(map(str, values))


def check_bench_shapes(v: dict[str, Any], gpus: int, problems: list[Problem]) -> None:
    """The shapes DeepEP's tests and kernels assert on, for the tests the stack runs."""
    tests = v["benchmarks"]
    seen: set[str] = set()
    for test in tests:
        if test in seen:
            problems.append(Problem("benchmarks", list(tests), f"lists {test} twice: name each test once"))
        seen.add(test)
    procs, hidden, topk, nodes = v["benchProcesses"], v["benchHidden"], v["benchTopk"], v["nodeCount"]
    if not 1 <= procs <= gpus or min(hidden, topk, nodes) < 1:
        return  # rules.check_benchmarks and check_capacity say so
    intranode_ranks_wrong = "intranode" in seen and procs not in DEEPEP_INTRANODE_RANKS
    if intranode_ranks_wrong:
        problems.append(
            Problem(
                "benchProcesses",
                procs,
                f"DeepEP's intranode kernels run {_known(DEEPEP_INTRANODE_RANKS)} ranks (launch.cuh SWITCH_RANKS)",
            )
        )
    if "internode" in seen and nodes >= 2:
        if procs != DEEPEP_INTERNODE_LOCAL_RANKS:
            if not intranode_ranks_wrong:  # one line for one value
                problems.append(
                    Problem("benchProcesses", procs, "DeepEP's test_internode.py asserts 8 processes per node: use 8")
                )
        elif nodes not in DEEPEP_INTERNODE_NODES:
            problems.append(
                Problem(
                    "nodeCount",
                    nodes,
                    f"DeepEP's internode kernels run {_known(DEEPEP_INTERNODE_NODES)} nodes (launch.cuh "
                    "SWITCH_RDMA_RANKS): use one of them, or drop internode from benchmarks",
                )
            )
        elif v["internodeExperts"] >= 1 and v["internodeExperts"] % (procs * nodes):
            problems.append(
                Problem(
                    "internodeExperts",
                    v["internodeExperts"],
                    f"test_internode.py asserts experts % ranks == 0: a multiple of {procs * nodes} ({nodes} nodes x "
                    f"{procs} processes)",
                )
            )
    if "low-latency" in seen and hidden not in DEEPEP_LL_HIDDEN:
        problems.append(
            Problem(
                "benchHidden",
                hidden,
                f"DeepEP's low-latency kernels take only hidden sizes {_known(DEEPEP_LL_HIDDEN)} (launch.cuh "
                "SWITCH_HIDDEN)",
            )
        )
    elif seen & {"intranode", "internode"} and hidden % 16:
        problems.append(
            Problem("benchHidden", hidden, "must be a multiple of 16 (DeepEP moves rows in 16-byte int4, FP8 too)")
        )
    limit = DEEPEP_LL_MAX_TOPK if "low-latency" in seen else DEEPEP_MAX_TOPK
    if topk > limit:
        which = "low-latency kernels (kNumMaxTopK)" if limit == DEEPEP_LL_MAX_TOPK else "kernels"
        problems.append(Problem("benchTopk", topk, f"DeepEP's {which} take at most {limit}: use 1-{limit}"))
    else:
        for test, key in (("intranode", "intranodeExperts"), ("low-latency", "lowLatencyExperts")):
            if test in seen and 1 <= v[key] < topk:
                problems.append(
                    Problem(key, v[key], f"must be at least benchTopk ({topk}): each token picks {topk} experts")
                )
    if "low-latency" in seen and v["lowLatencyTokens"] >= 1 and (procs * v["lowLatencyTokens"]) % 4:
        problems.append(
            Problem(
                "lowLatencyTokens",
                v["lowLatencyTokens"],
                f"DeepEP's low-latency dispatch needs ranks x tokens a multiple of 4 (TMA); with {procs} processes "
                "use a multiple of 4",
            )
        )
    for test, key in (("intranode", "intranodeExperts"), ("low-latency", "lowLatencyExperts")):
        if test in seen and v[key] // procs > DEEPEP_MAX_LOCAL_EXPERTS:
            problems.append(Problem(key, v[key], f"DeepEP takes at most {DEEPEP_MAX_LOCAL_EXPERTS} experts per rank"))

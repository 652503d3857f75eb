"""The NCCL all-to-all check the runner starts before DeepEP: a broken fabric shows here first. Its
worker imports torch in its own process; the rest is stdlib. Shipped next to run_bench.py."""

from __future__ import annotations

import argparse

# -- the NCCL check (worker side: imports torch) -----------------------------------------------------


def nccl_worker(local_rank: int, args: argparse.Namespace) -> None:  # pragma: no cover - needs GPUs
    import torch  # pyright: ignore[reportMissingImports]
    import torch.distributed as dist  # pyright: ignore[reportMissingImports]

    procs, nodes, node_rank = args.processes, args.nodes, args.node_rank
    world, rank = nodes * procs, node_rank * procs + local_rank
    torch.cuda.set_device(local_rank)
    device = torch.device(f"cuda:{local_rank}")
    dist.init_process_group(
        "nccl",
        init_method=f"tcp://{args.master_addr}:{args.master_port}",
        world_size=world,
        rank=rank,
        device_id=device,
    )
    if rank == 0:
        nccl = ".".join(map(str, torch.cuda.nccl.version()))
        print(f"[nccl] init: world {world}, nodes {nodes}, torch {torch.__version__}, NCCL {nccl}", flush=True)

    # Data check: chunk j of rank r carries r * 1000 + j; after the exchange chunk i must carry i * 1000 + r.
    chunk = 1024
    send = (torch.arange(world, device=device, dtype=torch.float32) + rank * 1000).repeat_interleave(chunk)
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send)
    want = (torch.arange(world, device=device, dtype=torch.float32) * 1000 + rank).repeat_interleave(chunk)
    ok = torch.tensor([1 if torch.equal(recv, want) else 0], device=device)
    dist.all_reduce(ok, op=dist.ReduceOp.MIN)
    if rank == 0:
        print(f"[nccl] all-to-all check: {'passed' if ok.item() == 1 else 'FAILED (wrong data received)'}", flush=True)

    for mb in args.nccl_sizes_mb:
        size = (int(mb * 2**20) // world) * world
        send_b = torch.ones(size, dtype=torch.uint8, device=device)
        recv_b = torch.empty_like(send_b)
        for _ in range(5):
            dist.all_to_all_single(recv_b, send_b)
        torch.cuda.synchronize()
        dist.barrier()
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        iters = args.nccl_iters
        start.record()
        for _ in range(iters):
            dist.all_to_all_single(recv_b, send_b)
        stop.record()
        torch.cuda.synchronize()
        t = torch.tensor([start.elapsed_time(stop) / 1e3 / iters], device=device, dtype=torch.float64)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)  # the slowest rank sets the pace
        if rank == 0:
            sec = t.item()
            algbw = size / sec / 1e9
            busbw = algbw * (world - 1) / world
            print(
                f"[nccl] all-to-all: ranks {world}, size {size} B per rank, avg_t: {sec * 1e6:.2f} us, "
                f"algbw: {algbw:.2f} GB/s, busbw: {busbw:.2f} GB/s",
                flush=True,
            )
    dist.barrier()
    dist.destroy_process_group()


def nccl_worker_main(args: argparse.Namespace) -> int:  # pragma: no cover - needs GPUs
    import torch.multiprocessing as mp  # pyright: ignore[reportMissingImports]

    mp.spawn(nccl_worker, args=(args,), nprocs=args.processes)
    return 0

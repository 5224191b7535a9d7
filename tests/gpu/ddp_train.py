#!/usr/bin/env python3
"""A plain PyTorch DDP training loop for tests/gpu/run.sh's ddp section:
one process per GPU (torchrun, or --spawn for torch.multiprocessing.spawn),
NCCL, AdamW, no profiling code at all: gprofd must find the steps (the
python/ helper's optimizer hook, or Kineto's) and the ranks by itself.
With --fsdp the same model is sharded instead (FSDP2,
torch.distributed.fsdp.fully_shard on each Linear and on the whole):
all-gathers before each layer's forward and backward, reduce-scatters of
its gradients, overlapped with compute: more and smaller collectives.

Runs until the file --stop exists (checked by every rank together, an
all-reduce every 20 steps, so all ranks stop on the same step) or
--max-s seconds. With --slow-rank R, rank R sleeps --slow-ms in each step
before its backward pass: a straggler, which the other rank sees as a
long NCCL all-reduce wait. At the end each rank prints one JSON line:
rank, steps run, the steps the agent counted (gprof_agent, when loaded).
With --block-times F each rank writes the wall-clock time at the end of
every 20 steps (after the stop check's all-reduce and .item(): the GPU has
caught up there) to F (%r replaced by the rank), for the capture's cost.
"""
import argparse
import json
import os
import time

import torch
import torch.distributed as dist


def train(rank, world, a):
    local = int(os.environ.get("LOCAL_RANK", rank))
    torch.cuda.set_device(local)
    dev = torch.device("cuda", local)
    if not dist.is_initialized():
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=dev)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[m for _ in range(4) for m in
                                  (torch.nn.Linear(a.width, a.width), torch.nn.GELU())],
                                torch.nn.Linear(a.width, 10)).to(dev)
    if a.fsdp:
        from torch.distributed.fsdp import fully_shard
        for m in model:
            if isinstance(m, torch.nn.Linear):
                fully_shard(m)
        ddp = fully_shard(model)
    else:
        ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local])
    opt = torch.optim.AdamW(ddp.parameters(), lr=1e-4)
    x = torch.randn(a.batch, a.width, device=dev)
    y = torch.randint(0, 10, (a.batch,), device=dev)
    flag = torch.zeros(1, device=dev)
    slow = a.slow_rank == rank
    t0 = time.time()
    n = 0
    blocks = []
    while True:
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.cross_entropy(ddp(x), y)
        if slow:
            torch.cuda.synchronize()
            time.sleep(a.slow_ms / 1000)
        loss.backward()
        opt.step()
        n += 1
        if n % 20 == 0:
            flag.fill_(1.0 if os.path.exists(a.stop) or time.time() - t0 > a.max_s else 0.0)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            stop = flag.item() > 0
            blocks.append((n, time.time()))  # a synchronised point: the GPU caught up
            if stop:
                break
    torch.cuda.synchronize()
    counted = None
    try:
        import gprof_agent
        counted = gprof_agent.steps() if gprof_agent.loaded() else None
    except ImportError:
        pass
    print(json.dumps({"rank": rank, "pid": os.getpid(), "fsdp": a.fsdp, "steps": n, "agent_steps": counted,
                      "seconds": round(time.time() - t0, 1)}), flush=True)
    if a.block_times:  # every 20 steps' end, wall clock (tests/gpu/ddp_cost.py)
        with open(a.block_times.replace("%r", str(rank)), "w") as f:
            json.dump({"rank": rank, "blocks": blocks}, f)
    dist.destroy_process_group()


def spawned(rank, world, a):
    os.environ.update(RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(world))
    train(rank, world, a)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--stop", required=True)
    ap.add_argument("--max-s", type=float, default=120)
    ap.add_argument("--width", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--slow-rank", type=int, default=-1)
    ap.add_argument("--slow-ms", type=float, default=4)
    ap.add_argument("--spawn", type=int, default=0, help="mp.spawn this many ranks")
    ap.add_argument("--fsdp", action="store_true", help="shard with FSDP2 instead of DDP")
    ap.add_argument("--block-times", default="",
                    help="write each 20 steps' end time here (%%r: the rank)")
    a = ap.parse_args()
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    if a.spawn:
        os.environ.setdefault("MASTER_PORT", "29533")
        import torch.multiprocessing as mp
        mp.spawn(spawned, args=(a.spawn, a), nprocs=a.spawn)
    else:
        train(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), a)


if __name__ == "__main__":
    main()

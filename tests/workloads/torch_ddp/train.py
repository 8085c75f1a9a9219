#!/usr/bin/env python3
"""A small PyTorch DDP training job (gloo, CPU tensors) that checkpoints through python/ft:
what a user's program looks like, for the end-to-end tests. Deterministic: the model is
seeded, each step's batch is a function of (step, rank), and the ranks' final bytes are the
same for every run of the same --steps, interrupted and restored or not.

    launch.py --nodes 2 --ranks-per-node 1 -- /usr/bin/python3 train.py --steps 30

Run under LD_PRELOAD=libft.so (torchrun's environment from the launcher: RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT); FT_CKPT_EVERY makes periodic saves. Each rank prints:

    torch_ddp rank=<r> restored step=<s>            (or "restored none": from scratch)
    torch_ddp rank=<r> step=<n> loss=<x>            after each completed optimizer step
    torch_ddp rank=<r> final step=<n> checksum=<sha256 of every parameter's and optimizer
                                                     state tensor's bytes, in state-dict order>

--crash-at-step S --crash-rank R: rank R SIGKILLs itself right after step S is complete
(ft.step_done(S) returned), as a crash would.
"""

import argparse
import hashlib
import os
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, required=True, help="optimizer steps in all")
    p.add_argument("--hidden", type=int, default=128, help="hidden width of the MLP")
    p.add_argument("--step-ms", type=float, default=0, help="host work per step (sleep), milliseconds")
    p.add_argument("--crash-at-step", type=int, default=0, help="SIGKILL --crash-rank after this step")
    p.add_argument("--crash-rank", type=int, default=-1)
    p.add_argument("--python-dir", default=os.path.join(HERE, "..", "..", "..", "python"),
                   help="where the ft package is (default: the source tree's python/)")
    return p.parse_args()


def say(rank, text):
    print("torch_ddp rank=%d %s" % (rank, text), flush=True)


def checksum(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return h.hexdigest()


def main():
    args = parse_args()
    sys.path.insert(0, os.path.abspath(args.python_dir))
    import torch
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel
    import ft

    torch.use_deterministic_algorithms(True)
    dist.init_process_group("gloo", init_method="env://")
    rank, world = dist.get_rank(), dist.get_world_size()

    torch.manual_seed(1234)  # the same initial model on every rank
    model = torch.nn.Sequential(torch.nn.Linear(32, args.hidden), torch.nn.Tanh(),
                                torch.nn.Linear(args.hidden, args.hidden), torch.nn.Tanh(),
                                torch.nn.Linear(args.hidden, 8))
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=1e-3, weight_decay=0.01)

    # ft: the optimizer's state exists before it is registered (training unchanged), then the
    # model's and the optimizer's tensors are registered and the planned checkpoint restored.
    ft.init_optimizer_state(optimizer)
    ft.set_shard(0, 0, rank)
    ft.register_state({"model": model.state_dict(keep_vars=True), "optim": optimizer.state_dict()})
    ft.register_end()
    start = ft.restore()
    say(rank, "restored none" if start is None or start is ft.NOT_AVAILABLE else "restored step=%d" % start)
    start = start or 0

    loss_fn = torch.nn.MSELoss()
    for step in range(start, args.steps):
        gen = torch.Generator().manual_seed(100003 * step + rank)  # this rank's batch of this step
        x = torch.randn(16, 32, generator=gen)
        y = torch.randn(16, 8, generator=gen)
        loss = loss_fn(ddp(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()  # DDP all-reduces the gradients over gloo
        ft.update_begin(None)  # the optimizer writes the registered state now
        optimizer.step()
        ft.step_done(step + 1)
        say(rank, "step=%d loss=%.6f" % (step + 1, loss.item()))
        if step + 1 == args.crash_at_step and rank == args.crash_rank:
            say(rank, "crashing after step %d (SIGKILL)" % (step + 1))
            os.kill(os.getpid(), signal.SIGKILL)
        if args.step_ms > 0:
            time.sleep(args.step_ms / 1000.0)

    tensors = list(model.state_dict().values())
    for index in sorted(optimizer.state_dict()["state"]):
        state = optimizer.state_dict()["state"][index]
        tensors += [state[k] for k in sorted(state) if isinstance(state[k], torch.Tensor)]
    say(rank, "final step=%d checksum=%s" % (args.steps, checksum(tensors)))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

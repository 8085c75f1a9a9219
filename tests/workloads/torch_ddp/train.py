#!/usr/bin/env python3
"""A small PyTorch DDP training job (gloo, CPU tensors) that checkpoints through python/ft:
what a user's program looks like, for the end-to-end tests. Deterministic: the model is
seeded, each step's batch is a function of (step, rank), and the ranks' final bytes are the
same for every run of the same --steps, interrupted and restored or not. What a real job has:
AdamW, a LambdaLR schedule (warm-up then decay, stepped every step), gradient clipping, dropout
(torch's CPU generator, seeded alike on every rank: DDP replicas draw the same masks), all kept
by ft: the model, the optimizer, the scheduler and the RNG states registered with
ft.register_state.

    launch.py --nodes 2 --ranks-per-node 1 -- /usr/bin/python3 train.py --steps 30

Run under LD_PRELOAD=libft.so (torchrun's environment from the launcher: RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT); FT_CKPT_EVERY makes periodic saves. Each rank prints:

    torch_ddp rank=<r> restored step=<s>            (or "restored none": from scratch)
    torch_ddp rank=<r> step=<n> loss=<x> lr=<y>     after each completed optimizer step
    torch_ddp rank=<r> final step=<n> checksum=<sha256 of every parameter's and optimizer
                                                     state tensor's bytes, in state-dict order,
                                                     then the learning rate and the RNG state>

--crash-at-step S --crash-rank R: rank R SIGKILLs itself right after step S is complete
(ft.step_done(S) returned), as a crash would. --fail-at-step S --fail-rank R: rank R raises an
uncaught Python exception there instead (a NaN check, an OOM).
"""

import argparse
import hashlib
import os
import random
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def wait_for_batch():
    """A data loader that never delivers: the frame ftmaster's stacks must name."""
    while True:
        time.sleep(0.2)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, required=True, help="optimizer steps in all")
    p.add_argument("--hidden", type=int, default=128, help="hidden width of the MLP")
    p.add_argument("--step-ms", type=float, default=0, help="host work per step (sleep), milliseconds")
    p.add_argument("--crash-at-step", type=int, default=0, help="SIGKILL --crash-rank after this step")
    p.add_argument("--crash-rank", type=int, default=-1)
    p.add_argument("--fail-at-step", type=int, default=0, help="raise an exception on --fail-rank after this step")
    p.add_argument("--fail-rank", type=int, default=-1)
    p.add_argument("--hang-at-step", type=int, default=0,
                   help="--hang-rank waits forever in wait_for_batch() after this step (a stuck data loader)")
    p.add_argument("--hang-rank", type=int, default=-1)
    p.add_argument("--dropout", type=float, default=0.1, help="dropout probability after each hidden layer")
    p.add_argument("--python-dir", default=os.path.join(HERE, "..", "..", "..", "python"),
                   help="where the ft package is (default: the source tree's python/)")
    return p.parse_args()


def say(rank, text):
    print("torch_ddp rank=%d %s" % (rank, text), flush=True)


def checksum(tensors, extra=b""):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    h.update(extra)
    return h.hexdigest()


def lr_at(step):
    """The schedule: linear warm-up over 5 steps, then a decay (LambdaLR's factor)."""
    return (step + 1) / 5.0 if step < 5 else 0.97 ** (step - 5)


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

    torch.manual_seed(1234)  # the same initial model and dropout masks on every rank
    random.seed(1234)  # every generator ft.RngState keeps is seeded alike: replicas hold the same bytes
    try:
        import numpy
        numpy.random.seed(1234)
    except ImportError:
        pass
    model = torch.nn.Sequential(torch.nn.Linear(32, args.hidden), torch.nn.Tanh(), torch.nn.Dropout(args.dropout),
                                torch.nn.Linear(args.hidden, args.hidden), torch.nn.Tanh(),
                                torch.nn.Dropout(args.dropout), torch.nn.Linear(args.hidden, 8))
    ddp = DistributedDataParallel(model)
    optimizer = torch.optim.AdamW(ddp.parameters(), lr=3e-3, weight_decay=0.01)
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lr_at)

    # ft: the optimizer's state exists before it is registered (training unchanged), then the
    # model's and the optimizer's tensors, the scheduler (and the learning rates it set in the
    # optimizer) and the RNG states are registered and the planned checkpoint restored.
    ft.init_optimizer_state(optimizer)
    ft.set_shard(0, 0, rank)
    ft.register_state({"model": model, "optim": optimizer, "sched": scheduler, "rng": ft.RngState()})
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
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        ft.update_begin(None)  # the optimizer writes the registered state now
        optimizer.step()
        scheduler.step()  # before step_done: the step's learning rate is part of its state
        ft.step_done(step + 1)
        say(rank, "step=%d loss=%.6f lr=%.9g" % (step + 1, loss.item(), optimizer.param_groups[0]["lr"]))
        if step + 1 == args.crash_at_step and rank == args.crash_rank:
            say(rank, "crashing after step %d (SIGKILL)" % (step + 1))
            os.kill(os.getpid(), signal.SIGKILL)
        if step + 1 == args.fail_at_step and rank == args.fail_rank:
            say(rank, "raising an exception after step %d" % (step + 1))
            raise RuntimeError("torch_ddp: injected failure after step %d" % (step + 1))
        if step + 1 == args.hang_at_step and rank == args.hang_rank:
            say(rank, "hanging in wait_for_batch after step %d" % (step + 1))
            wait_for_batch()
        if args.step_ms > 0:
            time.sleep(args.step_ms / 1000.0)

    tensors = list(model.state_dict().values())
    for index in sorted(optimizer.state_dict()["state"]):
        state = optimizer.state_dict()["state"][index]
        tensors += [state[k] for k in sorted(state) if isinstance(state[k], torch.Tensor)]
    extra = repr([g["lr"] for g in optimizer.param_groups]).encode() + torch.get_rng_state().numpy().tobytes()
    say(rank, "final step=%d checksum=%s" % (args.steps, checksum(tensors, extra)))
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()

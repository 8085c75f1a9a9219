#!/usr/bin/env python3
"""A small GPT trained on random tokens for the GPU kit (kit.py's torch section runs it with and
without LD_PRELOAD=libft.so): what libft.so costs a real PyTorch training step.

The model is built here (no download): token and position embeddings, N pre-norm transformer
blocks (causal scaled-dot-product attention, GELU MLP), a tied output layer; random weights,
bf16 parameters, AdamW (capturable). A step is forward, loss, backward, the gradients
all-reduced over a one-rank NCCL process group (in buckets, as DDP does), optimizer step, and
loss.item() (the host reads the loss every step, as training loops that log do).

Two modes, in alternating blocks within the process so both see the same machine state:
  eager   the step as written
  graphs  the whole step captured once into a CUDA graph (torch.cuda.graph) and replayed
Prints `torch mode=<mode> step_ms=<median over blocks>` for each, and `torch note: ...` for
anything that went differently than planned (e.g. the all-reduce left out of the graph).

Flags: --layers --dim --heads --seq --batch --vocab --blocks --block-steps --warmup; --device cpu runs
the same code on a CPU PyTorch in float32 over gloo (a check of the script, no figures);
--no-nccl leaves the process group out.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F


def parse_args():
    p = argparse.ArgumentParser()
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--dim", type=int, default=1024)
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--seq", type=int, default=1024)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--vocab", type=int, default=32768)
    p.add_argument("--blocks", type=int, default=4, help="blocks per mode")
    p.add_argument("--block-steps", type=int, default=20)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--device", default="cuda")
    p.add_argument("--no-nccl", action="store_true")
    return p.parse_args()


class Block(nn.Module):
    def __init__(self, dim, heads):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(dim)
        self.qkv = nn.Linear(dim, 3 * dim, bias=False)
        self.proj = nn.Linear(dim, dim, bias=False)
        self.ln2 = nn.LayerNorm(dim)
        self.fc = nn.Linear(dim, 4 * dim, bias=False)
        self.out = nn.Linear(4 * dim, dim, bias=False)

    def forward(self, x):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
        if hasattr(F, "scaled_dot_product_attention"):
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:  # PyTorch < 2.0 (the CPU check of this script)
            w = (q @ k.transpose(-2, -1)) / (q.shape[-1] ** 0.5)
            w = w.masked_fill(torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            a = w.softmax(-1) @ v
        x = x + self.proj(a.transpose(1, 2).reshape(b, t, d))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    def __init__(self, vocab, seq, dim, heads, layers):
        super().__init__()
        self.tok = nn.Embedding(vocab, dim)
        self.pos = nn.Embedding(seq, dim)
        self.blocks = nn.ModuleList(Block(dim, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(dim)
        for p in self.parameters():  # GPT-2's initialisation: logits of a sane size
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def forward(self, idx):
        x = self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))
        for blk in self.blocks:
            x = blk(x)
        return self.ln(x) @ self.tok.weight.t()


def note(msg):
    print("torch note: " + msg, flush=True)


def main():
    a = parse_args()
    cuda = a.device == "cuda"
    dev = torch.device("cuda", 0) if cuda else torch.device(a.device)  # process groups want an index
    dtype = torch.bfloat16 if cuda else torch.float32
    torch.manual_seed(0)
    if cuda:
        torch.cuda.set_device(0)
        torch.backends.cuda.matmul.allow_tf32 = True
    model = GPT(a.vocab, a.seq, a.dim, a.heads, a.layers).to(device=dev, dtype=dtype)
    params = [p for p in model.parameters() if p.requires_grad]
    print("torch model: %.1fM parameters, %d layers, dim %d, seq %d, batch %d, %s" % (
        sum(p.numel() for p in params) / 1e6, a.layers, a.dim, a.seq, a.batch, dtype), flush=True)
    opt_kw = {"lr": 1e-4}
    if cuda:
        opt_kw["capturable"] = True
    opt = torch.optim.AdamW(params, **opt_kw)

    pg = None
    if not a.no_nccl:
        import torch.distributed as dist
        try:
            kw = {"device_id": dev} if cuda else {}  # eager NCCL init (PyTorch >= 2.3)
            dist.init_process_group("nccl" if cuda else "gloo", store=dist.HashStore(), rank=0, world_size=1, **kw)
            pg = dist
        except Exception as e:  # the step runs on without the all-reduce, and says so
            note("no NCCL process group (%s: %s): gradients not all-reduced" % (type(e).__name__, e))
    # Gradient buckets of ~25 MiB, as DDP's.
    buckets, cur, size = [], [], 0
    for p in params:
        cur.append(p)
        size += p.numel() * p.element_size()
        if size >= 25 << 20:
            buckets.append(cur)
            cur, size = [], 0
    if cur:
        buckets.append(cur)

    x = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)
    y = torch.randint(0, a.vocab, (a.batch, a.seq), device=dev)

    def allreduce_grads():
        for bucket in buckets:
            flat = torch.cat([p.grad.reshape(-1) for p in bucket])
            pg.all_reduce(flat)
            off = 0
            for p in bucket:
                n = p.numel()
                p.grad.copy_(flat[off:off + n].view_as(p.grad))
                off += n

    def step(with_allreduce=True):
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, a.vocab).float(), y.view(-1))
        loss.backward()
        if pg is not None and with_allreduce:
            allreduce_grads()
        opt.step()
        return loss

    # Warm-up on a side stream (what torch.cuda.graph needs before a capture), grads kept (set
    # to None would free the memory the graph's static grads must keep).
    side = torch.cuda.Stream() if cuda else None
    if cuda:
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                opt.zero_grad(set_to_none=False)
                step()
        torch.cuda.current_stream().wait_stream(side)
    else:
        for _ in range(3):
            opt.zero_grad(set_to_none=False)
            step()

    graph, static_loss, graph_allreduce = None, None, False
    if cuda:
        for with_ar in ((True, False) if pg is not None else (False,)):
            try:
                g = torch.cuda.CUDAGraph()
                # Grads set to None: the captured backward allocates them from the graph's pool
                # and every replay overwrites them (PyTorch's whole-network capture recipe).
                opt.zero_grad(set_to_none=True)
                with torch.cuda.graph(g):
                    static_loss = step(with_allreduce=with_ar)
                graph, graph_allreduce = g, with_ar
                break
            except Exception as e:
                note("capture %s the all-reduce failed (%s: %s)" % ("with" if with_ar else "without", type(e).__name__,
                                                                    str(e).splitlines()[0][:200]))
                torch.cuda.synchronize()
        if graph is not None and pg is not None and not graph_allreduce:
            note("graphs mode: the all-reduce runs eagerly after each replay")
    else:
        note("no CUDA: graphs mode not run")

    def eager_step():
        opt.zero_grad(set_to_none=False)
        return step().item()

    def graph_step():
        graph.replay()
        if pg is not None and not graph_allreduce:
            allreduce_grads()
        return static_loss.item()

    modes = {"eager": eager_step}
    if graph is not None:
        modes["graphs"] = graph_step
    for fn in modes.values():
        for _ in range(a.warmup):
            fn()
    times = {m: [] for m in modes}
    for b in range(a.blocks):
        for m in (list(modes) if b % 2 == 0 else list(reversed(list(modes)))):
            if cuda:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            for _ in range(a.block_steps):
                loss = modes[m]()
            times[m].append((time.perf_counter() - t0) / a.block_steps * 1e3)
    for m, ts in times.items():
        print("torch mode=%s step_ms=%.4f blocks=%s loss=%.3f" % (m, statistics.median(ts), ",".join("%.3f" % t for t in ts), loss),
              flush=True)
    # Under libft.so: what it saw of this process (its segment, read by the kit's ftdump before
    # the process exits and removes it): evidence that the figures above include its hooks.
    ftdump = os.environ.get("KIT_FTDUMP")
    if ftdump and "libft" in os.environ.get("LD_PRELOAD", ""):
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        env["LD_LIBRARY_PATH"] = os.environ.get("KIT_LIB", "")
        try:
            text = subprocess.run([ftdump, "--job", os.environ.get("FT_JOB", "")], capture_output=True, text=True,
                                  timeout=20, env=env).stdout
        except (OSError, subprocess.SubprocessError) as e:
            text = "ftdump failed: %s" % e
        for line in text.splitlines():
            print("torch ftdump: " + line, flush=True)
    if pg is not None:
        pg.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())

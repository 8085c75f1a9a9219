#!/usr/bin/env python3
"""The stuck Python code's frame, end to end: tests/workloads/torch_ddp/train.py (DDP over gloo,
Debian's PyTorch 1.13) on 2 simulated nodes under LD_PRELOAD=libft.so with python/ft, one
ftworker per node, ftmaster, a real redis-server. Rank 1 stops in a Python function after step 5
(train.py --hang-at-step: wait_for_batch, a data loader that never delivers) while rank 0 waits
for it in gloo's all-reduce. `ftmaster stacks --rank 1` asks rank 1's worker for its stacks: the
answer names the Python frame (wait_for_batch (train.py:N)), from python/ft's faulthandler, and
carries the native stack (eu-stack); rank 0's names its wait. The process runs on afterwards.

usage: torch_stacks_e2e_test.py --launch L --libft F --ftworker W --ftmaster M --train T
Run it with the Python that has PyTorch (Debian's python3-torch: /usr/bin/python3).
"""

import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
sys.path.insert(0, HERE)
from cluster import check  # noqa: E402
from torch_ddp_e2e_test import TOPOLOGY, TorchCluster, parse_args, require_torch  # noqa: E402


def stacks(c, rank):
    out = subprocess.run([c.paths.ftmaster, "stacks", "--rank", str(rank), "--job", c.job, "--redis", c.redis_url()],
                         env=c.base_env(), capture_output=True, text=True, timeout=30)
    check(out.returncode == 0, "ftmaster stacks --rank %d exited %d: %s%s" % (rank, out.returncode, out.stdout, out.stderr))
    return out.stdout


def main():
    args = parse_args()
    require_torch()
    with TorchCluster(args, "torch-stacks") as c:
        c.start_master(TOPOLOGY)
        c.start_node_workers()
        env = {"OMP_NUM_THREADS": "1", "PYTHONDONTWRITEBYTECODE": "1"}
        c.start_job(["--steps", "1000", "--step-ms", "20", "--hang-at-step", "5", "--hang-rank", "1"], env=env,
                    program=c.program, launch_args=("--keep-going",), timeout=60)
        c.wait_for(lambda: "hanging in wait_for_batch" in c.job_output(), 90, "rank 1 to stop in wait_for_batch",
                   poll=0.2)
        c.wait_for(lambda: c.db.command("HLEN", c.key("ranks")) == 2, 30, "both ranks' membership")
        t0 = time.monotonic()
        text = stacks(c, 1)
        took = time.monotonic() - t0
        print("$ ftmaster stacks --rank 1  (%.2f s)\n%s" % (took, text), flush=True)
        check("python thread" in text and "wait_for_batch (train.py:" in text,
              "rank 1's stacks do not name the Python function it waits in:\n%s" % text)
        check("tid " in text, "rank 1's native stack is missing:\n%s" % text)
        text0 = stacks(c, 0)
        print("$ ftmaster stacks --rank 0\n%s" % text0, flush=True)
        check("python thread" in text0 and "wait_for_batch" not in text0,
              "rank 0's stacks (it waits in the all-reduce):\n%s" % text0)
        check(c.job_proc.poll() is None and "hanging in wait_for_batch" in c.job_output(),
              "the job did not survive having its stacks taken")
        c.stop_job()
        print("RESULT torch_stacks python_frame=1 stacks_s=%.2f" % took)
        print("OK")


if __name__ == "__main__":
    main()

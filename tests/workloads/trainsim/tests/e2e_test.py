#!/usr/bin/env python3
"""trainsim end to end on the gpusim stand-ins, checked against trainsim_reference.

  --case 3d            8 ranks, dp=2 tp=2 pp=2, 50 steps, 2 nodes x 4: under 30 s wall
  --case dp8           8 ranks, dp=8, a short run
  --case microbatches  4 ranks, dp=2 pp=2, 3 micro-batches (grouped send/recv in flight)
  --case sharded       6 ranks, dp=3 tp=2, --sharded-optimizer (reduce-scatter, a slice's
                       momentum update, all-gather) with slices of unequal fill
  --case overlap       4 ranks, dp=2 pp=2, 2 micro-batches, --overlap-grad-reduce and
                       --compute-at backward: each layer's gradient all-reduced on a second
                       stream while the backward pass goes on; the same model as without

Every case runs without libft.so: trainsim imports ft's API weakly and must then train exactly
as before, with no trace of ft in its output.
"""

import os

import trainsim_common as tc

CASES = {
    # name: (nodes, ranks per node, model flags, extra trainsim flags, wall-time limit)
    "3d": (2, 4, ["--dp", "2", "--tp", "2", "--pp", "2", "--steps", "50"], [], 30.0),
    "dp8": (2, 4, ["--dp", "8", "--steps", "10"], [], 30.0),
    "microbatches": (2, 2, ["--dp", "2", "--pp", "2", "--microbatches", "3", "--steps", "8",
                            "--layers", "6"], ["--verbose"], 30.0),
    # 10000 parameters per rank in 3 slices of 3334: the last one padded.
    "sharded": (2, 3, ["--dp", "3", "--tp", "2", "--steps", "12", "--param-bytes", "40000",
                       "--sharded-optimizer"], [], 30.0),
    "overlap": (2, 2, ["--dp", "2", "--pp", "2", "--microbatches", "2", "--steps", "12", "--layers", "4"],
                ["--overlap-grad-reduce", "--compute-at", "backward"], 30.0),
}


def main():
    args = tc.parse_paths()
    tc.check("libft" not in os.environ.get("LD_PRELOAD", ""), "run these without libft.so preloaded")
    nodes, per_node, model, extra, limit = CASES[args.case]
    rc, out, err, secs = tc.run_job(args, nodes, per_node, model + extra)
    if rc != 0:
        print(out[-4000:])
        print(err[-4000:])
    tc.check(rc == 0, "launcher exited %d" % rc)
    tc.check(secs < limit, "took %.1f s, limit %.0f s" % (secs, limit))
    got = tc.checksums(out)
    tc.check("restored step" not in out and "ft_" not in err, "ft output without libft.so:\n%s" % err[-2000:])
    tc.verify_against_reference(args, got, model, nodes * per_node)
    if "--verbose" in extra:
        steps = {}
        for line in out.splitlines():
            m = tc.STEP_RE.search(line)
            if m:
                steps.setdefault(int(m.group(1)), []).append(int(m.group(2)))
        steps_flag = int(model[model.index("--steps") + 1])
        for rank in range(nodes * per_node):
            tc.check(steps.get(rank) == list(range(steps_flag)), "rank %d step lines %s" % (rank, steps.get(rank)))
    print("OK: %s in %.2f s wall" % (args.case, secs))


if __name__ == "__main__":
    main()

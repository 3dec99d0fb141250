"""One rank of a gloo all-reduce across machines, as torchrun starts it.

Each rank adds rank+1 to the sum, prints the result, writes a trace file
(TRACE_DIR/run<GPUPORTAL_RUN>-rank<RANK>: its PID, run, node rank, the sum
and the time) and then, while TRACE_DIR/hold exists, waits: the test kills a rank
there. integration/multinode_test.go runs it.
"""
import os
import time

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
t = torch.tensor([float(rank + 1)])
dist.all_reduce(t)
print(f"rank {rank} of {world} on node {os.environ['NODE_RANK']}: all_reduce {t.item():g}", flush=True)

trace_dir = os.environ["TRACE_DIR"]
run = os.environ["GPUPORTAL_RUN"]
path = os.path.join(trace_dir, f"run{run}-rank{rank}")
with open(path + ".tmp", "w") as f:
    f.write(f"pid={os.getpid()} run={run} node_rank={os.environ['NODE_RANK']} sum={t.item():g} time={time.time():.3f}\n")
os.rename(path + ".tmp", path)
while os.path.exists(os.path.join(trace_dir, "hold")):
    time.sleep(0.1)
dist.barrier()
dist.destroy_process_group()

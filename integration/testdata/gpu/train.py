"""A small PyTorch training job for gpuportal's real-GPU check
(integration/gpu_test.go, build tag gpu).

It holds a fixed amount of GPU memory (so the portal's reading can be set
beside nvidia-smi's), trains a linear layer for --steps steps of about
--step-s seconds each, saves a checkpoint every --every steps in
GPUPORTAL_CHECKPOINT_DIR and resumes from it when GPUPORTAL_RESUME=1. On
SIGTERM it finishes its step, saves (taking --save-s more seconds, as a
big model's save does) and exits with --term-exit.

Each step appends "UNIX_MS JOB RUN PID STEP" to --trace, so what a run
redid after a stop is read from the job's own evidence.
"""

import argparse
import os
import signal
import sys
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--trace", required=True)
p.add_argument("--steps", type=int, required=True)
p.add_argument("--step-s", type=float, default=0.1)
p.add_argument("--every", type=int, default=10)
p.add_argument("--mem-mib", type=int, default=1024)
p.add_argument("--save-s", type=float, default=0.0)
p.add_argument("--term-exit", type=int, default=143)
p.add_argument("--dim", type=int, default=2048, help="the layer's size: each step multiplies dim x dim matrices 12 times")
p.add_argument("--device", default="cuda", help="cpu: a dry run of this script without a GPU")
args = p.parse_args()

job = os.environ.get("GPUPORTAL_JOB_ID", "0")
run = os.environ.get("GPUPORTAL_RUN", "0")
ckdir = os.environ["GPUPORTAL_CHECKPOINT_DIR"]
ckpt = os.path.join(ckdir, "state.pt")

stop = False


def on_term(signum, frame):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)

dev = torch.device(args.device)
cuda = dev.type == "cuda"
torch.manual_seed(0)
ballast = torch.empty(args.mem_mib * 2**20, dtype=torch.uint8, device=dev)
w = torch.randn(args.dim, args.dim, device=dev) * 0.01
target = torch.randn(args.dim, args.dim, device=dev)
step = 0
if os.environ.get("GPUPORTAL_RESUME") == "1" and os.path.exists(ckpt):
    state = torch.load(ckpt)
    step = state["step"]
    w.copy_(state["w"].to(dev))
    print(f"run {run} resumes at step {step} (checkpoint of run {os.environ.get('GPUPORTAL_RESUME_RUN', '?')})", flush=True)
else:
    print(f"run {run} starts from scratch", flush=True)
if cuda:
    torch.cuda.synchronize()
    print(f"run {run}: pid {os.getpid()} on {torch.cuda.get_device_name(0)}, "
          f"{torch.cuda.memory_reserved() // 2**20} MiB reserved by PyTorch", flush=True)


def save(step):
    tmp = ckpt + ".new"
    torch.save({"step": step, "w": w.cpu()}, tmp)
    os.replace(tmp, ckpt)


with open(args.trace, "a", buffering=1) as tr:
    while step < args.steps and not stop:
        t0 = time.monotonic()
        tr.write(f"{int(time.time() * 1000)} {job} {run} {os.getpid()} {step}\n")
        for _ in range(4):
            x = torch.randn(args.dim, args.dim, device=dev)
            loss = ((x @ w - target) ** 2).mean()
            w -= 1e-3 * (x.T @ (x @ w - target)) / args.dim
        if cuda:
            torch.cuda.synchronize()
        step += 1
        if step % args.every == 0:
            save(step)
        left = args.step_s - (time.monotonic() - t0)
        if left > 0:
            time.sleep(left)
    if stop:
        print(f"run {run}: SIGTERM at step {step}: saving", flush=True)
        save(step)
        time.sleep(args.save_s)
        print(f"run {run}: saved at step {step}", flush=True)
        sys.exit(args.term_exit)
print(f"run {run}: done at step {step}, loss {loss.item():.4f}", flush=True)

"""A small PyTorch training job for gpuportal: trains a two-layer network
on a synthetic regression task, saves a checkpoint every few steps into
$GPUPORTAL_CHECKPOINT_DIR, and resumes from it when the job is started
again (after a preemption, a requeue or a resubmit of the same job).

It runs on the GPUs gpuportal gives it (CUDA_VISIBLE_DEVICES) when CUDA is
there, and on the CPU otherwise (Debian's python3-torch is CPU-only).

    gpuportal job submit --name torch-demo --gpus 1 --env STEPS=300 \
        -- python3 examples/pytorch/train.py

examples/pytorch/build-image makes a container image of it from Debian's
packages (docs/portal.md, "A real PyTorch job in a container").

Variables: STEPS (300), CHECKPOINT_EVERY (50), LEARNING_RATE (0.05).
"""
import os
import pwd
import signal
import sys
import time

import torch

steps = int(os.environ.get("STEPS", "300"))
every = int(os.environ.get("CHECKPOINT_EVERY", "50"))
lr = float(os.environ.get("LEARNING_RATE", "0.05"))
ckdir = os.environ.get("GPUPORTAL_CHECKPOINT_DIR", "checkpoint")
os.makedirs(ckdir, exist_ok=True)
ckpt = os.path.join(ckdir, "model.pt")

device = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(32, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1)).to(device)
opt = torch.optim.SGD(model.parameters(), lr=lr)
w_true = torch.randn(32, 1, device=device)

start = 0
if os.path.exists(ckpt):
    state = torch.load(ckpt, map_location=device)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    start = state["step"]
    print(f"resumed from step {start}", flush=True)


def save(step):
    tmp = ckpt + ".tmp"
    torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "step": step}, tmp)
    os.replace(tmp, ckpt)


stop = False


def on_term(signum, frame):
    # gpuportal sends SIGTERM before it preempts or stops a job: save now.
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)

try:
    account = pwd.getpwuid(os.getuid()).pw_name
except KeyError:  # a container without the account in its /etc/passwd (Docker)
    account = "?"
print(f"torch {torch.__version__} on {device} as {account} (uid {os.getuid()}); job {os.environ.get('GPUPORTAL_JOB_ID')}, "
      f"run {os.environ.get('GPUPORTAL_RUN')}, CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')}, "
      f"LEARNING_RATE={lr}", flush=True)
t0 = time.time()
for step in range(start, steps):
    x = torch.randn(256, 32, device=device)
    y = x @ w_true + 0.01 * torch.randn(256, 1, device=device)
    loss = torch.nn.functional.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    if (step + 1) % every == 0 or step + 1 == steps:
        save(step + 1)
        print(f"step {step + 1}/{steps} loss {loss.item():.4f} ({time.time() - t0:.1f}s)", flush=True)
    if stop:
        save(step + 1)
        print(f"SIGTERM: checkpoint saved at step {step + 1}", flush=True)
        sys.exit(143)
print("done", flush=True)

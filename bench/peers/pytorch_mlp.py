#!/usr/bin/env python3
"""PyTorch peer of the seed experiment (SMALL / BIG MLP, and Keras's MNIST convnet) on MNIST-shaped data.

Written as a competent PyTorch user would write it, with Keras's semantics:
glorot-uniform kernels and zero biases, Adam(lr 1e-3, betas 0.9/0.999, eps 1e-7), cross-entropy
from logits, batch 32, reshuffled every epoch, last partial batch kept, inverted dropout 0.2.
The data set is one float tensor (scaled /255 once) on the training device; each batch is
index_select'ed from it with a per-epoch torch.randperm.

Prints one JSON line on stdout at the end; progress goes to stderr. Only the training loop of
each epoch is timed (not loading, not evaluation).

    bench/peers/.venv/bin/python bench/peers/pytorch_mlp.py --model small --threads 1 [--max-steps 300]
    bench/peers/.venv/bin/python bench/peers/pytorch_mlp.py --model convnet --threads 2 \
        --data data/mnist-10k/mnist-10k.npz --epochs 15 --validation-split 0.1

The convnet: Conv2d(1, 32, 3), ReLU, MaxPool2d(2), Conv2d(32, 64, 3), ReLU, MaxPool2d(2), Flatten,
Dropout(0.5), Linear(1600, 10); batch 128 unless --batch-size; Keras's init and Adam as above.

PyTorch is PyPI's default wheel, installed into bench/peers/.venv by scripts/install-peers.
"""

import contextlib
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import peer_common as pc  # noqa: E402


def build_model(nn, kind):
    if kind == "convnet":
        # Keras's "Simple MNIST convnet"; PyTorch is channels-first, so the input is (N, 1, 28, 28)
        # and Flatten sees (64, 5, 5) in another order than Keras's (5, 5, 64): the same model.
        model = nn.Sequential(
            nn.Conv2d(1, 32, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Dropout(0.5), nn.Linear(64 * 5 * 5, 10))
        for m in model.modules():
            if isinstance(m, (nn.Conv2d, nn.Linear)):
                # Keras's glorot_uniform: fans are in/out channels x the receptive field, as here.
                nn.init.xavier_uniform_(m.weight)
                nn.init.zeros_(m.bias)
        return model
    if kind == "small":
        layers = [nn.Flatten(), nn.Linear(784, 128), nn.ReLU(), nn.Dropout(0.2), nn.Linear(128, 10)]
    else:
        layers = [nn.Flatten(),
                  nn.Linear(784, 1000), nn.ReLU(), nn.Dropout(0.2),
                  nn.Linear(1000, 1000), nn.ReLU(), nn.Dropout(0.2),
                  nn.Linear(1000, 10)]
    model = nn.Sequential(*layers)
    for m in model.modules():
        if isinstance(m, nn.Linear):
            nn.init.xavier_uniform_(m.weight)  # Keras glorot_uniform
            nn.init.zeros_(m.bias)
    return model  # outputs logits; the softmax lives in the loss and in argmax


def main():
    args = pc.parse_args("PyTorch peer of the crossover seed experiment")
    pc.limit_threads_env(args.threads)
    # Passive OpenMP wait, the kinder setting for the peer: with libgomp's default (spin, then
    # sleep), workers spinning between the step's many small parallel ops hold cores the others
    # need. On 2 shared cores (load 1.5-5) PyPI's torch 2.15 at --threads 2 ran SMALL and BIG
    # 3-8x slower without it (Debian's 1.13, GEMMs on OpenBLAS's own threads: 3-15x). A user's
    # own OMP_WAIT_POLICY is kept.
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        import torch
        from torch import nn
    except Exception as e:  # noqa: BLE001
        pc.emit({"peer": "pytorch", "available": False, "reason": f"import torch failed: {e}"})
        return 0

    if args.threads is not None:
        torch.set_num_threads(args.threads)
        torch.set_num_interop_threads(1)
    if args.device == "cuda" and not torch.cuda.is_available():
        pc.emit({"peer": "pytorch", "version": torch.__version__, "available": False,
                 "device": "cuda", "reason": "torch.cuda.is_available() is False "
                 f"(torch built with CUDA: {torch.version.cuda})"})
        return 0
    device = torch.device(args.device)
    torch.manual_seed(args.seed)

    t_load = time.perf_counter()
    x_tr, y_tr, x_te, y_te = pc.load_data_or_exit(args.data)
    x_tr, y_tr, x_va, y_va = pc.split_validation(x_tr, y_tr, args.validation_split)
    if args.model == "convnet":  # channels first
        x_tr, x_te = x_tr[:, None], x_te[:, None]
        x_va = None if x_va is None else x_va[:, None]
    x_train = torch.from_numpy(x_tr).to(device)
    y_train = torch.from_numpy(y_tr).to(device)
    x_test = torch.from_numpy(x_te).to(device)
    y_test = torch.from_numpy(y_te).to(device)
    if args.device == "cuda":
        torch.cuda.synchronize()
    n = x_train.shape[0]
    pc.log(f"pytorch {torch.__version__}: loaded {n} train / {x_test.shape[0]} test from "
           f"{args.data} in {time.perf_counter() - t_load:.2f} s; device {args.device}, "
           f"threads {torch.get_num_threads()}")

    model = build_model(nn, args.model).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, betas=(0.9, 0.999), eps=1e-7)
    loss_fn = nn.CrossEntropyLoss()
    bs = args.batch_size
    steps_full = pc.steps_per_epoch(n, bs)
    steps_run = min(steps_full, args.max_steps) if args.max_steps else steps_full
    extrapolated = steps_run < steps_full
    read_item = not args.no_item
    gen = torch.Generator(device="cpu")
    gen.manual_seed(args.seed)

    def sync():
        if args.device == "cuda":
            torch.cuda.synchronize()

    def autocast():
        # The mixed precision a PyTorch user reaches for on a CPU with bf16: the forward pass and
        # the loss under autocast (its matmuls in bf16), backward and Adam on the fp32 weights.
        if args.autocast == "bf16":
            return torch.autocast(device_type=device.type, dtype=torch.bfloat16)
        return contextlib.nullcontext()

    def model_eval(x):
        with autocast():
            return model(x)

    seconds, steady, val_acc = [], [], []
    train_loss = train_acc = None
    for epoch in range(args.epochs):
        model.train()
        sync()
        t0 = time.perf_counter()
        t_warm = None
        perm = torch.randperm(n, generator=gen).to(device)
        loss_sum = 0.0 if read_item else torch.zeros((), device=device)
        correct = torch.zeros((), dtype=torch.int64, device=device)
        seen = 0
        for step in range(steps_run):
            idx = perm[step * bs:(step + 1) * bs]
            xb = x_train.index_select(0, idx)
            yb = y_train.index_select(0, idx)
            with autocast():
                logits = model(xb)
                loss = loss_fn(logits, yb)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            b = idx.shape[0]
            if read_item:
                loss_sum += loss.item() * b  # what a progress line does: a sync every step
            else:
                loss_sum += loss.detach() * b
            correct += (logits.detach().argmax(1) == yb).sum()
            seen += b
            if step + 1 == pc.WARMUP_STEPS:
                sync()
                t_warm = time.perf_counter()
        sync()
        t1 = time.perf_counter()
        elapsed = t1 - t0
        est, st = pc.epoch_estimate(elapsed, None if t_warm is None else t_warm - t0,
                                    steps_run, steps_full)
        seconds.append(est)
        steady.append(st)
        train_loss = float(loss_sum) / seen
        train_acc = int(correct) / seen
        val = ""
        if x_va is not None:
            model.eval()
            with torch.inference_mode():
                xv, yv = torch.from_numpy(x_va).to(device), torch.from_numpy(y_va).to(device)
                hits = sum(int((model_eval(xv[i:i + 1000]).argmax(1) == yv[i:i + 1000]).sum())
                           for i in range(0, xv.shape[0], 1000))
            val_acc.append(hits / xv.shape[0])
            val = f" - val_accuracy {val_acc[-1]:.4f}"
        pc.log(f"epoch {epoch + 1}/{args.epochs}: {steps_run} steps in {elapsed:.3f} s"
               + (f" (extrapolated to {seconds[-1]:.3f} s for {steps_full} steps)" if extrapolated else "")
               + f" - loss {train_loss:.4f} - accuracy {train_acc:.4f}{val}")

    model.eval()
    with torch.inference_mode():
        hits = 0
        for i in range(0, x_test.shape[0], 1000):
            hits += int((model_eval(x_test[i:i + 1000]).argmax(1) == y_test[i:i + 1000]).sum())
        test_acc = hits / x_test.shape[0]
    pc.log(f"test accuracy {test_acc:.4f}")

    pc.emit({
        "peer": "pytorch",
        "version": torch.__version__,
        "model": args.model,
        "threads": torch.get_num_threads(),
        "device": args.device,
        "autocast": args.autocast,
        "seconds_per_epoch": seconds,
        "steady_seconds_per_epoch": steady,
        "batch_size": bs,
        "validation_split": args.validation_split,
        "val_accuracy": val_acc,
        "steps_per_epoch": steps_full,
        "timed_steps": steps_run,
        "extrapolated": extrapolated,
        "extrapolation": pc.EXTRAPOLATION if extrapolated else None,
        "read_loss_each_step": read_item,
        "thread_env": {k: os.environ.get(k) for k in
                       ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "OMP_WAIT_POLICY")},
        "train_loss": train_loss,
        "train_accuracy": train_acc,
        "test_accuracy": test_acc,
    })
    return 0


if __name__ == "__main__":
    sys.exit(main())

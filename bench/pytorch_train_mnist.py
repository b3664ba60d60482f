#!/usr/bin/env python3
"""Trains a tandem YAML model in PyTorch on the MNIST sample (datasets/mnist-sample) and prints
the test accuracy after every epoch: the reference for tandem's final accuracy.

  python3 bench/pytorch_train_mnist.py --config configs/lenet.yaml [--epochs 5] [--threads 2]
      [--batch-size N] [--lr X] [--seed N] [--data DIR] [--device cpu|cuda]

Uses the config's optimizer, batch size, learning-rate schedule (per epoch), train.shuffle /
drop_last and data.normalize (mean/std on [0,1] pixels). The IDX files (gzipped or not) are
read with gzip + numpy; no torchvision.
"""
import argparse
import gzip
import math
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import torch  # noqa: E402

import tandem_torch as tt  # noqa: E402


def read_idx(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    zero, dtype, ndim = struct.unpack(">HBB", data[:4])
    if zero != 0 or dtype != 0x08:
        raise ValueError(f"{path}: not an unsigned-byte IDX file")
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    arr = np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * ndim)
    if arr.size != math.prod(dims):
        raise ValueError(f"{path}: {arr.size} values, header says {dims}")
    return arr.reshape(dims)


def find_split(folder, split):
    """train-images-idx3-ubyte[.gz] / t10k-* or test-*."""
    prefixes = ["train"] if split == "train" else ["test", "t10k"]
    for p in prefixes:
        imgs = [os.path.join(folder, f"{p}-images-idx3-ubyte{ext}") for ext in (".gz", "")]
        labs = [os.path.join(folder, f"{p}-labels-idx1-ubyte{ext}") for ext in (".gz", "")]
        imgs = [f for f in imgs if os.path.exists(f)]
        labs = [f for f in labs if os.path.exists(f)]
        if imgs and labs:
            return imgs[0], labs[0]
    raise FileNotFoundError(f"{folder}: no {split} IDX pair ({'/'.join(prefixes)}-images-idx3-ubyte"
                            f"[.gz] and -labels-idx1-ubyte[.gz])")


def load_split(folder, split, mean, std, shape):
    ip, lp = find_split(folder, split)
    x = read_idx(ip).astype(np.float32) / 255.0
    y = read_idx(lp).astype(np.int64)
    if len(x) != len(y):
        raise ValueError(f"{ip}: {len(x)} images but {lp} has {len(y)} labels")
    x = (x - mean) / std
    return torch.from_numpy(x.reshape((len(x),) + shape)), torch.from_numpy(y)


def lr_at(epoch, base, sched, epochs):
    """tandem's per-epoch schedules (epoch 0-based)."""
    typ = sched.get("type", "constant")
    if typ == "constant":
        lr = base
    elif typ == "step":
        lr = base * float(sched.get("gamma", 0.1)) ** (epoch // int(sched.get("step", 1)))
    elif typ == "multistep":
        n = sum(1 for m in sched.get("milestones", []) if epoch >= int(m))
        lr = base * float(sched.get("gamma", 0.1)) ** n
    elif typ == "cosine":
        lo = float(sched.get("min_lr", 0.0))
        lr = lo + (base - lo) * (1 + math.cos(math.pi * epoch / max(1, epochs))) / 2
    else:
        raise tt.ConfigError(f"train.schedule.type: unknown '{typ}'")
    w = int(sched.get("warmup_epochs", 0))
    if epoch < w:
        lr = lr * (epoch + 1) / w
    return lr


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--epochs", type=int, default=None)
    ap.add_argument("--batch-size", type=int, default=None)
    ap.add_argument("--lr", type=float, default=None)
    ap.add_argument("--seed", type=int, default=None)
    ap.add_argument("--threads", type=int, default=None, help="default: every core")
    ap.add_argument("--data", default=None, help="folder with the IDX files (overrides data.path)")
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "gpu"])
    a = ap.parse_args()

    cfg = tt.load_config(a.config)
    train = cfg.get("train") or {}
    data = cfg.get("data") or {}
    epochs = a.epochs or int(train.get("epochs", 1))
    batch = a.batch_size or int(train.get("batch_size", 64))
    seed = a.seed if a.seed is not None else int(train.get("seed", 0))
    shuffle = bool(train.get("shuffle", True))
    drop_last = bool(train.get("drop_last", False))
    device = "cuda" if a.device in ("cuda", "gpu") else "cpu"
    torch.set_num_threads(a.threads or os.cpu_count() or 1)
    torch.manual_seed(seed)
    if device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False

    if a.data:
        folder = a.data
    else:
        if data.get("format") != "mnist":
            sys.exit(f"{a.config}: data.format is '{data.get('format')}', not mnist; "
                     "give --data DIR with MNIST IDX files")
        folder = os.path.normpath(tt.resolve_data_path(a.config, data.get("train") or data.get("path", "")))
    test_folder = (tt.resolve_data_path(a.config, data["test"])
                   if not a.data and data.get("test") else folder)
    norm = data.get("normalize") or {}
    mean = np.float32((norm.get("mean") or [0.0])[0])
    std = np.float32((norm.get("std") or [1.0])[0])
    shape = tt.input_shape(cfg)
    xtr, ytr = load_split(folder, "train", mean, std, shape)
    xte, yte = load_split(test_folder, "test", mean, std, shape)
    xtr, ytr, xte, yte = (t.to(device) for t in (xtr, ytr, xte, yte))

    model, _ = tt.build_model(cfg)
    model = model.to(device)
    loss_fn = tt.make_loss(cfg)
    base_lr = a.lr if a.lr is not None else float((train.get("optimizer") or {}).get("lr", 0.01))
    opt = tt.make_optimizer(cfg, model.parameters(), lr=base_lr)
    sched = train.get("schedule") or {}
    print(f"{tt.framework()} {cfg.get('name', a.config)}: {len(xtr)} train / {len(xte)} test "
          f"images from {folder}, batch {batch}, {torch.get_num_threads()} threads, {device}")

    g = torch.Generator().manual_seed(seed)
    for ep in range(epochs):
        lr = lr_at(ep, base_lr, sched, epochs)
        for group in opt.param_groups:
            group["lr"] = lr
        model.train()
        order = (torch.randperm(len(xtr), generator=g) if shuffle
                 else torch.arange(len(xtr))).to(device)
        n_batches = len(xtr) // batch if drop_last else math.ceil(len(xtr) / batch)
        t0 = time.perf_counter()
        tot_loss = 0.0
        correct = 0
        seen = 0
        for b in range(n_batches):
            idx = order[b * batch:(b + 1) * batch]
            x, y = xtr[idx], ytr[idx]
            opt.zero_grad(set_to_none=True)
            out = model(x)
            loss = loss_fn(out, y)
            loss.backward()
            opt.step()
            tot_loss += loss.item() * len(y)
            correct += (out.argmax(1) == y).sum().item()
            seen += len(y)
        dt = time.perf_counter() - t0
        model.eval()
        with torch.no_grad():
            te_correct = 0
            te_loss = 0.0
            for b in range(0, len(xte), 1000):
                out = model(xte[b:b + 1000])
                te_loss += loss_fn(out, yte[b:b + 1000]).item() * len(out)
                te_correct += (out.argmax(1) == yte[b:b + 1000]).sum().item()
        print(f"epoch {ep + 1}/{epochs}: lr {lr:g}, train loss {tot_loss / seen:.4f} "
              f"acc {100 * correct / seen:.2f}%, test loss {te_loss / len(xte):.4f} "
              f"acc {100 * te_correct / len(xte):.2f}%, {dt:.1f} s, {seen / dt:.0f} img/s",
              flush=True)


if __name__ == "__main__":
    try:
        main()
    except (tt.ConfigError, FileNotFoundError, ValueError) as e:
        sys.exit(f"pytorch_train_mnist: {e}")

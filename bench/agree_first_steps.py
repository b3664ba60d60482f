"""Checks that tandem and PyTorch train a config alike, step for step, from the same weights.

tandem trains the config for two epochs of STEPS steps on a small CIFAR-10-format data set this
script writes (random pixels, random labels, read in file order: no shuffling, no augmentation),
saving a checkpoint after the first. The PyTorch twin (tandem_torch.py) is built from the same
YAML, loads that checkpoint (weights, batch normalization's running statistics, SGD's velocity
or Adam's moments), and trains the second epoch on the same batches. The table compares the two
frameworks' losses of the second epoch's steps: the first step computes with identical weights,
so its difference is fp32 rounding alone; later ones show how far the rounding carries.

For the comparison the config is changed where the two frameworks cannot match draw for draw,
and the changes are printed: dropout and drop_path rates 0 (their masks are each framework's own
random numbers), the input 3x32x32 and the last dense layer 10 units (the data set's), data
CIFAR-10 binary, no shuffle, normalization by a fixed mean and std, a constant learning rate.

Run with /usr/bin/python3 (Debian's python3-torch), after building tandem:
  /usr/bin/python3 bench/agree_first_steps.py --config configs/resnet18_cifar.yaml
"""
import argparse
import json
import os
import struct
import subprocess
import sys
import tempfile

import numpy as np
import torch
import yaml

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tandem_torch  # noqa: E402

MEAN, STD = [0.49, 0.48, 0.45], [0.25, 0.24, 0.26]


def comparable(cfg, data_dir, batch, lr):
    """The config as both frameworks can run it draw for draw, and the changes made."""
    changes = []
    cfg = dict(cfg)

    def zero_rates(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in ("dropout", "drop_path") and isinstance(v, dict) and v.get("rate"):
                    changes.append(f"{k} rate {v['rate']} -> 0")
                    v["rate"] = 0.0
                else:
                    zero_rates(v)
        elif isinstance(node, list):
            for v in node:
                zero_rates(v)

    zero_rates(cfg.get("layers"))
    zero_rates(cfg.get("blocks"))
    if cfg.get("input", {}).get("shape") != [3, 32, 32]:
        changes.append(f"input {cfg['input']['shape']} -> [3, 32, 32]")
        cfg["input"] = {"shape": [3, 32, 32]}
    last = cfg["layers"][-1]
    if isinstance(last, dict):
        dense = last.get("dense")
        if isinstance(dense, dict) and dense.get("units") != 10:
            changes.append(f"last dense units {dense['units']} -> 10")
            dense["units"] = 10
    cfg["data"] = {"format": "cifar10", "path": data_dir,
                   "normalize": {"mean": MEAN, "std": STD}}
    train = dict(cfg.get("train") or {})
    train.update({"epochs": 2, "batch_size": batch, "shuffle": False, "drop_last": True})
    train.pop("schedule", None)
    if lr is not None:
        train["optimizer"] = dict(train.get("optimizer") or {}, lr=lr)
        changes.append(f"learning rate {lr:g}")
    cfg["train"] = train
    cfg.pop("precision", None)
    return cfg, changes


def write_cifar(folder, per_file, seed):
    """Five train files of per_file records and a test file: random labels and pixels."""
    rng = np.random.default_rng(seed)
    os.makedirs(folder, exist_ok=True)
    records = []
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        labels = rng.integers(0, 10, per_file, dtype=np.uint8)
        pixels = rng.integers(0, 256, (per_file, 3 * 32 * 32), dtype=np.uint8)
        with open(os.path.join(folder, name), "wb") as f:
            f.write(np.concatenate([labels[:, None], pixels], axis=1).tobytes())
        if name != "test_batch.bin":
            records.append((labels, pixels))
    labels = np.concatenate([r[0] for r in records])
    pixels = np.concatenate([r[1] for r in records]).reshape(-1, 3, 32, 32)
    return labels, pixels


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        assert t["dtype"] == "F32", (name, t["dtype"])
        a, b = t["data_offsets"]
        out[name] = torch.from_numpy(np.frombuffer(data[a:b], dtype="<f4").copy()).reshape(t["shape"])
    return out


def load_into(model, optimizer, tensors):
    """Copies the checkpoint's tensors into the twin, layer by layer under tandem's names."""
    names = model.names if hasattr(model, "names") else None
    if names is None:
        raise SystemExit("the twin of this config is a plain stack: use a config with named layers")
    used = set()
    for name, mod in zip(names, model.layers):
        leaf = next((m for m in mod.modules() if any(True for _ in m.parameters(recurse=False))),
                    None)
        if leaf is None:
            continue
        for pname, p in leaf.named_parameters(recurse=False):
            key = f"{name}.{pname}"
            with torch.no_grad():
                p.copy_(tensors[key].reshape(p.shape))
            used.add(key)
            for state, opt_key in (("momentum_buffer", "velocity"), ("exp_avg", "m"),
                                   ("exp_avg_sq", "v")):
                k = f"optimizer.{key}.{opt_key}"
                if k in tensors:
                    optimizer.state[p][state] = tensors[k].reshape(p.shape).clone()
                    used.add(k)
        for bname, buf in leaf.named_buffers(recurse=False):
            key = f"{name}.{bname}"
            if key in tensors:
                buf.copy_(tensors[key].reshape(buf.shape))
                used.add(key)
    missing = [k for k in tensors if k not in used]
    if missing:
        raise SystemExit(f"checkpoint tensors the twin has no place for: {missing[:5]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--steps", type=int, default=6, help="steps an epoch (and compared)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--lr", type=float, default=None, help="the optimizer's (default: the config's)")
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--trainer", default=os.path.join(os.path.dirname(__file__), "..", "build",
                                                      "trainer"))
    ap.add_argument("--tolerance", type=float, default=1e-3,
                    help="largest relative difference of the first step's losses (default 1e-3)")
    args = ap.parse_args()

    torch.set_num_threads(args.threads)
    original = tandem_torch.load_config(args.config)
    with tempfile.TemporaryDirectory() as tmp:
        data = os.path.join(tmp, "data")
        per_file = -(-args.steps * args.batch_size // 5)
        labels, pixels = write_cifar(data, per_file, seed=11)
        cfg, changes = comparable(yaml.safe_load(open(args.config)), data, args.batch_size,
                                  args.lr)
        cfg["data"]["path"] = data
        path = os.path.join(tmp, "agree.yaml")
        with open(path, "w") as f:
            yaml.safe_dump(cfg, f, sort_keys=False)
        ckpt, metrics = os.path.join(tmp, "ckpt"), os.path.join(tmp, "steps.jsonl")
        cmd = [args.trainer, "--config", path, "--device", "cpu", "--threads", str(args.threads),
               "--quiet", "--checkpoint-dir", ckpt, "--log-every", "1", "--metrics", metrics]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            raise SystemExit(f"tandem failed ({r.returncode}):\n{r.stdout}{r.stderr}")
        steps = [json.loads(line) for line in open(metrics) if '"step"' in line]
        tandem_losses = [s["loss"] for s in steps if s["step"] > args.steps][:args.steps]

        model, _ = tandem_torch.build_model(cfg)
        loss_fn = tandem_torch.make_loss(cfg)
        opt = tandem_torch.make_optimizer(cfg, model.parameters())
        load_into(model, opt, read_safetensors(os.path.join(ckpt, "epoch-1.safetensors")))
        model.train()
        mean = torch.tensor(MEAN).view(1, 3, 1, 1)
        std = torch.tensor(STD).view(1, 3, 1, 1)
        torch_losses = []
        for k in range(args.steps):
            sl = slice(k * args.batch_size, (k + 1) * args.batch_size)
            x = (torch.from_numpy(pixels[sl]).float() / 255.0 - mean) / std
            y = torch.from_numpy(labels[sl].astype(np.int64))
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            torch_losses.append(loss.item())

    print(f"{original.get('name', args.config)}: epoch 2 of {args.steps} steps, batch "
          f"{args.batch_size}, both from tandem's epoch-1 checkpoint; {args.threads} threads")
    for c in changes:
        print(f"  changed for the comparison: {c}")
    print(f"  {'step':>4}  {'tandem':>10}  {'pytorch':>10}  {'rel. diff':>9}")
    worst = 0.0
    for k, (a, b) in enumerate(zip(tandem_losses, torch_losses)):
        d = abs(a - b) / max(abs(b), 1e-12)
        worst = max(worst, d)
        print(f"  {args.steps + k + 1:>4}  {a:>10.6f}  {b:>10.6f}  {d:>9.2e}")
    first = abs(tandem_losses[0] - torch_losses[0]) / max(abs(torch_losses[0]), 1e-12)
    verdict = "agree" if first <= args.tolerance else "DIFFER"
    print(f"  {verdict}: first step {first:.2e} (tolerance {args.tolerance:g}), "
          f"max over {len(torch_losses)} steps {worst:.2e}")
    return 0 if verdict == "agree" else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""trainer import against PyTorch's own models: a torchvision network with seeded random weights
and batch-normalization statistics that are not the identity, exported by torch.onnx.export at
opset 13 (eval mode: batch normalization folded into the convolutions) and at opset 17 (the
normalization kept: TrainingMode.PRESERVE, do_constant_folding=False), is imported; for each,
`trainer predict --json` on a few images gives PyTorch's eval-mode logits within 1e-4 relative.
With --step, one SGD step from the imported weights (trainer train --init) gives PyTorch's loss
and updated weights. A model that tandem cannot express (--refused) must be refused by name.

Exit 0: every check held; 1: one did not (said why); 77: no PyTorch here (skipped, said why).
"""
import argparse
import copy
import json
import os
import shutil
import struct
import subprocess
import sys
import zlib

try:
    import torch
    import torchvision
except ImportError as e:  # the test skips, and says why
    print(f"skipped: /usr/bin/python3 has no PyTorch and torchvision ({e}); "
          "tools/setup.sh installs python3-torch and python3-torchvision")
    sys.exit(77)

SIZE = 64  # input height and width: small, so that the test stays fast
# The training step's batch: batch normalization over fewer samples is ill-conditioned enough in
# deep networks that fp32's rounding (PyTorch's as tandem's) reaches percents of the update.
STEP_BATCH = 16
MEAN, STD = [0.485, 0.456, 0.406], [0.229, 0.224, 0.225]


class Activations(torch.nn.Module):
    """The operators no torchvision classifier above uses: each activation import takes, a
    ceil-mode average pooling, and the Shape/Gather/Unsqueeze/Concat chain of x.view(N, -1)."""

    def __init__(self):
        super().__init__()
        nn = torch.nn
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.acts = nn.ModuleList([nn.GELU(), nn.SiLU(), nn.LeakyReLU(0.2), nn.Tanh(), nn.ELU(0.5),
                                   nn.Softplus(), nn.Hardswish(), nn.Hardsigmoid(), nn.Sigmoid(),
                                   nn.ReLU6()])
        self.convs = nn.ModuleList([nn.Conv2d(8, 8, 3, padding=1) for _ in self.acts])
        self.pool = nn.AvgPool2d(3, stride=2, ceil_mode=True)
        self.fc = nn.Linear(8 * 32 * 32, 10)

    def forward(self, x):
        x = self.conv(x)
        for act, conv in zip(self.acts, self.convs):
            x = conv(act(x))
        x = self.pool(x)
        return self.fc(x.reshape(x.size(0), -1))


def build(name):
    torch.manual_seed(0)
    if name == "activations":
        return Activations().eval()
    kwargs = {"aux_logits": False, "init_weights": True} if name == "googlenet" else {}
    model = getattr(torchvision.models, name)(**kwargs)
    g = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                c = m.num_features
                m.weight.copy_(0.5 + torch.rand(c, generator=g))
                m.bias.copy_(0.2 * torch.randn(c, generator=g))
                m.running_mean.copy_(0.2 * torch.randn(c, generator=g))
                m.running_var.copy_(0.5 + torch.rand(c, generator=g))
    return model.eval()


def write_png(path, pixels):
    """pixels: uint8 tensor (H, W, 3); a plain RGB PNG, without any image library."""
    h, w, _ = pixels.shape
    raw = b"".join(b"\x00" + bytes(pixels[y].flatten().tolist()) for y in range(h))

    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data +
                struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def images(folder, count, seed=2):
    """count random images as PNG files, and the normalized batch PyTorch takes for them."""
    g = torch.Generator().manual_seed(seed)
    pixels = torch.randint(0, 256, (count, SIZE, SIZE, 3), generator=g, dtype=torch.uint8)
    files = []
    for i in range(count):
        files.append(os.path.join(folder, f"image{i}.png"))
        write_png(files[-1], pixels[i])
    x = pixels.permute(0, 3, 1, 2).float() / 255
    x = (x - torch.tensor(MEAN).view(1, 3, 1, 1)) / torch.tensor(STD).view(1, 3, 1, 1)
    return files, x


def export(model, path, opset, keep_batchnorm):
    mode = torch.onnx.TrainingMode.PRESERVE if keep_batchnorm else torch.onnx.TrainingMode.EVAL
    torch.onnx.export(model, torch.zeros(1, 3, SIZE, SIZE), path, opset_version=opset,
                      training=mode, do_constant_folding=not keep_batchnorm)


def run(cmd):
    return subprocess.run(cmd, capture_output=True, text=True)


def fail(why):
    print("FAILED: " + why)
    sys.exit(1)


def check_predict(args, model, work, opset, keep_batchnorm, files, x):
    tag = f"opset {opset}, " + ("batch normalization kept" if keep_batchnorm else "folded")
    onnx_path = os.path.join(work, f"{args.model}.onnx")
    export(model, onnx_path, opset, keep_batchnorm)
    out = os.path.join(work, "imported")
    r = run([args.trainer, "import", onnx_path, "--out", out, "--normalize", "imagenet",
             "--force"])
    if r.returncode != 0:
        fail(f"{tag}: trainer import exited {r.returncode}:\n{r.stdout}{r.stderr}")
    folded_note = "folded in by PyTorch's eval-mode export" in r.stdout
    if folded_note == keep_batchnorm and any(
            isinstance(m, torch.nn.BatchNorm2d) for m in model.modules()):
        fail(f"{tag}: the import {'says' if folded_note else 'does not say'} that batch "
             f"normalization was folded:\n{r.stdout}")
    checkpoint = os.path.join(out, f"{args.model}.safetensors")
    r = run([args.trainer, "predict", "--checkpoint", checkpoint, "--json", *files])
    if r.returncode != 0:
        fail(f"{tag}: trainer predict exited {r.returncode}:\n{r.stdout}{r.stderr}")
    ours = torch.tensor([json.loads(line)["logits"] for line in r.stdout.splitlines()],
                        dtype=torch.float64)
    with torch.no_grad():
        theirs = model(x).double()
    if ours.shape != theirs.shape:
        fail(f"{tag}: predict gave logits of shape {tuple(ours.shape)}, PyTorch "
             f"{tuple(theirs.shape)}")
    err = ((ours - theirs).abs().max() / theirs.abs().max()).item()
    print(f"{args.model} ({tag}): {theirs.shape[1]} logits of {len(files)} images, largest "
          f"difference {err:.2e} of the largest logit")
    if not err <= 1e-4:
        fail(f"{tag}: logits differ from PyTorch's by {err:.2e} of the largest (limit 1e-4)")
    # The GPU backend, where this machine has one that runs (exit status 5: none; said why).
    r = run([args.trainer, "predict", "--checkpoint", checkpoint, "--json", "--device", "gpu",
             *files])
    if r.returncode == 5:
        print(f"{args.model} ({tag}), GPU: skipped ({r.stderr.strip().splitlines()[0]})")
    elif r.returncode != 0:
        fail(f"{tag}: trainer predict --device gpu exited {r.returncode}:\n{r.stdout}{r.stderr}")
    else:
        gpu = torch.tensor([json.loads(line)["logits"] for line in r.stdout.splitlines()],
                           dtype=torch.float64)
        gerr = ((gpu - theirs).abs().max() / theirs.abs().max()).item()
        print(f"{args.model} ({tag}), GPU: largest difference {gerr:.2e} of the largest logit")
        if not gerr <= 1e-4:
            fail(f"{tag}: GPU logits differ from PyTorch's by {gerr:.2e} (limit 1e-4)")
    return out


def read_safetensors(path):
    """name -> float32 tensor, from tandem's checkpoint (safetensors: a JSON header, then data)."""
    with open(path, "rb") as f:
        size = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(size))
        data = f.read()
    out = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        out[name] = torch.frombuffer(bytearray(data[begin:end]), dtype=torch.float32).reshape(
            entry["shape"])
    return out


def check_step(args, model, work, imported):
    """One SGD step (lr 0.01, no momentum) on 16 images from the imported weights
    (train.init), in train mode: tandem's loss, weights and running statistics are PyTorch's. The
    ONNX graph holds no dropout or stochastic depth: PyTorch's are switched off for the step."""
    data = os.path.join(work, "data")
    os.makedirs(os.path.join(data, "images"))
    files, x = images(os.path.join(data, "images"), STEP_BATCH, seed=3)
    # One image of each of 4 classes in turn; tandem reads a class's folder in name order.
    labels = [i % 4 for i in range(STEP_BATCH)]
    for split in ("train", "test"):
        for i, f in enumerate(files):
            folder = os.path.join(data, split, f"class{labels[i]}")
            os.makedirs(folder, exist_ok=True)
            shutil.copy(f, os.path.join(folder, f"{i:02d}.png"))
    order = sorted(range(STEP_BATCH), key=lambda i: (labels[i], i))
    x, labels = x[order], [labels[i] for i in order]
    yaml = open(os.path.join(imported, f"{args.model}.yaml")).read()
    yaml = yaml[:yaml.index("\nloss:")] + f"""
loss: softmax_cross_entropy
data: {{format: image_folder, path: {data}, normalize: {{mean: {MEAN}, std: {STD}}}}}
train: {{epochs: 1, batch_size: {STEP_BATCH}, shuffle: false, init: {args.model}.safetensors,
        optimizer: {{type: sgd, lr: 0.01}}, checkpoint: {{dir: {work}/ckpt}}}}
"""
    config = os.path.join(imported, "step.yaml")
    open(config, "w").write(yaml)
    metrics = os.path.join(work, "step.jsonl")
    r = run([args.trainer, "--config", config, "--quiet", "--metrics", metrics])
    if r.returncode != 0:
        fail(f"one step from the imported weights exited {r.returncode}:\n{r.stdout}{r.stderr}")
    ours_loss = json.loads(open(metrics).readline())["train_loss"]
    ours = read_safetensors(os.path.join(work, "ckpt", "epoch-1.safetensors"))

    for m in model.modules():
        if isinstance(m, torch.nn.Dropout):
            m.p = 0.0
        if type(m).__name__ == "StochasticDepth":
            m.p = 0.0

    def step(net, inputs):
        net.train()
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        loss = torch.nn.functional.cross_entropy(net(inputs), torch.tensor(labels))
        opt.zero_grad()
        loss.backward()
        opt.step()
        return loss.item(), {k: v.detach().double() for k, v in net.state_dict().items()
                             if v.dtype in (torch.float32, torch.float64)}

    # The same step in float64 is the reference both fp32 results are measured against: the
    # early layers' gradients pass many batch normalizations of few samples, whose backward
    # cancels, so fp32's rounding grows there, in PyTorch as in tandem.
    exact_loss, exact = step(copy.deepcopy(model).double(), x.double())
    torch_loss, theirs = step(model, x)
    loss_err = abs(ours_loss - exact_loss) / abs(exact_loss)
    torch_loss_err = abs(torch_loss - exact_loss) / abs(exact_loss)
    # Each tensor's error is measured against its layer's step: the largest change the exact
    # step makes to any of the layer's tensors (a bias that starts at zero has no scale of its
    # own, and its gradient, a sum over the batch and positions, cancels).
    before = read_safetensors(os.path.join(imported, f"{args.model}.safetensors"))
    step_of = {}
    for name, value in exact.items():
        layer = name.rsplit(".", 1)[0]
        change = (value - before[name].double()).abs().max().item()
        step_of[layer] = max(step_of.get(layer, 0.0), change)
    worst, torch_worst, where = 0.0, 0.0, ""
    for name, value in exact.items():
        if name not in ours:
            fail(f"the checkpoint after the step has no '{name}'")
        scale = max(step_of[name.rsplit(".", 1)[0]], 1e-30)
        err = (ours[name].double() - value).abs().max().item() / scale
        torch_err = (theirs[name] - value).abs().max().item() / scale
        if err > worst:
            worst, where = err, name
        torch_worst = max(torch_worst, torch_err)
        if os.environ.get("IMPORT_DEBUG"):
            print(f"  {name}: {err:.1e} (PyTorch {torch_err:.1e})")
    print(f"{args.model}, one SGD step against float64: loss {ours_loss:.6f}, relative error "
          f"{loss_err:.1e} (PyTorch fp32 {torch_loss_err:.1e}); updates of {len(exact)} tensors, "
          f"largest error {worst:.1e} of the layer's step ({where}) (PyTorch fp32 "
          f"{torch_worst:.1e})")
    if not loss_err <= 1e-4:
        fail(f"the step's loss is {loss_err:.1e} from float64's (limit 1e-4)")
    # Within 1e-2 of the layer's step (a wrong gradient is off by its own size), or as accurate
    # as PyTorch's own fp32 step where the network's conditioning puts even that beyond it.
    if not worst <= max(4 * torch_worst, 1e-2):
        fail(f"after the step '{where}' is {worst:.1e} of its layer's step from float64's, "
             f"PyTorch fp32 {torch_worst:.1e} (limit: 1e-2, or 4 times PyTorch's)")


def check_refused(args, model, work):
    onnx_path = os.path.join(work, f"{args.model}.onnx")
    export(model, onnx_path, 13, False)
    out = os.path.join(work, "refused")
    r = run([args.trainer, "import", onnx_path, "--out", out])
    print(r.stderr.strip())
    if r.returncode != 3:
        fail(f"import of {args.model} exited {r.returncode}, not 3 (refused)")
    if args.refused not in r.stderr:
        fail(f"the refusal does not name '{args.refused}'")
    if os.path.exists(out):
        fail(f"the refused import wrote {out}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--trainer", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--refused", help="the model must be refused, naming this")
    args = p.parse_args()
    torch.set_num_threads(2)
    work = os.path.join(args.work, args.model)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    model = build(args.model)
    if args.refused:
        check_refused(args, model, work)
        return
    files, x = images(work, 4)
    check_predict(args, model, work, 13, False, files, x)
    imported = check_predict(args, model, work, 17, True, files, x)
    check_step(args, model, work, imported)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

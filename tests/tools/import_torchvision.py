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


def images(folder, count):
    """count random images as PNG files, and the normalized batch PyTorch takes for them."""
    g = torch.Generator().manual_seed(2)
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
    check_predict(args, model, work, 17, True, files, x)
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()

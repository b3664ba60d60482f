#!/usr/bin/env python3
"""Training and inference throughput of a tandem YAML model in PyTorch (the reference figures for
`trainer bench`).

  python3 bench/pytorch_bench.py --config configs/lenet.yaml --device cpu --batch-size 64 \
      --steps 50 [--warmup 10] [--threads 2] [--json] [--channels-last] [--precision bf16]

Training step = forward + loss + backward + optimizer step (the config's optimizer); inference
step = forward only, under torch.no_grad() in eval mode. Inputs are random normal batches and
random labels, generated before timing. `--warmup` steps are run and not counted; every later
step is timed on its own (torch.cuda.synchronize() before and after on cuda) and the median step
time gives images/s. cuda: cudnn.benchmark on, TF32 off (tandem's fp32 default).

--precision bf16 (cpu, cuda) or fp16 (cuda) runs forward and loss under torch.autocast, the
weights and optimizer in fp32, as tandem's mixed precision does; fp16 adds a GradScaler. tf32 is
fp32 with TF32 tensor-core math (cuda).
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import torch  # noqa: E402

import tandem_torch as tt  # noqa: E402


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", required=True)
    ap.add_argument("--device", default="cpu", choices=["cpu", "cuda", "gpu"],
                    help="gpu is taken as cuda")
    ap.add_argument("--batch-size", type=int, default=None,
                    help="default: the config's train.batch_size")
    ap.add_argument("--batch-sizes", default=None,
                    help="comma-separated batch sizes, one result each (like trainer bench)")
    ap.add_argument("--steps", type=int, default=50, help="timed steps (each of train, infer)")
    ap.add_argument("--warmup", type=int, default=10, help="untimed steps before timing")
    ap.add_argument("--threads", type=int, default=None,
                    help="torch.set_num_threads (default: every core, like tandem)")
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--channels-last", action="store_true",
                    help="NHWC memory format for 4-D inputs")
    ap.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16", "fp16"],
                    help="bf16/fp16: autocast mixed precision (fp16 and tf32: cuda only)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--show-backend", action="store_true",
                    help="print (to stderr) which BLAS / oneDNN / threads torch really uses")
    return ap.parse_args()


def backend_report():
    """What torch really runs on: build config, the BLAS / oneDNN / OpenMP libraries mapped into
    this process, OpenBLAS's chosen kernel (through its C API) and threadpoolctl's view if the
    module is installed."""
    import ctypes
    import re
    lines = [torch.__config__.show().strip(), torch.__config__.parallel_info().strip()]
    try:
        maps = open("/proc/self/maps").read()
        libs = sorted(set(re.findall(r"/\S*(?:blas|lapack|dnnl|mkl|gomp|iomp)\S*", maps)))
        lines.append("libraries mapped: " + ", ".join(libs))
    except OSError:
        pass
    try:
        ob = ctypes.CDLL("libopenblas.so.0")
        ob.openblas_get_corename.restype = ctypes.c_char_p
        ob.openblas_get_config.restype = ctypes.c_char_p
        lines.append(f"OpenBLAS: kernel {ob.openblas_get_corename().decode()}, "
                     f"{ob.openblas_get_num_threads()} threads, "
                     f"config {ob.openblas_get_config().decode()}")
    except (OSError, AttributeError) as e:
        lines.append(f"OpenBLAS: not loadable ({e})")
    lines.append(f"oneDNN (mkldnn) enabled: {torch.backends.mkldnn.is_available() and torch.backends.mkldnn.enabled}"
                 " (run with DNNL_VERBOSE=1 to see each primitive's ISA, e.g. jit:avx512_core)")
    try:
        import threadpoolctl
        for info in threadpoolctl.threadpool_info():
            lines.append(f"threadpoolctl: {info}")
    except ImportError:
        lines.append("threadpoolctl: not installed")
    return "\n".join(lines)


def timed_steps(fn, warmup, steps, sync):
    for _ in range(warmup):
        fn()
    sync()
    times = []
    for _ in range(steps):
        sync()
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return times


def main():
    a = parse_args()
    device = "cuda" if a.device in ("cuda", "gpu") else "cpu"
    if a.steps < 1 or a.warmup < 0:
        sys.exit("--steps must be >= 1 and --warmup >= 0")
    cfg = tt.load_config(a.config)
    if a.batch_sizes:
        try:
            batches = [int(b) for b in a.batch_sizes.split(",")]
        except ValueError:
            sys.exit(f"--batch-sizes expects integers like 16,64,256, got {a.batch_sizes!r}")
    else:
        batches = [a.batch_size or int((cfg.get("train") or {}).get("batch_size", 64))]
    if min(batches) < 1:
        sys.exit("batch sizes must be >= 1")

    threads = a.threads if a.threads else (os.cpu_count() or 1)
    torch.set_num_threads(threads)
    torch.manual_seed(a.seed)
    if device == "cuda":
        if not torch.cuda.is_available():
            sys.exit("--device cuda: this PyTorch build has no CUDA or no GPU is visible "
                     f"(torch {torch.__version__}, built with CUDA {torch.version.cuda})")
        torch.backends.cudnn.benchmark = True
        torch.backends.cuda.matmul.allow_tf32 = a.precision == "tf32"
        torch.backends.cudnn.allow_tf32 = a.precision == "tf32"
        sync = torch.cuda.synchronize
    else:
        if a.precision in ("tf32", "fp16"):
            sys.exit(f"--precision {a.precision} is for cuda; the CPU runs fp32 or bf16")
        def sync():
            pass

    model, out_dim = tt.build_model(cfg)
    if a.show_backend:
        print(backend_report(), file=sys.stderr)
    classes = tt.num_classes(cfg, out_dim)
    shape = tt.input_shape(cfg)
    fmt = (torch.channels_last if a.channels_last and len(shape) == 3
           else torch.contiguous_format)
    model = model.to(device, memory_format=fmt)
    loss_fn = tt.make_loss(cfg)
    opt = tt.make_optimizer(cfg, model.parameters())
    low = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(a.precision)
    scaler = torch.cuda.amp.GradScaler() if a.precision == "fp16" else None

    def autocast():
        return torch.autocast(device_type=device, dtype=low, enabled=low is not None)

    for batch in batches:
        # A few distinct pre-generated batches, cycled (data generation is not timed).
        g = torch.Generator().manual_seed(a.seed + 1)
        nb = 4
        xs = [torch.randn((batch,) + shape, generator=g).to(device).contiguous(memory_format=fmt)
              if len(shape) == 3 else torch.randn((batch,) + shape, generator=g).to(device)
              for _ in range(nb)]
        ys = [torch.randint(0, min(classes, out_dim), (batch,), generator=g).to(device)
              for _ in range(nb)]
        it = [0]

        def train_step():
            i = it[0] % nb
            it[0] += 1
            opt.zero_grad(set_to_none=True)
            with autocast():
                out = model(xs[i])
            loss = loss_fn(out.float(), ys[i])  # the loss in fp32, as autocast's recipe has it
            if scaler:
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt.step()

        def infer_step():
            i = it[0] % nb
            it[0] += 1
            with autocast():
                model(xs[i])

        model.train()
        t_train = timed_steps(train_step, a.warmup, a.steps, sync)
        model.eval()
        with torch.no_grad():
            t_infer = timed_steps(infer_step, a.warmup, a.steps, sync)

        med_train = statistics.median(t_train)
        med_infer = statistics.median(t_infer)
        res = {
            "framework": tt.framework(),
            "device": device,
            "config": a.config,
            "batch_size": batch,
            "threads": torch.get_num_threads(),
            "precision": a.precision,
            "channels_last": fmt is torch.channels_last,
            "train_images_per_second": round(batch / med_train, 1),
            "infer_images_per_second": round(batch / med_infer, 1),
            "train_ms_per_step": round(med_train * 1e3, 3),
        }
        if a.json:
            print(json.dumps(res))
        else:
            name = cfg.get("name") or os.path.basename(a.config)
            dev = device if device == "cpu" else f"cuda ({torch.cuda.get_device_name()})"
            print(f"{res['framework']} {name} on {dev}, {res['threads']} threads, batch {batch}"
                  f"{', channels_last' if fmt is torch.channels_last else ''}"
                  f"{'' if a.precision == 'fp32' else ', ' + a.precision}: "
                  f"train {res['train_images_per_second']:.0f} img/s "
                  f"({res['train_ms_per_step']:.2f} ms/step median of {a.steps}, "
                  f"min {min(t_train) * 1e3:.2f}, max {max(t_train) * 1e3:.2f}), "
                  f"infer {res['infer_images_per_second']:.0f} img/s "
                  f"({med_infer * 1e3:.2f} ms/step)")


if __name__ == "__main__":
    try:
        main()
    except tt.ConfigError as e:
        sys.exit(f"pytorch_bench: {e}")

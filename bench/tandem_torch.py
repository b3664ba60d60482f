"""Builds the PyTorch equivalent of a tandem YAML model (shared by pytorch_bench.py and
pytorch_train_mnist.py).

Mirrors tandem's rules (docs: /work/shared/DESIGN.md, engine/layer.h, engine/backend.h):
  * layers are a sequential list; each item is a bare string ("- relu") or a one-key mapping
    ("- conv2d: {filters: 20, kernel: 5}");
  * conv2d {filters, kernel, stride: 1, padding: 0, dilation: 1, bias: true}
    dense {units, bias: true}            (a dense layer on a non-flat input flattens it first)
    maxpool / avgpool {kernel, stride: kernel, padding: 0}   (avgpool excludes padding)
    global_avgpool, flatten, relu, leaky_relu {alpha: 0.01}, sigmoid, tanh, dropout {rate: 0.5}
    batchnorm {momentum: 0.1, eps: 1e-5}  (BatchNorm2d on a (C,H,W) input, BatchNorm1d on a flat one)
    kernel / stride / padding / dilation may be an int or an [h, w] pair;
  * initialisation: He uniform U(+-sqrt(6/fan_in)) for a conv2d/dense layer directly followed by relu or
    leaky_relu, Glorot uniform U(+-sqrt(6/(fan_in+fan_out))) otherwise, biases zero;
  * loss softmax_cross_entropy (mean over the batch) or mse (mean over N*C against one-hot);
  * optimizer sgd {lr, momentum, weight_decay, nesterov} | adam | adamw {lr, beta1, beta2, eps,
    weight_decay}; tandem's defaults (weight_decay 0, also for adamw).
Unknown layer types or keys are errors here too (so a typo is not silently benchmarked).
"""
import math
import os

import torch
import torch.nn as nn
import torch.nn.functional as F
import yaml


class ConfigError(Exception):
    pass


def load_config(path):
    with open(path) as f:
        cfg = yaml.safe_load(f)
    if not isinstance(cfg, dict):
        raise ConfigError(f"{path}: not a YAML mapping")
    return cfg


def _pair(v, what):
    if isinstance(v, int):
        return (v, v)
    if isinstance(v, (list, tuple)) and len(v) == 2 and all(isinstance(x, int) for x in v):
        return tuple(v)
    raise ConfigError(f"{what}: expected an int or an [h, w] pair, got {v!r}")


_KEYS = {
    "conv2d": {"filters", "kernel", "stride", "padding", "dilation", "bias"},
    "dense": {"units", "bias"},
    "maxpool": {"kernel", "stride", "padding"},
    "avgpool": {"kernel", "stride", "padding"},
    "global_avgpool": set(),
    "flatten": set(),
    "relu": set(),
    "leaky_relu": {"alpha"},
    "sigmoid": set(),
    "tanh": set(),
    "dropout": {"rate"},
    "batchnorm": {"momentum", "eps"},
}


def parse_layers(cfg):
    """[(type, args dict)] from cfg['layers']."""
    out = []
    for i, item in enumerate(cfg.get("layers") or []):
        if isinstance(item, str):
            typ, args = item, {}
        elif isinstance(item, dict) and len(item) == 1:
            typ, args = next(iter(item.items()))
            args = args or {}
            if not isinstance(args, dict):
                raise ConfigError(f"layer {i} ({typ}): expected a mapping of options, got {args!r}")
        else:
            raise ConfigError(f"layer {i}: expected a layer name or a one-key mapping, got {item!r}")
        if typ not in _KEYS:
            raise ConfigError(f"layer {i}: unknown layer type '{typ}'; expected one of: "
                              + ", ".join(sorted(_KEYS)))
        unknown = set(args) - _KEYS[typ]
        if unknown:
            raise ConfigError(f"layer {i} ({typ}): unknown key(s) {sorted(unknown)}; expected one "
                              f"of: {sorted(_KEYS[typ])}")
        out.append((typ, args))
    if not out:
        raise ConfigError("the config has no layers")
    return out


def input_shape(cfg):
    shape = (cfg.get("input") or {}).get("shape")
    if not shape:
        raise ConfigError("input.shape is missing")
    return tuple(int(s) for s in shape)


def _init_weight(w, he):
    # fan_in / fan_out as tandem and torch define them: in * kh * kw, out * kh * kw.
    fan_in, fan_out = nn.init._calculate_fan_in_and_fan_out(w)
    with torch.no_grad():
        if he:
            a = math.sqrt(6.0 / fan_in)
            w.uniform_(-a, a)
        else:
            a = math.sqrt(6.0 / (fan_in + fan_out))
            w.uniform_(-a, a)


def build_model(cfg):
    """nn.Sequential equivalent to the tandem model, initialised like tandem."""
    layers = parse_layers(cfg)
    shape = input_shape(cfg)  # per sample, no batch axis
    mods = []

    def out_shape(mod, shp):
        with torch.no_grad():
            return tuple(mod(torch.zeros((1,) + shp)).shape[1:])

    for i, (typ, a) in enumerate(layers):
        nxt = layers[i + 1][0] if i + 1 < len(layers) else None
        he = nxt in ("relu", "leaky_relu")
        if typ == "conv2d":
            if len(shape) != 3:
                raise ConfigError(f"layer {i} (conv2d): needs a (C,H,W) input, got {shape}")
            m = nn.Conv2d(shape[0], int(a["filters"]), _pair(a["kernel"], "kernel"),
                          stride=_pair(a.get("stride", 1), "stride"),
                          padding=_pair(a.get("padding", 0), "padding"),
                          dilation=_pair(a.get("dilation", 1), "dilation"),
                          bias=bool(a.get("bias", True)))
            _init_weight(m.weight, he)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif typ == "dense":
            if len(shape) != 1:
                mods.append(nn.Flatten())
                shape = (math.prod(shape),)
            m = nn.Linear(shape[0], int(a["units"]), bias=bool(a.get("bias", True)))
            _init_weight(m.weight, he)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
        elif typ in ("maxpool", "avgpool"):
            k = _pair(a["kernel"], "kernel")
            s = _pair(a.get("stride", a["kernel"]), "stride")
            p = _pair(a.get("padding", 0), "padding")
            m = (nn.MaxPool2d(k, s, p) if typ == "maxpool"
                 else nn.AvgPool2d(k, s, p, count_include_pad=False))
        elif typ == "global_avgpool":
            m = nn.AdaptiveAvgPool2d(1)
        elif typ == "flatten":
            m = nn.Flatten()
        elif typ == "relu":
            m = nn.ReLU()
        elif typ == "leaky_relu":
            m = nn.LeakyReLU(float(a.get("alpha", 0.01)))
        elif typ == "sigmoid":
            m = nn.Sigmoid()
        elif typ == "tanh":
            m = nn.Tanh()
        elif typ == "dropout":
            m = nn.Dropout(float(a.get("rate", 0.5)))
        elif typ == "batchnorm":
            bn = nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d
            m = bn(shape[0], eps=float(a.get("eps", 1e-5)), momentum=float(a.get("momentum", 0.1)))
        mods.append(m)
        shape = out_shape(m, shape)
    model = nn.Sequential(*mods)
    if len(shape) != 1:
        # The loss sees (N, C): flatten a (C,1,1) output (global_avgpool last).
        model.append(nn.Flatten())
        shape = (math.prod(shape),)
    return model, shape[0]


def make_loss(cfg):
    loss = cfg.get("loss", "softmax_cross_entropy")
    if loss == "softmax_cross_entropy":
        ce = nn.CrossEntropyLoss()
        return lambda out, labels: ce(out, labels)
    if loss == "mse":
        mse = nn.MSELoss()  # mean over N*C, as tandem's mse_forward
        return lambda out, labels: mse(out, F.one_hot(labels, out.shape[1]).to(out.dtype))
    raise ConfigError(f"loss: unknown '{loss}'; expected softmax_cross_entropy or mse")


def make_optimizer(cfg, params, lr=None):
    o = dict(((cfg.get("train") or {}).get("optimizer") or {}))
    typ = o.pop("type", "sgd")
    lr = float(lr if lr is not None else o.get("lr", 0.01))
    wd = float(o.get("weight_decay", 0.0))
    if typ == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=float(o.get("momentum", 0.0)),
                               weight_decay=wd, nesterov=bool(o.get("nesterov", False)))
    betas = (float(o.get("beta1", 0.9)), float(o.get("beta2", 0.999)))
    eps = float(o.get("eps", 1e-8))
    if typ == "adam":
        return torch.optim.Adam(params, lr=lr, betas=betas, eps=eps, weight_decay=wd)
    if typ == "adamw":
        return torch.optim.AdamW(params, lr=lr, betas=betas, eps=eps, weight_decay=wd)
    raise ConfigError(f"train.optimizer.type: unknown '{typ}'; expected sgd, adam or adamw")


def num_classes(cfg, model_out):
    return int((cfg.get("data") or {}).get("classes", model_out))


def framework():
    v = torch.__version__.split(".")
    return f"pytorch {v[0]}.{v[1]}"


def resolve_data_path(cfg_path, p):
    """tandem's rule: relative to the config file's folder first, then the working directory."""
    if os.path.isabs(p):
        return p
    first = os.path.join(os.path.dirname(os.path.abspath(cfg_path)), p)
    return first if os.path.exists(first) else os.path.abspath(p)

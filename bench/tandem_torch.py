"""Builds the PyTorch equivalent of a tandem YAML model (shared by pytorch_bench.py and
pytorch_train_mnist.py).

Mirrors tandem's rules (README.md, engine/graph.cpp, layers/):
  * layers are a list; each item is a bare string ("- relu"), a one-key mapping
    ("- conv2d: {filters: 20, kernel: 5}"), or a mapping with one layer type plus optional
    `name:` (a word) and `inputs:` (a name or a list of names), e.g.
    "- {add: {}, inputs: [stem, batchnorm_3]}"; a type's value may be null or {};
  * a layer is called by its `name:`, else type_k for the k-th layer of its type (named ones
    count); `input` is the model's input. A layer takes the previous layer's output unless
    `inputs:` names earlier layers; every output but the last must be taken by a later layer;
  * when every layer takes the previous one, build_model returns an nn.Sequential; otherwise a
    BranchingModel (the layer modules in an nn.ModuleList plus each one's input indices; forward
    runs them in list order, keeping every output; the model's output is the last layer's);
  * conv2d {filters, kernel, stride: 1, padding: 0, dilation: 1, groups: 1, bias: true}
    dense {units, bias: true}            (a dense layer on a non-flat input flattens it first)
    maxpool / avgpool {kernel, stride: kernel, padding: 0, ceil_mode: false}   (avgpool excludes
    padding)
    global_avgpool, flatten, relu, leaky_relu {alpha: 0.01}, sigmoid, tanh, dropout {rate: 0.5}
    relu6, silu, hardswish, hardsigmoid, gelu {approximate: none | tanh}, elu {alpha: 1.0},
    softplus, mish (PyTorch's definitions)
    batchnorm {momentum: 0.1, eps: 1e-5, zero_init: false}  (BatchNorm2d on a (C,H,W) input,
    BatchNorm1d on a flat one; zero_init starts its weight at 0)
    groupnorm {groups, eps: 1e-5} (GroupNorm), drop_path {rate} (stochastic depth per sample,
    torchvision's StochasticDepth "row"; PyTorch's masks, not tandem's)
    global_avgpool {keep_dims: true}  ((C,1,1); false: (C))
    add (2+ inputs of one shape, elementwise sum; a name listed twice counts twice),
    multiply (2 inputs of one shape, or a (C) / (C,1,1) gate of a (C,H,W) input),
    concat (2+ inputs joined along the first non-batch axis: channels of (C,H,W), features of (F));
    kernel / stride / padding / dilation may be an int or an [h, w] pair;
  * initialisation: a conv2d/dense layer's `init:` when given (he_normal, he_uniform,
    glorot_normal, glorot_uniform, pytorch = U(+-1/sqrt(fan_in))); else He uniform
    U(+-sqrt(6/fan_in)) when its output's first taker (the first later layer, in list order, that
    takes it; in a sequential model, the layer directly after it) is relu-like (relu, leaky_relu,
    relu6, silu, hardswish, gelu, elu, softplus, mish), Glorot
    uniform U(+-sqrt(6/(fan_in+fan_out))) otherwise; biases zero;
  * loss softmax_cross_entropy (mean over the batch; {softmax_cross_entropy: {label_smoothing:
    e}} as CrossEntropyLoss(label_smoothing=e)) or mse (mean over N*C against one-hot);
  * optimizer sgd {lr, momentum, weight_decay, nesterov} | adam | adamw {lr, beta1, beta2, eps,
    weight_decay}; tandem's defaults (weight_decay 0, also for adamw).
Unknown layer types, keys or input names are errors here too (so a typo is not silently
benchmarked).
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
    "conv2d": {"filters", "kernel", "stride", "padding", "dilation", "groups", "bias", "init"},
    "dense": {"units", "bias", "init"},
    "maxpool": {"kernel", "stride", "padding", "ceil_mode"},
    "avgpool": {"kernel", "stride", "padding", "ceil_mode"},
    "global_avgpool": {"keep_dims"},
    "flatten": set(),
    "relu": set(),
    "leaky_relu": {"alpha"},
    "sigmoid": set(),
    "tanh": set(),
    "relu6": set(),
    "silu": set(),
    "hardswish": set(),
    "hardsigmoid": set(),
    "gelu": {"approximate"},
    "elu": {"alpha"},
    "softplus": set(),
    "mish": set(),
    "dropout": {"rate"},
    "batchnorm": {"momentum", "eps", "zero_init"},
    "groupnorm": {"groups", "eps"},
    "drop_path": {"rate"},
    "add": set(),
    "multiply": set(),
    "concat": set(),
}
_MERGE = ("add", "concat", "multiply")  # the layer types that take two or more inputs
# The activations after which tandem initialises a layer He uniform (layers/init_choice.cpp).
_RELU_LIKE = ("relu", "leaky_relu", "relu6", "silu", "hardswish", "gelu", "elu", "softplus", "mish")


def _item_type(item):
    if isinstance(item, str):
        return item
    types = [k for k in item if k not in ("name", "inputs", "repeat")] if isinstance(item, dict) else []
    return types[0] if len(types) == 1 else None


def expand_blocks(cfg):
    """cfg['layers'] with every use of a block of cfg['blocks'] replaced by the block's layers, as
    tandem expands them: '$param' replaced by the use's value (or the param's default), names
    scoped by the use (NAME.layer, BLOCK_k for an unnamed use, NAME.k for `repeat`), `input` the
    block's input."""
    blocks = cfg.get("blocks") or {}
    out, uses = [], {}

    def last_name():
        if not out:
            return "input"
        last = out[-1]
        if isinstance(last, dict) and last.get("name"):
            return last["name"]
        typ = _item_type(last)
        k = sum(1 for o in out if _item_type(o) == typ and not (isinstance(o, dict) and o.get("name")))
        return f"{typ}_{k}"

    def sub(node, values, block):
        if isinstance(node, str) and node.startswith("$") and len(node) > 1:
            if node[1:] not in values:
                raise ConfigError(f"block '{block}' uses '{node}', which is none of its params")
            return values[node[1:]]
        if isinstance(node, dict):
            return {k: sub(v, values, block) for k, v in node.items()}
        if isinstance(node, list):
            return [sub(v, values, block) for v in node]
        return node

    def add(item, scope, scope_input, stack, counts, first):
        typ = _item_type(item)
        if typ in blocks:
            return use(item, typ, scope, scope_input, stack, counts, first)
        if scope:
            item = dict(item) if isinstance(item, dict) else {item: {}}
            own = item.get("name")
            if not own:
                counts[typ] = counts.get(typ, 0) + 1
                own = f"{typ}_{counts[typ]}"
            ins = item.get("inputs")
            ins = [ins] if isinstance(ins, str) else ins
            if ins:
                item["inputs"] = [scope_input if n == "input" else f"{scope}.{n}" for n in ins]
            elif first[0] and scope_input != last_name():
                item["inputs"] = [scope_input]
            item["name"] = f"{scope}.{own}"
        first[0] = False
        out.append(item)

    def use(item, typ, scope, scope_input, stack, counts, first):
        if typ in stack:
            raise ConfigError(f"block '{typ}' uses itself")
        block = blocks[typ]
        params = block.get("params") or {}
        given = (item.get(typ) if isinstance(item, dict) else None) or {}
        unknown = set(given) - set(params)
        if unknown:
            raise ConfigError(f"block '{typ}' has no param(s) {sorted(unknown)}")
        values = {k: v for k, v in params.items() if v is not None}
        values.update(given)
        missing = [k for k in params if k not in values]
        if missing:
            raise ConfigError(f"block '{typ}' needs a value for {missing}")
        name = item.get("name") if isinstance(item, dict) else None
        if not name:  # BLOCK_k: the k-th unnamed use, within its scope
            k = counts if scope else uses
            k[typ] = k.get(typ, 0) + 1
            name = f"{typ}_{k[typ]}"
        base = f"{scope}.{name}" if scope else name
        ins = item.get("inputs") if isinstance(item, dict) else None
        ins = [ins] if isinstance(ins, str) else ins
        if ins:
            n = ins[0]
            block_input = n if not scope else (scope_input if n == "input" else f"{scope}.{n}")
        else:
            block_input = scope_input if first[0] else last_name()
        times = int(item.get("repeat", 1)) if isinstance(item, dict) else 1
        for k in range(times):
            inner_scope = f"{base}.{k}" if times > 1 else base
            inner_first = [True]
            inner_counts = {}
            for inner in block["layers"]:
                add(sub(inner, values, typ), inner_scope, block_input, stack + [typ], inner_counts,
                    inner_first)
            block_input = last_name()
        first[0] = False

    first = [False]
    for item in cfg.get("layers") or []:
        add(item, "", "", [], {}, first)
    return out


def parse_items(cfg):
    """[{type, args, name, inputs}] from cfg['layers'] (name None / inputs None when not given),
    blocks expanded."""
    out = []
    for i, item in enumerate(expand_blocks(cfg)):
        name = inputs = None
        if isinstance(item, str):
            typ, args = item, {}
        elif isinstance(item, dict) and item:
            types = [k for k in item if k not in ("name", "inputs")]
            if len(types) != 1:
                raise ConfigError(f"layer {i}: " + ("no layer type beside 'name'/'inputs'" if not types
                                  else f"several layer types in one item ({', '.join(map(str, types))})")
                                  + f": {item!r}")
            typ = types[0]
            args = item[typ] or {}
            if not isinstance(args, dict):
                raise ConfigError(f"layer {i} ({typ}): expected a mapping of options, got {args!r}")
            if "name" in item:
                name = item["name"]
                if not isinstance(name, str) or not name:
                    raise ConfigError(f"layer {i} ({typ}): 'name' must be a word, got {name!r}")
            if "inputs" in item:
                inputs = item["inputs"]
                if isinstance(inputs, str):
                    inputs = [inputs]
                if (not isinstance(inputs, list) or not inputs
                        or not all(isinstance(x, str) for x in inputs)):
                    raise ConfigError(f"layer {i} ({typ}): 'inputs' must name one or more layers, "
                                      f"got {item['inputs']!r}")
        else:
            raise ConfigError(f"layer {i}: expected a layer name or a one-key mapping, got {item!r}")
        if typ not in _KEYS:
            raise ConfigError(f"layer {i}: unknown layer type '{typ}'; expected one of: "
                              + ", ".join(sorted(_KEYS)))
        for key in ("name", "inputs"):
            if key in args:
                raise ConfigError(f"layer {i} ({typ}): '{key}' is written among the layer's options; "
                                  f"put it beside the type, e.g. '- {{{typ}: {{}}, {key}: ...}}'")
        unknown = set(args) - _KEYS[typ]
        if unknown:
            raise ConfigError(f"layer {i} ({typ}): unknown key(s) {sorted(unknown)}; expected one "
                              f"of: {sorted(_KEYS[typ])}")
        out.append({"type": typ, "args": args, "name": name, "inputs": inputs})
    if not out:
        raise ConfigError("the config has no layers")
    return out


def parse_layers(cfg):
    """[(type, args dict)] from cfg['layers'] (names and inputs left out)."""
    return [(it["type"], it["args"]) for it in parse_items(cfg)]


def wiring(items):
    """(names, inputs): each layer's name (its `name:`, else type_k for the k-th unnamed layer of
    its type) and the activations it takes (0 = the model input, k = layer k-1's output),
    checked as tandem's Graph checks them."""
    names, counts = [], {}
    for it in items:
        if not it["name"]:
            counts[it["type"]] = counts.get(it["type"], 0) + 1
        names.append(it["name"] or f"{it['type']}_{counts[it['type']]}")
    named = {"input": 0}
    inputs = []
    for i, it in enumerate(items):
        label = f"layer {i} ({it['type']}, {names[i]})"
        ins = []
        for n in it["inputs"] or []:
            if n not in named:
                later = n in names[i:]
                raise ConfigError(f"{label} takes '{n}', " + (
                    "a layer listed after it" if later else
                    "which is no earlier layer's name; inputs name earlier layers: "
                    + ", ".join(named) + " (a layer is called by its 'name:', else type_k for the "
                    "k-th of its type)"))
            ins.append(named[n])
        ins = ins or [i]
        if names[i] in named:
            raise ConfigError(f"{label} is called '{names[i]}', a name " + (
                "kept for the model's input" if names[i] == "input" else "an earlier layer already has"))
        named[names[i]] = i + 1
        several = it["type"] in _MERGE
        if several != (len(ins) > 1):
            raise ConfigError(f"{label} takes " + ("two or more inputs" if several else "one input")
                              + f", got {len(ins)}")
        inputs.append(ins)
    taken = {a for ins in inputs for a in ins}
    for i in range(len(items) - 1):
        if i + 1 not in taken:
            raise ConfigError(f"the output of layer {i} ({items[i]['type']}, {names[i]}) is taken by "
                              "no later layer (the model's output is the last layer's)")
    return names, inputs


def input_shape(cfg):
    shape = (cfg.get("input") or {}).get("shape")
    if not shape:
        raise ConfigError("input.shape is missing")
    return tuple(int(s) for s in shape)


_INITS = ("he_normal", "he_uniform", "glorot_normal", "glorot_uniform", "pytorch")


def _init_weight(w, he, init=None, where="init"):
    """tandem's init: `init` when given, else He uniform before relu-like layers, Glorot uniform
    otherwise. fan_in / fan_out as tandem and torch define them: in * kh * kw, out * kh * kw."""
    if init is not None and init not in _INITS:
        raise ConfigError(f"{where}: unknown '{init}'; expected one of: " + ", ".join(_INITS))
    init = init or ("he_uniform" if he else "glorot_uniform")
    fan_in, fan_out = nn.init._calculate_fan_in_and_fan_out(w)
    with torch.no_grad():
        if init == "he_normal":
            w.normal_(0.0, math.sqrt(2.0 / fan_in))
        elif init == "glorot_normal":
            w.normal_(0.0, math.sqrt(2.0 / (fan_in + fan_out)))
        else:
            bound = {"he_uniform": math.sqrt(6.0 / fan_in),
                     "glorot_uniform": math.sqrt(6.0 / (fan_in + fan_out)),
                     "pytorch": 1.0 / math.sqrt(fan_in)}[init]
            w.uniform_(-bound, bound)


def _out_shape(mod, shp):
    # In eval mode: a batch of one is fine for BatchNorm1d, and no running statistics move.
    was = mod.training
    mod.eval()
    try:
        with torch.no_grad():
            return tuple(mod(torch.zeros((1,) + shp)).shape[1:])
    finally:
        mod.train(was)


def _make_layer(i, typ, a, shape, he):
    """(module, flatten_first) for a one-input layer on a per-sample input `shape`."""
    flatten_first = False
    if typ == "conv2d":
        if len(shape) != 3:
            raise ConfigError(f"layer {i} (conv2d): needs a (C,H,W) input, got {shape}")
        m = nn.Conv2d(shape[0], int(a["filters"]), _pair(a["kernel"], "kernel"),
                      stride=_pair(a.get("stride", 1), "stride"),
                      padding=_pair(a.get("padding", 0), "padding"),
                      dilation=_pair(a.get("dilation", 1), "dilation"),
                      groups=int(a.get("groups", 1)),
                      bias=bool(a.get("bias", True)))
        _init_weight(m.weight, he, a.get("init"), f"layer {i} ({typ}): init")
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif typ == "dense":
        if len(shape) != 1:
            flatten_first = True
            shape = (math.prod(shape),)
        m = nn.Linear(shape[0], int(a["units"]), bias=bool(a.get("bias", True)))
        _init_weight(m.weight, he, a.get("init"), f"layer {i} ({typ}): init")
        if m.bias is not None:
            nn.init.zeros_(m.bias)
    elif typ in ("maxpool", "avgpool"):
        k = _pair(a["kernel"], "kernel")
        s = _pair(a.get("stride", a["kernel"]), "stride")
        p = _pair(a.get("padding", 0), "padding")
        ceil = bool(a.get("ceil_mode", False))
        m = (nn.MaxPool2d(k, s, p, ceil_mode=ceil) if typ == "maxpool"
             else nn.AvgPool2d(k, s, p, ceil_mode=ceil, count_include_pad=False))
    elif typ == "global_avgpool":
        m = nn.AdaptiveAvgPool2d(1)
        if not bool(a.get("keep_dims", True)):
            m = nn.Sequential(m, nn.Flatten())
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
    elif typ == "relu6":
        m = nn.ReLU6()
    elif typ == "silu":
        m = nn.SiLU()
    elif typ == "hardswish":
        m = nn.Hardswish()
    elif typ == "hardsigmoid":
        m = nn.Hardsigmoid()
    elif typ == "gelu":
        m = nn.GELU(approximate=str(a.get("approximate", "none")))
    elif typ == "elu":
        m = nn.ELU(float(a.get("alpha", 1.0)))
    elif typ == "softplus":
        m = nn.Softplus()
    elif typ == "mish":
        m = nn.Mish()
    elif typ == "dropout":
        m = nn.Dropout(float(a.get("rate", 0.5)))
    elif typ == "batchnorm":
        bn = nn.BatchNorm2d if len(shape) == 3 else nn.BatchNorm1d
        m = bn(shape[0], eps=float(a.get("eps", 1e-5)), momentum=float(a.get("momentum", 0.1)))
        if bool(a.get("zero_init", False)):
            nn.init.zeros_(m.weight)
    elif typ == "groupnorm":
        m = nn.GroupNorm(int(a["groups"]), shape[0], eps=float(a.get("eps", 1e-5)))
    elif typ == "drop_path":
        m = DropPath(float(a["rate"]))
    else:
        raise ConfigError(f"layer {i} ({typ}): takes two or more inputs")
    return m, flatten_first


class DropPath(nn.Module):
    """Stochastic depth (tandem's drop_path): while training, each sample dropped whole with
    probability `rate`, the others scaled by 1 / (1 - rate); torchvision's StochasticDepth(p, "row").
    The masks are PyTorch's random numbers, not tandem's."""

    def __init__(self, rate):
        super().__init__()
        self.rate = rate

    def forward(self, x):
        if not self.training or self.rate == 0:
            return x
        keep = torch.empty((x.shape[0],) + (1,) * (x.dim() - 1), dtype=x.dtype, device=x.device)
        return x * keep.bernoulli_(1 - self.rate).div_(1 - self.rate)


class Add(nn.Module):
    """Elementwise sum of two or more inputs of one shape (tandem's add)."""

    def forward(self, *xs):
        y = xs[0] + xs[1]
        for x in xs[2:]:
            y = y + x
        return y


class Multiply(nn.Module):
    """Elementwise product of two inputs; a (N,C) or (N,C,1,1) gate broadcast over (N,C,H,W)
    (tandem's multiply)."""

    def forward(self, a, b):
        if a.dim() == 2 and b.dim() == 4:
            a = a[:, :, None, None]
        if b.dim() == 2 and a.dim() == 4:
            b = b[:, :, None, None]
        return a * b


class Concat(nn.Module):
    """Joins inputs along the first non-batch axis: channels of (N,C,H,W), features of (N,F)."""

    def forward(self, *xs):
        return torch.cat(xs, dim=1)


def _merge_shape(i, typ, shapes):
    first = shapes[0]
    if typ == "multiply":
        if len(shapes) != 2:
            raise ConfigError(f"layer {i} (multiply): takes two inputs, got {len(shapes)}")
        a, b = shapes
        if a == b:
            return a
        for gate, x in ((b, a), (a, b)):
            if len(x) == 3 and gate[0] == x[0] and (len(gate) == 1 or tuple(gate[1:]) == (1, 1)):
                return x
        raise ConfigError(f"layer {i} (multiply): shapes {a} and {b} do not broadcast")
    if typ == "add":
        for s in shapes:
            if s != first:
                raise ConfigError(f"layer {i} (add): needs inputs of one shape, got {first} and {s}")
        return first
    for s in shapes:
        if len(s) != len(first) or s[1:] != first[1:]:
            raise ConfigError(f"layer {i} (concat): joins inputs along their first axis, so the "
                              f"others must agree; got {first} and {s}")
    return (sum(s[0] for s in shapes),) + first[1:]


class BranchingModel(nn.Module):
    """A tandem model whose layers take named earlier outputs. layers[i] takes the activations
    inputs[i] (0 = the model input, k = layers[k-1]'s output); the model's output is the last
    layer's. forward runs the layers in list order and keeps every output."""

    def __init__(self, layers, inputs, names, flatten_output=False):
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.inputs = [list(ins) for ins in inputs]
        self.names = list(names)
        self.flatten_output = flatten_output

    def forward(self, x):
        acts = [x]
        for layer, ins in zip(self.layers, self.inputs):
            acts.append(layer(*[acts[a] for a in ins]))
        y = acts[-1]
        return torch.flatten(y, 1) if self.flatten_output else y

    def extra_repr(self):
        names = ["input"] + self.names
        return "wiring: " + "; ".join(
            f"{self.names[i]} <- {', '.join(names[a] for a in ins)}"
            for i, ins in enumerate(self.inputs)) + (", flatten_output=True" if self.flatten_output else "")


def build_model(cfg):
    """(model, output width): the nn.Module equivalent to the tandem model, initialised like tandem.
    nn.Sequential when every layer takes the previous one's output, else a BranchingModel."""
    items = parse_items(cfg)
    names, inputs = wiring(items)
    shape = input_shape(cfg)  # per sample, no batch axis
    if all(ins == [i] for i, ins in enumerate(inputs)):
        return _build_sequential([(it["type"], it["args"]) for it in items], shape)
    # He init when the output's first taker (in list order) is relu-like, as tandem's Graph.
    first_taker = {}
    for i, ins in enumerate(inputs):
        for a in ins:
            first_taker.setdefault(a, items[i]["type"])
    shapes = [shape]
    mods = []
    for i, it in enumerate(items):
        typ, a = it["type"], it["args"]
        in_shapes = [shapes[k] for k in inputs[i]]
        if typ in _MERGE:
            m = {"add": Add, "concat": Concat, "multiply": Multiply}[typ]()
            out = _merge_shape(i, typ, in_shapes)
        else:
            he = first_taker.get(i + 1) in _RELU_LIKE
            m, flatten_first = _make_layer(i, typ, a, in_shapes[0], he)
            if flatten_first:
                m = nn.Sequential(nn.Flatten(), m)
            out = _out_shape(m, in_shapes[0])
        mods.append(m)
        shapes.append(out)
    shape = shapes[-1]
    model = BranchingModel(mods, inputs, names, flatten_output=len(shape) != 1)
    return model, math.prod(shape)


def _build_sequential(layers, shape):
    mods = []
    for i, (typ, a) in enumerate(layers):
        nxt = layers[i + 1][0] if i + 1 < len(layers) else None
        he = nxt in _RELU_LIKE
        m, flatten_first = _make_layer(i, typ, a, shape, he)
        if flatten_first:
            mods.append(nn.Flatten())
            shape = (math.prod(shape),)
        mods.append(m)
        shape = _out_shape(m, shape)
    model = nn.Sequential(*mods)
    if len(shape) != 1:
        # The loss sees (N, C): flatten a (C,1,1) output (global_avgpool last).
        model.append(nn.Flatten())
        shape = (math.prod(shape),)
    return model, shape[0]


def make_loss(cfg):
    loss = cfg.get("loss", "softmax_cross_entropy")
    settings = {}
    if isinstance(loss, dict) and len(loss) == 1:  # {softmax_cross_entropy: {label_smoothing: e}}
        loss, settings = next(iter(loss.items()))
        settings = settings or {}
    if loss == "softmax_cross_entropy":
        ce = nn.CrossEntropyLoss(label_smoothing=float(settings.get("label_smoothing", 0.0)))
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

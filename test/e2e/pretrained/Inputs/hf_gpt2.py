#!/usr/bin/python3
"""The independent side of dt's pretrained-weight tests: GPT-2 checkpoints as Hugging Face
writes them, written and read here with nothing of dt's, and GPT-2's forward pass in
PyTorch as transformers computes it (Conv1D weights stored [in, out], GELU with tanh,
the head tied to wte).

    hf_gpt2.py make DIR [--seed S] [--prefix P] [--dtype F32|BF16|F16] [--files N] [sizes]
    hf_gpt2.py tokens FILE --windows N --seq T [--seed S]
    hf_gpt2.py check-loss DIR TOKENS RUN_OUTPUT --seq T [sizes]
    hf_gpt2.py compare EXPECTED_DIR EXPORTED_DIR [--frozen PATTERN ...]
    hf_gpt2.py check-config DIR [sizes]
    hf_gpt2.py lora-train DIR ADAPTERS TOKENS RUN_OUTPUT --seq T --steps N [sizes]
    hf_gpt2.py check-merge BASE_DIR ADAPTERS_DIR MERGED_DIR
    hf_gpt2.py check-base CHECKPOINT_DIR BASE_DIR
    hf_gpt2.py rms-train INITIAL_DIR TOKENS RUN_OUTPUT --seq T --steps N --eps E
    hf_gpt2.py rope-train INITIAL_DIR TOKENS RUN_OUTPUT --seq T --steps N --heads H --theta B
    hf_gpt2.py llama-train INITIAL_DIR TOKENS RUN_OUTPUT --seq T --steps N --heads H
        --kv-heads K --theta B --eps E
    hf_gpt2.py corrupt FILE (truncate|nan TENSOR|shape TENSOR|extra)
"""
import argparse
import json
import math
import os
import re
import struct
import sys

import numpy as np

DTYPES = {"F32": (np.float32, 4), "F16": (np.float16, 2), "BF16": (None, 2)}


def sizes(ap):
    ap.add_argument("--vocab", type=int, default=256)
    ap.add_argument("--ctx", type=int, default=32)
    ap.add_argument("--width", type=int, default=32)
    ap.add_argument("--depth", type=int, default=2)
    ap.add_argument("--heads", type=int, default=2)


def gpt2_state(a, rng):
    """Hugging Face GPT-2's tensors (names without a prefix), Conv1D weights [in, out]."""
    w, s = a.width, {}
    normal = lambda *shape: (rng.standard_normal(shape) * 0.1).astype(np.float32)
    s["wte.weight"] = normal(a.vocab, w)
    s["wpe.weight"] = normal(a.ctx, w)
    for i in range(a.depth):
        h = f"h.{i}."
        for ln in ("ln_1", "ln_2"):
            s[h + ln + ".weight"] = (1 + normal(w)).astype(np.float32)
            s[h + ln + ".bias"] = normal(w)
        s[h + "attn.c_attn.weight"] = normal(w, 3 * w)
        s[h + "attn.c_attn.bias"] = normal(3 * w)
        s[h + "attn.c_proj.weight"] = normal(w, w)
        s[h + "attn.c_proj.bias"] = normal(w)
        s[h + "mlp.c_fc.weight"] = normal(w, 4 * w)
        s[h + "mlp.c_fc.bias"] = normal(4 * w)
        s[h + "mlp.c_proj.weight"] = normal(4 * w, w)
        s[h + "mlp.c_proj.bias"] = normal(w)
        # The causal-mask buffer real GPT-2 files carry; not a parameter.
        s[h + "attn.bias"] = np.tril(np.ones((a.ctx, a.ctx), np.float32))[None, None]
    s["ln_f.weight"] = (1 + normal(w)).astype(np.float32)
    s["ln_f.bias"] = normal(w)
    return s


def to_bytes(array, dtype):
    if dtype == "F32":
        return array.astype("<f4").tobytes()
    if dtype == "F16":
        return array.astype("<f2").tobytes()
    # bf16: round to nearest even from f32's bits.
    bits = array.astype("<f4").view("<u4").astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    return rounded.astype("<u2").tobytes()


def from_bytes(raw, dtype, shape):
    if dtype == "F32":
        return np.frombuffer(raw, "<f4").reshape(shape).copy()
    if dtype == "F16":
        return np.frombuffer(raw, "<f2").astype(np.float32).reshape(shape)
    if dtype == "BF16":
        bits = np.frombuffer(raw, "<u2").astype(np.uint32) << 16
        return bits.view(np.float32).reshape(shape)
    if dtype == "I64":
        return np.frombuffer(raw, "<i8").reshape(shape).copy()
    raise SystemExit(f"unexpected dtype {dtype}")


def write_file(path, tensors, dtype):
    """One safetensors file, laid out as the reference writer lays it out."""
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(tensors):
        raw = to_bytes(tensors[name], dtype)
        header[name] = {"dtype": dtype, "shape": list(tensors[name].shape),
                        "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def read_file(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        out[name] = from_bytes(data[8 + n + b:8 + n + e], info["dtype"], info["shape"])
    assert 8 + n + max([i["data_offsets"][1] for k, i in header.items()
                        if k != "__metadata__"] + [0]) == len(data), f"{path}: trailing bytes"
    return out, header


def read_dir(path):
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            weight_map = json.load(f)["weight_map"]
        out = {}
        for file in sorted(set(weight_map.values())):
            tensors, _ = read_file(os.path.join(path, file))
            assert set(tensors) == {k for k, v in weight_map.items() if v == file}, file
            out.update(tensors)
        return out
    return read_file(os.path.join(path, "model.safetensors"))[0]


def make(a):
    rng = np.random.default_rng(a.seed)
    state = gpt2_state(a, rng)
    os.makedirs(a.dir, exist_ok=True)
    named = {a.prefix + k: v for k, v in state.items()}
    if a.files == 1:
        write_file(os.path.join(a.dir, "model.safetensors"), named, a.dtype)
        return
    names = sorted(named)
    groups = [names[i::a.files] for i in range(a.files)]
    weight_map = {}
    for i, group in enumerate(groups):
        file = f"model-{i + 1:05d}-of-{a.files:05d}.safetensors"
        write_file(os.path.join(a.dir, file), {k: named[k] for k in group}, a.dtype)
        weight_map.update({k: file for k in group})
    with open(os.path.join(a.dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": 0}, "weight_map": weight_map}, f)


def tokens(a):
    rng = np.random.default_rng(a.seed)
    count = a.windows * a.seq + 1
    header = np.zeros(256, np.int32)
    header[:3] = (20240520, 1, count)
    with open(a.file, "wb") as f:
        f.write(header.tobytes())
        f.write(rng.integers(0, 256, count, dtype=np.uint16).tobytes())


def gpt2_loss(state, tokens, a, lora=None):
    """GPT-2's mean cross-entropy in double precision; `lora` maps a Conv1D's
    name (`h.0.attn.c_attn`) to its adapter (A [r, in], B [out, r], scale)."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    t = {k: torch.from_numpy(np.ascontiguousarray(v)).double() for k, v in state.items()}
    lora = lora or {}

    def conv1d(z, name):
        y = z @ t[name + ".weight"] + t[name + ".bias"]
        if name in lora:
            A, B, scale = lora[name]
            y = y + (z @ A.T) @ B.T * scale
        return y
    return gpt2_loss_of(t, conv1d, tokens, a)


def gpt2_loss_of(t, conv1d, tokens, a):
    import torch
    import torch.nn.functional as F
    x, y = tokens[:, :-1], tokens[:, 1:]
    b, n = x.shape
    h = t["wte.weight"][x] + t["wpe.weight"][torch.arange(n)]
    hd = a.width // a.heads
    for i in range(a.depth):
        p = f"h.{i}."
        z = F.layer_norm(h, (a.width,), t[p + "ln_1.weight"], t[p + "ln_1.bias"], 1e-5)
        qkv = conv1d(z, p + "attn.c_attn")
        q, k, v = (u.view(b, n, a.heads, hd).transpose(1, 2) for u in qkv.split(a.width, -1))
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        mask = torch.ones(n, n, dtype=torch.bool).triu(1)
        att = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
        att = att.transpose(1, 2).reshape(b, n, a.width)
        h = h + conv1d(att, p + "attn.c_proj")
        z = F.layer_norm(h, (a.width,), t[p + "ln_2.weight"], t[p + "ln_2.bias"], 1e-5)
        z = F.gelu(conv1d(z, p + "mlp.c_fc"), approximate="tanh")
        h = h + conv1d(z, p + "mlp.c_proj")
    logits = F.layer_norm(h, (a.width,), t["ln_f.weight"], t["ln_f.bias"], 1e-5) @ t["wte.weight"].T
    return F.cross_entropy(logits.reshape(-1, a.vocab), y.reshape(-1))


def check_loss(a):
    state = {re.sub(r"^(transformer|model)\.", "", k): v for k, v in read_dir(a.dir).items()}
    expected = gpt2_loss(state, read_tokens(a.tokens, a.seq), a).item()
    with open(a.run_output) as f:
        m = re.search(r"step 1/\d+\s+loss ([0-9.]+)", f.read())
    if not m:
        raise SystemExit(f"{a.run_output}: no 'step 1/N loss' line")
    got = float(m.group(1))
    print(f"step-1 loss: dt {got:.6f}, PyTorch {expected:.6f}")
    if abs(got - expected) > 1e-4 * max(1.0, abs(expected)):
        raise SystemExit("the losses differ by more than 1e-4")


def compare(a):
    """Every tensor equal; with --frozen, those the patterns match equal and every
    other one changed (trained)."""
    import fnmatch
    expected = {re.sub(r"^(transformer|model)\.", "", k): v
                for k, v in read_dir(a.expected).items() if not k.endswith(".attn.bias")}
    got = read_dir(a.exported)
    if set(expected) != set(got):
        raise SystemExit(f"names differ: only expected {sorted(set(expected) - set(got))}, "
                         f"only exported {sorted(set(got) - set(expected))}")
    frozen = 0
    for name in sorted(expected):
        same = expected[name].shape == got[name].shape and np.array_equal(expected[name],
                                                                          got[name])
        keep = a.frozen is None or any(fnmatch.fnmatch(name, p) for p in a.frozen)
        if keep and not same:
            raise SystemExit(f"{name}: exported {got[name].shape} differs from the input")
        if not keep and same:
            raise SystemExit(f"{name}: not frozen, but it did not change")
        frozen += keep
    print(f"{frozen} tensors equal" + ("" if a.frozen is None else
                                      f", {len(got) - frozen} trained"))


def read_tokens(path, seq, with_mask=False):
    """The windows of seq + 1 tokens of an llm.c shard (uint16, or uint32 for
    magic 20240801); with_mask: also dt's loss mask (header word 3), 1 where
    a token is a target, as windows of the same shape."""
    import torch
    with open(path, "rb") as f:
        data = f.read()
    magic, _, count, masked = struct.unpack_from("<4i", data)
    width = np.uint32 if magic == 20240801 else np.uint16
    ids = np.frombuffer(data, width, count, 1024).astype(np.int64)
    mask = (np.frombuffer(data, np.uint8, count, 1024 + count * np.dtype(width).itemsize)
            if masked else np.ones(count, np.uint8))
    windows = (len(ids) - 1) // seq
    cut = lambda a: torch.from_numpy(np.stack([a[i * seq:i * seq + seq + 1]
                                               for i in range(windows)]))
    return (cut(ids), cut(mask.astype(np.int64))) if with_mask else cut(ids)


def read_adapters(path):
    """PEFT's adapter_model.safetensors: {module: (A, B)} with the names PEFT gives."""
    tensors, _ = read_file(os.path.join(path, "adapter_model.safetensors"))
    out = {}
    for name, value in tensors.items():
        m = re.fullmatch(r"base_model\.model\.transformer\.(.+)\.lora_([AB])\.weight", name)
        if not m:
            raise SystemExit(f"{name}: not a PEFT LoRA name for GPT2LMHeadModel")
        out.setdefault(m.group(1), {})[m.group(2)] = value
    return {k: (v["A"], v["B"]) for k, v in out.items()}


def lora_train(a):
    """Trains the adapters of ADAPTERS (dt's initial ones) on the base model in DIR with
    torch.optim.AdamW, the whole token file as the batch of every step, and checks
    that dt's logged losses of the same steps agree within 1e-4."""
    import torch
    state = {re.sub(r"^(transformer|model)\.", "", k): v for k, v in read_dir(a.dir).items()}
    with open(os.path.join(a.adapters, "adapter_config.json")) as f:
        config = json.load(f)
    scale = config["lora_alpha"] / config["r"]
    params, lora = [], {}
    for name, (A, B) in read_adapters(a.adapters).items():
        A = torch.from_numpy(A).double().requires_grad_()
        B = torch.from_numpy(B).double().requires_grad_()
        params += [A, B]
        lora[name] = (A, B, scale)
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=a.wd)
    batch = read_tokens(a.tokens, a.seq)
    expected = train_steps(opt, a.steps, lambda: gpt2_loss(state, batch, a, lora))
    compare_losses(a.run_output, expected)
    if abs(expected[-1] - expected[0]) < 1e-6:
        raise SystemExit("the adapters did not change the loss")


def check_merge(a):
    """MERGED is BASE with W + (alpha / r) · (B A) in place of every adapted Conv1D
    weight (stored [in, out], so the delta transposed), and every other tensor equal."""
    base = {re.sub(r"^(transformer|model)\.", "", k): v
            for k, v in read_dir(a.base).items() if not k.endswith(".attn.bias")}
    merged = read_dir(a.merged)
    with open(os.path.join(a.adapters, "adapter_config.json")) as f:
        config = json.load(f)
    scale = config["lora_alpha"] / config["r"]
    adapters = read_adapters(a.adapters)
    if set(base) != set(merged):
        raise SystemExit(f"names differ: {sorted(set(base) ^ set(merged))}")
    for name in sorted(base):
        module = name[:-len(".weight")] if name.endswith(".weight") else None
        if module in adapters:
            A, B = adapters[module]
            expected = base[name] + (scale * (B.astype(np.float64) @ A)).T
            err = np.abs(merged[name] - expected).max()
            if err > 1e-6 * max(1.0, np.abs(expected).max()):
                raise SystemExit(f"{name}: merged differs from W + s·BA by {err}")
        elif not np.array_equal(base[name], merged[name]):
            raise SystemExit(f"{name}: not adapted, but it differs from the base")
    print(f"{len(adapters)} adapted weights merged, {len(base) - len(adapters)} equal")


def check_base(a):
    """The base weights in a one-rank dt checkpoint are the file's, bit for bit."""
    with open(os.path.join(a.checkpoint, "manifest.json")) as f:
        manifest = json.load(f)
    with open(os.path.join(a.checkpoint, "tensors.bin"), "rb") as f:
        data = f.read()
    base = {re.sub(r"^(transformer|model)\.", "", k): v for k, v in read_dir(a.base).items()}
    names = {"ln1": "ln_1", "ln2": "ln_2", "qkv": "c_attn", "proj": "c_proj",
             "up": "c_fc", "down": "c_proj", "blocks": "h"}
    same = 0
    for t in manifest["tensors"]:
        if t["role"] != "param" or ".lora_" in t["name"]:
            continue
        hf = ".".join(names.get(p, p) for p in t["name"].split("."))
        raw = data[t["offset"]:t["offset"] + t["bytes"]]
        value = np.frombuffer(raw, "<f4").reshape(t["shape"])
        expected = base[hf]
        if re.search(r"\.(qkv|proj|up|down)\.weight$", t["name"]):
            expected = expected.T  # Conv1D, stored [in, out]
        if not np.array_equal(value, expected):
            raise SystemExit(f"{t['name']}: the base weight changed")
        same += 1
    print(f"{same} base weights bit for bit as loaded")


def train_steps(opt, steps, loss_of):
    """The losses of `steps` optimizer steps on the loss `loss_of()` computes."""
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        loss = loss_of()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def compare_losses(run_output, expected):
    with open(run_output) as f:
        got = [float(x) for x in re.findall(r"step\s+\d+/\d+\s+loss ([0-9.]+)", f.read())]
    if len(got) != len(expected):
        raise SystemExit(f"{run_output}: {len(got)} loss lines, expected {len(expected)}")
    for step, (g, e) in enumerate(zip(got, expected), 1):
        print(f"step {step}: dt {g:.6f}, PyTorch {e:.6f}")
        if abs(g - e) > 1e-4 * max(1.0, abs(e)):
            raise SystemExit(f"step {step}: the losses differ by more than 1e-4")


def rope_tables(a, hd, n):
    """transformers' rotary cos and sin for n positions of head width hd
    (inv_freq in float32, cat(freqs, freqs)), the frequencies scaled as
    rope_scaling says with llama-train's --rope-* options."""
    import torch
    inv_freq = 1.0 / (a.theta ** (torch.arange(0, hd, 2, dtype=torch.int64).float() / hd))
    factor = getattr(a, "rope_factor", 1.0)
    if factor != 1.0 and a.rope_original == 0:
        inv_freq = inv_freq / factor  # rope_type "linear"
    elif factor != 1.0:
        # rope_type "llama3", as transformers' _compute_llama3_parameters
        low_wavelen = a.rope_original / a.rope_low
        high_wavelen = a.rope_original / a.rope_high
        wavelen = 2 * math.pi / inv_freq
        scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
        smooth = (a.rope_original / wavelen - a.rope_low) / (a.rope_high - a.rope_low)
        smoothed = (1 - smooth) * scaled / factor + smooth * scaled
        medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
        inv_freq = torch.where(medium, smoothed, scaled)
    freqs = torch.arange(n).float()[:, None] * inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos().double(), emb.sin().double()


def rms_train(a):
    """rms_tiny.dt (embedding, RMS norm, head) in PyTorch from dt's exported initial
    weights: AdamW, no decay on the norm's 1-D weight (dt's rule), the whole token
    file as every step's batch."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    t = {k: torch.from_numpy(v).double().requires_grad_() for k, v in read_dir(a.dir).items()}
    decay = [t["wte.weight"], t["head.weight"]]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": [t["norm.weight"]], "weight_decay": 0.0}],
                            lr=1e-2, betas=(0.9, 0.95), eps=1e-8)
    batch = read_tokens(a.tokens, a.seq)
    x, y = batch[:, :-1], batch[:, 1:]

    def loss():
        h = t["wte.weight"][x]
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + a.eps) * t["norm.weight"]
        logits = h @ t["head.weight"].T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    compare_losses(a.run_output, train_steps(opt, a.steps, loss))


def image_setup(a):
    """conv_train's and pool_train's start: dt's exported initial weights in
    float64, AdamW without decay on 1-D tensors (dt's rule), the token file."""
    import torch
    torch.set_num_threads(1)
    t = {k: torch.from_numpy(v).double().requires_grad_() for k, v in read_dir(a.dir).items()}
    opt = torch.optim.AdamW(
        [{"params": [v for v in t.values() if v.dim() >= 2], "weight_decay": 0.1},
         {"params": [v for v in t.values() if v.dim() < 2], "weight_decay": 0.0}],
        lr=1e-2, betas=(0.9, 0.95), eps=1e-8)
    batch = read_tokens(a.tokens, a.seq)
    return t, opt, batch[:, :-1], batch[:, 1:]


def conv_train(a):
    """conv_tiny.dt (tokens as a 16 x 16 image, two convolutions, a head) in
    PyTorch from dt's exported initial weights: F.conv2d with the same padding,
    stride and groups; AdamW without decay on 1-D tensors (dt's rule)."""
    import torch
    import torch.nn.functional as F
    t, opt, x, y = image_setup(a)
    b, n = x.shape

    def loss():
        h = t["wte.weight"][x].reshape(b, 1, n, -1)
        h = F.conv2d(h, t["c1.weight"], t["c1.bias"], padding=1).relu()
        h = F.conv2d(h, t["c2_weight"], t["c2_bias"], stride=2, padding=(1, 2),
                     dilation=(1, 2), groups=2)
        logits = h.reshape(b, n, -1) @ t["head.weight"].T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    compare_losses(a.run_output, train_steps(opt, a.steps, loss))


def pool_train(a):
    """pool_tiny.dt in PyTorch: F.max_pool2d, F.avg_pool2d (padding counted, its
    default) and F.adaptive_avg_pool2d after a convolution; AdamW as conv_train."""
    import torch
    import torch.nn.functional as F
    t, opt, x, y = image_setup(a)
    b, n = x.shape

    def loss():
        h = t["wte.weight"][x].reshape(b, 1, n, -1)
        h = F.conv2d(h, t["c1.weight"], t["c1.bias"], padding=1).relu()
        h = F.avg_pool2d(F.max_pool2d(h, 3, stride=2, padding=1), 2, stride=1)
        tall = F.avg_pool2d(h, (2, 1), stride=1, padding=(1, 0))
        pooled = F.adaptive_avg_pool2d(h, 1).reshape(b, 1, 8).expand(b, n, 8)
        odd = F.adaptive_avg_pool2d(h, (9, 2)).reshape(b, 1, 144).expand(b, n, 144)
        logits = torch.cat([tall.reshape(b, n, -1), pooled, odd], -1) @ t["head.weight"].T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    compare_losses(a.run_output, train_steps(opt, a.steps, loss))


def rope_train(a):
    """rope_tiny.dt in PyTorch, its rotary embedding as transformers' LLaMA computes
    it (inv_freq in float32, cos/sin of cat(freqs, freqs), rotate_half), from dt's
    exported initial weights; AdamW as rms_train."""
    import torch
    import torch.nn.functional as F
    torch.set_num_threads(1)
    t = {k: torch.from_numpy(v).double().requires_grad_() for k, v in read_dir(a.dir).items()}
    opt = torch.optim.AdamW(list(t.values()), lr=1e-2, betas=(0.9, 0.95), eps=1e-8,
                            weight_decay=0.1)
    batch = read_tokens(a.tokens, a.seq)
    x, y = batch[:, :-1], batch[:, 1:]
    b, n = x.shape
    width = t["wte.weight"].shape[1]
    hd = width // a.heads
    cos, sin = rope_tables(a, hd, n)

    def rotate_half(u):
        return torch.cat((-u[..., hd // 2:], u[..., :hd // 2]), dim=-1)

    def loss():
        h = t["wte.weight"][x]
        q, k, v = ((h @ t["qkv.weight"].T).split(width, -1))
        q, k, v = (u.view(b, n, a.heads, hd).transpose(1, 2) for u in (q, k, v))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        mask = torch.ones(n, n, dtype=torch.bool).triu(1)
        att = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
        logits = (h + att.transpose(1, 2).reshape(b, n, width)) @ t["head.weight"].T
        return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))
    compare_losses(a.run_output, train_steps(opt, a.steps, loss))


def llama_loss(t, x, y, a):
    """transformers' LlamaForCausalLM forward on tensors named as dt names them:
    RMSNorm, rotate-half RoPE, repeat_kv, SwiGLU, causal attention, and the head
    (the embedding table with --tied)."""
    import torch
    import torch.nn.functional as F
    b, n = x.shape
    width = t["embed_tokens.weight"].shape[1]
    hd = width // a.heads
    cos, sin = rope_tables(a, hd, n)

    def rms(h, w):
        return h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + a.eps) * w

    def rope(u):
        return u * cos + torch.cat((-u[..., hd // 2:], u[..., :hd // 2]), dim=-1) * sin

    def repeat_kv(u):
        g = a.heads // a.kv_heads
        return u[:, :, None].expand(b, a.kv_heads, g, n, hd).reshape(b, a.heads, n, hd)

    h = t["embed_tokens.weight"][x]
    i = 0
    while f"layers.{i}.input_layernorm.weight" in t:
        p = f"layers.{i}."
        z = rms(h, t[p + "input_layernorm.weight"])
        q = (z @ t[p + "self_attn.q_proj.weight"].T).view(b, n, a.heads, hd).transpose(1, 2)
        k = (z @ t[p + "self_attn.k_proj.weight"].T).view(b, n, a.kv_heads, hd).transpose(1, 2)
        v = (z @ t[p + "self_attn.v_proj.weight"].T).view(b, n, a.kv_heads, hd).transpose(1, 2)
        q, k, v = rope(q), repeat_kv(rope(k)), repeat_kv(v)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
        mask = torch.ones(n, n, dtype=torch.bool).triu(1)
        att = scores.masked_fill(mask, float("-inf")).softmax(-1) @ v
        h = h + att.transpose(1, 2).reshape(b, n, width) @ t[p + "self_attn.o_proj.weight"].T
        z = rms(h, t[p + "post_attention_layernorm.weight"])
        g = z @ t[p + "mlp.gate_proj.weight"].T
        h = h + (F.silu(g) * (z @ t[p + "mlp.up_proj.weight"].T)) @ t[p + "mlp.down_proj.weight"].T
        i += 1
    head = t["embed_tokens.weight"] if a.tied else t["lm_head.weight"]
    logits = rms(h, t["norm.weight"]) @ head.T
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1))


def llama_train(a):
    """A LLaMA from dt's exported initial weights trained with AdamW in PyTorch (no
    decay on 1-D tensors, dt's rule); dt's logged losses must agree within 1e-4."""
    import torch
    torch.set_num_threads(1)
    # transformers' names: the head beside `model.`, which holds the rest.
    t = {re.sub(r"^model\.", "", k): torch.from_numpy(v).double().requires_grad_()
         for k, v in read_dir(a.dir).items()}
    if ("lm_head.weight" in t) == a.tied or \
            any(k.startswith("model.") for k in read_dir(a.dir)) != ("embed_tokens.weight" in t):
        raise SystemExit(f"{a.dir}: not LlamaForCausalLM's names"
                         f" ({'tied' if a.tied else 'untied'} head)")
    opt = torch.optim.AdamW(
        [{"params": [v for v in t.values() if v.dim() >= 2], "weight_decay": 0.1},
         {"params": [v for v in t.values() if v.dim() < 2], "weight_decay": 0.0}],
        lr=1e-2, betas=(0.9, 0.95), eps=1e-8)
    batch, mask = read_tokens(a.tokens, a.seq, with_mask=True)
    # Targets the loss mask excludes are ignored, as Hugging Face's -100 labels.
    x, y = batch[:, :-1], batch[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
    compare_losses(a.run_output, train_steps(opt, a.steps, lambda: llama_loss(t, x, y, a)))


def check_config(a):
    """The config.json transformers' GPT2Config reads, for the sizes given."""
    with open(os.path.join(a.dir, "config.json")) as f:
        config = json.load(f)
    expected = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"],
                "vocab_size": a.vocab, "n_positions": a.ctx, "n_embd": a.width,
                "n_layer": a.depth, "n_head": a.heads, "n_inner": None,
                "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5,
                "tie_word_embeddings": True}
    wrong = {k: (config.get(k), v) for k, v in expected.items() if config.get(k) != v}
    if wrong:
        raise SystemExit(f"config.json: (found, expected) {wrong}")
    print("config.json is GPT-2's")


def add_head(a):
    """A tied checkpoint that still carries the head: A_DIR's tensors and
    lm_head.weight, a copy of the embedding table, written to OUT_DIR."""
    tensors = read_dir(a.dir)
    if "lm_head.weight" in tensors:
        raise SystemExit(f"{a.dir} has a head already")
    tensors["lm_head.weight"] = tensors["model.embed_tokens.weight"].copy()
    os.makedirs(a.out, exist_ok=True)
    write_file(os.path.join(a.out, "model.safetensors"), tensors, "F32")


def corrupt(a):
    tensors, header = read_file(a.file)
    if a.how == "truncate":
        size = os.path.getsize(a.file)
        with open(a.file, "r+b") as f:
            f.truncate(size - 4)
        return
    if a.how == "nan":
        tensors[a.tensor].flat[3] = np.nan
    elif a.how == "shape":
        tensors[a.tensor] = tensors[a.tensor][:-1]
    elif a.how == "extra":
        tensors["h.0.attn.c_attn.lora_A.weight"] = np.zeros((4, 4), np.float32)
    write_file(a.file, tensors, "F32")


def training(sub, name):
    """A subcommand that trains in PyTorch and compares with dt's run output."""
    p = sub.add_parser(name)
    for arg in ("dir", "tokens", "run_output"):
        p.add_argument(arg)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    return p


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("make")
    p.add_argument("dir")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--prefix", default="")
    p.add_argument("--dtype", choices=sorted(DTYPES), default="F32")
    p.add_argument("--files", type=int, default=1)
    sizes(p)
    p = sub.add_parser("tokens")
    p.add_argument("file")
    p.add_argument("--windows", type=int, required=True)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--seed", type=int, default=0)
    p = sub.add_parser("check-loss")
    p.add_argument("dir")
    p.add_argument("tokens")
    p.add_argument("run_output")
    p.add_argument("--seq", type=int, required=True)
    sizes(p)
    p = sub.add_parser("compare")
    p.add_argument("expected")
    p.add_argument("exported")
    p.add_argument("--frozen", nargs="+")
    p = sub.add_parser("lora-train")
    for arg in ("dir", "adapters", "tokens", "run_output"):
        p.add_argument(arg)
    p.add_argument("--seq", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--wd", type=float, default=0.1)
    sizes(p)
    p = training(sub, "conv-train")
    p = training(sub, "pool-train")
    p = training(sub, "rms-train")
    p.add_argument("--eps", type=float, required=True)
    p = training(sub, "rope-train")
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--theta", type=float, required=True)
    p = training(sub, "llama-train")
    p.add_argument("--tied", action="store_true")
    p.add_argument("--rope-factor", type=float, default=1.0)
    p.add_argument("--rope-low", type=float, default=1.0)
    p.add_argument("--rope-high", type=float, default=4.0)
    p.add_argument("--rope-original", type=float, default=0.0)
    p.add_argument("--heads", type=int, required=True)
    p.add_argument("--kv-heads", type=int, required=True)
    p.add_argument("--theta", type=float, required=True)
    p.add_argument("--eps", type=float, required=True)
    p = sub.add_parser("add-head")
    p.add_argument("dir")
    p.add_argument("out")
    p = sub.add_parser("check-merge")
    p.add_argument("base")
    p.add_argument("adapters")
    p.add_argument("merged")
    p = sub.add_parser("check-base")
    p.add_argument("checkpoint")
    p.add_argument("base")
    p = sub.add_parser("check-config")
    p.add_argument("dir")
    sizes(p)
    p = sub.add_parser("corrupt")
    p.add_argument("file")
    p.add_argument("how", choices=["truncate", "nan", "shape", "extra"])
    p.add_argument("tensor", nargs="?")
    a = ap.parse_args()
    {"make": make, "tokens": tokens, "check-loss": check_loss, "compare": compare,
     "check-config": check_config, "corrupt": corrupt, "lora-train": lora_train,
     "check-merge": check_merge, "check-base": check_base, "rms-train": rms_train,
     "conv-train": conv_train, "pool-train": pool_train,
     "rope-train": rope_train, "llama-train": llama_train,
     "add-head": add_head}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())

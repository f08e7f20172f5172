#!/usr/bin/env python3
"""PyTorch's side of bert.test and distilbert.test: transformers'
BertForSequenceClassification (post-LN layers, the exact erf GELU, an additive
padding mask, the [CLS] pooler) and DistilBertForSequenceClassification
(masked_fill, pre_classifier + ReLU on the first token) written as plain
PyTorch modules under transformers' names, so that dt's export loads with a
strict load_state_dict; config.json's model_type picks the family.

  bert.py train INITIAL_DIR FILE RUN_OUTPUT --seq T --steps N --heads H
      10 AdamW steps from dt's initial export on the classification file
      (read as the runtime reads it); dt's logged losses must agree within
      1e-4.
  bert.py eval EXPORT_DIR FILE RUN_OUTPUT --seq T --heads H
      dt's final export, strictly loaded, in eval mode: its loss on the file
      must be dt's eval loss, and its config.json BertConfig's.
"""
import argparse
import json
import math
import os
import re
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import classes  # noqa: E402  (reads dt-tokenize's file as the runtime does)
import hf_gpt2  # noqa: E402


class SelfAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width)
        self.value = nn.Linear(width, width)

    def forward(self, x, bias):
        b, t, w = x.shape
        split = lambda z: z.view(b, t, self.heads, w // self.heads).transpose(1, 2)
        q, k, v = split(self.query(x)), split(self.key(x)), split(self.value(x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(w // self.heads) + bias
        y = F.softmax(scores, dim=-1) @ v
        return y.transpose(1, 2).reshape(b, t, w)


class Residual(nn.Module):
    def __init__(self, inp, width, eps):
        super().__init__()
        self.dense = nn.Linear(inp, width)
        self.LayerNorm = nn.LayerNorm(width, eps=eps)

    def forward(self, h, x):
        return self.LayerNorm(self.dense(h) + x)


class Attention(nn.Module):
    def __init__(self, width, heads, eps):
        super().__init__()
        setattr(self, "self", SelfAttention(width, heads))
        self.output = Residual(width, width, eps)

    def forward(self, x, bias):
        return self.output(getattr(self, "self")(x, bias), x)


class Intermediate(nn.Module):
    def __init__(self, width, hidden):
        super().__init__()
        self.dense = nn.Linear(width, hidden)

    def forward(self, x):
        return F.gelu(self.dense(x))  # exact erf, transformers' "gelu"


class Layer(nn.Module):
    def __init__(self, width, heads, hidden, eps):
        super().__init__()
        self.attention = Attention(width, heads, eps)
        self.intermediate = Intermediate(width, hidden)
        self.output = Residual(hidden, width, eps)

    def forward(self, x, bias):
        a = self.attention(x, bias)
        return self.output(self.intermediate(a), a)


class Embeddings(nn.Module):
    def __init__(self, vocab, width, positions, types, eps):
        super().__init__()
        self.word_embeddings = nn.Embedding(vocab, width)
        self.position_embeddings = nn.Embedding(positions, width)
        self.token_type_embeddings = nn.Embedding(types, width)
        self.LayerNorm = nn.LayerNorm(width, eps=eps)

    def forward(self, ids, segments):
        pos = torch.arange(ids.shape[1])
        return self.LayerNorm(self.word_embeddings(ids) + self.position_embeddings(pos)
                              + self.token_type_embeddings(segments))


class Bert(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.embeddings = Embeddings(c["vocab_size"], c["hidden_size"],
                                     c["max_position_embeddings"], c["type_vocab_size"],
                                     c["layer_norm_eps"])
        self.encoder = nn.Module()
        self.encoder.layer = nn.ModuleList(
            Layer(c["hidden_size"], c["num_attention_heads"], c["intermediate_size"],
                  c["layer_norm_eps"]) for _ in range(c["num_hidden_layers"]))
        self.pooler = nn.Module()
        self.pooler.dense = nn.Linear(c["hidden_size"], c["hidden_size"])

    def forward(self, ids, segments, mask):
        bias = ((1.0 - mask) * torch.finfo(mask.dtype).min)[:, None, None, :]
        h = self.embeddings(ids, segments)
        for layer in self.encoder.layer:
            h = layer(h, bias)
        return torch.tanh(self.pooler.dense(h[:, 0]))


class BertClassifier(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.bert = Bert(c)
        self.classifier = nn.Linear(c["hidden_size"], c["num_labels"])

    def forward(self, ids, segments, mask):
        return self.classifier(self.bert(ids, segments, mask))


class DistilAttention(nn.Module):
    """DistilBERT's MultiHeadSelfAttention: q scaled first, masked_fill."""

    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.q_lin = nn.Linear(width, width)
        self.k_lin = nn.Linear(width, width)
        self.v_lin = nn.Linear(width, width)
        self.out_lin = nn.Linear(width, width)

    def forward(self, x, mask):
        b, t, w = x.shape
        split = lambda z: z.view(b, t, self.heads, w // self.heads).transpose(1, 2)
        q = split(self.q_lin(x)) / math.sqrt(w // self.heads)
        k, v = split(self.k_lin(x)), split(self.v_lin(x))
        scores = q @ k.transpose(-1, -2)
        scores = scores.masked_fill((mask == 0)[:, None, None, :],
                                    torch.finfo(scores.dtype).min)
        y = F.softmax(scores, dim=-1) @ v
        return self.out_lin(y.transpose(1, 2).reshape(b, t, w))


class DistilLayer(nn.Module):
    def __init__(self, width, heads, hidden):
        super().__init__()
        self.attention = DistilAttention(width, heads)
        self.sa_layer_norm = nn.LayerNorm(width, eps=1e-12)
        self.ffn = nn.Module()
        self.ffn.lin1 = nn.Linear(width, hidden)
        self.ffn.lin2 = nn.Linear(hidden, width)
        self.output_layer_norm = nn.LayerNorm(width, eps=1e-12)

    def forward(self, x, mask):
        a = self.sa_layer_norm(self.attention(x, mask) + x)
        return self.output_layer_norm(self.ffn.lin2(F.gelu(self.ffn.lin1(a))) + a)


class DistilBertClassifier(nn.Module):
    """transformers' DistilBertForSequenceClassification."""

    def __init__(self, c):
        super().__init__()
        d = nn.Module()
        d.embeddings = nn.Module()
        d.embeddings.word_embeddings = nn.Embedding(c["vocab_size"], c["dim"])
        d.embeddings.position_embeddings = nn.Embedding(c["max_position_embeddings"], c["dim"])
        d.embeddings.LayerNorm = nn.LayerNorm(c["dim"], eps=1e-12)
        d.transformer = nn.Module()
        d.transformer.layer = nn.ModuleList(
            DistilLayer(c["dim"], c["n_heads"], c["hidden_dim"]) for _ in range(c["n_layers"]))
        self.distilbert = d
        self.pre_classifier = nn.Linear(c["dim"], c["dim"])
        self.classifier = nn.Linear(c["dim"], c["num_labels"])

    def forward(self, ids, segments, mask):
        e = self.distilbert.embeddings
        h = e.LayerNorm(e.word_embeddings(ids) + e.position_embeddings(torch.arange(ids.shape[1])))
        for layer in self.distilbert.transformer.layer:
            h = layer(h, mask)
        return self.classifier(F.relu(self.pre_classifier(h[:, 0])))


def load(directory):
    """The model of `directory`'s config.json with its weights, strictly."""
    with open(os.path.join(directory, "config.json")) as f:
        c = json.load(f)
    if c["model_type"] == "distilbert":
        assert c["activation"] == "gelu" and not c["sinusoidal_pos_embds"], c
        assert c["architectures"] == ["DistilBertForSequenceClassification"], c
        model = DistilBertClassifier(c).double()
    else:
        assert c["model_type"] == "bert" and c["hidden_act"] == "gelu", c
        assert c["architectures"] == ["BertForSequenceClassification"], c
        model = BertClassifier(c).double()
    state = {k: torch.from_numpy(v).double() for k, v in hf_gpt2.read_dir(directory).items()}
    model.load_state_dict(state, strict=True)
    return model


def batch(path, seq):
    ids, types, mask, labels = classes.fields(path, seq)
    return (torch.from_numpy(ids), torch.from_numpy(types),
            torch.from_numpy(mask).double(), torch.from_numpy(labels))


def train(a):
    torch.set_num_threads(1)
    model = load(a.dir)
    ids, types, mask, labels = batch(a.file, a.seq)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    rest = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    loss = lambda: F.cross_entropy(model(ids, types, mask), labels)
    hf_gpt2.compare_losses(a.run_output, hf_gpt2.train_steps(opt, a.steps, loss))


def evaluate(a):
    torch.set_num_threads(1)
    model = load(a.dir).eval()
    ids, types, mask, labels = batch(a.file, a.seq)
    with torch.no_grad():
        loss = F.cross_entropy(model(ids, types, mask), labels).item()
    with open(a.run_output) as f:
        dt = float(re.findall(r"eval at step \d+: loss ([0-9.]+)", f.read())[-1])
    print(f"eval loss: dt {dt:.6f}, PyTorch {loss:.6f}")
    if abs(dt - loss) > 1e-4 * max(1.0, abs(loss)):
        raise SystemExit("the eval losses differ by more than 1e-4")


def main():
    ap = argparse.ArgumentParser()
    sub = ap.add_subparsers(dest="cmd", required=True)
    for name in ("train", "eval"):
        p = sub.add_parser(name)
        for arg in ("dir", "file", "run_output"):
            p.add_argument(arg)
        p.add_argument("--seq", type=int, required=True)
        p.add_argument("--steps", type=int, default=0)
    a = ap.parse_args()
    {"train": train, "eval": evaluate}[a.cmd](a)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Benchmark: the compiled examples/cnn_fashion.dt against PyTorch, side by side.

    bench/run_cnn_fashion.py [--repeats R] [--env KEY=VALUE ...] [--out FILE]

Both train the same residual CNN (a 3x3 stem to 16 channels, 2x2 max pooling, a residual
block, a strided 3x3 convolution to 32 channels, a residual block, a linear head on the
32 x 7 x 7 features) on Fashion-MNIST for 3 epochs with the same batch (128), optimizer (AdamW,
lr 3e-3, wd 0.01 on tensors of rank >= 2), schedule (cosine, 100 warm-up steps) and seed,
at one and at two threads, interleaved, R times each, as bench/run_mlp_fashion.py races
the perceptron (PyTorch's convolutions are oneDNN's; dt's are its own register-tiled
kernels, kernels/cpu/conv2d.c).
The FLOPs counted are the convolutions' and the head's multiply-adds.

Needs the set-up of `scripts/setup.sh --bench` (python3-torch) and a built dtc.
Writes a Markdown report to bench/results/ (or --out).
"""
from run_mlp_fashion import race

# (output positions, output channels, window size = input channels x 3 x 3) of each
# convolution, the stem first: its input is the data, so it has no input gradient.
CONVS = [(28 * 28, 16, 1 * 9), (14 * 14, 16, 16 * 9), (14 * 14, 16, 16 * 9),
         (7 * 7, 32, 16 * 9), (7 * 7, 32, 32 * 9), (7 * 7, 32, 32 * 9)]
MACS = sum(p * o * k for p, o, k in CONVS) + 32 * 7 * 7 * 10
# Forward, the weights' gradients, and the inputs' gradients but the stem's.
FLOP_PER_SAMPLE = 2 * (MACS + MACS + MACS - CONVS[0][0] * CONVS[0][1] * CONVS[0][2])

CNN = {
    "name": "cnn_fashion",
    "torch": "cnn_fashion_torch.py",
    "flop_per_sample": FLOP_PER_SAMPLE,
    "flops_counted": "the convolutions' and the head's multiply-adds, forward and backward",
    # A residual block's convolution on a batch: 16 x 144 @ 144 x (128 x 14 x 14).
    "model_shape": (16, 128 * 14 * 14, 16 * 9),
    "model_shape_text": "16x144 @ 144x25088",
}

if __name__ == "__main__":
    race(CNN, __doc__)

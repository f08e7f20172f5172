#!/usr/bin/python3
"""The PyTorch peer of examples/cnn_fashion.dt: the same residual CNN (torch.nn's
Conv2d and MaxPool2d, oneDNN's convolutions), data, batch,
optimizer (AdamW, lr 3e-3), schedule and epochs as mlp_fashion_torch.py trains them.
Prints one JSON line with samples/s, the final test accuracy and peak RSS.

    cnn_fashion_torch.py --threads N [--data DIR] [--epochs E]
"""
import sys

import torch
import torch.nn.functional as F
from torch import nn

from mlp_fashion_torch import arguments, train_and_report


class Residual(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)

    def forward(self, x):
        return F.relu(x + self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x))))))


class CNN(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.stem = nn.Conv2d(1, 16, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.block1 = Residual(16)
        self.down = nn.Conv2d(16, 32, 3, stride=2, padding=1, bias=False)
        self.down_bn = nn.BatchNorm2d(32)
        self.block2 = Residual(32)
        self.fc = nn.Linear(32 * 7 * 7, classes)

    def forward(self, x):
        h = self.pool(F.relu(self.bn(self.stem(x.view(-1, 1, 28, 28)))))
        h = self.block2(F.relu(self.down_bn(self.down(self.block1(h)))))
        return self.fc(h.flatten(1))


def main():
    args = arguments()
    train_and_report(CNN(10), args, lr=3e-3)


if __name__ == "__main__":
    sys.exit(main())

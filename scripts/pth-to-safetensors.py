#!/usr/bin/env python3
"""Converts a PyTorch state dict saved with torch.save (torchvision's published
ResNet weights are such .pth files) into a .safetensors file that dt's
`init = nn.safetensors(...)` reads. Needs only Debian's python3-torch.

    python3 scripts/pth-to-safetensors.py resnet18-f37072fd.pth resnet18.safetensors

Loading a pickle runs code from it: convert only files from a source you trust
(torch.load is called with weights_only=True where the installed PyTorch has
it)."""

import json
import struct
import sys

DTYPES = {"float32": "F32", "float16": "F16", "bfloat16": "BF16", "float64": "F64",
          "int64": "I64", "int32": "I32", "uint8": "U8", "bool": "BOOL"}


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    import torch
    try:
        state = torch.load(sys.argv[1], map_location="cpu", weights_only=True)
    except TypeError:  # PyTorch before 1.13 has no weights_only
        state = torch.load(sys.argv[1], map_location="cpu")
    if "state_dict" in state and isinstance(state["state_dict"], dict):
        state = state["state_dict"]
    header, blobs, at = {"__metadata__": {"format": "pt"}}, [], 0
    for name in sorted(state):
        t = state[name].detach().contiguous()
        dtype = DTYPES.get(str(t.dtype).replace("torch.", ""))
        if dtype is None:
            raise SystemExit(f"{name}: dtype {t.dtype} has no safetensors name here")
        # bf16 has no numpy type: its bytes are those of int16.
        raw = (t.view(torch.int16) if t.dtype == torch.bfloat16 else t).numpy().tobytes()
        header[name] = {"dtype": dtype, "shape": list(t.shape),
                        "data_offsets": [at, at + len(raw)]}
        blobs.append(raw)
        at += len(raw)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(sys.argv[2], "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
    print(f"{sys.argv[2]}: {len(state)} tensors, {at} bytes")


if __name__ == "__main__":
    main()

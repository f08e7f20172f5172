#!/usr/bin/python3
"""Writes a text classification set from Debian's fortunes: each fortune of
the files computers, politics, science and work, labelled with its file's
name, as JSON lines for dt-tokenize --classes (every tenth fortune goes to
the validation set), and the training texts alone (OUT_DIR/train.txt, to
train a tokenizer on, e.g. with spm_train).

    fortune-classes.py [FORTUNES_DIR] OUT_DIR    (writes OUT_DIR/{train,val}.jsonl, train.txt)
"""
import json
import os
import sys

CLASSES = ["computers", "politics", "science", "work"]


def fortunes(path):
    doc = []
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.rstrip("\n") == "%":
                if "".join(doc).strip():
                    yield "".join(doc)
                doc = []
            else:
                doc.append(line)
    if "".join(doc).strip():
        yield "".join(doc)


def main():
    args = sys.argv[1:]
    src = args[0] if len(args) == 2 else "/usr/share/games/fortunes"
    out = args[-1]
    os.makedirs(out, exist_ok=True)
    counts = {"train": 0, "val": 0}
    with open(os.path.join(out, "train.jsonl"), "w") as train, \
            open(os.path.join(out, "val.jsonl"), "w") as val, \
            open(os.path.join(out, "train.txt"), "w") as text:
        for name in CLASSES:
            for i, fortune in enumerate(fortunes(os.path.join(src, name))):
                split = "val" if i % 10 == 9 else "train"
                (val if split == "val" else train).write(
                    json.dumps({"text": fortune, "label": name}) + "\n")
                if split == "train":
                    text.write(fortune)
                counts[split] += 1
    print(f"{counts['train']} training and {counts['val']} validation fortunes "
          f"in {len(CLASSES)} classes ({', '.join(CLASSES)}) in {out}")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Classification examples for dt-tokenize's tests, from the documents
texts.py wrote: the first 90, every third with a second text (the next
document's first 80 characters), labels cycling through neg, pos, neutral.
Writes the reference's input (a JSON array of [text, pair-or-null]),
dt-tokenize's (JSON lines) and the expected label ids.

usage: examples.py DOCS.json EX.json EX.jsonl LABELS.json
"""
import json
import sys

NAMES = ["neg", "pos", "neutral"]


def main():
    docs_path, ex_path, jsonl_path, labels_path = sys.argv[1:5]
    docs = json.load(open(docs_path, encoding="utf-8"))
    examples, lines, labels = [], [], []
    for i, d in enumerate(docs[:90]):
        text = d[:300]
        pair = docs[i + 1][:80] if i % 3 == 0 else None
        examples.append([text, pair])
        labels.append(i % 3)
        line = {"text": text, "label": NAMES[i % 3]}
        if pair is not None:
            line["pair"] = pair
        lines.append(json.dumps(line, ensure_ascii=False))
    json.dump(examples, open(ex_path, "w", encoding="utf-8"), ensure_ascii=False)
    with open(jsonl_path, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    json.dump(labels, open(labels_path, "w"))


if __name__ == "__main__":
    main()

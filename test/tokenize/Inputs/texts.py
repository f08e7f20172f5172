#!/usr/bin/env python3
"""The documents dt-tokenize's tests encode: Inputs/mixed.json (edge cases of
Unicode, whitespace, numbers and special tokens) then the fortunes of each
FORTUNE file (split at its "%" lines, as `dt-tokenize --delimiter %` splits
it), written as a JSON array (for the reference) and JSON lines (for
dt-tokenize).

usage: texts.py OUT.json OUT.jsonl [FORTUNE_FILE...]
"""
import json
import os
import sys


def fortunes(path):
    doc = ""
    with open(path, encoding="utf-8", newline="\n") as f:
        for line in f:
            line = line.rstrip("\n")
            if line == "%":
                if doc.strip():
                    yield doc
                doc = ""
            else:
                doc += line + "\n"
    if doc.strip():
        yield doc


def main():
    out_json, out_jsonl, files = sys.argv[1], sys.argv[2], sys.argv[3:]
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "mixed.json"), encoding="utf-8") as f:
        docs = json.load(f)
    for path in files:
        docs.extend(fortunes(path))
    with open(out_json, "w", encoding="utf-8") as f:
        json.dump(docs, f, ensure_ascii=False)
    with open(out_jsonl, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()

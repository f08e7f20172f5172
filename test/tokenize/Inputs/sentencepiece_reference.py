#!/usr/bin/env python3
"""Encodes documents with Debian's python3-sentencepiece, the reference for
dt-tokenize's SentencePiece path.

usage: sentencepiece_reference.py MODEL TEXTS.json OUT.json
"""
import json
import sys

import sentencepiece


def main():
    model, texts, out = sys.argv[1:4]
    sp = sentencepiece.SentencePieceProcessor(model_file=model)
    docs = json.load(open(texts, encoding="utf-8"))
    json.dump([sp.encode(d) for d in docs], open(out, "w"))


if __name__ == "__main__":
    main()

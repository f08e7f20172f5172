// Encodes texts with Hugging Face's JavaScript tokenizers, the reference
// dt-tokenize is checked against.
//
// usage: node reference.mjs TOKENIZER.json TEXTS.json OUT.json [examples]
//   TEXTS.json  a JSON array of strings (documents), or with `examples` of
//               [text, pair-or-null] (classification examples)
//   OUT.json    the ids of each (examples: {ids, type_ids}); documents are
//               encoded without special tokens, examples with the template's
import fs from "fs";
import path from "path";
import { Tokenizer } from "@huggingface/tokenizers";

const [tokenizerPath, textsPath, outPath, mode] = process.argv.slice(2);
const tokenizerJson = JSON.parse(fs.readFileSync(tokenizerPath, "utf8"));
const configPath = path.join(path.dirname(tokenizerPath), "tokenizer_config.json");
const config = fs.existsSync(configPath)
  ? JSON.parse(fs.readFileSync(configPath, "utf8")) : {};
const tokenizer = new Tokenizer(tokenizerJson, config);
const texts = JSON.parse(fs.readFileSync(textsPath, "utf8"));
const out = texts.map((t) => {
  if (mode !== "examples")
    return tokenizer.encode(t, { add_special_tokens: false }).ids;
  const e = tokenizer.encode(t[0], { text_pair: t[1], add_special_tokens: true,
                                     return_token_type_ids: true });
  return { ids: e.ids, type_ids: e.token_type_ids };
});
fs.writeFileSync(outPath, JSON.stringify(out));

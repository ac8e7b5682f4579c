#!/usr/bin/env python3
"""The peer of kbrl's built-in sampler: Hugging Face transformers `generate` on the same
random-initialised shapes, prompt length, new tokens and batch sizes (ANCHORS.md: 16 tokens/s at
batch 1, 474 at batch 32 for Qwen2-1.5B shapes on an H200).

    transformers_generate.py --config qwen2-1.5b.config.json [--batch 1,32,128] [--prompt 512]
                             [--new 256] [--out peer.json]

Sampling at temperature 1 (no top-k/top-p), bf16, sdpa attention; every sequence generates
exactly --new tokens (min_new_tokens = max_new_tokens, no end-of-sequence id).
"""

import argparse
import json
import time

import torch
from transformers import AutoConfig, AutoModelForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--batch", default="1,32,128")
    ap.add_argument("--prompt", type=int, default=512)
    ap.add_argument("--new", type=int, default=256)
    ap.add_argument("--out")
    args = ap.parse_args()
    with open(args.config) as f:
        fields = json.load(f)
    fields.pop("eos_token_id", None)
    fields.pop("bos_token_id", None)
    config = AutoConfig.for_model(fields.pop("model_type"), **fields)
    torch.manual_seed(0)
    with torch.device("cuda"):
        model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16,
                                                 attn_implementation="sdpa")
    model.eval()
    runs = []
    for batch in [int(b) for b in args.batch.split(",")]:
        ids = torch.randint(0, config.vocab_size, (batch, args.prompt), device="cuda")
        mask = torch.ones_like(ids)
        kw = dict(do_sample=True, temperature=1.0, top_k=0, top_p=1.0, pad_token_id=0,
                  eos_token_id=None)
        model.generate(ids[:, :16], attention_mask=mask[:, :16], max_new_tokens=4, **kw)
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        out = model.generate(ids, attention_mask=mask, max_new_tokens=args.new,
                             min_new_tokens=args.new, **kw)
        torch.cuda.synchronize()
        secs = time.perf_counter() - t0
        generated = (out.shape[1] - args.prompt) * batch
        runs.append({"batch": batch, "new_tokens": generated, "seconds": secs,
                     "tokens_per_s": generated / secs})
        print("peer batch %4d: %d new tokens in %.2f s = %.1f tokens/s" % (
            batch, generated, secs, generated / secs), flush=True)
    doc = {"peer": "transformers %s generate (sdpa), torch %s" % (
        __import__("transformers").__version__, torch.__version__), "runs": runs}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Golden values for kbrl's transformer tests, computed with Hugging Face transformers and peft.

    python3 tools/make_golden.py --out test/data/model/golden

For each architecture kbrl runs (qwen2, qwen3, llama with llama3 RoPE scaling) this builds a tiny
randomly initialised model from a config (hidden 64, 2 layers, 4 query heads, 2 key/value heads,
vocabulary 256, a fixed seed) and writes into <out>/<arch>/:

  config.json, generation_config.json, model.safetensors   the model, as save_pretrained writes
                                                           it (weights stored in bfloat16: the
                                                           fp32 model below is that model exactly)
  adapter/adapter_config.json, adapter_model.safetensors  a PEFT LoRA adapter with random,
                                                           non-zero A and B
  golden.safetensors   input_ids    int64 [2, 10]   the prompt batch (no padding)
                       logits       f32 [2, 10, 256] the model's logits, fp32 on the CPU, eager
                                                     attention
                       lora_logits  f32 [2, 10, 256] the same with the adapter on
                       greedy.<i>   int64 [n]        generate(do_sample=False, max_new_tokens=16)
                                                     for prompt i alone (n < 16 if eos came)
                       inv_freq     f32 [head_dim/2] the RoPE inverse frequencies the model uses
  golden.json          versions, settings and the smallest top-1/top-2 logit gap met by greedy
                       decoding (a gap near the test's tolerance would make the test fragile)

Everything runs on the CPU in float32 so the numbers do not depend on the GPU or on TF32.
"""

import argparse
import copy
import json
import os
import sys

import torch

SEED = 1234
PROMPT_LEN = 10
NEW_TOKENS = 16
COMMON = dict(
    vocab_size=256,
    hidden_size=64,
    intermediate_size=96,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    max_position_embeddings=256,
    rms_norm_eps=1e-6,
    hidden_act="silu",
    bos_token_id=1,
    eos_token_id=2,
)
# Per architecture: config class name, its own settings, RoPE, and the adapter's settings.
ARCHS = {
    "qwen2": dict(
        config="Qwen2Config",
        extra=dict(tie_word_embeddings=True, use_sliding_window=False),
        rope_theta=1000000.0,
        rope_scaling=None,
        lora=dict(r=4, lora_alpha=8,
                  target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                  "down_proj"]),
    ),
    "qwen3": dict(
        config="Qwen3Config",
        # head_dim 32 with hidden 64 and 4 heads: the explicit head_dim differs from 64 / 4.
        extra=dict(tie_word_embeddings=True, head_dim=32, attention_bias=False,
                   use_sliding_window=False),
        rope_theta=1000000.0,
        rope_scaling=None,
        lora=dict(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "down_proj"],
                  layers_to_transform=[1]),
    ),
    "llama": dict(
        config="LlamaConfig",
        extra=dict(tie_word_embeddings=False, attention_bias=False, mlp_bias=False),
        rope_theta=500000.0,
        # original_max_position_embeddings 64 puts the band edges (64/1, 64/4 wavelengths)
        # among this head_dim's frequencies, so all three cases of the scaling are exercised.
        rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0,
                          high_freq_factor=4.0, original_max_position_embeddings=64),
        lora=dict(r=4, lora_alpha=16, use_rslora=True,
                  target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj",
                                  "down_proj"]),
    ),
}


def make_config(transformers, arch):
    spec = ARCHS[arch]
    kw = dict(COMMON)
    kw.update(spec["extra"])
    major = int(transformers.__version__.split(".")[0])
    if major >= 5:
        # transformers 5 keeps rope_theta and the scaling together in rope_parameters.
        rope = dict(rope_type="default", rope_theta=spec["rope_theta"])
        if spec["rope_scaling"]:
            rope.update(spec["rope_scaling"])
        kw["rope_parameters"] = rope
    else:
        kw["rope_theta"] = spec["rope_theta"]
        kw["rope_scaling"] = spec["rope_scaling"]
    return getattr(transformers, spec["config"])(**kw)


def randomise(model, seed):
    """Every parameter from a seeded normal: norms near 1, the rest with std 0.1 (larger than the
    usual 0.02 so that logits spread and greedy choices are clear). Values are rounded to
    bfloat16, the precision the checkpoint is stored in."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in sorted(model.named_parameters()):
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            value = 1.0 + 0.1 * noise if "norm" in name else 0.1 * noise
            p.copy_(value.to(torch.bfloat16).to(torch.float32))


def rope_inv_freq(model):
    for _, module in model.named_modules():
        if hasattr(module, "inv_freq") and isinstance(module.inv_freq, torch.Tensor):
            return module.inv_freq.detach().float().clone()
    return None


def smallest_greedy_gap(model, ids):
    """The smallest top-1 minus top-2 logit gap at the positions whose argmax greedy decoding
    took (the last prompt position and every generated one but the last)."""
    with torch.no_grad():
        logits = model(ids).logits[0].float()
    top = logits.topk(2, dim=-1).values
    gaps = (top[:, 0] - top[:, 1])[PROMPT_LEN - 1:-1]
    return float(gaps.min()) if gaps.numel() else float("inf")


def build(arch, out_dir, transformers, peft, save_file):
    torch.manual_seed(SEED)
    config = make_config(transformers, arch)
    model = transformers.AutoModelForCausalLM.from_config(
        config, attn_implementation="eager")
    model.eval()
    randomise(model, SEED)
    rope_type = getattr(getattr(model.model, "rotary_emb", None), "rope_type", None)
    if ARCHS[arch]["rope_scaling"] and rope_type not in (None, "llama3"):
        sys.exit(f"{arch}: the model uses rope_type {rope_type!r}, expected llama3")

    gen = torch.Generator().manual_seed(SEED + 1)
    input_ids = torch.randint(3, COMMON["vocab_size"], (2, PROMPT_LEN), generator=gen)
    tensors = {"input_ids": input_ids.contiguous()}
    with torch.no_grad():
        tensors["logits"] = model(input_ids).logits.float().contiguous()
    gaps = []
    for i in range(input_ids.shape[0]):
        prompt = input_ids[i:i + 1]
        with torch.no_grad():
            out = model.generate(prompt, attention_mask=torch.ones_like(prompt), do_sample=False,
                                 max_new_tokens=NEW_TOKENS, eos_token_id=COMMON["eos_token_id"],
                                 pad_token_id=0)
        tensors[f"greedy.{i}"] = out[0, PROMPT_LEN:].contiguous()
        gaps.append(smallest_greedy_gap(model, out))
    inv_freq = rope_inv_freq(model)
    if inv_freq is not None:
        tensors["inv_freq"] = inv_freq.contiguous()

    os.makedirs(out_dir, exist_ok=True)
    # Stored in bfloat16 (the values already are bfloat16 numbers): half the bytes of fp32.
    # A copy is converted, not the model: Module.to(dtype) also casts the RoPE buffer inv_freq,
    # and a round trip through bfloat16 would leave the model below with rounded frequencies.
    copy.deepcopy(model).to(torch.bfloat16).save_pretrained(out_dir)

    lora = dict(ARCHS[arch]["lora"])
    lora_config = peft.LoraConfig(task_type="CAUSAL_LM", lora_dropout=0.0, bias="none", **lora)
    peft_model = peft.get_peft_model(model, lora_config)
    gen = torch.Generator().manual_seed(SEED + 2)
    with torch.no_grad():
        for name, p in sorted(peft_model.named_parameters()):
            if "lora_" in name:
                p.copy_(0.1 * torch.randn(p.shape, generator=gen, dtype=torch.float32))
    peft_model.eval()
    with torch.no_grad():
        tensors["lora_logits"] = peft_model(input_ids).logits.float().contiguous()
    peft_model.save_pretrained(os.path.join(out_dir, "adapter"))
    readme = os.path.join(out_dir, "adapter", "README.md")  # peft's model card template
    if os.path.exists(readme):
        os.remove(readme)

    save_file(tensors, os.path.join(out_dir, "golden.safetensors"))
    info = {
        "arch": arch,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "seed": SEED,
        "prompt_len": PROMPT_LEN,
        "new_tokens": NEW_TOKENS,
        "greedy_lengths": [int(tensors[f"greedy.{i}"].numel()) for i in range(2)],
        "smallest_greedy_gap": min(gaps),
        "lora": lora,
        "rope_type": rope_type,
        # Whether lora_logits were computed with the RoPE frequencies of inv_freq (the first
        # version of this script rounded them to bfloat16 by mistake; its golden.json has no
        # such key).
        "lora_logits_rope": "inv_freq" if inv_freq is not None
                            and torch.equal(rope_inv_freq(peft_model), inv_freq) else "other",
        "logits_abs_max": float(tensors["logits"].abs().max()),
        "lora_logits_max_change": float((tensors["lora_logits"] - tensors["logits"]).abs().max()),
    }
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(info, f, indent=1)
    return info


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="directory to write <arch>/ folders into")
    parser.add_argument("--arch", action="append", choices=sorted(ARCHS),
                        help="only these architectures (default: all)")
    args = parser.parse_args()

    import peft
    import transformers
    from safetensors.torch import save_file

    torch.set_num_threads(1)  # same summation order on every run
    for arch in args.arch or list(ARCHS):
        info = build(arch, os.path.join(args.out, arch), transformers, peft, save_file)
        print(json.dumps(info))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The peer of kbrl's learner: transformers + peft LoRA training on the same random-initialised
shapes (ANCHORS.md: 18,600 tokens/s for Qwen2-1.5B shapes at 8 x 2048, 6,860 for Qwen2.5-7B shapes
at 4 x 2048, on an H200).

    peft_train_step.py --config CONFIG.json [--batch 8] [--seq 2048] [--rank 32]
                       [--checkpointing on|off] [--warmup 2] [--steps 5] [--peak-tflops 790]
                       [--label peft] [--out peer.json]

Measured as the anchor was: bf16 base weights, sdpa attention, LoRA r=32 (alpha 2r, dropout 0) on
all linear layers (q/k/v/o/gate/up/down), gradient checkpointing (non-reentrant, inputs made to
require grad as peft needs), torch.optim.AdamW (lr 1e-4) over the adapter, gradient clipping at 1,
causal-LM loss on batch x seq random tokens (labels = inputs: seq - 1 positions per sequence, as
kbrl-bench-train trains). Warm-up steps untimed, then each step timed between synchronisations.
FLOPs per token are counted exactly as kbrl-bench-train counts them (see its header), so the two
MFU figures compare like the throughputs. Peak memory: torch.cuda.max_memory_allocated over the
timed steps. A failure (out of memory, missing package) writes {"error": ...} to --out.
"""

import argparse
import json
import sys
import time
import traceback


def count_flops(cfg, seq, lora_params, checkpointing):
    """kbrl-bench-train's formula: model FLOPs = 4 N_mm + 6 N_lora + 3 A per token."""
    h, inter, layers = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
    heads, kv = cfg["num_attention_heads"], cfg.get("num_key_value_heads", cfg["num_attention_heads"])
    hd = cfg.get("head_dim") or h // heads
    per_layer = h * heads * hd + 2 * h * kv * hd + heads * hd * h + 3 * h * inter
    lm_head = cfg["vocab_size"] * h
    n_mm = layers * per_layer + lm_head
    attention = 4.0 * layers * heads * hd * (seq + 1) / 2
    model = 4 * n_mm + 6 * lora_params + 3 * attention
    hardware = model + (2 * (n_mm - lm_head) + 2 * lora_params + attention if checkpointing else 0)
    return model, hardware


def run(args):
    import torch
    import transformers
    import peft
    from transformers import AutoConfig, AutoModelForCausalLM

    with open(args.config) as f:
        fields = json.load(f)
    cfg_fields = dict(fields)
    for k in ("eos_token_id", "bos_token_id"):
        cfg_fields.pop(k, None)
    config = AutoConfig.for_model(cfg_fields.pop("model_type"), **cfg_fields)
    config.use_cache = False
    torch.manual_seed(0)
    with torch.device("cuda"):
        try:
            model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16,
                                                     attn_implementation="sdpa")
        except TypeError:  # transformers before 4.56 spells it torch_dtype
            model = AutoModelForCausalLM.from_config(config, torch_dtype=torch.bfloat16,
                                                     attn_implementation="sdpa")
    checkpointing = args.checkpointing == "on"
    if checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.enable_input_require_grads()
    lora = peft.LoraConfig(r=args.rank, lora_alpha=2 * args.rank, lora_dropout=0.0,
                           target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj",
                                           "up_proj", "down_proj"],
                           task_type="CAUSAL_LM")
    model = peft.get_peft_model(model, lora)
    model.train()
    params = [p for p in model.parameters() if p.requires_grad]
    lora_params = sum(p.numel() for p in params)
    opt = torch.optim.AdamW(params, lr=1e-4)
    ids = torch.randint(0, config.vocab_size, (args.batch, args.seq), device="cuda")
    step_tokens = args.batch * args.seq
    times, losses = [], []
    for i in range(args.warmup + args.steps):
        if i == args.warmup:
            torch.cuda.reset_peak_memory_stats()
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        s = time.perf_counter() - t0
        losses.append(loss.item())
        print("%s step %d: %.3f s, %.0f tokens/s, loss %.4f%s" % (
            args.label, i, s, step_tokens / s, losses[-1], " (warm-up)" if i < args.warmup else ""),
            flush=True)
        if i >= args.warmup:
            times.append(s)
    mean = sum(times) / len(times)
    tps = step_tokens / mean
    model_flops, hw_flops = count_flops(fields, args.seq, lora_params, checkpointing)
    peak = args.peak_tflops * 1e12
    doc = {
        "label": args.label,
        "peer": "transformers %s + peft %s, torch %s" % (transformers.__version__,
                                                         peft.__version__, torch.__version__),
        "config": args.config, "replicas": 1, "batch_per_replica": args.batch, "seq": args.seq,
        "lora_rank": args.rank, "gradient_checkpointing": checkpointing,
        "trainable_parameters": lora_params, "step_tokens": step_tokens, "mean_step_s": mean,
        "tokens_per_s": tps, "model_flops_per_token": model_flops,
        "hardware_flops_per_token": hw_flops, "peak_tflops_per_device": args.peak_tflops,
        "mfu": model_flops * tps / peak, "hfu": hw_flops * tps / peak,
        "first_loss": losses[0], "last_loss": losses[-1], "step_seconds": times,
        "memory": [{"device": "cuda:0", "peak_allocated_bytes": torch.cuda.max_memory_allocated(),
                    "peak_reserved_bytes": torch.cuda.max_memory_reserved()}],
    }
    print("%s: %.0f tokens/s (%.3f s/step), MFU %.1f%%, peak allocated %.1f GiB" % (
        args.label, tps, mean, 100 * doc["mfu"], torch.cuda.max_memory_allocated() / 2**30),
        flush=True)
    return doc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--config", required=True)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=2048)
    ap.add_argument("--rank", type=int, default=32)
    ap.add_argument("--checkpointing", choices=["on", "off"], default="on")
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--peak-tflops", type=float, default=790.0)
    ap.add_argument("--label", default="peft")
    ap.add_argument("--out")
    args = ap.parse_args()
    try:
        doc = run(args)
        code = 0
    except Exception as e:  # noqa: BLE001 - a failed row must still leave a result
        traceback.print_exc()
        doc = {"label": args.label, "error": "%s: %s" % (type(e).__name__, str(e)[:500])}
        code = 1
    if args.out:
        with open(args.out, "w") as f:
            json.dump(doc, f, indent=1)
    sys.exit(code)


if __name__ == "__main__":
    main()

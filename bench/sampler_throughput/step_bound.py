#!/usr/bin/env python3
"""Each run of a kbrl-bench-generate result against its decode step's memory-traffic bound.

A decode step must read every weight once and every cached key and value row its sequences
attend to: weight_bytes + batch x (mean attended positions) x bytes per position, where a
position holds layers x 2 (key, value) x kv_heads x head_dim elements. Over decode steps
s = 1 .. new - 1 a sequence attends prompt + s positions, prompt + new / 2 on average. At the
copy bandwidth the benchmark measured (a device-to-device copy), that is the fastest a step can
be; the fraction is bound / measured step. Logits, the new rows written and activations are left
out (small next to these at the shapes measured), so the bound is a little optimistic.

    python3 step_bound.py RESULT.json CONFIG.json
"""
import json
import sys


def position_bytes(config, element_bytes):
    heads = config["num_attention_heads"]
    head_dim = config.get("head_dim") or config["hidden_size"] // heads
    kv_heads = config.get("num_key_value_heads", heads)
    return config["num_hidden_layers"] * 2 * kv_heads * head_dim * element_bytes


def rows(result, config):
    element_bytes = 2 if result.get("dtype", "bf16") == "bf16" else 4
    per_position = position_bytes(config, element_bytes)
    bandwidth = result["copy_bandwidth_bytes_per_s"]
    prompt, new = result["prompt_tokens"], result["new_tokens"]
    for run in result["runs"]:
        steps = run["decode_steps"]
        if steps <= 0:
            continue
        measured = run["decode_seconds"] / steps
        cache = run["batch"] * (prompt + new / 2.0) * per_position
        bound = (result["weight_bytes"] + cache) / bandwidth
        yield run, measured, cache, bound


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    result = json.load(open(sys.argv[1]))
    config = json.load(open(sys.argv[2]))
    print("batch  graphs  decode step  weights + cache read  bound step  fraction of the bound")
    for run, measured, cache, bound in rows(result, config):
        print("%5d  %-6s  %8.2f ms  %6.2f + %6.2f GB     %6.2f ms  %5.1f %%" % (
            run["batch"], "on" if run.get("cuda_graphs") else "off", measured * 1e3,
            result["weight_bytes"] / 1e9, cache / 1e9, bound * 1e3, 100 * bound / measured))


if __name__ == "__main__":
    main()

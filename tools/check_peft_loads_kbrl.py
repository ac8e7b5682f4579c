#!/usr/bin/env python3
"""Loads adapters that kbrl's trainer wrote with peft.PeftModel.from_pretrained: the kbrl -> PEFT
direction of the adapter format (test_transformer.cpp checks PEFT -> kbrl on the golden models).

    KBRL_EXPORT_ADAPTER_DIR=/tmp/kbrl-adapters build/kbrl-tests --run_test=peft_step
    python3 tools/check_peft_loads_kbrl.py --golden test/data/model/golden \\
        --kbrl /tmp/kbrl-adapters --peft test/data/train/peft_step

For each architecture: every LoRA factor peft loaded must equal the tensor kbrl wrote (no key
left at peft's initialisation), and the logits of the base model with kbrl's adapter (after
kbrl's training step) must be close to those with peft's adapter after peft's own step from the
same start, measured against how far that step moved the logits. Prints one line per
architecture; exit status 1 on any mismatch.
"""
import argparse
import sys
from pathlib import Path

import torch
from peft import PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM


def load(base_dir: Path, adapter_dir: Path):
    base = AutoModelForCausalLM.from_pretrained(base_dir, torch_dtype=torch.float32,
                                                attn_implementation="eager")
    return PeftModel.from_pretrained(base, adapter_dir).eval()


def lora_weights(model):
    """peft's parameter name (without the adapter name) -> tensor, for every LoRA factor."""
    out = {}
    for name, p in model.named_parameters():
        if ".lora_A." in name or ".lora_B." in name:
            out[name.replace(".default", "")] = p.detach()
    return out


def logits(model, tokens):
    with torch.no_grad():
        return model(input_ids=tokens).logits.float()


def check(arch: str, golden: Path, kbrl: Path, peft_dir: Path) -> bool:
    written = load_file(str(kbrl / arch / "adapter_model.safetensors"))
    ours = load(golden / arch, kbrl / arch)
    loaded = lora_weights(ours)
    problems = []
    for name, value in written.items():
        if name not in loaded:
            problems.append(f"{name} was written by kbrl but peft has no such parameter")
        elif not torch.equal(loaded[name].cpu(), value.float()):
            problems.append(f"{name}: peft holds other values than kbrl wrote")
    missing = sorted(set(loaded) - set(written))
    if missing:
        problems.append(f"{len(missing)} LoRA factors peft expects were not in kbrl's file, "
                        f"e.g. {missing[0]}")

    torch.manual_seed(0)
    vocab = ours.config.vocab_size
    tokens = torch.randint(0, vocab, (2, 24))
    with ours.disable_adapter():
        start = logits(ours, tokens)
    kbrl_logits = logits(ours, tokens)
    peft_logits = logits(load(golden / arch, peft_dir / arch / "adapter"), tokens)
    moved = (peft_logits - start).abs().max().item()
    diff = (kbrl_logits - peft_logits).abs().max().item()
    if moved == 0 or diff > 0.05 * moved:
        problems.append(f"logits with kbrl's adapter differ from peft's by {diff:.3g}, "
                        f"while the step moved them by {moved:.3g}")
    status = "ok" if not problems else "FAILED"
    print(f"{arch}: {status}: {len(written)} factors loaded by peft; logits after the step: "
          f"kbrl vs peft max |diff| {diff:.3g}, step moved them {moved:.3g}")
    for p in problems:
        print(f"  {p}")
    return not problems


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--golden", type=Path, required=True)
    ap.add_argument("--kbrl", type=Path, required=True, help="adapters written by kbrl, per arch")
    ap.add_argument("--peft", type=Path, required=True, help="make_peft_step.py output")
    ap.add_argument("--arch", nargs="*", default=["qwen2", "qwen3", "llama"])
    args = ap.parse_args()
    ok = all([check(a, args.golden, args.kbrl, args.peft) for a in args.arch])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""One LoRA training step with Hugging Face transformers + peft, for kbrl's learner to compare with.

    python3 tools/make_peft_step.py --golden test/data/model/golden \\
        --out test/data/train/peft_step [--arch qwen2 ...] [--loss ppo] [--aggregation token] ...

For each architecture this loads the golden tiny model <golden>/<arch>/ (float32, eager attention)
with its PEFT adapter <golden>/<arch>/adapter/ (trainable), builds a fixed batch of four
sequences (random prompt and completion tokens from a seeded generator; sampler log-probabilities
= the model's own at the given temperature plus seeded noise, so importance ratios differ from 1
and PPO clips some tokens), computes kbrl's loss on it exactly as runtime/rl/policy_loss.hpp
defines it, back-propagates, clips the gradient's global norm, takes one torch.optim.AdamW step
and writes into <out>/<arch>/:

  batch.safetensors   prompt.<i>            int64 [P_i]   prompt tokens of sequence i
                      completion.<i>        int64 [C_i]   completion tokens
                      sampler_logprobs.<i>  float32 [C_i]
                      advantages            float64 [4]
                      grad.<module>.lora_A  float32       the loss's gradient before clipping, by
                      grad.<module>.lora_B                 module ("model.layers.0.self_attn.q_proj")
                      logprobs.<i>          float32 [C_i] the learner's log-probabilities before
                                                          the step
  adapter/            the adapter after the step (PEFT's save_pretrained)
  step.json           versions, every setting, and loss, policy_loss, kl, grad_norm, lr

kbrl's test (test/pending/test_peft_step.cpp, see its header) runs the same step with its trainer
and compares loss, gradient and the adapter after the step within stated tolerances.

Everything runs on the CPU in float32 with one thread, so the numbers do not depend on the GPU.
"""

import argparse
import json
import os
import shutil

import torch

SEED = 4321
PROMPT_LENS = [3, 5, 4, 6]
COMPLETION_LENS = [4, 2, 5, 3]
ADVANTAGES = [1.0, -0.5, 0.25, -1.0]


def load(golden_dir, transformers, peft):
    major = int(transformers.__version__.split(".")[0])
    kw = dict(attn_implementation="eager")
    kw["dtype" if major >= 5 else "torch_dtype"] = torch.float32
    base = transformers.AutoModelForCausalLM.from_pretrained(golden_dir, **kw)
    model = peft.PeftModel.from_pretrained(base, os.path.join(golden_dir, "adapter"),
                                           is_trainable=True)
    model.eval()  # no dropout anywhere (the adapter's lora_dropout is 0 too)
    return model


def module_of(param_name):
    """'base_model.model.model.layers.0.self_attn.q_proj.lora_A.default.weight' ->
    ('model.layers.0.self_attn.q_proj', 'lora_A')"""
    parts = param_name.split(".")
    i = parts.index("lora_A") if "lora_A" in parts else parts.index("lora_B")
    module = ".".join(parts[:i])
    for prefix in ("base_model.model.",):
        if module.startswith(prefix):
            module = module[len(prefix):]
    return module, parts[i]


def completion_logprobs(model, prompt, completion, temperature):
    ids = torch.cat([prompt, completion]).unsqueeze(0)
    logits = model(input_ids=ids).logits.float()[0]
    t = temperature if temperature > 0 else 1.0
    logp = torch.log_softmax(logits / t, dim=-1)
    p = prompt.numel()
    rows = logp[p - 1:p - 1 + completion.numel()]
    return rows.gather(-1, completion.unsqueeze(-1)).squeeze(-1)


def weights_of(lengths, aggregation):
    total = sum(lengths)
    seqs = sum(1 for n in lengths if n > 0)
    out = []
    for n in lengths:
        w = 1.0 / total if aggregation == "token" else 1.0 / (seqs * n)
        out.append(torch.full((n,), w, dtype=torch.float64))
    return out


def run(arch, args, transformers, peft, save_file):
    golden_dir = os.path.join(args.golden, arch)
    model = load(golden_dir, transformers, peft)
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(SEED)
    prompts = [torch.randint(3, vocab, (n,), generator=gen) for n in PROMPT_LENS]
    completions = [torch.randint(3, vocab, (n,), generator=gen) for n in COMPLETION_LENS]
    with torch.no_grad():
        sampler_lp = [
            completion_logprobs(model, p, c, args.temperature)
            + args.logprob_noise * torch.randn(c.numel(), generator=gen)
            for p, c in zip(prompts, completions)
        ]
        base_lp = None
        if args.kl_coef > 0:
            with model.disable_adapter():
                base_lp = [completion_logprobs(model, p, c, args.temperature)
                           for p, c in zip(prompts, completions)]

    params = [p for n, p in model.named_parameters() if p.requires_grad]
    names = [n for n, p in model.named_parameters() if p.requires_grad]
    assert params and all("lora_" in n for n in names), names
    weights = weights_of(COMPLETION_LENS, args.aggregation)
    policy = torch.zeros((), dtype=torch.float32)
    kl = torch.zeros((), dtype=torch.float32)
    clipped = torch.zeros((), dtype=torch.float32)
    learner_lp = []
    for i, (p, c) in enumerate(zip(prompts, completions)):
        lp = completion_logprobs(model, p, c, args.temperature)
        learner_lp.append(lp.detach().clone())
        w = weights[i].to(lp.dtype)
        adv = torch.full_like(lp, ADVANTAGES[i])
        if args.loss == "sft":
            per = -lp
        else:
            ratio = torch.exp(lp - sampler_lp[i])
            unclipped = ratio * adv
            if args.loss == "ppo":
                clip = torch.clamp(ratio, 1 - args.eps_low, 1 + args.eps_high) * adv
                per = -torch.minimum(unclipped, clip)
                clipped = clipped + (w * (clip < unclipped).to(w.dtype)).sum().detach()
            else:
                per = -unclipped
        policy = policy + (w * per).sum()
        if base_lp is not None:
            d = base_lp[i] - lp
            kl = kl + (w * (torch.exp(d) - d - 1)).sum()
    loss = policy + args.kl_coef * kl
    loss.backward()

    tensors = {}
    for n, p in zip(names, params):
        module, factor = module_of(n)
        tensors[f"grad.{module}.{factor}"] = p.grad.detach().float().contiguous().clone()
    # An infinite limit measures the norm without clipping.
    limit = args.clip_norm if args.clip_norm > 0 else float("inf")
    grad_norm = float(torch.nn.utils.clip_grad_norm_(params, limit))
    opt = torch.optim.AdamW(params, lr=args.lr, betas=(args.beta1, args.beta2), eps=args.eps,
                            weight_decay=args.weight_decay)
    opt.step()

    out_dir = os.path.join(args.out, arch)
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    for i in range(len(prompts)):
        tensors[f"prompt.{i}"] = prompts[i].contiguous()
        tensors[f"completion.{i}"] = completions[i].contiguous()
        tensors[f"sampler_logprobs.{i}"] = sampler_lp[i].float().contiguous()
        tensors[f"logprobs.{i}"] = learner_lp[i].float().contiguous()
    tensors["advantages"] = torch.tensor(ADVANTAGES, dtype=torch.float64)
    save_file(tensors, os.path.join(out_dir, "batch.safetensors"))
    model.save_pretrained(os.path.join(out_dir, "adapter"))
    readme = os.path.join(out_dir, "adapter", "README.md")  # peft's model card template
    if os.path.exists(readme):
        os.remove(readme)
    info = {
        "arch": arch,
        "golden": os.path.relpath(golden_dir, os.path.join(args.out, arch)),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "peft": peft.__version__,
        "seed": SEED,
        "loss": args.loss,
        "aggregation": args.aggregation,
        "eps_low": args.eps_low,
        "eps_high": args.eps_high,
        "kl_coef": args.kl_coef,
        "temperature": args.temperature,
        "lr": args.lr,
        "adam_beta1": args.beta1,
        "adam_beta2": args.beta2,
        "adam_eps": args.eps,
        "weight_decay": args.weight_decay,
        "clip_norm": args.clip_norm,
        "loss_value": float(loss),
        "policy_loss": float(policy),
        "kl": float(kl),
        "clip_fraction": float(clipped),
        "grad_norm": grad_norm,
        "clipped_by_norm": args.clip_norm > 0 and grad_norm > args.clip_norm,
    }
    with open(os.path.join(out_dir, "step.json"), "w") as f:
        json.dump(info, f, indent=1)
    return info


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--golden", required=True, help="test/data/model/golden")
    parser.add_argument("--out", required=True, help="directory to write <arch>/ folders into")
    parser.add_argument("--arch", action="append", choices=["qwen2", "qwen3", "llama"],
                        help="only these architectures (default: all three)")
    parser.add_argument("--loss", default="ppo", choices=["pg", "ppo", "sft"])
    parser.add_argument("--aggregation", default="token", choices=["token", "sequence"])
    parser.add_argument("--eps-low", type=float, default=0.2)
    parser.add_argument("--eps-high", type=float, default=0.28)
    parser.add_argument("--kl-coef", type=float, default=0.05)
    parser.add_argument("--temperature", type=float, default=0.9)
    parser.add_argument("--logprob-noise", type=float, default=0.2,
                        help="std of the noise added to the sampler log-probabilities")
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--beta1", type=float, default=0.9)
    parser.add_argument("--beta2", type=float, default=0.999)
    parser.add_argument("--eps", type=float, default=1e-8)
    parser.add_argument("--weight-decay", type=float, default=0.01)
    parser.add_argument("--clip-norm", type=float, default=0.5,
                        help="global gradient norm limit (0: none); step.json records whether "
                             "it bound (clipped_by_norm)")
    args = parser.parse_args()

    import peft
    import transformers
    from safetensors.torch import save_file

    torch.set_num_threads(1)  # same summation order on every run
    for arch in args.arch or ["qwen2", "qwen3", "llama"]:
        print(json.dumps(run(arch, args, transformers, peft, save_file)))


if __name__ == "__main__":
    main()

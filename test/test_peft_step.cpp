// kbrl's training step against peft's (transformers + peft + torch.optim.AdamW), on the golden
// tiny models. The fixtures are made on a machine with transformers and peft by
//
//   python3 tools/make_peft_step.py --golden test/data/model/golden --out test/data/train/peft_step
//
// It fails loudly if a fixture is missing; it never skips. With KBRL_EXPORT_ADAPTER_DIR set it
// also writes kbrl's adapter after the step to <dir>/<arch>/, for
// tools/check_peft_loads_kbrl.py to load with peft (the other direction of the PEFT format).
//
// What is compared, per architecture, and why the tolerances are what they are:
//   - the loss: relative 1e-4 (transformers' eager attention and kbrl's sum in other orders;
//     test_transformer.cpp holds logits to 1e-4), and the gradient of every LoRA factor:
//     atol 1e-4 * max |g|
//   - the gradient norm before clipping: relative 1e-4
//   - the adapter after the step: AdamW's first step moves each value by about
//     lr * sign(g), so a value whose gradient is near zero may move either way in either
//     implementation. Values whose peft gradient exceeds 1e-3 * max |g| must agree to
//     1e-6 + 1e-3 * lr; every value must lie within 2 * lr (+ weight decay) of peft's.

#include "model_fixture.hpp"
#include "runtime/io/file_io.hpp"
#include "runtime/model/lora_adapter.hpp"
#include "runtime/model/safetensors.hpp"
#include "runtime/train/trainer.hpp"
#include "test_support.hpp"

#include <ATen/ATen.h>
#include <simdjson.h>

#include <boost/test/unit_test.hpp>

#include <cstdlib>
#include <filesystem>

using namespace kbrl;
using kbrl::test::why;
namespace fs = std::filesystem;

namespace {

double number(simdjson::dom::object obj, const char* key) {
  double x = 0;
  simdjson::dom::element e;
  BOOST_REQUIRE_MESSAGE(!obj[key].get(e), "step.json lacks " << key);
  if (e.is_int64())
    return static_cast<double>(int64_t(e));
  BOOST_REQUIRE_MESSAGE(!e.get(x), "step.json: " << key << " is not a number");
  return x;
}

std::string text(simdjson::dom::object obj, const char* key) {
  std::string_view s;
  BOOST_REQUIRE_MESSAGE(!obj[key].get(s), "step.json lacks " << key);
  return std::string(s);
}

at::Tensor tensor(const model::safetensors_file& f, const std::string& name) {
  auto t = f.tensor(name, model::tensor_access::copy);
  BOOST_REQUIRE_MESSAGE(t, why(t));
  return *t;
}

} // namespace

BOOST_AUTO_TEST_SUITE(peft_step)

BOOST_AUTO_TEST_CASE(one_step_matches_peft) {
  const fs::path root = fs::path(KBRL_TEST_DATA) / "train" / "peft_step";
  const fs::path golden_root = fs::path(KBRL_TEST_DATA) / "model" / "golden";
  for (const char* arch : {"qwen2", "qwen3", "llama"}) {
    BOOST_TEST_CONTEXT(arch) {
      const auto dir = root / arch;
      BOOST_REQUIRE_MESSAGE(fs::exists(dir / "step.json"),
                            dir.string() << "/step.json is missing: run tools/make_peft_step.py "
                                            "(see this file's header)");
      auto json = io::read_text_file(dir / "step.json");
      BOOST_REQUIRE_MESSAGE(json, why(json));
      simdjson::dom::parser parser;
      simdjson::dom::object step;
      BOOST_REQUIRE(!parser.parse(*json).get(step));

      auto m = model::transformer::load(golden_root / arch);
      BOOST_REQUIRE_MESSAGE(m, why(m));
      auto initial = model::load_lora_adapter(golden_root / arch / "adapter", m->config(),
                                              at::TensorOptions().dtype(at::kFloat));
      BOOST_REQUIRE_MESSAGE(initial, why(initial));

      train::trainer_options o;
      o.loss.kind = *rl::parse_policy_loss_kind(text(step, "loss"));
      o.aggregation = *rl::parse_loss_aggregation(text(step, "aggregation"));
      o.loss.eps_low = number(step, "eps_low");
      o.loss.eps_high = number(step, "eps_high");
      o.loss.kl_coef = number(step, "kl_coef");
      o.temperature = number(step, "temperature");
      o.adamw.lr = number(step, "lr");
      o.adamw.beta1 = number(step, "adam_beta1");
      o.adamw.beta2 = number(step, "adam_beta2");
      o.adamw.eps = number(step, "adam_eps");
      o.adamw.weight_decay = number(step, "weight_decay");
      o.clip_norm = number(step, "clip_norm");
      o.micro_batch_tokens = 16; // several micro-batches: accumulation is part of the check
      o.logprob_chunk = 3;
      auto t = train::lora_trainer::create(*m, o, &*initial);
      BOOST_REQUIRE_MESSAGE(t, why(t));

      auto batch = model::safetensors_file::open(dir / "batch.safetensors");
      BOOST_REQUIRE_MESSAGE(batch, why(batch));
      const auto advantages = tensor(*batch, "advantages");
      std::vector<train::training_sample> samples;
      for (int64_t i = 0; i < advantages.numel(); ++i) {
        train::training_sample s;
        const auto k = std::to_string(i);
        auto p = tensor(*batch, "prompt." + k), c = tensor(*batch, "completion." + k);
        auto lp = tensor(*batch, "sampler_logprobs." + k);
        for (int64_t j = 0; j < p.numel(); ++j)
          s.prompt_tokens.push_back(static_cast<int32_t>(p[j].item<int64_t>()));
        for (int64_t j = 0; j < c.numel(); ++j) {
          s.completion_tokens.push_back(static_cast<int32_t>(c[j].item<int64_t>()));
          s.sampler_logprobs.push_back(lp[j].item<float>());
        }
        s.advantage = advantages[i].item<double>();
        samples.push_back(std::move(s));
      }

      auto grads = (*t)->compute_gradients(samples);
      BOOST_REQUIRE_MESSAGE(grads, why(grads));
      BOOST_CHECK_CLOSE(grads->loss, number(step, "loss_value"), 1e-2); // percent: 1e-4
      BOOST_CHECK_CLOSE(grads->grad_norm, number(step, "grad_norm"), 1e-2);
      const auto bucket = (*t)->gradients().clone();
      double gmax = 0;
      for (const auto& slot : (*t)->lora().slots())
        for (const char* factor : {".lora_A", ".lora_B"})
          gmax = std::max(gmax, tensor(*batch, "grad." + slot.module + factor).abs().max()
                                  .item<double>());
      std::map<std::string, std::pair<at::Tensor, at::Tensor>> peft_grads;
      for (const auto& slot : (*t)->lora().slots()) {
        const auto ga = tensor(*batch, "grad." + slot.module + ".lora_A");
        const auto gb = tensor(*batch, "grad." + slot.module + ".lora_B");
        peft_grads[slot.module] = {ga, gb};
        const auto ka = bucket.narrow(0, slot.a_offset, ga.numel()).view(ga.sizes());
        const auto kb = bucket.narrow(0, slot.b_offset, gb.numel()).view(gb.sizes());
        test::check_close(ka, ga, 1e-4 * gmax, slot.module + " lora_A gradient");
        test::check_close(kb, gb, 1e-4 * gmax, slot.module + " lora_B gradient");
      }

      auto stats = (*t)->step(samples);
      BOOST_REQUIRE_MESSAGE(stats, why(stats));
      auto after = model::load_lora_adapter(dir / "adapter", m->config(),
                                            at::TensorOptions().dtype(at::kFloat));
      BOOST_REQUIRE_MESSAGE(after, why(after));
      const auto mine = (*t)->adapter();
      if (const char* export_dir = std::getenv("KBRL_EXPORT_ADAPTER_DIR")) {
        auto written = model::write_lora_adapter(fs::path(export_dir) / arch, mine);
        BOOST_REQUIRE_MESSAGE(written, why(written));
      }
      const double lr = o.adamw.lr;
      for (const auto& [module, f] : after->modules) {
        const auto& g = peft_grads.at(module);
        const auto& k = mine.modules.at(module);
        for (int which = 0; which < 2; ++which) {
          const auto& theirs = which == 0 ? f.a : f.b;
          const auto& ours = which == 0 ? k.a : k.b;
          const auto& grad = which == 0 ? g.first : g.second;
          const auto diff = (ours - theirs).abs();
          const auto sure = grad.abs() > 1e-3 * gmax;
          const double worst_sure =
            sure.any().item<bool>() ? diff.masked_select(sure).max().item<double>() : 0.0;
          const std::string what = module + (which == 0 ? ".lora_A" : ".lora_B");
          BOOST_CHECK_MESSAGE(worst_sure <= 1e-6 + 1e-3 * lr,
                              what << ": after the step, values with a clear gradient differ by "
                                   << worst_sure);
          BOOST_CHECK_MESSAGE(diff.max().item<double>() <= 2 * lr * (1 + o.adamw.weight_decay),
                              what << ": a value differs by " << diff.max().item<double>());
        }
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

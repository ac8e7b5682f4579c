#include "runtime/episode/prompts.hpp"

#include "runtime/episode/backend_examples.hpp"

#include <cstdio>

namespace kbrl::episode {

const char* to_string(outcome o) {
  switch (o) {
    case outcome::format: return "format";
    case outcome::compile: return "compile";
    case outcome::runtime: return "runtime";
    case outcome::correctness: return "correctness";
    case outcome::refused: return "refused";
    case outcome::slower: return "slower";
    case outcome::faster: return "faster";
  }
  return "?";
}

outcome classify(const parsed_answer& answer, const eval_result* v) {
  if (!answer.ok() || v == nullptr)
    return outcome::format;
  switch (v->error) {
    case eval_error::static_check: return outcome::refused;
    case eval_error::compile: return outcome::compile;
    case eval_error::mismatch: return outcome::correctness;
    case eval_error::none: break;
    default: return outcome::runtime; // runtime, timeout, crashed (infrastructure is not the model's)
  }
  if (!v->correct)
    return outcome::correctness;
  return v->speedup > 1.0 ? outcome::faster : outcome::slower;
}

namespace {

std::string fmt(const char* format, double a, double b = 0, double c = 0) {
  char buf[256];
  std::snprintf(buf, sizeof buf, format, a, b, c);
  return buf;
}

const char* guidance(outcome o) {
  switch (o) {
    case outcome::format:
      return "Answer with your reasoning first and then the complete program, including the "
             "class ModelNew, inside the answer tags.";
    case outcome::compile:
      return "Fix the build errors above; keep the kernel's signature consistent between the C++ "
             "declaration and the CUDA definition.";
    case outcome::runtime:
      return "Check launch bounds, tensor shapes and dtypes, and that every pointer you index "
             "belongs to a contiguous tensor on the right device.";
    case outcome::correctness:
      return "Compare your kernel's arithmetic and index bounds with the reference line by line; "
             "check every element is written exactly once.";
    case outcome::refused:
      return "The program used a forbidden construct. Write a real kernel for the computation; "
             "do not reach the reference, patch timing or skip work.";
    case outcome::slower:
      return "It is correct but not faster than PyTorch. Fuse operations, use vectorised loads, "
             "better block sizes, or shared memory to cut memory traffic.";
    case outcome::faster:
      return "It is correct and faster. Try to make it faster still while keeping it correct.";
  }
  return "";
}

} // namespace

std::string feedback_text(const parsed_answer& answer, const eval_result* v) {
  auto o = classify(answer, v);
  std::string out = "Your previous answer: ";
  switch (o) {
    case outcome::format:
      out += std::string("no program could be read from it (") + to_string(answer.failure) + ").\n";
      break;
    case outcome::compile: out += "the program failed to build.\n"; break;
    case outcome::runtime: out += "the program failed while running.\n"; break;
    case outcome::correctness:
      out += "the output differs from the reference in " + std::to_string(v->trials_total - v->trials_passed)
             + " of " + std::to_string(v->trials_total) + " trials.\n";
      break;
    case outcome::refused: out += "refused before running.\n"; break;
    case outcome::slower:
    case outcome::faster:
      out += fmt("correct; it took %.4g ms against %.4g ms for the PyTorch reference "
                 "(%.3gx).\n",
                 v->kernel_runtime.mean_ms, v->reference_runtime.mean_ms, v->speedup);
      break;
  }
  if (v != nullptr && o != outcome::slower && o != outcome::faster) {
    for (size_t i = 0; i < v->trials.size(); ++i) {
      auto& t = v->trials[i];
      out += "  trial " + std::to_string(i + 1) + ": " + (t.passed ? "pass" : "FAIL")
             + fmt(", max abs diff %.3g", t.max_abs_diff) + (t.note.empty() ? "" : ", " + t.note)
             + "\n";
    }
    if (!v->error_excerpt.empty())
      out += "Error:\n" + v->error_excerpt + (v->error_excerpt.back() == '\n' ? "" : "\n");
  }
  out += guidance(o);
  return out;
}

std::string first_prompt(const problem& p, const prompt_settings& s) {
  auto backend = to_string(p.backend);
  std::string out = "Write a faster implementation of the PyTorch model below as a program that "
                    "defines `class ModelNew`, a drop-in replacement for `Model` (same "
                    "constructor arguments, same forward inputs and outputs), using the "
                    + std::string(backend) + " backend. Tensors are " + to_string(p.precision)
                    + ".";
  if (!s.hardware_notes.empty())
    out += " It runs on " + s.hardware_notes + ".";
  out += "\n\n";
  if (s.show_example) {
    out += "Example: for this model\n```python\n" + example_problem()
           + "```\nan answer is\n```python\n" + example_answer(p.backend) + "```\n\n";
  }
  if (!s.examples.empty())
    out += s.examples + (s.examples.back() == '\n' ? "\n" : "\n\n");
  out += "The model to speed up:\n```python\n" + p.reference_source
         + (p.reference_source.empty() || p.reference_source.back() == '\n' ? "" : "\n")
         + "```\n\n";
  auto& f = s.format;
  out += "Think first inside " + f.think_open + "..." + f.think_close
         + ", then give the complete program inside " + f.kernel_open + "..." + f.kernel_close
         + ". Only the program inside the tags is run.";
  return out;
}

std::vector<tok::chat_message> conversation(const problem& p,
                                            const std::vector<previous_turn>& history,
                                            const prompt_settings& s,
                                            const std::function<size_t(const std::string&)>& count) {
  std::vector<tok::chat_message> head;
  if (!s.system_prompt.empty())
    head.push_back({"system", s.system_prompt, std::nullopt});
  head.push_back({"user", first_prompt(p, s), std::nullopt});
  // Each earlier turn becomes (assistant answer without reasoning, user feedback).
  std::vector<std::pair<tok::chat_message, tok::chat_message>> turns;
  for (auto& t : history) {
    auto shown = t.answer.ok() || !t.answer.visible.empty() ? t.answer.visible : t.completion_text;
    turns.push_back({{"assistant", shown, std::nullopt},
                     {"user", feedback_text(t.answer, t.evaluated ? &t.verdict : nullptr),
                      std::nullopt}});
  }
  size_t used = 0;
  for (auto& m : head)
    used += count(m.content);
  // Keep the newest turns that fit; the latest one always stays.
  size_t keep_from = turns.size();
  while (keep_from > 0) {
    auto& [a, u] = turns[keep_from - 1];
    auto cost = count(a.content) + count(u.content);
    if (keep_from < turns.size() && used + cost > s.history_token_budget)
      break;
    used += cost;
    --keep_from;
  }
  auto out = head;
  if (keep_from > 0)
    out.back().content += "\n\n(" + std::to_string(keep_from)
                          + " earlier attempt(s) left out for length.)";
  for (size_t i = keep_from; i < turns.size(); ++i) {
    out.push_back(turns[i].first);
    out.push_back(turns[i].second);
  }
  return out;
}

caf::expected<std::vector<int32_t>> prompt_tokens(const problem& p,
                                                  const std::vector<previous_turn>& history,
                                                  const prompt_settings& settings,
                                                  const tok::tokenizer& tok,
                                                  const tok::chat_format& chat) {
  auto messages = conversation(p, history, settings,
                               [&tok](const std::string& text) { return tok.encode(text).size(); });
  auto rendered = chat.render(messages, true);
  if (!rendered)
    return rendered.error();
  return tok.encode(*rendered);
}

} // namespace kbrl::episode

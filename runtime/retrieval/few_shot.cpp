#include "runtime/retrieval/few_shot.hpp"

#include "runtime/tokenizer/tokenizer.hpp"

#include <cstdio>

namespace kbrl::retrieval {

namespace {

const char* const placeholder = "{examples}";

/// What a kernel is written in, for the code fence: C++/CUDA sources start with #include.
const char* fence_language(const std::string& source) {
  const auto first = source.find_first_not_of(" \t\r\n");
  if (first != std::string::npos
      && (source.compare(first, 8, "#include") == 0 || source.compare(first, 7, "#define") == 0
          || source.compare(first, 9, "#pragma o") == 0))
    return "cpp";
  return "python";
}

std::string backend_title(kernel_backend b) {
  switch (b) {
    case kernel_backend::cuda: return "CUDA";
    case kernel_backend::triton: return "Triton";
    case kernel_backend::torch: return "PyTorch";
    case kernel_backend::hip: return "HIP";
    case kernel_backend::cute: return "CuTe";
    case kernel_backend::tilelang: return "TileLang";
    case kernel_backend::thunderkittens: return "ThunderKittens";
  }
  return "kernel";
}

std::string with_newline(std::string s) {
  if (s.empty() || s.back() != '\n')
    s += '\n';
  return s;
}

std::string render_example(const retrieved_example& x, size_t number) {
  std::string out = "Example " + std::to_string(number);
  if (x.speedup > 0) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " (%.2fx faster than PyTorch eager)", x.speedup);
    out += buf;
  }
  out += ":\nReference:\n```python\n" + with_newline(x.reference_source) + "```\n";
  out += backend_title(x.backend) + " implementation:\n```" + fence_language(x.kernel_source)
         + "\n" + with_newline(x.kernel_source) + "```\n";
  return out;
}

} // namespace

token_counter character_estimate() {
  return [](std::string_view text) { return static_cast<int64_t>((text.size() + 3) / 4); };
}

token_counter tokenizer_count(const tok::tokenizer& tokenizer) {
  return [t = tokenizer](std::string_view text) {
    return static_cast<int64_t>(t.encode_ordinary(text).size());
  };
}

few_shot_block render_few_shot(const std::vector<retrieved_example>& examples,
                               const few_shot_options& options) {
  few_shot_block block;
  const auto count = options.count ? options.count : character_estimate();
  const std::string heading = "Here are PyTorch programs similar to yours, each with a faster "
                              + backend_title(options.backend) + " implementation:\n";
  std::vector<std::string> parts;
  for (const auto& x : examples) {
    if (x.backend != options.backend) {
      ++block.left_out_backend;
      continue;
    }
    if (options.max_tokens <= 0) {
      ++block.left_out_budget;
      continue;
    }
    // Counted as a whole, so the count is exact for tokenizers that merge across the seams.
    std::string candidate = heading;
    for (const auto& p : parts)
      candidate += "\n" + p;
    candidate += "\n" + render_example(x, parts.size() + 1);
    const int64_t tokens = count(candidate);
    if (tokens > options.max_tokens) {
      ++block.left_out_budget;
      continue;
    }
    parts.push_back(render_example(x, parts.size() + 1));
    block.ids.push_back(x.id);
    block.text = std::move(candidate);
    block.tokens = tokens;
  }
  return block;
}

std::string insert_few_shot(const std::string& prompt, const few_shot_block& block) {
  const auto at = prompt.find(placeholder);
  if (at != std::string::npos) {
    std::string out = prompt;
    out.replace(at, std::string{placeholder}.size(), block.text);
    return out;
  }
  if (block.text.empty())
    return prompt;
  return block.text + "\n" + prompt;
}

} // namespace kbrl::retrieval

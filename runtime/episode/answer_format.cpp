#include "runtime/episode/answer_format.hpp"

#include <cctype>
#include <vector>

namespace kbrl::episode {

const char* to_string(format_failure f) {
  switch (f) {
    case format_failure::none: return "none";
    case format_failure::unterminated_think: return "unterminated_think";
    case format_failure::missing_think: return "missing_think";
    case format_failure::no_code: return "no_code";
    case format_failure::unterminated_code: return "unterminated_code";
    case format_failure::several_code_blocks: return "several_code_blocks";
    case format_failure::empty_code: return "empty_code";
    case format_failure::no_model_new: return "no_model_new";
  }
  return "?";
}

namespace {

bool blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n") == std::string_view::npos;
}

size_t count(std::string_view text, std::string_view what) {
  size_t n = 0;
  for (auto at = text.find(what); at != std::string_view::npos; at = text.find(what, at + 1))
    ++n;
  return n;
}

/// The code of the tagged block(s) in `text`, or a failure.
parsed_answer tagged_code(std::string_view text, const answer_format& f) {
  parsed_answer out;
  auto opens = count(text, f.kernel_open);
  auto open = text.find(f.kernel_open);
  auto body = open + f.kernel_open.size();
  auto close = text.find(f.kernel_close, body);
  if (close == std::string_view::npos) {
    out.failure = format_failure::unterminated_code;
    return out;
  }
  if (opens > 1) {
    out.failure = format_failure::several_code_blocks;
    return out;
  }
  out.code = std::string(text.substr(body, close - body));
  return out;
}

/// Lines of a fenced block: "```" or "```python" (any info string) up to the next "```" line.
parsed_answer fenced_code(std::string_view text) {
  parsed_answer out;
  std::vector<std::string> blocks;
  size_t pos = 0;
  bool inside = false;
  std::string current;
  while (pos <= text.size()) {
    auto end = text.find('\n', pos);
    auto line = text.substr(pos, end == std::string_view::npos ? std::string_view::npos : end - pos);
    auto trimmed = line.substr(0, line.find_last_not_of(" \t\r") + 1);
    auto lead = trimmed.find_first_not_of(" \t");
    bool fence = lead != std::string_view::npos && trimmed.substr(lead, 3) == "```";
    if (fence && !inside) {
      inside = true;
      current.clear();
    } else if (fence && inside && trimmed.substr(lead) == "```") {
      inside = false;
      blocks.push_back(current);
    } else if (inside) {
      current.append(line).push_back('\n');
    }
    if (end == std::string_view::npos)
      break;
    pos = end + 1;
  }
  if (inside)
    out.failure = format_failure::unterminated_code;
  else if (blocks.empty())
    out.failure = format_failure::no_code;
  else if (blocks.size() > 1)
    out.failure = format_failure::several_code_blocks;
  else
    out.code = blocks.front();
  return out;
}

/// Whether a line of `code` starts (after indentation) with "class ModelNew" as a whole name.
bool defines_model_new(const std::string& code) {
  size_t pos = 0;
  while (pos < code.size()) {
    auto end = code.find('\n', pos);
    if (end == std::string::npos)
      end = code.size();
    auto i = code.find_first_not_of(" \t", pos);
    if (i < end && code.compare(i, 5, "class") == 0) {
      auto j = code.find_first_not_of(" \t", i + 5);
      if (j > i + 5 && j < end && code.compare(j, 8, "ModelNew") == 0) {
        auto k = j + 8;
        if (k >= code.size() || !(std::isalnum(static_cast<unsigned char>(code[k])) || code[k] == '_'))
          return true;
      }
    }
    pos = end + 1;
  }
  return false;
}

} // namespace

parsed_answer parse_answer(std::string_view text, const answer_format& f) {
  parsed_answer out;
  std::string_view rest = text;
  auto think = text.find(f.think_open);
  if (think != std::string_view::npos) {
    auto close = text.find(f.think_close, think + f.think_open.size());
    if (close == std::string_view::npos) {
      out.failure = format_failure::unterminated_think;
      return out;
    }
    out.reasoning = std::string(
      text.substr(think + f.think_open.size(), close - think - f.think_open.size()));
    rest = text.substr(close + f.think_close.size());
  } else if (f.require_think) {
    out.failure = format_failure::missing_think;
    return out;
  }
  out.visible = std::string(rest);
  parsed_answer code;
  if (rest.find(f.kernel_open) != std::string_view::npos)
    code = tagged_code(rest, f);
  else if (f.allow_fenced)
    code = fenced_code(rest);
  else
    code.failure = format_failure::no_code;
  if (!code.ok()) {
    out.failure = code.failure;
    return out;
  }
  if (blank(code.code)) {
    out.failure = format_failure::empty_code;
    return out;
  }
  if (!defines_model_new(code.code)) {
    out.failure = format_failure::no_model_new;
    return out;
  }
  out.code = std::move(code.code);
  return out;
}

} // namespace kbrl::episode

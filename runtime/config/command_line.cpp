#include "runtime/config/command_line.hpp"

#include "runtime/config/config_error.hpp"

#include <CLI/CLI.hpp>

#include <cstdio>
#include <vector>

namespace kbrl::config {

namespace {

/// Every long flag of `app` and its subcommands, with the leading dashes.
void long_flags(const CLI::App& app, std::vector<std::string>& out) {
  for (const auto* opt : app.get_options())
    for (auto& name : opt->get_lnames())
      out.push_back("--" + name);
  for (const auto* sub : app.get_subcommands([](const CLI::App*) { return true; }))
    long_flags(*sub, out);
}

} // namespace

std::string mistyped_flag_hint(const CLI::App& app, const std::string& message) {
  std::vector<std::string> flags;
  long_flags(app, flags);
  std::vector<std::string> extras;
  for (size_t at = message.find("--"); at != std::string::npos; at = message.find("--", at)) {
    auto end = message.find_first_of(" \n", at);
    extras.push_back(message.substr(at, end == std::string::npos ? std::string::npos : end - at));
    at = end == std::string::npos ? message.size() : end;
  }
  for (auto& extra : extras) {
    if (extra.rfind("--", 0) != 0)
      continue;
    auto word = extra.substr(0, extra.find('='));
    auto hint = did_you_mean(word, flags);
    if (!hint.empty())
      return hint;
  }
  return "";
}

void add_version_flag(CLI::App& app, const std::string& tool) {
  app.name(tool); // messages say "kbrl-eval: ...", not the path it was started by
  app.set_version_flag("--version", tool + " " KBRL_VERSION);
}

std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv, int usage_status) {
  try {
    app.parse(argc, argv);
    return std::nullopt;
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::Success& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    // An unknown flag is the mistake to name first: CLI11 may have stopped at a missing
    // required option that the mistyped one was meant to be.
    std::string message = e.what();
    for (auto& extra : app.remaining())
      if (extra.rfind("-", 0) == 0) {
        message = "unknown option " + extra + mistyped_flag_hint(app, extra);
        break;
      }
    std::fprintf(stderr, "%s: %s\nRun with --help for the options.\n", app.get_name().c_str(),
                 message.c_str());
    return usage_status;
  }
}

} // namespace kbrl::config

#pragma once
// Moving over from the seed projects: a YAML training config of kernelbench-tinker
// (ScalingIntelligence/kernelbench-tinker) or kernel-rl (Kevin-style multi-turn with RA-ICL,
// G-structure/kernel_rl) turned into a kbrl run config, and what their key names are called here.
//
// Both seeds read nested YAML flattened to dotted keys (dataset_builder.batch_size,
// multiturn.max_turns), with null meaning "keep the default"; kbrl reads the same way. Every seed
// key either becomes kbrl settings (with a comment naming where it came from) or is listed with
// why it has no equivalent. MIGRATING.md is the page for people; this is the code.

#include <caf/expected.hpp>

#include <map>
#include <string>
#include <vector>

namespace kbrl::config {

/// A seed config, flattened: dotted key -> scalar text, or -> list of scalar texts.
struct seed_values {
  std::map<std::string, std::string> scalars;
  std::map<std::string, std::vector<std::string>> lists;
};

/// Reads seed YAML (nested maps, scalars, lists of scalars; null dropped). errc::invalid_config
/// names `source` and the line for YAML that does not parse or a shape the seeds never use.
caf::expected<seed_values> read_seed_yaml(const std::string& text, const std::string& source);

/// One kbrl setting the conversion writes.
struct converted_setting {
  std::string key;        ///< "learner.lr"
  std::string toml_value; ///< "2e-06", "\"Qwen/Qwen3-8B\"", "[1]"
  std::string from;       ///< the seed keys it came from, "learning_rate: 0.000002"
};

/// A converted config.
struct seed_conversion {
  std::vector<converted_setting> settings;
  std::vector<std::string> no_equivalent; ///< "wandb_project: ... (why)"
  std::vector<std::string> assumptions;   ///< what the conversion had to decide
  /// The run config as TOML, every setting with a comment saying where it came from, and the
  /// keys without an equivalent and the assumptions as comments at the end.
  std::string toml(const std::string& source) const;
};

/// Converts a flattened seed config. Fails with errc::invalid_config listing every value kbrl
/// refuses (a seed value outside what the kbrl setting allows), naming the seed key.
caf::expected<seed_conversion> convert_seed(const seed_values& seed);

/// Every seed key the conversion knows (MIGRATING.md lists each; a test checks it).
std::vector<std::string> seed_key_names();

/// " (kernelbench-tinker and kernel-rl call it so; kbrl's is learner.lr)" when `key`, or its last
/// dotted part, is a seed key name, else "". For "unknown key" messages of run configs.
std::string seed_key_hint(const std::string& key);

} // namespace kbrl::config

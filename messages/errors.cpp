#include "messages/errors.hpp"

#include <caf/sec.hpp>

namespace kbrl {

const char* to_string(errc code) {
  switch (code) {
    case errc::none: return "none";
    case errc::invalid_config: return "invalid_config";
    case errc::invalid_argument: return "invalid_argument";
    case errc::io_failure: return "io_failure";
    case errc::unknown_actor: return "unknown_actor";
    case errc::node_unreachable: return "node_unreachable";
    case errc::busy: return "busy";
    case errc::timeout: return "timeout";
    case errc::worker_crashed: return "worker_crashed";
    case errc::not_supported: return "not_supported";
    case errc::internal: return "internal";
  }
  return "unknown";
}

std::string describe(const caf::error& err) {
  if (!err)
    return "no error";
  std::string out;
  if (err.category() == caf::atom("kbrl")) {
    out = to_string(static_cast<errc>(err.code()));
  } else if (err.category() == caf::atom("system")) {
    out = caf::to_string(static_cast<caf::sec>(err.code()));
  } else {
    out = caf::to_string(err.category()) + ":" + std::to_string(err.code());
  }
  const auto& ctx = err.context();
  if (ctx.size() == 1 && ctx.match_element<std::string>(0)) {
    out += ": ";
    out += ctx.get_as<std::string>(0);
  } else if (!ctx.empty()) {
    out += ": ";
    out += caf::to_string(ctx);
  }
  return out;
}

} // namespace kbrl

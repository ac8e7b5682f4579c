#pragma once
// kbrl's error codes: one enum for every failure that crosses an actor or node boundary.
// Runtime code returns caf::expected<T> built with make_error(errc::..., "what happened");
// actors forward those errors as replies. The text in the context is what a person reads.

#include <caf/atom.hpp>
#include <caf/error.hpp>
#include <caf/make_message.hpp>

#include <cstdint>
#include <string>

namespace kbrl {

/// Every error category kbrl reports. Append only: the numeric values cross nodes.
enum class errc : uint8_t {
  none = 0,
  invalid_config,     ///< a run config, manifest or override is wrong (file, line, key in the text)
  invalid_argument,   ///< a request carried a value outside its contract
  io_failure,         ///< a file or socket could not be read or written
  unknown_actor,      ///< a name that no node has registered
  node_unreachable,   ///< a peer could not be reached or refused the connection
  busy,               ///< a bounded queue is full; retry later
  timeout,            ///< a request or worker passed its deadline
  worker_crashed,     ///< an isolated worker process died or corrupted its device
  not_supported,      ///< the request names something this build or role does not do
  internal,           ///< a bug in kbrl: the text says where
};

/// Short lower-case name of an error code, e.g. "invalid_config".
const char* to_string(errc code);

/// Builds an error with a human-readable explanation as its context.
inline caf::error make_error(errc code, std::string what) {
  return caf::error{static_cast<uint8_t>(code), caf::atom("kbrl"),
                    caf::make_message(std::move(what))};
}

/// Renders any caf::error for a person: "invalid_config: cluster.toml:3: ...". Works without an
/// actor system, so tools can print errors raised before one exists.
std::string describe(const caf::error& err);

} // namespace kbrl

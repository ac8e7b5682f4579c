#include "messages/data.hpp"

namespace kbrl {

const char* to_string(kernel_backend x) {
  switch (x) {
    case kernel_backend::cuda: return "cuda";
    case kernel_backend::triton: return "triton";
    case kernel_backend::torch: return "torch";
    case kernel_backend::hip: return "hip";
    case kernel_backend::cute: return "cute";
    case kernel_backend::tilelang: return "tilelang";
    case kernel_backend::thunderkittens: return "thunderkittens";
  }
  return "unknown";
}

const char* to_string(kernel_precision x) {
  switch (x) {
    case kernel_precision::fp32: return "fp32";
    case kernel_precision::fp16: return "fp16";
    case kernel_precision::bf16: return "bf16";
  }
  return "unknown";
}

const char* to_string(finish_reason x) {
  switch (x) {
    case finish_reason::stop_token: return "stop_token";
    case finish_reason::stop_string: return "stop_string";
    case finish_reason::length: return "length";
    case finish_reason::error: return "error";
    case finish_reason::cancelled: return "cancelled";
  }
  return "unknown";
}

const char* to_string(actor_health x) {
  switch (x) {
    case actor_health::ok: return "ok";
    case actor_health::starting: return "starting";
    case actor_health::degraded: return "degraded";
    case actor_health::failed: return "failed";
  }
  return "unknown";
}

const char* to_string(eval_error x) {
  switch (x) {
    case eval_error::none: return "none";
    case eval_error::format: return "format";
    case eval_error::static_check: return "static_check";
    case eval_error::compile: return "compile";
    case eval_error::runtime: return "runtime";
    case eval_error::mismatch: return "mismatch";
    case eval_error::timeout: return "timeout";
    case eval_error::crashed: return "crashed";
    case eval_error::infrastructure: return "infrastructure";
  }
  return "unknown";
}

const char* to_string(node_state x) {
  switch (x) {
    case node_state::up: return "up";
    case node_state::down: return "down";
    case node_state::stopped: return "stopped";
  }
  return "unknown";
}

} // namespace kbrl

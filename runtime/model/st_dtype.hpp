#pragma once
// The element types of the safetensors format, without torch: what a caller needs to name a
// dtype (random_checkpoint.hpp, file listings) without including safetensors.hpp.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kbrl::model {

/// Element types of the format that kbrl reads and writes.
enum class st_dtype : uint8_t { f64, f32, f16, bf16, i64, i32, i16, i8, u8, boolean };

/// The format's name of a dtype: "F64", "F32", "F16", "BF16", "I64", "I32", "I16", "I8", "U8",
/// "BOOL".
const char* to_string(st_dtype dtype);

/// The dtype called `name` in a header, or nullopt if kbrl does not know it.
std::optional<st_dtype> parse_st_dtype(std::string_view name);

/// Every dtype's name, for error messages: "F64, F32, ...".
std::string known_st_dtypes();

/// Bytes per element: 8, 4, 2, 2, 8, 4, 2, 1, 1, 1.
std::size_t element_size(st_dtype dtype);

/// True for F64, F32, F16 and BF16.
bool is_floating(st_dtype dtype);

} // namespace kbrl::model

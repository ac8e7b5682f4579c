#include "runtime/io/file_store.hpp"

#include "messages/errors.hpp"
#include "runtime/io/file_io.hpp"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace kbrl::io {

namespace {

namespace fs = std::filesystem;

class directory_files final : public file_store {
public:
  explicit directory_files(std::string dir) : dir_(std::move(dir)) {}

  caf::expected<std::optional<std::string>> read(const std::string& name) override {
    std::error_code ec;
    if (!fs::exists(path_of(name), ec))
      return std::optional<std::string>{};
    auto text = read_text_file(path_of(name));
    if (!text)
      return text.error();
    return std::optional<std::string>{std::move(*text)};
  }

  caf::expected<void> replace(const std::string& name, std::string_view text) override {
    return write_file_atomically(path_of(name), {text});
  }

  caf::expected<void> append(const std::string& name, std::string_view text) override {
    std::ofstream out(path_of(name), std::ios::app | std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    out.flush();
    if (!out)
      return make_error(errc::io_failure, "could not write " + path_of(name) + ": "
                                            + std::strerror(errno));
    return {};
  }

  uint64_t size(const std::string& name) override {
    std::error_code ec;
    auto n = fs::file_size(path_of(name), ec);
    return ec ? 0 : static_cast<uint64_t>(n);
  }

  caf::expected<void> rename(const std::string& from, const std::string& to) override {
    std::error_code ec;
    fs::rename(path_of(from), path_of(to), ec);
    if (ec)
      return make_error(errc::io_failure, "could not rename " + path_of(from) + " to "
                                            + path_of(to) + ": " + ec.message());
    return {};
  }

  std::string path_of(const std::string& name) const override { return dir_ + "/" + name; }

private:
  std::string dir_;
};

} // namespace

std::shared_ptr<file_store> directory_store(std::string dir) {
  return std::make_shared<directory_files>(std::move(dir));
}

} // namespace kbrl::io

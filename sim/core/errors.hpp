#pragma once
#include <stdexcept>
#include <string>

namespace dtsim {

// Bad input (scenario, profile, command line): the CLI prints it and exits 2.
// `file` and `pointer` (RFC 6901) locate the offending value so a user can fix it without guessing.
class InputError : public std::runtime_error {
 public:
  InputError(std::string file, std::string pointer, const std::string& reason);
  const std::string& file() const { return file_; }
  const std::string& pointer() const { return pointer_; }
  const std::string& reason() const { return reason_; }

 private:
  std::string file_, pointer_, reason_;
};

}  // namespace dtsim

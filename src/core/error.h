// The one error type of crossover.
//
// Every failure a user can cause (bad usage, bad input, an unavailable device)
// is thrown as crossover::Error. Its message always says what went wrong, where
// (a file, a flag, a layer, a device) and why, in one line, so the CLI can
// print it as is and exit with code 2. Anything else that escapes (std::bad_alloc,
// a logic error) is an internal error: exit code 1.
#pragma once

#include <stdexcept>
#include <string>

namespace crossover {

class Error : public std::runtime_error {
 public:
  // where: the file, flag, layer or device concerned; what_why: what is wrong and why.
  // The message reads "<where>: <what_why>".
  Error(const std::string& where, const std::string& what_why)
      : std::runtime_error(where.empty() ? what_why : where + ": " + what_why) {}
};

}  // namespace crossover

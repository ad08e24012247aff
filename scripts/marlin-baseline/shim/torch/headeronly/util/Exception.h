// Minimal stand-in for torch's STD_TORCH_CHECK (marlin-bench shim, not from torch).
// Formats the message and throws std::runtime_error, like torch's version.
#pragma once
#include <sstream>
#include <stdexcept>
#include <string>
namespace marlin_bench_shim {
inline void cat(std::ostringstream&) {}
template <typename T, typename... R>
inline void cat(std::ostringstream& o, const T& t, const R&... r) {
  o << t;
  cat(o, r...);
}
template <typename... A>
[[noreturn]] inline void fail(const char* cond, const char* file, int line,
                              const A&... a) {
  std::ostringstream o;
  o << "check failed: (" << cond << ") at " << file << ":" << line << ": ";
  cat(o, a...);
  throw std::runtime_error(o.str());
}
}  // namespace marlin_bench_shim
#define STD_TORCH_CHECK(cond, ...)                                         \
  do {                                                                     \
    if (!(cond))                                                           \
      ::marlin_bench_shim::fail(#cond, __FILE__, __LINE__, ##__VA_ARGS__); \
  } while (0)
#define STD_TORCH_CHECK_NOT_IMPLEMENTED STD_TORCH_CHECK

// The contract every shim function keeps (src/lib.rs reads its side): no C++ exception crosses
// into Rust. A function runs its body under `nest::guarded`, which returns 0, or 1 with the
// exception's message copied into a malloc'd string in `*err` (freed by `nest_free_message`,
// defined in message.cpp, once Rust has copied it).

#pragma once

#include <c10/util/Exception.h>

#include <cstdlib>
#include <cstring>
#include <exception>

namespace nest {

// A malloc'd copy of `what` (null if malloc fails: Rust then reports "no message").
inline char* copy_message(const char* what) {
  size_t n = std::strlen(what);
  char* out = static_cast<char*>(std::malloc(n + 1));
  if (out != nullptr) {
    std::memcpy(out, what, n + 1);
  }
  return out;
}

// Runs `body`; 0, or 1 with the exception's message in `*err` (libtorch's without its C++
// backtrace).
template <typename F>
int guarded(char** err, F&& body) {
  try {
    body();
    return 0;
  } catch (const c10::Error& e) {
    *err = copy_message(e.what_without_backtrace());
  } catch (const std::exception& e) {
    *err = copy_message(e.what());
  } catch (...) {
    *err = copy_message("unknown C++ exception");
  }
  return 1;
}

} // namespace nest

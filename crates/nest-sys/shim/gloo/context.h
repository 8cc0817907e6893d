#pragma once
// Declarations only: see README.md.
#include <chrono>
namespace gloo {
class Context {
 public:
  void setTimeout(std::chrono::milliseconds timeout);
};
} // namespace gloo

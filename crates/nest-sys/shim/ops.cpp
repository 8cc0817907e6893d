// Counting the ATen operators a piece of work runs, for `nest_model::ops`: on a GPU each
// operator that computes is at least one kernel, and at small batches a pass costs about its
// kernel count (BENCHMARKS.md, "On a GPU"), so the count measured on the CPU says what the
// GPU will launch.
//
// A thread-local RecordFunction callback counts the operators called on the counting thread
// at the top level (an operator that others run inside, as `linear` runs `addmm`, counts once),
// leaving out the views, which launch nothing.
//
// Errors never cross the boundary as exceptions (guard.h).

#include <ATen/record_function.h>

#include "guard.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

// Operators that only make a view of their input (no kernel on any device).
const char* const kViews[] = {
    "aten::view",   "aten::unsqueeze", "aten::squeeze",   "aten::narrow",
    "aten::slice",  "aten::select",    "aten::expand",    "aten::transpose",
    "aten::permute", "aten::t",        "aten::as_strided", "aten::split",
    "aten::split_with_sizes", "aten::chunk", "aten::unbind", "aten::detach",
    "aten::alias",  "aten::_reshape_alias", "aten::expand_as", "aten::view_as",
};

bool is_view(const char* name) {
  for (const char* v : kViews) {
    if (std::strcmp(name, v) == 0) {
      return true;
    }
  }
  return false;
}

thread_local long long t_count = 0;
thread_local int t_depth = 0;
// NEST_OPS_TRACE=1: each counted operator's name on standard error, as counted.
thread_local bool t_trace = false;

std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
  if (t_depth++ == 0 && !is_view(fn.name())) {
    t_count++;
    if (t_trace) {
      std::fprintf(stderr, "op %lld: %s\n", t_count, fn.name());
    }
  }
  return nullptr;
}

void on_end(const at::RecordFunction&, at::ObserverContext*) { t_depth--; }

} // namespace

extern "C" {

// Starts counting on this thread from zero; `*handle` is what `nest_ops_stop` takes.
int nest_ops_start(unsigned long long* handle, char** err) {
  return nest::guarded(err, [&] {
    t_count = 0;
    t_depth = 0;
    const char* trace = std::getenv("NEST_OPS_TRACE");
    t_trace = trace != nullptr && std::strcmp(trace, "1") == 0;
    auto cb = at::RecordFunctionCallback(on_start, on_end)
                  .scopes({at::RecordScope::FUNCTION});
    *handle = static_cast<unsigned long long>(at::addThreadLocalCallback(cb));
  });
}

// Stops the count `handle` started (on the same thread) and writes it to `*count`.
int nest_ops_stop(unsigned long long handle, long long* count, char** err) {
  return nest::guarded(err, [&] {
    at::removeCallback(static_cast<at::CallbackHandle>(handle));
    *count = t_count;
  });
}

} // extern "C"

#pragma once
// The module qkv._qkv: the library's kernels, modules, models and readers as
// Python callables, one function per area. Only conversions live here; what
// each call does is the library's (docs/python.md). The Python package
// (python/qkv/) puts the nn.Module and Dataset faces on these.
#include <torch/extension.h>

#include <optional>
#include <type_traits>
#include <utility>

#include "qkv/core/interrupt.h"

namespace qkv::python {

namespace py = pybind11;

void bind_errors(py::module_& m);
void bind_ops(py::module_& m);
void bind_modules(py::module_& m);
void bind_data(py::module_& m);

// Runs f without the GIL (so Python threads go on) and with Ctrl-C routed to
// the flag that qkv's loops poll: a Ctrl-C stops the work there
// (qkv::Interrupted) or, in work that does not poll, as soon as it returns;
// either way Python sees KeyboardInterrupt. Outside the main thread the
// interpreter's handler cannot be swapped, so f just runs.
bool on_main_thread();
// Lines qkv said while the GIL was released, to Python's logging (module.cpp);
// with the GIL held.
void deliver_queued_lines();
void send_lines_to_logging();
[[noreturn]] void raise_keyboard_interrupt();  // clears qkv's flag first

template <typename F>
auto interruptible(F&& f) -> decltype(f()) {
  using Result = decltype(f());
  // On every way out, with the GIL held again: what the work said, to logging.
  struct Deliver {
    ~Deliver() { deliver_queued_lines(); }
  } deliver;
  if (!on_main_thread()) {
    py::gil_scoped_release release;
    return f();
  }
  InterruptScope scope;
  bool stopped = false;
  if constexpr (std::is_void_v<Result>) {
    try {
      py::gil_scoped_release release;
      f();
    } catch (const Interrupted&) {
      stopped = true;
    }
    if (stopped || interrupt_requested()) raise_keyboard_interrupt();
  } else {
    std::optional<Result> result;
    try {
      py::gil_scoped_release release;
      result.emplace(f());
    } catch (const Interrupted&) {
      stopped = true;
    }
    if (stopped || interrupt_requested()) raise_keyboard_interrupt();
    return std::move(*result);
  }
}

}  // namespace qkv::python

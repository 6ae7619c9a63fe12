// qkv._qkv: the module's entry point and how qkv's errors cross into Python.
#include <pybind11/stl.h>

#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "bindings.h"
#include "qkv/core/errors.h"
#include "qkv/core/messages.h"
#include "qkv/core/version.h"
#include "qkv/runtime/allocator.h"
#include "qkv/runtime/build_parts.h"
#include "qkv/runtime/openblas_core.h"
#include "qkv/runtime/runtime.h"

namespace qkv::python {

bool on_main_thread() {
  auto threading = py::module_::import("threading");
  return threading.attr("current_thread")().is(threading.attr("main_thread")());
}

void raise_keyboard_interrupt() {
  clear_interrupt();
  PyErr_SetNone(PyExc_KeyboardInterrupt);
  throw py::error_already_set();
}

// The library's lines for the user (qkv::say) go to Python's `logging`, as
// INFO records of the logger "qkv", so that an application's logging setup
// shows, files or silences them. A line said on a thread that holds the GIL
// is logged at once; one said without it (inside interruptible's work, or
// on a worker thread, where taking the GIL could deadlock against a waiting
// caller) waits in a queue until the call returns to Python.
namespace {
std::mutex g_queued_lines_mutex;
std::vector<std::string> g_queued_lines;

void log_line(const std::string& line) {
  try {
    py::module_::import("logging").attr("getLogger")("qkv").attr("info")(line);
  } catch (py::error_already_set&) {
    PyErr_Clear();  // a broken logging setup does not turn into qkv's error
  }
}
}  // namespace

void deliver_queued_lines() {
  std::vector<std::string> lines;
  {
    std::lock_guard<std::mutex> lock(g_queued_lines_mutex);
    lines.swap(g_queued_lines);
  }
  for (const auto& line : lines) log_line(line);
}

void send_lines_to_logging() {
  set_line_sink([](const std::string& line) {
    if (Py_IsInitialized() && PyGILState_Check()) {
      log_line(line);
      return;
    }
    std::lock_guard<std::mutex> lock(g_queued_lines_mutex);
    g_queued_lines.push_back(line);
  });
}

// qkv.UsageError (a bad argument) and qkv.DataError (a bad file or bad data,
// the message naming it) are ValueErrors, so code that catches ValueError
// for bad input keeps working; the message is qkv's one line.
void bind_errors(py::module_& m) {
  // Settings are named by the keyword arguments, which are the keys; the
  // parameter bound is a function of its own here.
  set_setting_namer([](const std::string& key) {
    return key == "max_params" ? std::string("qkv.models.set_max_parameters()") : key;
  });
  static py::exception<UsageError> usage_error(m, "UsageError", PyExc_ValueError);
  static py::exception<DataError> data_error(m, "DataError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const UsageError& e) {
      // (CPython's call: pybind11 3 deprecates the exception object's own call operator.)
      PyErr_SetString(usage_error.ptr(), with_setting_names(e.what()).c_str());
    } catch (const DataError& e) {
      PyErr_SetString(data_error.ptr(), with_setting_names(e.what()).c_str());
    } catch (const Interrupted& e) {
      clear_interrupt();
      PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
    }
  });
}

}  // namespace qkv::python

PYBIND11_MODULE(_qkv, m) {
  namespace py = pybind11;
  m.doc() = "qkv's C++ library (import the package qkv, not this module)";
  m.attr("__version__") = qkv::qkv_version();
  qkv::python::bind_errors(m);
  qkv::python::send_lines_to_logging();
  qkv::python::bind_ops(m);
  qkv::python::bind_modules(m);
  qkv::python::bind_data(m);
  m.def("set_threads", &qkv::set_threads, py::arg("n"),
        "LibTorch's and OpenBLAS's threads (n <= 0: one per core); torch.set_num_threads leaves OpenBLAS alone");
  m.def("keep_freed_memory", &qkv::keep_freed_memory_in_glibc, py::arg("keep") = true,
        R"doc(keep_freed_memory(keep=True) -> bool

Whether glibc's malloc keeps the memory this process frees for reuse (keep)
or hands large blocks back to the kernel on free (glibc's default), for the
whole process. `import qkv` sets keep=True (a training step ran 1.11x-1.30x
the C++ time without it, 1.01x-1.10x with it, at 17-34 % more peak memory;
docs/python.md); set QKV_KEEP_FREED_MEMORY=0 before importing qkv to leave
glibc as it is. Returns False, changing nothing, where jemalloc serves malloc
(preloaded).)doc");
  m.def("release_memory", &qkv::release_glibc_free_memory,
        "release_memory() -> int\n\nHands the freed memory glibc's malloc keeps back to the system (malloc_trim), "
        "e.g. between epochs; the bytes of resident memory that went (0 under jemalloc).");
  m.def("blas_summary", &qkv::blas_summary, "the BLAS that serves sgemm_ in this process, in one line");
  m.def(
      "optional_libraries",
      [] {
        std::map<std::string, bool> built;
        for (const auto& part : qkv::optional_parts()) built[part.name] = part.built;
        return built;
      },
      R"doc(optional_libraries() -> dict[str, bool]

The optional libraries this build of qkv was made with ({"HDF5": True,
"NIfTI": True, "XGBoost": True, "Gloo": True, "NCCL": False} on a CPU-only
LibTorch where Debian's packages were all found). Without
one, what needs it raises DataError naming the file and what to install
(docs/build.md).)doc");
  m.def("openblas_core_advice", [] {
    // OpenBLAS picks its kernels when it loads, before Python runs any of
    // qkv: the CLI re-executes itself with OPENBLAS_CORETYPE set, a module
    // can only say what to set.
    const auto loaded = qkv::blas::openblas_core_choice().core;
    if (loaded.empty()) return std::string();
    const auto better = qkv::blas::stronger_core(loaded, qkv::blas::cpu_blas_level());
    return better ? "OpenBLAS runs its " + loaded + " kernels on a CPU that runs " + *better +
                        "; start python with OPENBLAS_CORETYPE=" + *better + " for faster products"
                  : std::string();
  });
}

// flashdeberta._native: the C++ library for Python. Errors become Python exceptions carrying the C++
// message: a missing or unreadable file OSError (FileError), everything the caller got wrong ValueError
// (flashdeberta::Error, the runtime's UsageError), an allocation that failed MemoryError.
#include "bindings.hpp"

#include <ctime>
#ifdef __GLIBCXX__
#include <cxxabi.h>
#endif
#include <new>

#include "flashdeberta/config.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/runtime/options.hpp"

namespace flashdeberta::python {

runtime::RuntimeOptions runtime_options(std::filesystem::path const& model, std::string const& backend,
                                        std::string const& dtype, std::string const& attention, int threads,
                                        std::int64_t max_tokens) {
  runtime::RuntimeOptions options;
  options.model = model;
  if (backend == "eigen") {
    options.backend = runtime::BackendKind::kEigen;
  } else if (backend == "kokkos") {
    options.backend = runtime::BackendKind::kKokkos;
  } else if (backend == "cuda") {
    options.backend = runtime::BackendKind::kCuda;
  } else {
    throw runtime::UsageError("backend '" + backend + "' is not one of eigen, kokkos, cuda");
  }
  if (dtype == "float32") {
    options.dtype = DType::kF32;
  } else if (dtype == "bfloat16") {
    options.dtype = DType::kBF16;
  } else if (dtype == "float16") {
    options.dtype = DType::kF16;
  } else if (dtype == "int8") {
    options.dtype = DType::kI8;
  } else {
    throw runtime::UsageError("dtype '" + dtype + "' is not one of float32, bfloat16, float16, int8");
  }
  if (attention != "flash" && attention != "eager")
    throw runtime::UsageError("attention '" + attention + "' is not one of flash, eager");
  options.attention = attention == "eager" ? AttentionImpl::kEager : AttentionImpl::kFlash;
  options.threads = threads;
  options.max_tokens = max_tokens;
  return options;
}

double& native_seconds() {
  thread_local double seconds = 0.0;
  return seconds;
}

double& native_cpu_seconds() {
  thread_local double seconds = 0.0;
  return seconds;
}

double thread_cpu_seconds() {
  timespec now{};
  ::clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return static_cast<double>(now.tv_sec) + static_cast<double>(now.tv_nsec) * 1e-9;
}

PyObject* raise_current_exception() {
  try {
    throw;
  } catch (py::error_already_set& e) {
    e.restore();
#ifdef __GLIBCXX__
  } catch (abi::__forced_unwind&) {
    throw;
#endif
  } catch (...) {
    if (!py::detail::apply_exception_translators(py::detail::get_local_internals().registered_exception_translators) &&
        !py::detail::apply_exception_translators(py::detail::get_internals().registered_exception_translators))
      PyErr_SetString(PyExc_SystemError, "Exception escaped from default exception translator!");
  }
  return nullptr;
}

void translate_errors() {
  py::register_exception_translator([](std::exception_ptr error) {
    try {
      if (error) std::rethrow_exception(error);
    } catch (FileError const& e) {
      PyErr_SetString(PyExc_OSError, e.what());
    } catch (Error const& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (runtime::UsageError const& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });
}

}  // namespace flashdeberta::python

PYBIND11_MODULE(_native, m) {
  namespace fp = flashdeberta::python;
  m.doc() = "flashdeberta's C++ library: tokenizers, models and pipelines (use the flashdeberta package)";
  m.attr("__version__") = FLASHDEBERTA_VERSION_STRING;
  fp::translate_errors();
  m.def(
      "native_seconds",
      [](bool reset) {
        double const seconds = fp::native_seconds();
        if (reset) fp::native_seconds() = 0.0;
        return seconds;
      },
      pybind11::arg("reset") = false,
      "This thread's time inside the library's calls (GIL released) since the last reset.");
  m.def(
      "native_cpu_seconds",
      [](bool reset) {
        double const seconds = fp::native_cpu_seconds();
        if (reset) fp::native_cpu_seconds() = 0.0;
        return seconds;
      },
      pybind11::arg("reset") = false,
      "This thread's CPU time inside the library's calls (GIL released) since the last reset.");
  fp::bind_dlpack(m);
  fp::bind_tokenizer(m);
  fp::bind_model(m);
  fp::bind_model_calls(m);
  fp::bind_pipeline(m);
  fp::bind_gliner(m);
}

// flashdeberta._native: the C++ library for Python. Errors become Python exceptions carrying the C++
// message: a missing or unreadable file OSError (FileError), everything the caller got wrong ValueError
// (flashdeberta::Error, the runtime's UsageError), an allocation that failed MemoryError.
#include "bindings.hpp"

#include <pthread.h>

#include <atomic>
#include <ctime>
#ifdef __GLIBCXX__
#include <cxxabi.h>
#endif
#include <new>

#include "flashdeberta/config.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/runtime/options.hpp"

namespace flashdeberta::python {

namespace {

// Whether this process has run work on several OpenMP threads (set before such a call or load), and whether it
// is a child forked after that: GNU OpenMP keeps the forking thread's team in the child, whose threads are
// gone, so the child's next parallel region waits for them forever.
std::atomic<bool> ran_parallel{false};
std::atomic<bool> forked_after_parallel{false};

void on_fork_child() {
  if (ran_parallel.load()) forked_after_parallel.store(true);
}

}  // namespace

void require_fork_safe(int threads) {
  if (threads == 1) return;
  if (forked_after_parallel.load()) {
    throw runtime::UsageError(
        "this process was forked (os.fork, or multiprocessing's 'fork' start method) after flashdeberta had run "
        "work on several threads, and GNU OpenMP cannot start threads again in a forked child (the call would "
        "hang): load and run models in processes started with multiprocessing's 'spawn' or 'forkserver' method, "
        "or with threads=1 in this process");
  }
  if (!ran_parallel.load(std::memory_order_relaxed)) ran_parallel.store(true);  // no write per call
}

void register_fork_handler() { ::pthread_atfork(nullptr, nullptr, &on_fork_child); }

runtime::TokenLimitNames python_limit_names() { return {"max_tokens"}; }

runtime::RuntimeOptions runtime_options(std::filesystem::path const& model, std::string const& backend,
                                        std::string const& dtype, std::string const& attention, int threads,
                                        std::int64_t max_tokens) {
  // The runtime's bounds, as the CLI's --threads and --max-tokens have them.
  if (threads < 0 || threads > runtime::kMaxThreads) {
    throw runtime::UsageError("threads " + std::to_string(threads) + " is outside [0, " +
                              std::to_string(runtime::kMaxThreads) + "] (0: every core)");
  }
  if (max_tokens < 1 || max_tokens > runtime::kMaxTokensLimit) {
    throw runtime::UsageError("max_tokens " + std::to_string(max_tokens) + " is outside [1, " +
                              std::to_string(runtime::kMaxTokensLimit) + "]");
  }
  require_fork_safe(threads);
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
  options.limit_names = python_limit_names();
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
  m.attr("MAX_THREADS") = flashdeberta::runtime::kMaxThreads;  // the package checks its arguments against these
  m.attr("MAX_TOKENS") = flashdeberta::runtime::kMaxTokensLimit;
  fp::translate_errors();
  fp::register_fork_handler();
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
  fp::bind_train(m);
}

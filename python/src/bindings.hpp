// The pieces of the extension module flashdeberta._native, one file each, and what they share: numpy
// arrays from C++ vectors, and the rule that the GIL is released around every call into the library, so
// that Python threads tokenize and run models in parallel.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "flashdeberta/runtime/loaded_model.hpp"
#include "flashdeberta/runtime/options.hpp"

namespace flashdeberta::python {

namespace py = pybind11;

// The names of the token limit's settings in Python's messages: the max_tokens and batch_size arguments.
runtime::TokenLimitNames python_limit_names();

// The runtime options from the Python names: backend "eigen" | "kokkos" | "cuda", dtype "float32" |
// "bfloat16" | "float16", attention "flash" | "eager"; a name outside them is a runtime::UsageError.
runtime::RuntimeOptions runtime_options(std::filesystem::path const& model, std::string const& backend,
                                        std::string const& dtype, std::string const& attention, int threads,
                                        std::int64_t max_tokens);

// Before a load or call that runs on `threads` threads (0: every core): with more than one, a UsageError in a
// child forked after this process had run work on several threads (GNU OpenMP would hang there), else it notes
// that such work ran. register_fork_handler (module init) installs the pthread_atfork hook behind it.
void require_fork_safe(int threads);
void register_fork_handler();

// A head output left on the GPU as a flashdeberta._native.DeviceArray (DLPack producer, dlpack.cpp).
py::object device_array(runtime::DeviceTensor tensor);

// flashdeberta._native.Model (model_binding.cpp): the one a Python object is when it is a constructed Model,
// nullptr for anything else; and its call, for the entries that bypass pybind11's dispatcher
// (model_call.cpp): input_ids a numpy array, attention_mask and token_type_ids numpy arrays or None.
class Model;
Model const* native_model(PyObject* object);
py::object call(Model const& model, py::handle input_ids, py::handle attention_mask, py::handle token_type_ids,
                bool on_device);

void bind_dlpack(py::module_& m);
void bind_tokenizer(py::module_& m);
void bind_model(py::module_& m);
void bind_model_calls(py::module_& m);  // after bind_model
void bind_pipeline(py::module_& m);
void bind_gliner(py::module_& m);
void bind_train(py::module_& m);  // train_binding.cpp

// The time this thread spent inside the library with the GIL released (the C++ calls themselves), summed
// since the last reset, as wall time and as this thread's CPU time: bench/python_overhead.py subtracts them
// from a Python call's wall and CPU time to get what the binding adds (argument checks, conversions, numpy
// arrays) in one process, where two processes' medians differ by more than that. The CPU-time form holds on a
// busy machine, where waiting for a core inflates wall times. ScopedNativeTime adds the lifetime of its scope.
double& native_seconds();
double& native_cpu_seconds();
double thread_cpu_seconds();
class ScopedNativeTime {
 public:
  ScopedNativeTime() : start_(std::chrono::steady_clock::now()), start_cpu_(thread_cpu_seconds()) {}
  // The CPU clock (a system call, slow when the caches are cold after a forward) is read before the wall
  // clock ends the scope, so that the instrument's own cost counts inside the call, not as the binding's.
  ~ScopedNativeTime() {
    double const end_cpu = thread_cpu_seconds();
    auto const end = std::chrono::steady_clock::now();
    native_seconds() += std::chrono::duration<double>(end - start_).count();
    native_cpu_seconds() += end_cpu - start_cpu_;
  }
  ScopedNativeTime(ScopedNativeTime const&) = delete;
  ScopedNativeTime& operator=(ScopedNativeTime const&) = delete;

 private:
  std::chrono::steady_clock::time_point start_;
  double start_cpu_;
};

// A numpy array of `shape` that owns `values` (moved into a capsule, no copy). Made through numpy's C API
// directly: pybind11's array constructors add shape and stride vectors, checks and an error scope in the
// capsule's destructor, which cost microseconds when the caches are cold after a forward.
template <class T>
py::object to_numpy(std::vector<T>&& values, std::vector<std::int64_t> const& shape) {
  std::vector<Py_intptr_t> const dims(shape.begin(), shape.end());
  auto owned = std::make_unique<std::vector<T>>(std::move(values));
  T* const data = owned->data();
  auto const free_values = [](PyObject* capsule) {
    delete static_cast<std::vector<T>*>(PyCapsule_GetPointer(capsule, nullptr));
  };
  py::object base = py::reinterpret_steal<py::object>(PyCapsule_New(owned.get(), nullptr, free_values));
  if (!base) throw py::error_already_set();
  owned.release();  // the capsule frees it from here on
  auto& api = py::detail::npy_api::get();
  py::object array = py::reinterpret_steal<py::object>(api.PyArray_NewFromDescr_(
      api.PyArray_Type_, py::dtype::of<T>().release().ptr(), static_cast<int>(dims.size()),
      const_cast<Py_intptr_t*>(dims.data()), nullptr, data, py::detail::npy_api::NPY_ARRAY_WRITEABLE_, nullptr));
  if (!array) throw py::error_already_set();
  if (api.PyArray_SetBaseObject_(array.ptr(), base.release().ptr()) != 0) throw py::error_already_set();
  return array;
}

// For a raw CPython entry (METH_FASTCALL) inside its catch (...): the exception in flight as the Python
// error pybind11's dispatcher would set for it (error_already_set restored; otherwise the module's and
// pybind11's registered translators, module-local ones first), and nullptr to return to Python. A thread's
// forced unwinding (cancellation) is rethrown, as pybind11 does.
PyObject* raise_current_exception();

}  // namespace flashdeberta::python

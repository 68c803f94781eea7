// The model call without pybind11's dispatcher: after a forward has swept the caches, every function, object
// and allocation the call touches on its way back to Python costs cache misses, and pybind11's argument
// loading and cleanup, a Python __call__'s bytecode and the bound method and vector call CPython makes for it
// add 30 us or more to each call. Two raw CPython entries take the common call (numpy arrays in and out);
// everything else goes to the pybind11 method or the Python one, so that their conversions and their errors
// stay as they are.
//
// _native.call_model(model, input_ids, attention_mask, token_type_ids, on_device): Model.__call__ itself.
// _native.ModelBase: the base of flashdeberta.PreTrainedModel, whose instances CPython then calls through
// the type's tp_call slot directly, with `_native` (the Model) a field instead of an attribute in a dict.
#include "bindings.hpp"  // Python.h first, as structmember.h needs

#include <structmember.h>

namespace flashdeberta::python {

namespace {

bool is_array(PyObject* object) { return py::isinstance<py::array>(object); }

PyObject* call_model(PyObject*, PyObject* const* args, Py_ssize_t nargs, PyObject* kwnames) {
  Model const* const model = nargs == 5 && kwnames == nullptr ? native_model(args[0]) : nullptr;
  bool const fast = model != nullptr && is_array(args[1]) && (args[2] == Py_None || is_array(args[2])) &&
                    (args[3] == Py_None || is_array(args[3])) && PyBool_Check(args[4]);
  if (!fast) {
    if (nargs < 1) {
      PyErr_SetString(PyExc_TypeError, "call_model() takes the model first");
      return nullptr;
    }
    return PyObject_Vectorcall(args[0], args + 1, nargs - 1, kwnames);
  }
  try {
    return call(*model, args[1], args[2], args[3], args[4] == Py_True).release().ptr();
  } catch (...) {
    return raise_current_exception();
  }
}

PyMethodDef call_model_def{"call_model", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&call_model)),
                           METH_FASTCALL | METH_KEYWORDS,
                           "call_model(model, input_ids, attention_mask, token_type_ids, on_device): "
                           "model(input_ids, attention_mask, token_type_ids, on_device) with less overhead."};

struct ModelBase {
  PyObject ob_base;  // PyObject_HEAD
  PyObject* native;  // `_native`: a _native.Model, or whatever the subclass put there
};

// model(input_ids, attention_mask, token_type_ids, *, return_tensors="np", **unused), PreTrainedModel.forward's
// signature. Its common call, numpy arrays (exactly numpy.ndarray) or None and return_tensors "np" or left
// out, runs here as forward runs it; any other call goes to self.forward.
PyObject* model_base_call(PyObject* self, PyObject* args, PyObject* kwargs) {
  static PyObject* const names[] = {
      PyUnicode_InternFromString("input_ids"), PyUnicode_InternFromString("attention_mask"),
      PyUnicode_InternFromString("token_type_ids"), PyUnicode_InternFromString("return_tensors")};
  PyObject* given[4] = {nullptr, nullptr, nullptr, nullptr};  // the arguments by name
  Py_ssize_t const positional = PyTuple_GET_SIZE(args);
  bool fast = positional <= 3;
  for (Py_ssize_t i = 0; fast && i < positional; ++i) given[i] = PyTuple_GET_ITEM(args, i);
  PyObject* key = nullptr;
  PyObject* value = nullptr;
  for (Py_ssize_t position = 0; fast && kwargs != nullptr && PyDict_Next(kwargs, &position, &key, &value);) {
    int slot = 0;
    while (slot < 4 && key != names[slot] && PyUnicode_Compare(key, names[slot]) != 0) ++slot;
    fast = slot < 4 && given[slot] == nullptr;
    if (fast) given[slot] = value;
  }
  auto* const ndarray = py::detail::npy_api::get().PyArray_Type_;
  auto const array_or_none = [&](PyObject* a) { return a == nullptr || a == Py_None || Py_TYPE(a) == ndarray; };
  fast = fast && given[0] != nullptr && given[0] != Py_None && array_or_none(given[0]) && array_or_none(given[1]) &&
         array_or_none(given[2]) &&
         (given[3] == nullptr ||
          (PyUnicode_CheckExact(given[3]) && PyUnicode_CompareWithASCIIString(given[3], "np") == 0));
  PyObject* const native = reinterpret_cast<ModelBase*>(self)->native;
  Model const* const model = fast && native != nullptr ? native_model(native) : nullptr;
  if (model == nullptr) {
    py::object const forward = py::reinterpret_steal<py::object>(PyObject_GetAttrString(self, "forward"));
    return forward ? PyObject_Call(forward.ptr(), args, kwargs) : nullptr;
  }
  // The Model stays alive for the call should self._native be replaced meanwhile (by the output type's code).
  py::object const keep = py::reinterpret_borrow<py::object>(native);
  try {
    return call(*model, given[0], given[1] ? given[1] : Py_None, given[2] ? given[2] : Py_None, false).release().ptr();
  } catch (...) {
    return raise_current_exception();
  }
}

int model_base_traverse(PyObject* self, visitproc visit, void* arg) {
  Py_VISIT(reinterpret_cast<ModelBase*>(self)->native);
  return 0;
}

int model_base_clear(PyObject* self) {
  Py_CLEAR(reinterpret_cast<ModelBase*>(self)->native);
  return 0;
}

void model_base_dealloc(PyObject* self) {
  PyObject_GC_UnTrack(self);
  model_base_clear(self);
  Py_TYPE(self)->tp_free(self);
}

PyMemberDef model_base_members[] = {
    {"_native", T_OBJECT_EX, offsetof(ModelBase, native), 0, "the flashdeberta._native.Model"}, {}};

PyTypeObject model_base_type = {PyVarObject_HEAD_INIT(nullptr, 0)};

}  // namespace

void bind_model_calls(py::module_& m) {
  py::object const name = m.attr("__name__");
  py::object const function =
      py::reinterpret_steal<py::object>(PyCFunction_NewEx(&call_model_def, nullptr, name.ptr()));
  if (!function) throw py::error_already_set();
  m.add_object("call_model", function);

  model_base_type.tp_name = "flashdeberta._native.ModelBase";
  model_base_type.tp_doc =
      "The base of flashdeberta.PreTrainedModel: calls with numpy arrays reach the C++ model directly.";
  model_base_type.tp_basicsize = sizeof(ModelBase);
  model_base_type.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  model_base_type.tp_new = PyType_GenericNew;
  model_base_type.tp_dealloc = model_base_dealloc;
  model_base_type.tp_traverse = model_base_traverse;
  model_base_type.tp_clear = model_base_clear;
  model_base_type.tp_members = model_base_members;
  model_base_type.tp_call = model_base_call;
  if (PyType_Ready(&model_base_type) != 0) throw py::error_already_set();
  m.add_object("ModelBase", py::reinterpret_borrow<py::object>(reinterpret_cast<PyObject*>(&model_base_type)));
}

}  // namespace flashdeberta::python

// The tasks' JSON results (runtime/task_json.hpp) as Python objects: null None, numbers int or float,
// arrays lists, objects dicts in their key order.
#pragma once

#include "bindings.hpp"
#include "flashdeberta/runtime/task_json.hpp"

namespace flashdeberta::python {

py::object to_python(runtime::JsonOut const& value);

}  // namespace flashdeberta::python

// The tasks' results reach Python through the same JSON writer the CLI and the server use
// (runtime/task_json.hpp): converted here value for value, so a pipeline's dicts hold what the CLI prints.
#include "json_objects.hpp"

namespace flashdeberta::python {

py::object to_python(runtime::JsonOut const& value) {
  using Type = runtime::JsonOut::value_t;
  switch (value.type()) {
    case Type::null:
      return py::none();
    case Type::boolean:
      return py::bool_(value.get<bool>());
    case Type::number_integer:
      return py::int_(value.get<std::int64_t>());
    case Type::number_unsigned:
      return py::int_(value.get<std::uint64_t>());
    case Type::number_float:
      return py::float_(value.get<double>());
    case Type::string:
      return py::str(value.get_ref<std::string const&>());
    case Type::array: {
      py::list list(value.size());
      for (std::size_t i = 0; i < value.size(); ++i) list[i] = to_python(value[i]);
      return std::move(list);
    }
    case Type::object: {
      py::dict dict;
      for (auto const& item : value.items()) dict[py::str(item.key())] = to_python(item.value());
      return std::move(dict);
    }
    default:
      break;
  }
  throw py::type_error("a task result holds a JSON value Python has no type for");
}

}  // namespace flashdeberta::python

// flashdeberta._native.Model: a checkpoint with one head (or the backbone alone) on a backend, called with
// numpy input_ids / attention_mask / token_type_ids and returning HF's output fields as float32 arrays in
// HF's layouts. The inputs are checked as the CLI checks its run files (runtime/token_input.hpp).
#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "flashdeberta/core/error.hpp"
#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/heads/sequence_classification.hpp"
#include "flashdeberta/io/json.hpp"
#include "flashdeberta/io/mapped_file.hpp"
#include "flashdeberta/runtime/loaded_model.hpp"
#include "flashdeberta/runtime/options.hpp"
#include "flashdeberta/runtime/token_input.hpp"
#include "json_objects.hpp"

namespace flashdeberta::python {

namespace {

// An integer array of any integer dtype as int64 values in C order: `data` points into `array`, which keeps
// them alive, so that they are copied with the GIL released. Refuses floats and the like, which HF's
// embedding lookup refuses too. A C-contiguous int64 array (what a tokenizer returns) is read in place:
// numpy's conversion machinery is cold after a forward has swept the caches, and costs microseconds there.
struct IntegerArray {
  py::array array;
  std::vector<std::int64_t> shape;
  std::int64_t const* data = nullptr;
  std::size_t size = 0;

  std::vector<std::int64_t> values() const { return {data, data + size}; }
};

// The size check of runtime::check_token_values, made on the array's shape before its values are converted
// or copied: a 2**40-position view of one value (np.broadcast_to) or a billion-element uint8 array would
// otherwise be made into int64 values (or fail to be, as a message naming nothing) before being refused.
void check_positions(py::handle object, std::string const& name, std::int64_t max_tokens) {
  auto const array = py::reinterpret_borrow<py::array>(object);
  std::int64_t positions = 1;
  for (py::ssize_t d = 0; d < array.ndim(); ++d) {
    std::int64_t const size = array.shape(d);
    if (size <= 0) return;  // empty: check_token_values names it
    FLASHDEBERTA_REQUIRE(positions <= max_tokens / size,
                         "model input: " << name << " holds more than max_tokens " << max_tokens << " positions");
    positions *= size;
  }
}

IntegerArray integer_array(py::handle object, std::string const& name) {
  auto const read = [](py::array values) {
    IntegerArray out{std::move(values), {}, nullptr, 0};
    out.shape.assign(out.array.shape(), out.array.shape() + out.array.ndim());
    out.data = static_cast<std::int64_t const*>(out.array.data());
    out.size = static_cast<std::size_t>(out.array.size());
    return out;
  };
  auto array = py::reinterpret_borrow<py::array>(object);
  auto const* descriptor = py::detail::array_descriptor_proxy(py::detail::array_proxy(array.ptr())->descr);
  char const kind = descriptor->kind;
  int const in_place = py::array::c_style | py::detail::npy_api::NPY_ARRAY_ALIGNED_;
  if (kind == 'i' && array.itemsize() == 8 && descriptor->byteorder != '>' && (array.flags() & in_place) == in_place)
    return read(std::move(array));
  // A bool array is refused as HF's embedding lookup refuses one: it is not ids, types or a 0/1 mask by
  // accident of numpy's casting rules.
  FLASHDEBERTA_REQUIRE(kind == 'i' || kind == 'u', name << " has dtype " << std::string(py::str(array.dtype()))
                                                        << "; an integer dtype is expected (int64, int32, ...)");
  if (kind == 'u' && array.itemsize() == 8) {
    // int64 would wrap values from 2^63 on to negative ones, refused then as a negative value they never were.
    auto const unsigned_values = py::array_t<std::uint64_t, py::array::c_style | py::array::forcecast>::ensure(array);
    FLASHDEBERTA_REQUIRE(unsigned_values, name << ": cannot be read as uint64 values");
    std::vector<std::int64_t> const shape(array.shape(), array.shape() + array.ndim());
    std::uint64_t const* data = unsigned_values.data();
    auto const largest = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
    for (py::ssize_t i = 0; i < unsigned_values.size(); ++i) {
      FLASHDEBERTA_REQUIRE(data[i] <= largest, "model input: " << runtime::element_name(name, shape, i) << " = "
                                                               << data[i] << " is more than " << largest
                                                               << ", the largest value an int64 holds");
    }
  }
  auto values = py::array_t<std::int64_t, py::array::c_style | py::array::forcecast>::ensure(array);
  FLASHDEBERTA_REQUIRE(values, name << ": cannot be read as int64 values");
  return read(std::move(values));
}

}  // namespace

class Model {
 public:
  Model(std::string const& directory, std::string const& head, std::string const& backend, std::string const& dtype,
        std::string const& attention, int threads, std::int64_t max_tokens, py::object output_type)
      : output_type_(std::move(output_type)) {
    runtime::RuntimeOptions const options = runtime_options(directory, backend, dtype, attention, threads, max_tokens);
    max_tokens_ = max_tokens;
    std::optional<HeadKind> const kind = parse_head_kind(head);
    if (!kind) throw runtime::UsageError("head '" + head + "' is not one of " + head_kind_names());
    head_ = *kind;
    py::gil_scoped_release const unlocked;
    ScopedNativeTime const timed;
    config_ = runtime::read_model_config(options.model);
    config_source_ = model_config_file(options.model).string();
    model_directory_ = options.model;
    require_head_supported(config_, head_, config_source_);
    backend_ = std::make_unique<runtime::Backend>(options);
    model_ = backend_->load(options.model, config_, head_);
    description_ = runtime::describe_backend(options, backend_->threads());
  }
  ~Model() {
    model_.reset();  // before the backend that loaded it
    backend_.reset();
  }

  // on_device: the outputs stay in GPU memory as DeviceArrays (DLPack), for a model on CUDA. input_ids is a
  // numpy array; attention_mask and token_type_ids numpy arrays or None. hidden_states: HF's
  // output_hidden_states, "hidden_states.0" .. "hidden_states.N" [B, L, H] beside the outputs (host memory).
  py::object call(py::handle input_ids, py::handle attention_mask, py::handle token_type_ids, bool on_device,
                  bool hidden_states = false) const {
    require_fork_safe(backend_->threads());
    check_positions(input_ids, "input_ids", max_tokens_);
    IntegerArray const ids = integer_array(input_ids, "input_ids");
    std::optional<IntegerArray> mask, types;
    if (!attention_mask.is_none()) {
      check_positions(attention_mask, "attention_mask", max_tokens_);
      mask = integer_array(attention_mask, "attention_mask");
      FLASHDEBERTA_REQUIRE(mask->shape == ids.shape, "attention_mask has another shape than input_ids");
    }
    if (!token_type_ids.is_none()) {
      check_positions(token_type_ids, "token_type_ids", max_tokens_);
      types = integer_array(token_type_ids, "token_type_ids");
      FLASHDEBERTA_REQUIRE(types->shape == ids.shape, "token_type_ids has another shape than input_ids");
    }
    std::vector<PaddedTensor> tensors;
    std::optional<std::vector<runtime::DeviceTensor>> device_tensors;
    // The caller's mapping type (flashdeberta.ModelOutput), made before the forward: everything done after it
    // runs with caches the forward has swept.
    py::object out = output_type_();
    {
      py::gil_scoped_release const unlocked;
      ScopedNativeTime const timed;
      // The C++ copy of the inputs is made, and freed, with the GIL released, as numpy copies arrays.
      runtime::TokenInput input;
      input.source = "model input";
      input.shape = ids.shape;
      input.ids = ids.values();
      if (mask) input.mask = mask->values();
      if (types) input.types = types->values();
      runtime::check_token_values(input, max_tokens_, python_limit_names());
      runtime::check_against_head(input, head_);
      runtime::check_against_config(input, config_, config_source_);
      Batch const batch = runtime::to_batch(input, config_);
      if (on_device && !hidden_states) {
        device_tensors = model_->forward_head_on_device(batch, input.shape);
        FLASHDEBERTA_REQUIRE(device_tensors.has_value(),
                             "outputs on the device need a model on CUDA (device='cuda'); "
                             "this one runs on "
                                 << description_);
      } else {
        HeadOutput output = hidden_states ? model_->forward_head_with_hidden_states(batch, std::nullopt)
                                          : model_->forward_head(batch, std::nullopt);
        for (HostHeadTensor& t : output.tensors) tensors.push_back(to_padded(std::move(t), batch, input.shape));
      }
    }
    if (device_tensors) {
      for (runtime::DeviceTensor& t : *device_tensors) {
        py::str const name(t.name);  // before t is moved: the right side of = is evaluated first
        out[name] = device_array(std::move(t));
      }
      return out;
    }
    for (PaddedTensor& t : tensors) out[py::str(t.name)] = to_numpy(std::move(t.values), t.shape);
    return out;
  }

  std::string head() const { return std::string(head_kind_name(head_)); }
  // config.json as a dict in the file's order, read by the same strict reader as the model's config (a ZeroModels
  // directory's: the config.json HF would hold for it).
  py::object config() const {
    std::string const text = model_config_json(model_directory_);
    return to_python(io::parse_json<runtime::JsonOut>(text, config_source_, "config"));
  }
  // id2label as the library reads it (HF's rule: id2label when present, else LABEL_<i> for num_labels).
  std::vector<std::string> labels() const { return label_names(config_); }
  std::string const& description() const { return description_; }

 private:
  ModelConfig config_;
  std::string config_source_;
  std::filesystem::path model_directory_;
  HeadKind head_ = HeadKind::kBase;
  std::int64_t max_tokens_ = runtime::kDefaultMaxTokens;
  std::string description_;
  py::object output_type_;
  std::unique_ptr<runtime::Backend> backend_;
  std::unique_ptr<runtime::LoadedModel> model_;
};

namespace {

PyTypeObject* model_type = nullptr;  // flashdeberta._native.Model, set by bind_model

}  // namespace

Model const* native_model(PyObject* object) {
  if (Py_TYPE(object) != model_type) return nullptr;
  auto* const instance = reinterpret_cast<py::detail::instance*>(object);
  py::detail::value_and_holder const v_h = instance->get_value_and_holder(nullptr, false);
  return v_h && v_h.holder_constructed() ? v_h.value_ptr<Model>() : nullptr;
}

py::object call(Model const& model, py::handle input_ids, py::handle attention_mask, py::handle token_type_ids,
                bool on_device) {
  return model.call(input_ids, attention_mask, token_type_ids, on_device);
}

void bind_model(py::module_& m) {
  py::class_<Model> model(m, "Model");
  model
      .def(py::init<std::string const&, std::string const&, std::string const&, std::string const&, std::string const&,
                    int, std::int64_t, py::object>(),
           py::arg("directory"), py::arg("head"), py::arg("backend"), py::arg("dtype"), py::arg("attention"),
           py::arg("threads"), py::arg("max_tokens"), py::arg("output_type") = py::dict().get_type())
      .def(
          "__call__",
          [](Model const& self, py::array const& input_ids, std::optional<py::array> const& attention_mask,
             std::optional<py::array> const& token_type_ids, bool on_device) {
            return self.call(input_ids, attention_mask ? attention_mask->ptr() : Py_None,
                             token_type_ids ? token_type_ids->ptr() : Py_None, on_device);
          },
          py::arg("input_ids"), py::arg("attention_mask") = py::none(), py::arg("token_type_ids") = py::none(),
          py::arg("on_device") = false)
      .def(
          "call_with_hidden_states",
          [](Model const& self, py::array const& input_ids, std::optional<py::array> const& attention_mask,
             std::optional<py::array> const& token_type_ids) {
            return self.call(input_ids, attention_mask ? attention_mask->ptr() : Py_None,
                             token_type_ids ? token_type_ids->ptr() : Py_None, false, true);
          },
          py::arg("input_ids"), py::arg("attention_mask") = py::none(), py::arg("token_type_ids") = py::none())
      .def_property_readonly("head", &Model::head)
      .def_property_readonly("config", &Model::config)
      .def_property_readonly("labels", &Model::labels)
      .def_property_readonly("description", &Model::description);
  model_type = reinterpret_cast<PyTypeObject*>(model.ptr());
}

}  // namespace flashdeberta::python

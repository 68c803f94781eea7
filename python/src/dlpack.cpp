// flashdeberta._native.DeviceArray: a head output left in GPU memory, handed to torch (torch.from_dlpack),
// CuPy or JAX through the DLPack protocol (__dlpack__ / __dlpack_device__), without a copy.
//
// The structs below are the DLPack C ABI (dlpack.h, v0.8: DLDevice, DLDataType, DLTensor, DLManagedTensor),
// written out because Debian 12 packages no dlpack header; the capsule protocol is the one the Python array
// API standard describes: a PyCapsule named "dltensor" that the consumer renames "used_dltensor" once it
// owns the tensor, so the capsule's destructor frees only an unconsumed one.
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "bindings.hpp"
#include "flashdeberta/core/error.hpp"

namespace flashdeberta::python {

namespace {

struct DLDevice {
  std::int32_t device_type;  // kDLCUDA = 2
  std::int32_t device_id;
};
struct DLDataType {
  std::uint8_t code;  // kDLFloat = 2, kDLBfloat = 4
  std::uint8_t bits;
  std::uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  std::int32_t ndim;
  DLDataType dtype;
  std::int64_t* shape;
  std::int64_t* strides;  // null: compact row-major
  std::uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};

constexpr std::int32_t kDLCUDA = 2;
constexpr char const* kCapsuleName = "dltensor";

// What one exported tensor keeps alive: its shape array and the device memory.
struct Export {
  DLManagedTensor managed{};
  std::vector<std::int64_t> shape;
  std::shared_ptr<void> owner;
};

DLDataType dl_dtype(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return {2, 32, 1};
    case DType::kBF16:
      return {4, 16, 1};
    case DType::kF16:
      return {2, 16, 1};
    default:
      FLASHDEBERTA_FAIL("a device output of dtype " << dtype_name(dtype) << " has no DLPack export");
  }
}

}  // namespace

class DeviceArray {
 public:
  explicit DeviceArray(runtime::DeviceTensor tensor) : tensor_(std::move(tensor)) {}

  // A new capsule per call (the protocol allows several consumers); the data is ready on every stream
  // (the forward pass synchronized its stream), so `stream` asks nothing of us.
  // max_version, dl_device and copy (the 2023 protocol's keywords) are taken and answered with the unversioned
  // capsule, which every consumer accepts.
  py::capsule dlpack(py::object const& stream, py::object const& max_version, py::object const& dl_device,
                     py::object const& copy) const {
    (void)stream;
    (void)max_version;
    FLASHDEBERTA_REQUIRE(copy.is_none() || !copy.cast<bool>(), "DeviceArray: __dlpack__(copy=True) is not supported");
    if (!dl_device.is_none()) {
      auto const wanted = dl_device.cast<std::pair<int, int>>();
      FLASHDEBERTA_REQUIRE(wanted.first == kDLCUDA && wanted.second == tensor_.device,
                           "DeviceArray: lives on cuda:" << tensor_.device << ", not on the device asked for");
    }
    auto* e = new Export;
    e->shape = tensor_.shape;
    e->owner = tensor_.owner;
    e->managed.dl_tensor = DLTensor{tensor_.data,
                                    DLDevice{kDLCUDA, tensor_.device},
                                    static_cast<std::int32_t>(e->shape.size()),
                                    dl_dtype(tensor_.dtype),
                                    e->shape.data(),
                                    nullptr,
                                    0};
    e->managed.manager_ctx = e;
    e->managed.deleter = [](DLManagedTensor* self) { delete static_cast<Export*>(self->manager_ctx); };
    return py::capsule(&e->managed, kCapsuleName, [](PyObject* capsule) {
      // Still named "dltensor": nobody took it, so it is ours to free.
      if (PyCapsule_IsValid(capsule, kCapsuleName)) {
        auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, kCapsuleName));
        managed->deleter(managed);
      }
    });
  }

  py::tuple dlpack_device() const { return py::make_tuple(kDLCUDA, tensor_.device); }
  py::tuple shape() const { return py::cast(tensor_.shape); }
  std::string dtype() const {
    return tensor_.dtype == DType::kBF16 ? "bfloat16" : tensor_.dtype == DType::kF16 ? "float16" : "float32";
  }
  std::string repr() const {
    std::string dims;
    for (std::int64_t d : tensor_.shape) dims += (dims.empty() ? "" : ", ") + std::to_string(d);
    return "flashdeberta.DeviceArray(" + tensor_.name + ", shape=(" + dims + "), dtype=" + dtype() +
           ", cuda:" + std::to_string(tensor_.device) + ")";
  }

 private:
  runtime::DeviceTensor tensor_;
};

py::object device_array(runtime::DeviceTensor tensor) { return py::cast(DeviceArray(std::move(tensor))); }

void bind_dlpack(py::module_& m) {
  py::class_<DeviceArray>(m, "DeviceArray")
      .def("__dlpack__", &DeviceArray::dlpack, py::kw_only(), py::arg("stream") = py::none(),
           py::arg("max_version") = py::none(), py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack_device__", &DeviceArray::dlpack_device)
      .def_property_readonly("shape", &DeviceArray::shape)
      .def_property_readonly("dtype", &DeviceArray::dtype)
      .def("__repr__", &DeviceArray::repr);
}

}  // namespace flashdeberta::python

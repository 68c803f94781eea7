// The CUDA backend module (libflashdeberta_backend_cuda.so): the model instantiations over CudaPolicy and what
// only a device backend does (its device check, forwards timed by CUDA events, outputs left on the device for
// DLPack). It links cudart and cuBLASLt; the runtime opens it only when a run asks for --backend cuda
// (cuda_entry.cpp), so that the programs and the Python package load neither otherwise. Everything in it is
// hidden but the one C symbol the runtime looks up.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "cuda_device_outputs.hpp"
#include "flashdeberta/config.hpp"
#include "flashdeberta/cuda/cuda_policy.hpp"
#include "flashdeberta/cuda/event_timer.hpp"
#include "flashdeberta/runtime/backend_entry.hpp"
#include "flashdeberta/runtime/policy_backend.hpp"

namespace flashdeberta::runtime {

namespace {

// What CudaPolicy adds to the generic models (policy_backend.hpp's Device).
struct CudaDevice {
  static constexpr bool kOnDevice = true;

  // One forward timed on the model's stream (input uploads included: forward ends fenced) and the device
  // memory it used beyond what the policy held when the timer was made, after the weights were loaded.
  class Timer {
   public:
    explicit Timer(CudaPolicy const& policy) : weights_bytes_(policy.memory_stats().in_use_bytes) {}

    template <class Model>
    DeviceRun run(Model const& model, Batch const& batch) const {
      CudaPolicy const& p = model.policy();
      p.reset_peak_memory();
      double const ms = events_.milliseconds(p.stream(), [&] { return model.forward(batch); });
      std::size_t const peak = p.memory_stats().peak_in_use_bytes;
      return DeviceRun{ms, static_cast<std::int64_t>(peak > weights_bytes_ ? peak - weights_bytes_ : 0)};
    }

   private:
    std::size_t weights_bytes_ = 0;
    CudaEventTimer events_;
  };

  static DeviceTensor padded(CudaPolicy const& policy, DeviceHeadTensor<CudaPolicy>&& t, Batch const& batch,
                             std::vector<std::int64_t> const& input_shape) {
    return detail::padded_on_device(policy, std::move(t), batch, input_shape);
  }
};

// A CudaPolicy on device 0, refused with the reason when the machine has no CUDA device.
std::unique_ptr<StartedBackend> start(RuntimeOptions const& options) {
  int devices = 0;
  cudaError_t const status = cudaGetDeviceCount(&devices);
  FLASHDEBERTA_REQUIRE(status == cudaSuccess && devices > 0,
                       "--backend cuda: no CUDA device available ("
                           << (status == cudaSuccess ? "none found" : cudaGetErrorString(status)) << ")");
  // One host thread drives the device.
  return std::make_unique<PolicyBackend<CudaPolicy, CudaDevice>>(CudaPolicy(CudaOptions{.dtype = options.dtype}), 1,
                                                                 options.attention);
}

constexpr BackendModule kModule{.version = FLASHDEBERTA_VERSION_STRING, .start = &start};

}  // namespace

}  // namespace flashdeberta::runtime

extern "C" __attribute__((visibility("default"))) flashdeberta::runtime::BackendModule const*
flashdeberta_backend_module() {
  return &flashdeberta::runtime::kModule;
}

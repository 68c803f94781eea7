// The Eigen backend for the front ends: its registry entry (runtime/src/backend_registry.cpp) and the model
// instantiations over EigenPolicy, compiled into flashdeberta::runtime. The host backend, always built with the
// runtime, and the only one that quantizes linear layers to int8 (oneDNN).
#include <memory>
#include <string>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/runtime/backend_entry.hpp"
#include "flashdeberta/runtime/policy_backend.hpp"

namespace flashdeberta::runtime {

namespace {

// bf16 and int8 are the linear layers' dtype (oneDNN); everything else stays float32.
std::unique_ptr<StartedBackend> start_eigen(RuntimeOptions const& options) {
  if (options.dtype == DType::kF16) {
    throw UsageError(
        "--dtype fp16: the eigen backend computes in fp32, its linear layers optionally in bf16 or "
        "int8 (fp16 is the cuda backend's)");
  }
  EigenOptions eigen{.threads = options.threads};
  if (options.dtype == DType::kBF16 || options.dtype == DType::kI8) {
    if (!eigen_detail::kHasOnednn) {
      std::string const dtype(dtype_option_name(options.dtype));
      throw UsageError("--dtype " + dtype + ": the eigen backend runs bf16 and int8 through oneDNN, and this " +
                       "build has none (install libdnnl-dev and configure with FLASHDEBERTA_WITH_ONEDNN=ON)");
    }
    eigen.linear_dtype = options.dtype;
  }
  EigenPolicy policy(eigen);
  int const threads = policy.threads();
  return std::make_unique<PolicyBackend<EigenPolicy>>(std::move(policy), threads, options.attention);
}

}  // namespace

BackendEntry const& eigen_backend_entry() {
  static constexpr BackendEntry kEntry{.kind = BackendKind::kEigen,
                                       .computes_in = "fp32, its linear layers optionally in bf16 or int8",
                                       .quantizes_int8 = true,
                                       .start = &start_eigen};
  return kEntry;
}

}  // namespace flashdeberta::runtime

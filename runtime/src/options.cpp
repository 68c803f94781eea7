#include "flashdeberta/runtime/options.hpp"

#include "flashdeberta/core/error.hpp"

namespace flashdeberta::runtime {

std::string_view backend_name(BackendKind backend) {
  switch (backend) {
    case BackendKind::kEigen:
      return "eigen";
    case BackendKind::kKokkos:
      return "kokkos";
    case BackendKind::kCuda:
      return "cuda";
  }
  return "?";
}

std::string_view backend_title(BackendKind backend) {
  switch (backend) {
    case BackendKind::kEigen:
      return "Eigen";
    case BackendKind::kKokkos:
      return "Kokkos";
    case BackendKind::kCuda:
      return "CUDA";
  }
  return "?";
}

std::string_view attention_name(AttentionImpl attention) {
  return attention == AttentionImpl::kEager ? "eager" : "flash";
}

std::string_view dtype_option_name(DType dtype) {
  switch (dtype) {
    case DType::kBF16:
      return "bf16";
    case DType::kF16:
      return "fp16";
    case DType::kI8:
      return "int8";
    default:
      return "fp32";
  }
}

std::string describe_backend(RuntimeOptions const& o, int threads) {
  return std::string(backend_name(o.backend)) + ", attention " + std::string(attention_name(o.attention)) + ", dtype " +
         std::string(dtype_option_name(o.dtype)) + ", " + std::to_string(threads) +
         (threads == 1 ? " thread" : " threads");
}

void require_max_tokens(std::int64_t tokens, std::int64_t max_tokens, std::string const& what) {
  FLASHDEBERTA_REQUIRE(tokens <= max_tokens, what << " holds " << tokens << " tokens, more than --max-tokens "
                                                  << max_tokens << " (raise --max-tokens to run it at once)");
}

}  // namespace flashdeberta::runtime

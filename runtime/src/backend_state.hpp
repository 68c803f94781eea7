// What a started Backend holds (loaded_model.cpp starts it): the closed set of policies this build can run
// and the one chosen. Private to runtime/src: the model and GLiNER loaders (loaded_model.cpp, gliner.cpp)
// std::visit the policy to instantiate their templates for it.
#pragma once

#include <memory>
#include <optional>
#include <variant>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/policy/op_args.hpp"
#include "flashdeberta/runtime/loaded_model.hpp"

// CMake links flashdeberta::kokkos and flashdeberta::cuda and defines these when the build has the backend.
#if defined(FLASHDEBERTA_RUNTIME_WITH_KOKKOS)
#define FLASHDEBERTA_RUNTIME_HAS_KOKKOS 1
#include <Kokkos_Core.hpp>

#include "flashdeberta/kokkos/kokkos_policy.hpp"
#else
#define FLASHDEBERTA_RUNTIME_HAS_KOKKOS 0
#endif

#if defined(FLASHDEBERTA_RUNTIME_WITH_CUDA)
#define FLASHDEBERTA_RUNTIME_HAS_CUDA 1
#include "flashdeberta/cuda/cuda_policy.hpp"
#else
#define FLASHDEBERTA_RUNTIME_HAS_CUDA 0
#endif

namespace flashdeberta::runtime {

namespace detail {

// std::visit over it is the run-time -> compile-time switch.
using AnyPolicy = std::variant<EigenPolicy
#if FLASHDEBERTA_RUNTIME_HAS_KOKKOS
                               ,
                               KokkosPolicy<>
#endif
#if FLASHDEBERTA_RUNTIME_HAS_CUDA
                               ,
                               CudaPolicy
#endif
                               >;

}  // namespace detail

struct Backend::State {
  std::shared_ptr<void> runtime;  // declared before the policy, so destroyed after it
  std::optional<detail::AnyPolicy> policy;
  AttentionImpl attention = AttentionImpl::kFlash;
};

}  // namespace flashdeberta::runtime

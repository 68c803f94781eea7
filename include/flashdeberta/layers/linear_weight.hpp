// A linear layer's weight in policy memory, with what the policy prepared from it at load (prepared_linear.hpp).
#pragma once

#include <utility>

#include "flashdeberta/layers/weight_loader.hpp"
#include "flashdeberta/policy/prepared_linear.hpp"

namespace flashdeberta {

template <ExecutionPolicy P>
class LinearWeight {
 public:
  using Matrix = DeviceMatrix<typename P::Buffer>;

  LinearWeight() = default;
  // Prepares `weight` (prepared_linear.hpp) and keeps it unless the prepared form holds it: a weight the load
  // converted (a float16 checkpoint's) then gives its memory back, for the next weight's conversion to reuse.
  LinearWeight(P const& policy, Matrix weight) : weight_(std::move(weight)) {
    if constexpr (PreparesLinearWeights<P>) prepared_ = policy.prepare_linear(weight_.ref());
    if constexpr (PreparedLinearHoldsWeight<P>) {
      if (policy.prepared_holds_weight(prepared_)) weight_ = {};
    }
  }

  // args.out = act(args.a . W^T + bias); args.b is set to this weight (empty where the prepared form holds it).
  void gemm(P const& policy, GemmArgs args) const {
    args.b = weight_.ref();
    if constexpr (PreparesLinearWeights<P>) {
      policy.gemm(args, prepared_);
    } else {
      policy.gemm(args);
    }
  }

 private:
  Matrix weight_;
  prepared_linear_t<P> prepared_;
};

}  // namespace flashdeberta

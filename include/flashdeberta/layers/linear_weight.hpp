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
  LinearWeight(P const& policy, Matrix weight) : weight_(std::move(weight)) {
    if constexpr (PreparesLinearWeights<P>) prepared_ = policy.prepare_linear(weight_.ref());
  }

  MatrixRef ref() const { return weight_.ref(); }

  // args.out = act(args.a . W^T + bias); args.b is set to this weight.
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

// An optional policy hook: preparing a linear layer's weight once, at load, for the GEMMs that multiply by it.
#pragma once

#include <concepts>

#include "flashdeberta/policy/op_args.hpp"

namespace flashdeberta {

// prepare_linear(weight): what a policy derives once from a linear layer's (N, K) weight, as a type of its own
// (EigenPolicy in bf16 or int8: the weight converted or quantized and packed for oneDNN's matmul). The layer
// keeps it beside the weight and calls gemm(args, prepared), args.b still being that weight; policies without
// the hook run gemm(args) alone. GEMMs of weights not prepared (the heads, load-time projections) stay gemm(args).
template <class P>
concept PreparesLinearWeights = requires(P const& p, MatrixRef const& weight, GemmArgs const& args,
                                         typename P::PreparedLinear const& prepared) {
  { p.prepare_linear(weight) } -> std::same_as<typename P::PreparedLinear>;
  p.gemm(args, prepared);
};

// prepared_holds_weight(prepared): whether the prepared form alone runs every later gemm (oneDNN's packed float32
// weight, which can be packed again into another layout from itself), so that the layer may let its weight go:
// a weight converted at load (a float16 checkpoint's) then holds its memory only while it is packed.
template <class P>
concept PreparedLinearHoldsWeight = PreparesLinearWeights<P> &&
    requires(P const& p, typename P::PreparedLinear const& prepared) {
  { p.prepared_holds_weight(prepared) } -> std::same_as<bool>;
};

// What a linear layer keeps of prepare_linear: the policy's type, or nothing.
template <class P>
struct PreparedLinearOf {
  struct Nothing {};
  using type = Nothing;
};
template <PreparesLinearWeights P>
struct PreparedLinearOf<P> {
  using type = typename P::PreparedLinear;
};
template <class P>
using prepared_linear_t = typename PreparedLinearOf<P>::type;

}  // namespace flashdeberta

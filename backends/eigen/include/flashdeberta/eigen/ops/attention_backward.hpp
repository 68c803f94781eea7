// The host backward of disentangled attention (AttentionBackwardArgs, training_op_args.hpp): the eager or the
// flash path, as the forward ran (args.forward.impl).
#pragma once

#include "flashdeberta/eigen/ops/attention_backward_eager.hpp"
#include "flashdeberta/eigen/ops/attention_backward_flash.hpp"

namespace flashdeberta::eigen_ops {

inline void attention_backward(AttentionBackwardArgs const& args, int threads) {
  switch (args.forward.impl) {
    case AttentionImpl::kEager:
      attention_backward_eager(args, threads);
      return;
    case AttentionImpl::kFlash:
      attention_backward_flash(args, threads);
      return;
  }
  FLASHDEBERTA_FAIL("attention_backward: unknown attention implementation " << static_cast<int>(args.forward.impl));
}

}  // namespace flashdeberta::eigen_ops

// The Kokkos backward of disentangled attention (AttentionBackwardArgs, training_op_args.hpp): the eager or the
// flash path, as the forward ran (args.forward.impl).
#pragma once

#include "flashdeberta/kokkos/ops/attention_backward_eager.hpp"
#include "flashdeberta/kokkos/ops/attention_backward_flash.hpp"

namespace flashdeberta::kokkos_ops {

template <class ExecSpace>
void attention_backward(ExecSpace const& space, AttentionBackwardArgs const& args) {
  switch (args.forward.impl) {
    case AttentionImpl::kEager:
      attention_backward_eager(space, args);
      return;
    case AttentionImpl::kFlash:
      attention_backward_flash(space, args);
      return;
  }
  FLASHDEBERTA_FAIL("attention_backward: unknown attention implementation " << static_cast<int>(args.forward.impl));
}

}  // namespace flashdeberta::kokkos_ops

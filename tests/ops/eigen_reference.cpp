// The reference side of every backend's op test: each case through EigenPolicy, in a translation unit of
// its own that each backend's op test links.
#include "flashdeberta/eigen/eigen_policy.hpp"
#include "op_cases.hpp"

namespace flashdeberta::op_tests {
namespace {

EigenPolicy const& eigen_policy() {
  static EigenPolicy const policy(2);
  return policy;
}

}  // namespace

Host reference_run(GemmCase const& c) { return c.run(eigen_policy()); }
Host reference_run(LayerNormCase const& c) { return c.run(eigen_policy()); }
Host reference_run(EmbeddingCase const& c) { return c.run(eigen_policy()); }
Host reference_run(ConvCase const& c) { return c.run(eigen_policy()); }
Host reference_run(LstmCellCase const& c) { return c.run(eigen_policy()); }
// Flash cases too are checked against HF's order of operations (the eager path).
Host reference_run(AttentionCase const& c) {
  AttentionCase eager = c;
  eager.impl = AttentionImpl::kEager;
  return eager.run(eigen_policy());
}

}  // namespace flashdeberta::op_tests

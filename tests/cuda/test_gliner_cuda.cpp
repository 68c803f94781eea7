// GLiNER over CudaPolicy: the same fixture suite as the host policies (tests/gliner/gliner_suite.hpp: GLiNER
// 0.2.27's own entities and logits on 16 random-weight models). Host C++: CudaPolicy's header is host-only.
#include "../gliner/gliner_suite.hpp"
#include "flashdeberta/cuda/cuda_policy.hpp"

TEST_CASE("cuda: gliner: GLiNER fixtures through CudaPolicy in fp32") {
  flashdeberta::testing::run_gliner_fixture_suite(flashdeberta::CudaPolicy{});
}

TEST_CASE("cuda: gliner: a missing tensor is refused through CudaPolicy") {
  flashdeberta::testing::run_gliner_missing_tensor(flashdeberta::CudaPolicy{});
}

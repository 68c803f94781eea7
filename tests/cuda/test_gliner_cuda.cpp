// GLiNER over CudaPolicy: the same fixture suite as the host policies (tests/gliner/gliner_suite.hpp: GLiNER
// 0.2.27's own entities and logits on 16 random-weight models), then batches of texts with their own label sets
// against each text alone (fp32) and against fp32 (bf16, fp16). Host C++: CudaPolicy's header is host-only.
#include "../gliner/gliner_batch_suite.hpp"
#include "../gliner/gliner_suite.hpp"
#include "flashdeberta/cuda/cuda_policy.hpp"

TEST_CASE("cuda: gliner: GLiNER fixtures through CudaPolicy in fp32") {
  flashdeberta::testing::run_gliner_fixture_suite(flashdeberta::CudaPolicy{});
}

TEST_CASE("cuda: gliner: a missing tensor is refused through CudaPolicy") {
  flashdeberta::testing::run_gliner_missing_tensor(flashdeberta::CudaPolicy{});
}

// cuBLASLt may pick another kernel for another number of rows, so a text's GEMMs in a batch may round differently
// from its GEMMs alone: fp32 agrees to the fixture tolerance, not bit for bit.
TEST_CASE("cuda: gliner: a batch with per-text label sets gives each text its result alone, fp32") {
  flashdeberta::testing::run_gliner_batch_matches_single(flashdeberta::CudaPolicy{},
                                                         flashdeberta::testing::kGlinerScoreTolerance);
}

// GLiNER's layers run in the compute dtype (the LSTM's cell state in fp32); a bound, not a measurement: a few
// 16-bit roundings per layer of these random-weight models.
TEST_CASE("cuda: gliner: batches in bf16 and fp16 stay near fp32") {
  flashdeberta::CudaPolicy const f32{};
  for (flashdeberta::DType dtype : {flashdeberta::DType::kBF16, flashdeberta::DType::kF16}) {
    INFO(flashdeberta::dtype_name(dtype));
    flashdeberta::testing::run_gliner_batch_low_precision(f32, flashdeberta::CudaPolicy({.dtype = dtype}), 0.1);
  }
}

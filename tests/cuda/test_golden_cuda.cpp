// The HF fixtures through CudaPolicy: fp32 against the float64 expectations at 1e-5 (the golden suite
// shared with the host policies), and bf16/fp16, whose relative error is reported.
#include "../model/golden_suite.hpp"
#include "flashdeberta/cuda/cuda_policy.hpp"

namespace fd = flashdeberta;

namespace {

template <fd::Variant V>
double low_precision_error(fd::DType dtype, std::filesystem::path const& dir, fd::testing::GoldenCase const& golden) {
  auto const model = fd::DebertaModel<V, fd::CudaPolicy>::load(fd::CudaPolicy(fd::CudaOptions{.dtype = dtype}), dir);
  return fd::testing::relative_frobenius_error(golden, model.forward_to_host(golden.batch));
}

// Whether CudaPolicy computes in `dtype` here: bf16 is refused on code below compute_80 (a binary built with
// only compute_75 PTX, run with CUDA_FORCE_PTX_JIT=1 as on a T4), with the refusal reported.
bool computes_in(fd::DType dtype) {
  try {
    fd::CudaPolicy const policy(fd::CudaOptions{.dtype = dtype});
    return true;
  } catch (fd::Error const& e) {
    MESSAGE(std::string(fd::dtype_name(dtype)) << " is not run: " << std::string(e.what()));
    return false;
  }
}

}  // namespace

TEST_CASE("cuda: HF fixtures through CudaPolicy in fp32") { fd::testing::run_golden_suite(fd::CudaPolicy{}); }

TEST_CASE("cuda: HF fixtures through CudaPolicy in bf16 and fp16") {
  // About twice the worst error over the fixtures, measured on an H200 (the same figures as in
  // docs/cuda-notes.md, pass 3): bf16 7.05e-3 (v3_mask_hole; v3_base_like 5.98e-3), fp16 9.11e-4
  // (v1_no_relative; v3_mask_hole 8.66e-4, v3_base_like 7.80e-4). HF's own eager error in the same precision
  // is 7.0e-3..8.3e-3 (bf16) and 8.9e-4..1.0e-3 (fp16) on the v2/v3 fixtures.
  auto const bound = [](fd::DType dtype) { return dtype == fd::DType::kBF16 ? 1.5e-2 : 2.0e-3; };
  std::vector<fd::DType> dtypes;
  for (fd::DType dtype : {fd::DType::kBF16, fd::DType::kF16})
    if (computes_in(dtype)) dtypes.push_back(dtype);
  for (auto const& dir : fd::testing::fixture_directories()) {
    fd::ModelConfig const config = fd::load_model_config(dir);
    if (config.talking_head) continue;
    fd::testing::GoldenCase const golden = fd::testing::read_golden_case(dir);
    for (fd::DType dtype : dtypes) {
      double err = 0.0;
      if (config.model_type == fd::ModelType::kDeberta) {
        err = low_precision_error<fd::V1>(dtype, dir, golden);
      } else if (config.conv_kernel_size > 0) {
        err = low_precision_error<fd::V2>(dtype, dir, golden);
      } else {
        err = low_precision_error<fd::V3>(dtype, dir, golden);
      }
      MESSAGE("fixture " << dir.filename().string() << " " << fd::dtype_name(dtype)
                         << ": relative error of last_hidden_state " << err);
      CHECK(err <= bound(dtype));
    }
  }
}

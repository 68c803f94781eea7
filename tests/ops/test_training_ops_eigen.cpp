// The Eigen training ops (eigen/ops/training_ops.hpp) on the generic bodies of training_op_suite.hpp and
// training_gradient_checks.hpp, with 1 and 3 threads, and bit-identical between runs. The runner calls eigen_ops
// directly with the OpenMP thread count set as EigenPolicy sets it, so this test builds without the rest of the
// policy.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

#include "flashdeberta/core/host_buffer.hpp"
#include "flashdeberta/eigen/eigen_linear.hpp"
#include "flashdeberta/eigen/ops/dense_ops.hpp"
#include "flashdeberta/eigen/ops/training_ops.hpp"
#include "training_gradient_checks.hpp"
#include "training_op_suite.hpp"

#if defined(_OPENMP)
#include <omp.h>
#endif

namespace fd = flashdeberta;
namespace tt = fd::training_tests;

namespace {

// eigen_ops on host buffers, each op with the calling thread's OpenMP count set to `threads` for its duration
// (Eigen's GEMMs size their teams from it), as EigenPolicy runs them.
class EigenTrainingOps {
 public:
  using Buffer = fd::HostBuffer;

  // on_onednn: the float32 GEMMs (gemm, linear_backward) through oneDNN's sgemm, as EigenPolicy runs them by
  // default in a build with oneDNN, or on Eigen (F32Linear::kEigen).
  explicit EigenTrainingOps(int threads, bool on_onednn = fd::eigen_detail::kHasOnednn)
      : threads_(threads), on_onednn_(on_onednn) {}
  int threads() const { return threads_; }

  Buffer upload(std::span<float const> host, fd::DType dtype) const {
    REQUIRE(dtype == fd::DType::kF32);
    Buffer buffer(static_cast<std::int64_t>(host.size()), fd::DType::kF32);
    std::copy(host.begin(), host.end(), buffer.as<float>());
    return buffer;
  }
  Buffer upload_indices(std::span<std::int32_t const> host) const {
    Buffer buffer(static_cast<std::int64_t>(host.size()), fd::DType::kI32);
    std::copy(host.begin(), host.end(), buffer.as<std::int32_t>());
    return buffer;
  }
  void download(Buffer const& buffer, std::span<float> host) const {
    std::copy_n(buffer.as<float>(), host.size(), host.begin());
  }
  void fence() const {}

  void gemm(fd::GemmArgs const& a) const { run(fd::eigen_ops::gemm, a, on_onednn_); }
  void layer_norm(fd::LayerNormArgs const& a) const { run(fd::eigen_ops::layer_norm, a); }
  void conv1d(fd::Conv1dArgs const& a) const { run(fd::eigen_ops::conv1d, a); }
  void linear_backward(fd::LinearBackwardArgs const& a) const { run(fd::eigen_ops::linear_backward, a, on_onednn_); }
  void layer_norm_backward(fd::LayerNormBackwardArgs const& a) const { run(fd::eigen_ops::layer_norm_backward, a); }
  void activation(fd::ActivationArgs const& a) const { run(fd::eigen_ops::activation, a); }
  void embedding_backward(fd::EmbeddingBackwardArgs const& a) const { run(fd::eigen_ops::embedding_backward, a); }
  void conv1d_backward(fd::Conv1dBackwardArgs const& a) const { run(fd::eigen_ops::conv1d_backward, a); }
  void dropout(fd::DropoutArgs const& a) const { run(fd::eigen_ops::dropout, a); }
  void adamw(fd::AdamWArgs const& a) const { run(fd::eigen_ops::adamw, a); }
  void fill(fd::MatrixRef const& out, float value) const {
    ThreadCount const scope(threads_);
    fd::eigen_ops::fill(out, value, threads_);
  }
  double sum_of_squares(float const* values, std::int64_t count) const {
    ThreadCount const scope(threads_);
    return fd::eigen_ops::sum_of_squares(values, count, threads_);
  }

 private:
  class ThreadCount {
   public:
    explicit ThreadCount([[maybe_unused]] int threads) {
#if defined(_OPENMP)
      previous_ = omp_get_max_threads();
      omp_set_num_threads(threads);
#endif
    }
    ~ThreadCount() {
#if defined(_OPENMP)
      omp_set_num_threads(previous_);
#endif
    }
    ThreadCount(ThreadCount const&) = delete;
    ThreadCount& operator=(ThreadCount const&) = delete;

   private:
    [[maybe_unused]] int previous_ = 1;
  };

  template <class Args, class... Extra>
  void run(void (*op)(Args const&, int, Extra...), Args const& args, std::type_identity_t<Extra>... extra) const {
    ThreadCount const scope(threads_);
    op(args, threads_, extra...);
  }

  int threads_;
  bool on_onednn_;
};

static_assert(tt::TrainingOpRunner<EigenTrainingOps>);

constexpr std::uint32_t kSeed = 20261207;

// Each body once per thread count; INFO names the count in every message.
template <class Body>
void for_each_thread_count(Body&& body) {
  for (int threads : {1, 3}) {
    INFO("threads " << threads);
    body(EigenTrainingOps(threads));
  }
}

bool bit_identical(std::vector<double> const& a, std::vector<double> const& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0;
}

}  // namespace

// The bounds are about 3x the largest error measured (max_error's measure): 6e-7 for the float32 GEMMs of linear
// and conv1d backward over up to 2050 rows, 4e-7 for the activations' derivatives (mish's libm, Eigen's erf),
// 1.1e-7 for dropout's two float32 roundings; AdamW within 1 float32 ulp of the reference.
TEST_CASE("eigen training: linear_backward against the reference") {
  for_each_thread_count([](auto const& r) { tt::linear_backward_cases(r, kSeed, 2e-6); });
}

TEST_CASE("eigen training: linear_backward with its GEMMs on Eigen against the reference") {
  for (int threads : {1, 3}) {
    INFO("threads " << threads);
    tt::linear_backward_cases(EigenTrainingOps(threads, false), kSeed, 2e-6);
  }
}

TEST_CASE("eigen training: layer_norm_backward against the reference") {
  for_each_thread_count([](auto const& r) { tt::layer_norm_backward_cases(r, kSeed, 2e-6); });
}

TEST_CASE("eigen training: activation forward and backward against the reference") {
  for_each_thread_count([](auto const& r) { tt::activation_cases(r, kSeed, 2e-6); });
}

TEST_CASE("eigen training: embedding_backward against the reference") {
  for_each_thread_count([](auto const& r) { tt::embedding_backward_cases(r, kSeed, 2e-6); });
}

TEST_CASE("eigen training: conv1d_backward against the reference") {
  for_each_thread_count([](auto const& r) { tt::conv1d_backward_cases(r, kSeed, 2e-6); });
}

TEST_CASE("eigen training: dropout mask, scale and counter") {
  for_each_thread_count([](auto const& r) { tt::dropout_cases(r, kSeed, 2e-7); });
}

TEST_CASE("eigen training: adamw against the reference over 3 steps") {
  for_each_thread_count([](auto const& r) { tt::adamw_cases(r, kSeed, 1.0); });
}

TEST_CASE("eigen training: fill and sum_of_squares") {
  for_each_thread_count([](auto const& r) {
    tt::fill_cases(r);
    tt::sum_of_squares_cases(r, kSeed, 1e-12);
  });
}

TEST_CASE("eigen training: backward ops against finite differences of the forward ops") {
  for_each_thread_count([](auto const& r) {
    // Linear in every operand: only float32 rounding. LayerNorm and the activations: steps of length 1e-2, whose
    // curvature term measured up to 1.3e-5.
    tt::linear_finite_differences(r, kSeed, 1e-6);
    tt::layer_norm_finite_differences(r, kSeed, 1e-2, 1e-4);
    tt::activation_finite_differences(r, kSeed, 1e-2, 1e-4);
    tt::conv1d_finite_differences(r, kSeed, 1e-6);
  });
}

TEST_CASE("eigen training: bad arguments throw") { tt::rejects_bad_arguments(EigenTrainingOps(1)); }

TEST_CASE("eigen training: every op is bit-identical between two runs with 3 threads") {
  EigenTrainingOps const r(3);
  auto const first = tt::run_every_op(r, kSeed);
  auto const second = tt::run_every_op(r, kSeed);
  REQUIRE(first.size() == second.size());
  for (std::size_t i = 0; i < first.size(); ++i)
    CHECK_MESSAGE(bit_identical(first[i].values, second[i].values), first[i].name << " differs between runs");
}

// The reductions this backend writes (column sums, LayerNorm's parameter gradients, the scatter-add, the sum of
// squares) and the elementwise ops do not depend on the thread count; Eigen's GEMMs (linear dx and dw, conv1d's
// dx and dweight) promise nothing, and are only reported.
TEST_CASE("eigen training: reductions and elementwise ops are the same with 1 and 3 threads") {
  std::set<std::string> const gemm_outputs{"linear dx", "linear dw", "conv1d dx", "conv1d dweight"};
  auto const one = tt::run_every_op(EigenTrainingOps(1), kSeed);
  auto const three = tt::run_every_op(EigenTrainingOps(3), kSeed);
  REQUIRE(one.size() == three.size());
  for (std::size_t i = 0; i < one.size(); ++i) {
    bool const same = bit_identical(one[i].values, three[i].values);
    if (gemm_outputs.count(one[i].name) != 0) {
      MESSAGE(one[i].name << std::string(same ? ": the same" : ": differs") << " with 1 and 3 threads (Eigen GEMM)");
    } else {
      CHECK_MESSAGE(same, one[i].name << " differs between 1 and 3 threads");
    }
  }
}

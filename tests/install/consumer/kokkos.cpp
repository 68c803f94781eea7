// flashdeberta::kokkos from a consumer: KokkosPolicy takes a matrix into its memory space, multiplies it there
// by the identity (gemm: out = a b^T) and gives it back. Small on purpose: the model on KokkosPolicy is the main
// build's golden suite; this checks what the package gives a consumer (the headers, Kokkos and its link) in a
// tenth of the compile time of a model forward on KokkosPolicy.
#include <cstdio>
#include <vector>

#include <Kokkos_Core.hpp>
#include <flashdeberta/kokkos/kokkos_policy.hpp>

namespace fd = flashdeberta;

int main(int argc, char** argv) {
  Kokkos::ScopeGuard const kokkos(argc, argv);  // outlives the buffers
  try {
    fd::KokkosPolicy<> const policy;
    std::vector<float> const a{1, 2, 3, 4};
    std::vector<float> const identity{1, 0, 0, 1};
    auto const a_buffer = policy.upload(a, fd::DType::kF32);
    auto const b_buffer = policy.upload(identity, fd::DType::kF32);
    auto out_buffer = policy.allocate(4, fd::DType::kF32);
    fd::GemmArgs gemm;
    gemm.a = fd::matrix_ref(a_buffer.data(), fd::DType::kF32, 2, 2);
    gemm.b = fd::matrix_ref(b_buffer.data(), fd::DType::kF32, 2, 2);
    gemm.out = fd::matrix_ref(out_buffer.data(), fd::DType::kF32, 2, 2);
    policy.gemm(gemm);
    std::vector<float> out(4);
    policy.download(out_buffer, out);
    std::printf("consumer_kokkos: %g %g %g %g on %s\n", out[0], out[1], out[2], out[3],
                Kokkos::DefaultExecutionSpace::name());
    return out == a ? 0 : 1;
  } catch (fd::Error const& e) {
    std::fprintf(stderr, "consumer_kokkos: %s\n", e.what());
    return 1;
  }
}

// Loads a checkpoint through flashdeberta's headers and runs one forward pass: on EigenPolicy (the consumer
// target; through oneDNN's matmul in a build that has it), or on KokkosPolicy where CONSUMER_KOKKOS is defined
// (consumer_kokkos).
#include <cstdio>

#include <flashdeberta/flashdeberta.hpp>
#ifdef CONSUMER_KOKKOS
#include <Kokkos_Core.hpp>
#include <flashdeberta/kokkos/kokkos_policy.hpp>
#else
#include <flashdeberta/eigen/eigen_policy.hpp>
#endif

int main(int argc, char** argv) {
#ifdef CONSUMER_KOKKOS
  Kokkos::ScopeGuard const kokkos(argc, argv);  // outlives the model
  using Policy = flashdeberta::KokkosPolicy<>;
  char const* const name = "consumer_kokkos";
  Policy const policy;
#else
  using Policy = flashdeberta::EigenPolicy;
  char const* const name = "consumer";
  Policy const policy(1);
#endif
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CHECKPOINT_DIR\n", name);
    return 2;
  }
  try {
    auto model = flashdeberta::DebertaV3<Policy>::load(policy, argv[1]);
    auto const batch = flashdeberta::Batch::from_sequences({{1, 5, 7, 2}, {1, 9, 2}});
    std::vector<float> const hidden = model.forward_to_host(batch);
    std::printf("%s: %zu values from %s\n", name, hidden.size(), argv[1]);
    return hidden.size() == static_cast<std::size_t>(7 * model.config().hidden_size) ? 0 : 1;
  } catch (flashdeberta::Error const& e) {
    std::fprintf(stderr, "%s: %s\n", name, e.what());
    return 1;
  }
}

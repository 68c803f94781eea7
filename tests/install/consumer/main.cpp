// Loads a checkpoint through flashdeberta's headers and runs one forward pass on EigenPolicy (through oneDNN's
// matmul in a build that has it).
#include <cstdio>

#include <flashdeberta/eigen/eigen_policy.hpp>
#include <flashdeberta/flashdeberta.hpp>

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer CHECKPOINT_DIR\n");
    return 2;
  }
  try {
    auto model = flashdeberta::DebertaV3<flashdeberta::EigenPolicy>::load(flashdeberta::EigenPolicy(1), argv[1]);
    auto const batch = flashdeberta::Batch::from_sequences({{1, 5, 7, 2}, {1, 9, 2}});
    std::vector<float> const hidden = model.forward_to_host(batch);
    std::printf("consumer: %zu values from %s\n", hidden.size(), argv[1]);
    return hidden.size() == static_cast<std::size_t>(7 * model.config().hidden_size) ? 0 : 1;
  } catch (flashdeberta::Error const& e) {
    std::fprintf(stderr, "consumer: %s\n", e.what());
    return 1;
  }
}

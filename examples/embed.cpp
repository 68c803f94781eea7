// Sentence embeddings with the library API: load a DeBERTa v3 checkpoint, run two sequences of token
// ids as one packed batch, mean-pool each sequence's last hidden state.
//
//   embed MODEL_DIR        (a Hugging Face checkpoint directory: config.json + model.safetensors)
#include <cmath>
#include <cstdio>
#include <exception>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/flashdeberta.hpp"

int main(int argc, char** argv) try {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s MODEL_DIR\n", argv[0]);
    return 2;
  }
  using Model = flashdeberta::DebertaV3<flashdeberta::EigenPolicy>;
  Model const model = Model::load(flashdeberta::EigenPolicy(/*threads=*/0), argv[1]);

  // Token ids as a tokenizer gives them: [CLS] ... [SEP]. Sequences of different lengths need no padding.
  flashdeberta::Batch const batch = flashdeberta::Batch::from_sequences({{1, 12, 27, 44, 2}, {1, 33, 9, 2}});
  std::vector<float> const hidden = model.forward_to_host(batch);  // (T, H), the sequences back to back
  std::int64_t const h = model.config().hidden_size;

  for (std::int64_t b = 0; b < batch.batch_size(); ++b) {
    std::vector<double> mean(static_cast<std::size_t>(h), 0.0);
    for (std::int64_t t = batch.cu_seqlens[b]; t < batch.cu_seqlens[b + 1]; ++t)
      for (std::int64_t c = 0; c < h; ++c) mean[c] += hidden[t * h + c] / static_cast<double>(batch.sequence_length(b));
    double norm = 0.0;
    for (double v : mean) norm += v * v;
    std::printf("sequence %lld: %lld tokens, first values %.5f %.5f %.5f, mean-pooled norm %.5f\n",
                static_cast<long long>(b), static_cast<long long>(batch.sequence_length(b)),
                hidden[batch.cu_seqlens[b] * h + 0], hidden[batch.cu_seqlens[b] * h + 1],
                hidden[batch.cu_seqlens[b] * h + 2], std::sqrt(norm));
  }
  return 0;
} catch (std::exception const& e) {
  std::fprintf(stderr, "embed: error: %s\n", e.what());
  return 1;
}

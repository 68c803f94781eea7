// What every head shares: its input (the backbone's packed hidden states), the tokens a caller asks
// for, a loader for head tensors (never prefixed with "deberta.", spec 7) whose errors name the tensor
// and the file, the row gather the pooler and the masked-LM row selection use, and the download.
#pragma once

#include <algorithm>
#include <cstdint>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "flashdeberta/heads/head_kind.hpp"
#include "flashdeberta/heads/head_output.hpp"
#include "flashdeberta/io/checkpoint.hpp"
#include "flashdeberta/io/config_json.hpp"
#include "flashdeberta/model/deberta_model.hpp"

namespace flashdeberta {

// Per-call options of a head.
struct HeadRequest {
  // Masked LM: the packed tokens whose logits are computed (a GEMM over a 128k vocabulary is the
  // largest of the model, so asking for the masked positions only saves most of it). nullopt: all.
  std::optional<std::vector<std::int64_t>> tokens;

  // The packed tokens of `batch` whose input id is `token_id` (e.g. [MASK]).
  static HeadRequest tokens_with_id(Batch const& batch, std::int64_t token_id) {
    HeadRequest request;
    request.tokens.emplace();
    for (std::int64_t t = 0; t < batch.total_tokens(); ++t) {
      if (batch.input_ids[t] == token_id) request.tokens->push_back(t);
    }
    return request;
  }
};

template <ExecutionPolicy P>
struct HeadInput {
  P const& policy;
  Batch const& batch;
  HiddenStates<P> const& hidden;  // (T, H)
  MatrixRef word_embeddings;      // (V, E) the backbone's table: the tied masked-LM decoder
  HeadRequest const& request;
};

template <ExecutionPolicy P>
using DeviceHeadTensor = HeadTensor<typename P::Buffer>;

// A head's outputs in policy memory.
template <ExecutionPolicy P>
struct DeviceHeadOutput {
  std::vector<DeviceHeadTensor<P>> tensors;
};

template <ExecutionPolicy P>
HeadOutput download_outputs(P const& policy, DeviceHeadOutput<P> const& device) {
  HeadOutput host;
  for (auto const& t : device.tensors) {
    HostHeadTensor h{t.name, t.rows, t.tokens, t.row_count, t.width, t.squeeze, {}};
    h.values.resize(static_cast<std::size_t>(t.row_count * t.width));
    if (!h.values.empty()) policy.download(t.values, std::span<float>(h.values));
    host.tensors.push_back(std::move(h));
  }
  return host;
}

// HF's hidden_states (DebertaModel::forward_hidden_states) appended to `out` as "hidden_states.0" (the
// embedding output) .. "hidden_states.N", packed (T, H) in host memory.
template <ExecutionPolicy P>
void append_hidden_states(P const& policy, std::vector<HiddenStates<P>> const& states, HeadOutput& out) {
  for (std::size_t k = 0; k < states.size(); ++k) {
    std::vector<float> host(static_cast<std::size_t>(states[k].tokens * states[k].hidden_size));
    if (!host.empty()) policy.download(states[k].values, std::span<float>(host));
    out.tensors.push_back(
        hidden_state_tensor("hidden_states." + std::to_string(k), std::move(host), states[k].hidden_size));
  }
}

// Reads head tensors by their HF names (no prefix). `head` names the head in messages
// ("sequence-classification head").
template <ExecutionPolicy P>
class HeadWeights {
 public:
  using Matrix = DeviceMatrix<typename P::Buffer>;

  HeadWeights(P const& policy, Checkpoint const& checkpoint, std::string head)
      : policy_(policy), checkpoint_(checkpoint), head_(std::move(head)) {}

  bool has(std::string const& name) const { return checkpoint_.contains(name); }
  // The checkpoint's config.json, for messages about what the config asks of the head.
  std::string config_source() const { return model_config_file(checkpoint_.directory()).string(); }
  std::string const& head() const { return head_; }

  // `why` says where the required shape comes from, e.g. "num_labels = 3 from config.json".
  Matrix matrix(std::string const& name, std::int64_t rows, std::int64_t cols, std::string const& why = {}) const {
    return {load(name, {rows, cols}, why), rows, cols};
  }

  typename P::Buffer vector(std::string const& name, std::int64_t size, std::string const& why = {}) const {
    return load(name, {size}, why);
  }

  // "<dir>/model.safetensors", or the shard index of a sharded checkpoint: where a tensor was looked for.
  std::string files() const {
    std::set<std::string> sources;
    for (std::string const& name : checkpoint_.names()) sources.insert(checkpoint_.source_of(name));
    if (sources.size() == 1) return *sources.begin();
    return (checkpoint_.directory() / "model.safetensors.index.json").string() + " and its shards";
  }

  [[noreturn]] void fail_missing(std::string const& name) const {
    std::string present;
    int shown = 0;
    for (std::string const& n : checkpoint_.names()) {
      if (n.starts_with("deberta.") || n.starts_with("embeddings.") || n.starts_with("encoder.")) continue;
      if (shown++ < 12) present += (present.empty() ? "" : ", ") + n;
    }
    if (shown > 12) present += ", ...";
    FLASHDEBERTA_FAIL(
        files() << ": the " << head_ << " needs tensor '" << name << "', which the checkpoint lacks ("
                << (present.empty() ? std::string("it holds no head tensors") : "head tensors: " + present) << ")");
  }

  // The backbone's word embeddings (V, E) in the compute dtype, for a decoder tied to them, where the backbone keeps
  // them as stored in 16 bits (lends_stored_table: its embedding op widens the rows it gathers, a GEMM cannot);
  // nullopt where the backbone's table is in the compute dtype already and the head multiplies by it.
  std::optional<Matrix> word_embeddings_for_gemm(std::int64_t rows, std::int64_t cols) const {
    for (std::string const name : {"deberta.embeddings.word_embeddings.weight", "embeddings.word_embeddings.weight"}) {
      if (!checkpoint_.contains(name)) continue;
      if (!lends_stored_table(policy_, checkpoint_, name, {rows, cols})) return std::nullopt;
      return Matrix{load_weight(policy_, checkpoint_, name, {rows, cols}), rows, cols};
    }
    return std::nullopt;
  }

 private:
  // In policy memory as the backbone's weights are (load_weight: in place where it can be).
  typename P::Buffer load(std::string const& name, std::vector<std::int64_t> const& shape,
                          std::string const& why) const {
    if (!checkpoint_.contains(name)) fail_missing(name);
    auto const& actual = checkpoint_.info(name).shape;
    FLASHDEBERTA_REQUIRE(actual == shape, checkpoint_.source_of(name)
                                              << ": tensor '" << name << "' has shape " << detail::format_shape(actual)
                                              << "; the " << head_ << " needs " << detail::format_shape(shape)
                                              << (why.empty() ? "" : " (" + why + ")"));
    return load_weight(policy_, checkpoint_, name, shape);
  }

  P const& policy_;
  Checkpoint const& checkpoint_;
  std::string head_;
};

// out (rows.size(), cols) = table[rows]: the embedding gather with the hidden states as its table.
// `indices` receives the uploaded row list, which must outlive the (possibly asynchronous) gather.
template <ExecutionPolicy P>
typename P::Buffer gather_rows(P const& policy, MatrixRef const& table, std::span<std::int32_t const> rows,
                               typename P::Buffer& indices) {
  auto const count = static_cast<std::int64_t>(rows.size());
  typename P::Buffer out = policy.allocate(count * table.cols, table.dtype);
  if (count == 0) return out;
  indices = policy.upload_indices(rows);
  EmbeddingArgs args;
  args.ids = static_cast<std::int32_t const*>(indices.data());
  args.word = table;
  args.out = {out.data(), out.dtype(), count, table.cols, table.cols};
  policy.embedding(args);
  return out;
}

}  // namespace flashdeberta

// The trainable parameters of a model under their Hugging Face names, in float32 policy memory: values, gradients
// and, once an optimizer has stepped, AdamW's two moments.
//
// Parameters that one GEMM reads together are laid out back to back in one block (v2/v3's query, key and value
// projections become one (3A, H) matrix), so the forward runs one GEMM over the block and the backward writes one
// gradient; each HF tensor is a view of its block. Views stay valid while the set lives: blocks are never moved.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <numeric>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/core/matrix_ref.hpp"
#include "flashdeberta/io/checkpoint.hpp"
#include "flashdeberta/policy/training_concepts.hpp"

namespace flashdeberta {

// How a parameter missing from the checkpoint starts (a new head on a backbone), as HF's _init_weights does.
enum class ParameterInit {
  kNormal,  // N(0, initializer_range^2): Linear and embedding weights
  kZeros,   // biases
  kOnes,    // LayerNorm weights
};

// No weight decay on biases and LayerNorm weights (HF Trainer.get_decay_parameter_names).
inline bool decays(std::string_view name) {
  auto const ends_with = [&](std::string_view suffix) {
    return name.size() >= suffix.size() && name.substr(name.size() - suffix.size()) == suffix;
  };
  return !(ends_with("bias") || name.find("LayerNorm") != std::string_view::npos);
}

// Where parameters come from: the tensors of `checkpoint` under `lookup_prefix` (a backbone saved alone has none, one
// saved with a head "deberta."), named `name_prefix` + their HF name in the trained model. No checkpoint: every
// parameter is initialized.
struct ParameterSource {
  Checkpoint const* checkpoint = nullptr;
  std::string lookup_prefix;
  std::string name_prefix;
};

template <TrainingPolicy P>
class ParameterSet {
 public:
  using Buffer = typename P::Buffer;

  struct Parameter {
    std::string name;  // the HF name, as in the checkpoint and the saved model.safetensors
    std::vector<std::int64_t> shape;
    std::int64_t count = 0;
    std::size_t block = 0;
    std::int64_t offset = 0;  // elements into its block
    bool decay = true;
  };

  // One named tensor of a block: its shape and how it starts when the checkpoint lacks it.
  struct Spec {
    std::string name;
    std::vector<std::int64_t> shape;
    ParameterInit init = ParameterInit::kNormal;
  };

  ParameterSet(P policy, float initializer_range = 0.02f, std::uint64_t init_seed = 42)
      : policy_(std::move(policy)), initializer_range_(initializer_range), init_rng_(init_seed) {}

  P const& policy() const { return policy_; }

  // Adds the tensors of `specs` as one contiguous block, each read from the source when it holds it and initialized
  // otherwise. Returns the index of the first; the rest follow in order.
  std::size_t add_block(std::vector<Spec> const& specs, ParameterSource const& source) {
    std::int64_t total = 0;
    for (Spec const& spec : specs) total += element_count(spec.shape);
    std::vector<float> host(static_cast<std::size_t>(total));
    std::size_t const first = parameters_.size();
    std::int64_t offset = 0;
    for (Spec const& spec : specs) {
      std::int64_t const count = element_count(spec.shape);
      std::span<float> values(host.data() + offset, static_cast<std::size_t>(count));
      std::string const stored = source.lookup_prefix + spec.name;
      std::string const name = source.name_prefix + spec.name;
      if (source.checkpoint != nullptr && source.checkpoint->contains(stored)) {
        source.checkpoint->read_f32_into(stored, spec.shape, values);
        loaded_.push_back(name);
      } else {
        initialize(values, spec.init);
        initialized_.push_back(name);
      }
      parameters_.push_back({name, spec.shape, count, blocks_.size(), offset, decays(spec.name)});
      offset += count;
    }
    Block block{
        policy_.upload(std::span<float const>(host), DType::kF32), policy_.allocate(total, DType::kF32), {}, {}};
    policy_.fill(matrix_ref(block.grad.data(), DType::kF32, 1, total), 0.0f);
    blocks_.push_back(std::move(block));
    return first;
  }
  std::size_t add(Spec const& spec, ParameterSource const& source) { return add_block({spec}, source); }

  std::size_t size() const { return parameters_.size(); }
  Parameter const& info(std::size_t index) const { return parameters_.at(index); }
  std::size_t index_of(std::string_view name) const {
    for (std::size_t i = 0; i < parameters_.size(); ++i)
      if (parameters_[i].name == name) return i;
    FLASHDEBERTA_FAIL("no trainable parameter named '" << name << "'");
  }
  // Names (in the trained model) read from the checkpoint, and those it lacked (initialized as HF does).
  std::vector<std::string> const& loaded() const { return loaded_; }
  std::vector<std::string> const& initialized() const { return initialized_; }

  // A parameter's value or gradient viewed as (rows, cols); rows * cols must be its element count. `count`
  // consecutive parameters of one block may be viewed together (a stacked projection).
  MatrixRef value(std::size_t index, std::int64_t rows, std::int64_t cols, std::size_t count = 1) const {
    return view(index, rows, cols, count, Slot::kValue);
  }
  MatrixRef grad(std::size_t index, std::int64_t rows, std::int64_t cols, std::size_t count = 1) const {
    return view(index, rows, cols, count, Slot::kGrad);
  }
  float* value_data(std::size_t index) const {
    return static_cast<float*>(value(index, 1, parameters_.at(index).count).data);
  }
  float* grad_data(std::size_t index) const {
    return static_cast<float*>(grad(index, 1, parameters_.at(index).count).data);
  }

  void zero_grads() {
    std::vector<FloatRun> const runs = gradient_runs();
    if constexpr (BatchesFloatRuns<P>) {
      policy_.fill(std::span<FloatRun const>(runs), 0.0f);
    } else {
      for (FloatRun const& r : runs) policy_.fill(matrix_ref(r.data, DType::kF32, 1, r.count), 0.0f);
    }
    if (!tracked_) return;
    for (std::int32_t row : tracked_->list) tracked_->touched[static_cast<std::size_t>(row)] = 0;
    tracked_->list.clear();
    tracked_->all = false;
  }

  // The global L2 norm of every gradient (torch.nn.utils.clip_grad_norm_'s total_norm), in float64.
  double grad_norm() const {
    std::vector<FloatRun> const runs = gradient_runs();
    if constexpr (BatchesFloatRuns<P>) {
      return std::sqrt(policy_.sum_of_squares(std::span<FloatRun const>(runs)));
    } else {
      double sum = 0.0;
      for (FloatRun const& r : runs) sum += policy_.sum_of_squares(r.data, r.count);
      return std::sqrt(sum);
    }
  }

  // Row tracking of one 2-D parameter with a block of its own (the word embeddings): zero_grads and grad_norm then
  // visit only the rows whose gradient may be nonzero since the last zero_grads. v3's 128k-row table is over half
  // of its parameters (two of the optimizer's memory passes over it per step), and 1024 tokens touch at most 1024
  // of its rows. Whoever adds to that gradient names the rows (note_rows) or all of them (note_all_rows: the tied
  // masked-LM decoder); set() and set_grad() count as all.
  void track_rows(std::size_t index) {
    Parameter const& p = parameters_.at(index);
    std::size_t shared = 0;
    for (Parameter const& q : parameters_) shared += q.block == p.block ? 1 : 0;
    FLASHDEBERTA_REQUIRE(p.shape.size() == 2 && shared == 1,
                         "row tracking needs a 2-D parameter with a block of its own; " << p.name << " is not");
    tracked_ = RowTracking{index, p.shape[0], p.shape[1], true, std::vector<std::uint8_t>(p.shape[0], 0), {}};
  }
  void note_rows(std::size_t index, std::span<std::int32_t const> rows) {
    if (!tracked_ || tracked_->index != index || tracked_->all) return;
    for (std::int32_t row : rows) {
      FLASHDEBERTA_REQUIRE(row >= 0 && row < tracked_->rows, parameters_[index].name << ": gradient row " << row
                                                                                     << " outside its "
                                                                                     << tracked_->rows << " rows");
      auto& seen = tracked_->touched[static_cast<std::size_t>(row)];
      if (seen == 0) tracked_->list.push_back(row);
      seen = 1;
    }
  }
  void note_all_rows(std::size_t index) {
    if (tracked_ && tracked_->index == index) tracked_->all = true;
  }

  // What each parameter holds: its value, its gradient, AdamW's first and second moments.
  enum class Slot { kValue, kGrad, kExpAvg, kExpAvgSq };

  // Every parameter's `slot` in host memory, under its name, in the order added (moments: zeros before the first
  // step).
  std::vector<std::pair<std::string, std::vector<float>>> download(Slot slot) const;
  std::vector<std::pair<std::string, std::vector<float>>> download_values() const { return download(Slot::kValue); }
  std::vector<std::pair<std::string, std::vector<float>>> download_grads() const { return download(Slot::kGrad); }

  // Overwrites one parameter's `slot` from host memory (a resumed run, a test).
  void set(std::size_t index, std::span<float const> values, Slot slot);
  void set_value(std::size_t index, std::span<float const> values) { set(index, values, Slot::kValue); }
  void set_grad(std::size_t index, std::span<float const> values) { set(index, values, Slot::kGrad); }

  // AdamW over every parameter (the moments are allocated, zeroed, at the first step).
  void adamw_step(AdamWArgs args) {
    for (Parameter const& p : parameters_) {
      Block& b = blocks_[p.block];
      allocate_moments(b);
      AdamWArgs a = args;
      a.weights = static_cast<float*>(b.value.data()) + p.offset;
      a.grads = static_cast<float const*>(b.grad.data()) + p.offset;
      a.exp_avg = static_cast<float*>(b.exp_avg.data()) + p.offset;
      a.exp_avg_sq = static_cast<float*>(b.exp_avg_sq.data()) + p.offset;
      a.count = p.count;
      if (!p.decay) a.weight_decay = 0.0;
      policy_.adamw(a);
    }
  }

 private:
  struct Block {
    Buffer value, grad, exp_avg, exp_avg_sq;  // (block elements) each
  };

  static std::int64_t element_count(std::vector<std::int64_t> const& shape) {
    return std::accumulate(shape.begin(), shape.end(), std::int64_t{1}, std::multiplies<>());
  }

  void initialize(std::span<float> values, ParameterInit init) {
    if (init == ParameterInit::kNormal) {
      std::normal_distribution<float> normal(0.0f, initializer_range_);
      for (float& v : values) v = normal(init_rng_);
    } else {
      std::fill(values.begin(), values.end(), init == ParameterInit::kOnes ? 1.0f : 0.0f);
    }
  }

  void allocate_moments(Block& b) const {
    if (b.exp_avg.size() != 0) return;
    b.exp_avg = policy_.allocate(b.value.size(), DType::kF32);
    b.exp_avg_sq = policy_.allocate(b.value.size(), DType::kF32);
    policy_.fill(matrix_ref(b.exp_avg.data(), DType::kF32, 1, b.value.size()), 0.0f);
    policy_.fill(matrix_ref(b.exp_avg_sq.data(), DType::kF32, 1, b.value.size()), 0.0f);
  }

  static Buffer const& slot_of(Block const& b, Slot slot) {
    switch (slot) {
      case Slot::kGrad:
        return b.grad;
      case Slot::kExpAvg:
        return b.exp_avg;
      case Slot::kExpAvgSq:
        return b.exp_avg_sq;
      case Slot::kValue:
      default:
        return b.value;
    }
  }

  MatrixRef view(std::size_t index, std::int64_t rows, std::int64_t cols, std::size_t count, Slot slot) const {
    FLASHDEBERTA_REQUIRE(index + count <= parameters_.size(), "parameter view past the end of the set");
    Parameter const& first = parameters_[index];
    std::int64_t elements = 0;
    for (std::size_t i = index; i < index + count; ++i) {
      FLASHDEBERTA_REQUIRE(parameters_[i].block == first.block,
                           "parameters " << first.name << " and " << parameters_[i].name << " are not one block");
      elements += parameters_[i].count;
    }
    FLASHDEBERTA_REQUIRE(rows * cols == elements, "parameter " << first.name << " (" << elements
                                                               << " elements) viewed as (" << rows << ", " << cols
                                                               << ")");
    float* base = static_cast<float*>(slot_of(blocks_[first.block], slot).data());
    return matrix_ref(base + first.offset, DType::kF32, rows, cols);
  }

  struct RowTracking {
    std::size_t index = 0;
    std::int64_t rows = 0, width = 0;
    bool all = true;                    // every row may be nonzero: until the first zero_grads, after set()
    std::vector<std::uint8_t> touched;  // (rows) 1 where the row is in `list`
    std::vector<std::int32_t> list;     // the rows noted since the last zero_grads
  };

  bool tracks_rows_of(std::size_t block) const {
    return tracked_ && !tracked_->all && parameters_[tracked_->index].block == block;
  }
  // Where the gradients may be nonzero, block by block: every block whole, but the tracked one's touched rows only.
  std::vector<FloatRun> gradient_runs() const {
    std::vector<FloatRun> runs;
    for (std::size_t x = 0; x < blocks_.size(); ++x) {
      auto* grad = static_cast<float*>(blocks_[x].grad.data());
      if (tracks_rows_of(x)) {
        for_each_touched_run([&](std::int64_t first, std::int64_t count) {
          runs.push_back({grad + first * tracked_->width, count * tracked_->width});
        });
      } else if (blocks_[x].grad.size() > 0) {
        runs.push_back({grad, blocks_[x].grad.size()});
      }
    }
    return runs;
  }

  // body(first, count) for each run of consecutive touched rows, in row order.
  template <class Body>
  void for_each_touched_run(Body&& body) const {
    std::vector<std::int32_t> rows = tracked_->list;
    std::sort(rows.begin(), rows.end());
    for (std::size_t x = 0; x < rows.size();) {
      std::size_t y = x + 1;
      while (y < rows.size() && rows[y] == rows[y - 1] + 1) ++y;
      body(std::int64_t{rows[x]}, static_cast<std::int64_t>(y - x));
      x = y;
    }
  }

  P policy_;
  float initializer_range_;
  std::mt19937_64 init_rng_;
  std::vector<Parameter> parameters_;
  std::vector<Block> blocks_;
  std::vector<std::string> loaded_, initialized_;
  std::optional<RowTracking> tracked_;
};

template <TrainingPolicy P>
std::vector<std::pair<std::string, std::vector<float>>> ParameterSet<P>::download(Slot slot) const {
  std::vector<std::vector<float>> blocks;
  for (Block const& b : blocks_) {
    std::vector<float> host(static_cast<std::size_t>(b.value.size()), 0.0f);
    if (slot_of(b, slot).size() != 0) policy_.download(slot_of(b, slot), std::span<float>(host));
    blocks.push_back(std::move(host));
  }
  std::vector<std::pair<std::string, std::vector<float>>> out;
  for (Parameter const& p : parameters_) {
    auto const begin = blocks[p.block].begin() + p.offset;
    out.emplace_back(p.name, std::vector<float>(begin, begin + p.count));
  }
  return out;
}

template <TrainingPolicy P>
void ParameterSet<P>::set(std::size_t index, std::span<float const> values, Slot slot) {
  Parameter const& p = parameters_.at(index);
  FLASHDEBERTA_REQUIRE(static_cast<std::int64_t>(values.size()) == p.count,
                       "parameter " << p.name << " holds " << p.count << " values, not " << values.size());
  if (slot == Slot::kExpAvg || slot == Slot::kExpAvgSq) allocate_moments(blocks_[p.block]);
  if (slot == Slot::kGrad) note_all_rows(index);
  Buffer const staged = policy_.upload(values, DType::kF32);
  policy_.activation({.x = matrix_ref(staged.data(), DType::kF32, 1, p.count),
                      .out = view(index, 1, p.count, 1, slot),
                      .activation = Activation::kIdentity});
}

}  // namespace flashdeberta

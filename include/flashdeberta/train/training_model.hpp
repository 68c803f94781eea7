// TrainingModel<Variant, Policy>: a DeBERTa backbone and one head as trainable float32 parameters under HF's names,
// one forward + loss + backward per call (gradients add up in the parameter set until zeroed), and the parameters
// out in the names a Hugging Face checkpoint of the head's class uses.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "flashdeberta/io/checkpoint.hpp"
#include "flashdeberta/io/config_json.hpp"
#include "flashdeberta/train/trainable_head.hpp"
#include "flashdeberta/train/trainable_model.hpp"
#include "flashdeberta/train/training_memory.hpp"

namespace flashdeberta {

struct TrainingModelOptions {
  HeadKind head = HeadKind::kSequenceClassification;
  ProblemType problem = ProblemType::kSingleLabel;
  AttentionImpl attention = AttentionImpl::kFlash;
  std::uint64_t init_seed = 42;  // parameters the checkpoint lacks (a new head) start from this generator
  // Keep only each layer's output and run the layer's forward again in the backward: one layer's tape in memory
  // instead of all (about a third more compute).
  bool activation_checkpointing = false;
  // The last layer computes only the rows the head reads (row_subset.hpp): the same loss and gradients for less
  // work. Off: every row, as HF computes it.
  bool head_rows_only = true;
  // A step whose estimate (training_memory.hpp) exceeds this many bytes, or what the policy reports available when
  // that is less, is refused before anything is allocated; 0: only the policy's report.
  std::int64_t max_step_bytes = 0;
};

// One forward's result: the loss and the head's logits (host, (rows, width)).
struct TrainingLoss {
  double loss = 0.0;
  std::vector<float> logits;
  std::int64_t counted = 0;  // rows (or elements) the loss averaged over
};

template <Variant V, TrainingPolicy P>
class TrainingModel {
 public:
  // The checkpoint in `directory` (a backbone alone, or saved with any head); head tensors it lacks are initialized.
  static TrainingModel load(P policy, std::filesystem::path const& directory, TrainingModelOptions options) {
    ModelConfig config = load_model_config(directory);
    FLASHDEBERTA_REQUIRE(config.model_type == V::kModelType, model_config_file(directory).string()
                                                                 << ": not a " << V::kName << " checkpoint");
    Checkpoint const checkpoint = Checkpoint::open(directory);
    return TrainingModel(std::move(policy), std::move(config), &checkpoint, options);
  }

  TrainingModel(P policy, ModelConfig config, Checkpoint const* checkpoint, TrainingModelOptions options)
      : config_(std::move(config)),
        options_(options),
        parameters_(std::make_unique<ParameterSet<P>>(std::move(policy), 0.02f, options.init_seed)) {
    ParameterSource backbone{checkpoint, backbone_prefix(checkpoint), "deberta."};
    backbone_ = std::make_unique<TrainableDeberta<V, P>>(*parameters_, backbone, config_);
    ParameterSource head{checkpoint, "", ""};
    head_ = std::make_unique<TrainableHead<P>>(*parameters_, head, config_, options.head, options.problem,
                                               backbone_->word_embeddings());
    parameters_->track_rows(backbone_->word_embeddings());
  }

  ModelConfig const& config() const { return config_; }
  ParameterSet<P>& parameters() { return *parameters_; }
  ParameterSet<P> const& parameters() const { return *parameters_; }
  TrainableHead<P> const& head() const { return *head_; }
  void set_attention(AttentionImpl impl) { options_.attention = impl; }
  void set_activation_checkpointing(bool on) { options_.activation_checkpointing = on; }

  // Forward, loss and backward of one batch; the parameters' gradients add up (ParameterSet::zero_grads clears
  // them). `dropout` all zero runs as HF's eval mode does; `seed` draws this step's dropout masks. The backward
  // starts from the loss's gradient times `loss_scale` (DynamicLossScale: fp16 products), so every gradient is
  // that many times the loss's.
  TrainingLoss forward_backward(Batch const& batch, TrainingTargets const& targets, DropoutRates dropout = {},
                                std::uint64_t seed = 0, double loss_scale = 1.0) {
    return run(batch, targets, dropout, seed, /*backward=*/true, loss_scale);
  }

  // The loss and logits without a backward (evaluation: no dropout).
  TrainingLoss evaluate(Batch const& batch, TrainingTargets const& targets) {
    return run(batch, targets, {}, 0, /*backward=*/false, 1.0);
  }

 private:
  static std::string backbone_prefix(Checkpoint const* checkpoint) {
    if (checkpoint == nullptr || checkpoint->contains("embeddings.word_embeddings.weight")) return "";
    return "deberta.";
  }

  TrainingLoss run(Batch const& batch, TrainingTargets const& targets, DropoutRates dropout, std::uint64_t seed,
                   bool backward, double loss_scale) {
    batch.validate(config_);
    FLASHDEBERTA_REQUIRE(batch.batch_size() > 0, "training needs at least one sequence");
    P const& p = parameters_->policy();
    std::int64_t gathered = batch.batch_size();
    if (options_.head == HeadKind::kMaskedLM) gathered = static_cast<std::int64_t>(targets.classes.size());
    require_training_fits(p,
                          estimate_training_memory(p, config_, batch, options_.attention,
                                                   options_.activation_checkpointing, gathered, head_->width()),
                          options_.max_step_bytes, options_.activation_checkpointing);
    ForwardContext<P> const forward(p, batch, options_.attention);
    TrainContext<P> ctx{forward, *parameters_, dropout, seed, 0};
    // With head_rows_only the last layer computes only the rows the head reads (row_subset.hpp): the same loss and
    // gradients; otherwise the head gathers them from every row.
    RowSubset<P> const head_rows(p, head_->read_rows(batch, targets));
    typename TrainableDeberta<V, P>::Tape tape;
    MatrixRef const hidden = backbone_->forward(ctx, tape, options_.activation_checkpointing,
                                                options_.head_rows_only ? &head_rows : nullptr);
    typename TrainableHead<P>::Saved saved;
    head_->forward(ctx, hidden, head_rows, saved, /*hidden_gathered=*/tape.subset != nullptr);
    LossGradient loss = head_->loss(saved, batch, targets);
    TrainingLoss out{loss.loss, saved.logits, loss.counted};
    if (backward) {
      if (loss_scale != 1.0)
        for (float& g : loss.dlogits) g = static_cast<float>(g * loss_scale);
      auto dhidden = head_->backward(ctx, saved, loss.dlogits);
      saved = {};
      backbone_->backward(ctx, tape, std::move(dhidden), options_.activation_checkpointing);
      // The rows of the word embeddings' gradient this backward added to: the batch's ids, or every row where the
      // masked-LM decoder (tied to the table) wrote its gradient.
      if (options_.head == HeadKind::kMaskedLM) {
        parameters_->note_all_rows(backbone_->word_embeddings());
      } else {
        parameters_->note_rows(backbone_->word_embeddings(), batch.input_ids);
      }
    }
    p.fence();
    return out;
  }

  ModelConfig config_;
  TrainingModelOptions options_;
  std::unique_ptr<ParameterSet<P>> parameters_;
  std::unique_ptr<TrainableDeberta<V, P>> backbone_;
  std::unique_ptr<TrainableHead<P>> head_;
};

}  // namespace flashdeberta

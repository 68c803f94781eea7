// The model instantiations every backend shares, generic over its policy: a backend folder's runtime source
// (backends/<name>/runtime/) starts its policy and returns a PolicyBackend<P>, whose load() crosses from the
// run-time variant and head to DebertaModel<V, P> or DebertaWith<V, P, Head> and whose load_gliner() to
// GLiNER<P>. No backend type is named here; a backend whose work runs on a device passes a Device type with
// what only it can do (CudaDevice in backends/cuda/runtime/).
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <utility>
#include <vector>

#include "flashdeberta/gliner/gliner.hpp"
#include "flashdeberta/heads/deberta_with.hpp"
#include "flashdeberta/model/deberta_model.hpp"
#include "flashdeberta/runtime/backend_entry.hpp"
#include "flashdeberta/runtime/gliner.hpp"
#include "flashdeberta/runtime/loaded_model.hpp"
#include "flashdeberta/runtime/training_session.hpp"
#include "flashdeberta/variant/dispatch.hpp"

namespace flashdeberta::runtime {

// The Device of a host backend: its outputs are in host memory already and the host clock times it.
//
// A device backend's Device has kOnDevice true and
//   Timer(P const& policy)  made once the weights are loaded;
//     DeviceRun run(Model const& model, Batch const& batch) const  one forward timed on the device
//   static DeviceTensor padded(P const&, DeviceHeadTensor<P>&&, Batch const&, std::vector<std::int64_t> const& shape)
//     an output in HF's layout for an input of `shape`, left on the device (LoadedModel::forward_head_on_device)
struct HostDevice {
  static constexpr bool kOnDevice = false;
  struct Timer {
    template <class P>
    explicit Timer(P const&) {}
  };
};

// TrainingModel<V, P> and its optimizer behind the runtime's TrainingSession.
template <Variant V, TrainingPolicy P>
class TypedTrainingSession final : public TrainingSession {
 public:
  TypedTrainingSession(P const& policy, std::filesystem::path const& directory, ModelConfig const& config,
                       TrainingSessionOptions const& options, AttentionImpl attention)
      : model_(
            policy, config, &checkpoint(directory),
            {.head = options.head, .problem = options.problem, .attention = attention, .init_seed = options.init_seed}),
        optimizer_(options.optimizer),
        loss_scale_(loss_scale_for(policy.compute_dtype())) {
    checkpoint_.reset();  // the parameters are copies: the file need not stay open
  }

  ModelConfig const& config() const override { return model_.config(); }
  TrainingLoss forward_backward(Batch const& batch, TrainingTargets const& targets, DropoutRates dropout,
                                std::uint64_t seed) override {
    return model_.forward_backward(batch, targets, dropout, seed, loss_scale_ ? loss_scale_->scale() : 1.0);
  }
  TrainingLoss evaluate(Batch const& batch, TrainingTargets const& targets) override {
    return model_.evaluate(batch, targets);
  }
  void zero_grads() override { model_.parameters().zero_grads(); }
  OptimizerStepReport step(double gradient_scale) override {
    OptimizerStepReport const report =
        optimizer_.step(model_.parameters(), gradient_scale, loss_scale_ ? &*loss_scale_ : nullptr);
    model_.parameters().zero_grads();
    return report;
  }
  double next_learning_rate() const override { return optimizer_.next_learning_rate(); }
  std::vector<std::pair<std::string, std::vector<float>>> weights() const override {
    return model_.parameters().download_values();
  }
  std::map<std::string, std::vector<std::int64_t>> shapes() const override {
    ParameterSet<P> const& s = model_.parameters();
    std::map<std::string, std::vector<std::int64_t>> out;
    for (std::size_t i = 0; i < s.size(); ++i) out[s.info(i).name] = s.info(i).shape;
    return out;
  }
  TrainingState state() const override {
    using Slot = typename ParameterSet<P>::Slot;
    ParameterSet<P> const& s = model_.parameters();
    return {s.download(Slot::kValue),
            s.download(Slot::kExpAvg),
            s.download(Slot::kExpAvgSq),
            optimizer_.completed_steps(),
            loss_scale_ ? loss_scale_->scale() : 0.0,
            loss_scale_ ? loss_scale_->good_steps() : 0};
  }
  void restore(TrainingState const& state) override {
    using Slot = typename ParameterSet<P>::Slot;
    ParameterSet<P>& s = model_.parameters();
    auto const put = [&](std::vector<std::pair<std::string, std::vector<float>>> const& tensors, Slot slot) {
      FLASHDEBERTA_REQUIRE(tensors.size() == s.size(), "training state of " << tensors.size()
                                                                            << " tensors for a model of " << s.size()
                                                                            << " parameters");
      for (std::size_t i = 0; i < tensors.size(); ++i) {
        FLASHDEBERTA_REQUIRE(tensors[i].first == s.info(i).name, "training state: tensor "
                                                                     << i << " is '" << tensors[i].first
                                                                     << "', the model's is '" << s.info(i).name << "'");
        s.set(i, tensors[i].second, slot);
      }
    };
    put(state.values, Slot::kValue);
    put(state.exp_avg, Slot::kExpAvg);
    put(state.exp_avg_sq, Slot::kExpAvgSq);
    optimizer_.set_completed_steps(state.completed_steps);
    if (loss_scale_ && state.loss_scale > 0.0) loss_scale_->restore(state.loss_scale, state.loss_scale_good_steps);
  }

 private:
  Checkpoint const& checkpoint(std::filesystem::path const& directory) {
    checkpoint_ = std::make_unique<Checkpoint>(Checkpoint::open(directory));
    return *checkpoint_;
  }

  std::unique_ptr<Checkpoint> checkpoint_;  // declared first: open while model_ reads it
  TrainingModel<V, P> model_;
  AdamW<P> optimizer_;
  std::optional<DynamicLossScale> loss_scale_;  // fp16 products only
};

template <Variant V, ExecutionPolicy P, class Device>
class TypedModel final : public LoadedModel {
 public:
  TypedModel(P const& policy, std::filesystem::path const& directory, ModelOptions options)
      : model_(DebertaModel<V, P>::load(policy, directory, options)), timer_(policy) {}

  std::vector<float> forward_to_host(Batch const& batch) const override { return model_.forward_to_host(batch); }
  void forward(Batch const& batch) const override { (void)model_.forward(batch); }
  HeadOutput forward_head(Batch const& batch, std::optional<std::int64_t>) const override {
    HeadOutput out;
    out.tensors.push_back(last_hidden_state_tensor(model_.forward_to_host(batch), model_.config().hidden_size));
    return out;
  }
  HeadOutput forward_head_with_hidden_states(Batch const& batch, std::optional<std::int64_t>) const override {
    std::vector<HiddenStates<P>> const states = model_.forward_hidden_states(batch);
    HeadOutput out;
    append_hidden_states(model_.policy(), states, out);
    HostHeadTensor last = out.tensors.back();
    last.name = "last_hidden_state";
    out.tensors.insert(out.tensors.begin(), std::move(last));
    return out;
  }
  std::optional<DeviceRun> device_forward(Batch const& batch) const override {
    if constexpr (Device::kOnDevice) {
      return timer_.run(model_, batch);
    } else {
      return LoadedModel::device_forward(batch);
    }
  }
  std::optional<std::vector<DeviceTensor>> forward_head_on_device(
      Batch const& batch, std::vector<std::int64_t> const& input_shape) const override {
    if constexpr (Device::kOnDevice) {
      HiddenStates<P> hidden = model_.forward(batch);
      DeviceHeadTensor<P> t{"last_hidden_state",     HeadRows::kTokens, {}, hidden.tokens, hidden.hidden_size, false,
                            std::move(hidden.values)};
      t.tokens.resize(static_cast<std::size_t>(t.row_count));
      std::iota(t.tokens.begin(), t.tokens.end(), std::int64_t{0});
      return std::vector<DeviceTensor>{Device::padded(model_.policy(), std::move(t), batch, input_shape)};
    } else {
      return LoadedModel::forward_head_on_device(batch, input_shape);
    }
  }

 private:
  DebertaModel<V, P> model_;
  typename Device::Timer timer_;  // after model_: a device timer counts the memory the weights hold
};

template <Variant V, ExecutionPolicy P, template <class> class Head, class Device>
class TypedHeadModel final : public LoadedModel {
 public:
  TypedHeadModel(P const& policy, std::filesystem::path const& directory, ModelOptions options)
      : model_(DebertaWith<V, P, Head>::load(policy, directory, options)) {}

  std::vector<float> forward_to_host(Batch const& batch) const override {
    return model_.backbone().forward_to_host(batch);
  }
  void forward(Batch const& batch) const override { (void)model_.forward(batch); }
  HeadOutput forward_head(Batch const& batch, std::optional<std::int64_t> mask_token_id) const override {
    return model_.forward_to_host(batch,
                                  mask_token_id ? HeadRequest::tokens_with_id(batch, *mask_token_id) : HeadRequest{});
  }
  HeadOutput forward_head_with_hidden_states(Batch const& batch,
                                             std::optional<std::int64_t> mask_token_id) const override {
    std::vector<HiddenStates<P>> states;
    DeviceHeadOutput<P> const head = model_.forward(
        batch, mask_token_id ? HeadRequest::tokens_with_id(batch, *mask_token_id) : HeadRequest{}, states);
    HeadOutput out = download_outputs(model_.backbone().policy(), head);
    append_hidden_states(model_.backbone().policy(), states, out);
    return out;
  }
  std::optional<std::vector<DeviceTensor>> forward_head_on_device(
      Batch const& batch, std::vector<std::int64_t> const& input_shape) const override {
    if constexpr (Device::kOnDevice) {
      std::vector<DeviceTensor> out;
      DeviceHeadOutput<P> outputs = model_.forward(batch);
      for (auto& t : outputs.tensors)
        out.push_back(Device::padded(model_.backbone().policy(), std::move(t), batch, input_shape));
      return out;
    } else {
      return LoadedModel::forward_head_on_device(batch, input_shape);
    }
  }

 private:
  DebertaWith<V, P, Head> model_;
};

template <ExecutionPolicy P>
class TypedGliner final : public LoadedGliner {
 public:
  TypedGliner(P const& policy, std::filesystem::path const& directory, ModelOptions options)
      : model_(GLiNER<P>::load(policy, directory, options)) {}

  GlinerConfig const& config() const override { return model_.config(); }
  tokenizer::Tokenizer const& tokenizer() const override { return model_.tokenizer(); }
  std::vector<GlinerLogits> logits(std::vector<GlinerInput> const& inputs) const override {
    return model_.logits(inputs);
  }

 private:
  GLiNER<P> model_;
};

// A started backend over policy P: the one place that instantiates the model templates for P.
template <ExecutionPolicy P, class Device = HostDevice>
class PolicyBackend final : public StartedBackend {
 public:
  // `runtime`: what the policy needs running while it exists (Kokkos' initialization guard), released after it.
  PolicyBackend(P policy, int threads, AttentionImpl attention, std::shared_ptr<void> runtime = nullptr)
      : runtime_(std::move(runtime)), policy_(std::move(policy)), threads_(threads), options_{.attention = attention} {}

  // The policy, not a table, says what it computes in, so a backend that gains a dtype needs no front-end change.
  DType computes() const override {
    if constexpr (requires { policy_.linear_dtype(); }) {
      return policy_.linear_dtype();
    } else {
      return policy_.compute_dtype();
    }
  }
  int threads() const override { return threads_; }

  std::unique_ptr<LoadedModel> load(std::filesystem::path const& directory, ModelConfig const& config,
                                    HeadKind head) const override {
    return dispatch_variant(config, [&]<Variant V>() -> std::unique_ptr<LoadedModel> {
      if (head == HeadKind::kBase) return std::make_unique<TypedModel<V, P, Device>>(policy_, directory, options_);
      return dispatch_head(head, [&]<template <class> class Head>() -> std::unique_ptr<LoadedModel> {
        return std::make_unique<TypedHeadModel<V, P, Head, Device>>(policy_, directory, options_);
      });
    });
  }
  std::unique_ptr<LoadedGliner> load_gliner(std::filesystem::path const& directory) const override {
    return std::make_unique<TypedGliner<P>>(policy_, directory, options_);
  }
  std::unique_ptr<TrainingSession> train(std::filesystem::path const& directory, ModelConfig const& config,
                                         TrainingSessionOptions const& options) const override {
    if constexpr (TrainingPolicy<P>) {
      return dispatch_variant(config, [&]<Variant V>() -> std::unique_ptr<TrainingSession> {
        return std::make_unique<TypedTrainingSession<V, P>>(policy_, directory, config, options, options_.attention);
      });
    } else {
      FLASHDEBERTA_FAIL("the " << P::name() << " backend does not train; train on the host (--backend eigen)");
    }
  }

 private:
  std::shared_ptr<void> runtime_;  // declared before the policy, so destroyed after it
  P policy_;
  int threads_ = 1;
  ModelOptions options_;
};

}  // namespace flashdeberta::runtime

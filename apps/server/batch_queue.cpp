#include "server/batch_queue.hpp"

#include <algorithm>
#include <exception>
#include <future>
#include <string>

#include "server/api_error.hpp"

namespace flashdeberta::cli::server {

std::optional<RequestGate::Permit> RequestGate::try_enter() {
  std::lock_guard const lock(mutex_);
  if (in_flight_ >= limit_) return std::nullopt;
  ++in_flight_;
  return Permit(this);
}

std::size_t RequestGate::in_flight() const {
  std::lock_guard const lock(mutex_);
  return in_flight_;
}

void RequestGate::leave() {
  std::lock_guard const lock(mutex_);
  --in_flight_;
}

// One request's sequences on their way through the worker. `next` is guarded by mutex_; the rest is the
// worker's until `finished` is set, after which the waiting HTTP thread reads `output`.
struct BatchQueue::Job {
  std::vector<tokenizer::Encoding>* encodings = nullptr;
  std::size_t next = 0;          // the first sequence no batch has taken yet
  std::size_t done = 0;          // sequences whose rows are in `output`
  std::int64_t tokens_done = 0;  // their tokens: where the next rows' token indices start
  bool settled = false;          // `finished` holds a value or an error
  HeadOutput output;
  Clock::time_point enqueued;
  std::promise<void> finished;
};

BatchQueue::BatchQueue(runtime::Pipeline const& pipeline, std::int64_t max_batch_tokens, Metrics& metrics)
    : pipeline_(pipeline), max_batch_tokens_(max_batch_tokens), metrics_(metrics), worker_([this] { work(); }) {}

BatchQueue::~BatchQueue() {
  stop();
  if (worker_.joinable()) worker_.join();
}

HeadOutput BatchQueue::run(std::vector<tokenizer::Encoding>& encodings) const {
  if (encodings.empty()) return {};
  auto job = std::make_shared<Job>();
  job->encodings = &encodings;
  job->enqueued = Clock::now();
  std::future<void> finished = job->finished.get_future();
  {
    std::lock_guard const lock(mutex_);
    if (stopping_) throw ApiError(kUnavailable, ErrorType::kUnhealthy, "the server is shutting down");
    queue_.push_back(job);
    queued_sequences_ += encodings.size();
  }
  wake_.notify_one();
  finished.get();  // rethrows the worker's ApiError
  return std::move(job->output);
}

void BatchQueue::stop() {
  {
    std::lock_guard const lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
}

std::size_t BatchQueue::queued_sequences() const {
  std::lock_guard const lock(mutex_);
  return queued_sequences_;
}

void BatchQueue::work() {
  for (;;) {
    std::vector<Slice> const slices = take_batch();
    if (slices.empty()) return;
    try {
      run_batch(slices);
    } catch (std::exception const& e) {
      // A forward that fails fails every request in it; the requests still queued behind them go on.
      std::lock_guard const lock(mutex_);
      for (Slice const& slice : slices) {
        Job& job = *slice.job;
        if (job.settled) continue;
        job.settled = true;
        if (auto const at = std::find(queue_.begin(), queue_.end(), slice.job); at != queue_.end()) {
          queued_sequences_ -= job.encodings->size() - job.next;
          queue_.erase(at);
        }
        job.finished.set_exception(std::make_exception_ptr(
            ApiError(kFailedDependency, ErrorType::kBackend, std::string("the forward pass failed: ") + e.what())));
      }
    }
  }
}

std::vector<BatchQueue::Slice> BatchQueue::take_batch() {
  std::unique_lock lock(mutex_);
  wake_.wait(lock, [&] { return !queue_.empty() || stopping_; });
  std::vector<Slice> slices;
  std::int64_t tokens = 0;
  while (!queue_.empty()) {
    std::shared_ptr<Job> const job = queue_.front();
    std::vector<tokenizer::Encoding> const& encodings = *job->encodings;
    std::size_t end = job->next;
    for (; end < encodings.size(); ++end) {
      auto const size = static_cast<std::int64_t>(encodings[end].size());
      if (tokens > 0 && tokens + size > max_batch_tokens_) break;
      tokens += size;
    }
    if (end == job->next) break;  // the batch is full
    slices.push_back({job, job->next, end});
    queued_sequences_ -= end - job->next;
    job->next = end;
    if (end < encodings.size()) break;  // the rest of this request goes into the next batch
    queue_.pop_front();
  }
  return slices;
}

void BatchQueue::run_batch(std::vector<Slice> const& slices) {
  // The batch's sequences, moved in from their requests (and back below): per slice, where its sequences
  // and tokens start in the packed batch.
  std::vector<tokenizer::Encoding> batch;
  std::vector<std::int64_t> token_starts;
  std::int64_t tokens = 0;
  for (Slice const& slice : slices) {
    token_starts.push_back(tokens);
    for (std::size_t s = slice.begin; s < slice.end; ++s) {
      tokens += static_cast<std::int64_t>((*slice.job->encodings)[s].size());
      batch.push_back(std::move((*slice.job->encodings)[s]));
    }
  }
  token_starts.push_back(tokens);
  auto const start = Clock::now();
  for (Slice const& slice : slices) {
    if (slice.begin == 0)
      metrics_.record_queue_time(std::chrono::duration<double>(start - slice.job->enqueued).count());
  }
  auto const give_back = [&] {
    std::size_t b = 0;
    for (Slice const& slice : slices)
      for (std::size_t s = slice.begin; s < slice.end; ++s) (*slice.job->encodings)[s] = std::move(batch[b++]);
  };
  HeadOutput out;
  try {
    out = pipeline_.model().forward_head(runtime::pack_sequences(batch, pipeline_.config()), pipeline_.mask_token_id());
  } catch (...) {
    give_back();
    throw;
  }
  double const seconds = std::chrono::duration<double>(Clock::now() - start).count();
  give_back();
  metrics_.record_batch(slices.size(), batch.size(), tokens, seconds);

  // Each slice's rows go to its request, its tokens renumbered from where that request's previous rows ended.
  std::size_t first = 0;  // the slice's first sequence in the batch
  for (std::size_t k = 0; k < slices.size(); ++k) {
    std::size_t const last = first + (slices[k].end - slices[k].begin);
    runtime::append_head_rows(slices[k].job->output, out, first, last, token_starts[k], token_starts[k + 1],
                              slices[k].job->tokens_done);
    first = last;
  }
  for (std::size_t k = 0; k < slices.size(); ++k) {
    Job& job = *slices[k].job;
    job.done += slices[k].end - slices[k].begin;
    job.tokens_done += token_starts[k + 1] - token_starts[k];
    if (job.done == job.encodings->size()) {
      job.settled = true;
      job.finished.set_value();
    }
  }
}

}  // namespace flashdeberta::cli::server

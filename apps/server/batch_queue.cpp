#include "server/batch_queue.hpp"

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <exception>
#include <string>

#include "server/api_error.hpp"
#include "server/thread_name.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace flashdeberta::cli::server {

namespace {

// Free heap memory worth giving back: a large request (a long text tokenized, a large answer) leaves
// hundreds of MB in glibc's arenas, which keep it for later allocations. Below this, a trim gives back too
// little to be worth its madvise calls (it runs off the requests' threads, on an idle server).
constexpr std::size_t kTrimFreeBytes = std::size_t{4} << 20;
// How long after the gate empties the trim comes: the HTTP layer sends and frees the answer after the
// request's permit is gone.
constexpr auto kTrimDelay = std::chrono::milliseconds(100);

// Gives the free memory of every arena back when they hold more than kTrimFreeBytes (mallinfo2 walks the
// free lists: microseconds; malloc_trim madvises the free pages away).
void release_free_memory() {
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
  if (::mallinfo2().fordblks > kTrimFreeBytes) ::malloc_trim(0);
#endif
}

// Fixed thresholds instead of glibc's dynamic ones, which rise with every large block freed (up to 32 MB for
// mmap, 64 MB for trimming a thread arena's top) so that a few large requests made every later block of up
// to 32 MB come from arenas that keep it: blocks from 1 MB on are mapped and unmapped on their own, and an
// arena's free top above 4 MB is given back as it is freed.
void set_malloc_thresholds() {
#if defined(__GLIBC__)
  ::mallopt(M_MMAP_THRESHOLD, 1 << 20);
  ::mallopt(M_TRIM_THRESHOLD, 4 << 20);
#endif
}

}  // namespace

RequestGate::RequestGate(std::size_t limit) : limit_(limit), trimmer_([this] { return_memory(); }) {
  set_malloc_thresholds();
}

RequestGate::~RequestGate() {
  {
    std::lock_guard const lock(mutex_);
    stopping_ = true;
  }
  idle_.notify_all();
  trimmer_.join();
}

// Off the requests' threads, so that no answer waits for it; skipped when requests came in meanwhile (the
// next time the gate empties trims).
void RequestGate::return_memory() {
  name_this_thread("fd-trim");
  std::unique_lock lock(mutex_);
  std::uint64_t seen = 0;
  while (true) {
    trimmer_waiting_ = true;
    idle_.wait(lock, [&] { return stopping_ || idle_times_ != seen; });
    trimmer_waiting_ = false;
    if (idle_.wait_for(lock, kTrimDelay, [&] { return stopping_; })) return;
    seen = idle_times_;
    if (in_flight_ != 0) continue;
    lock.unlock();
    release_free_memory();
    lock.lock();
  }
}

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
  bool wake = false;
  {
    std::lock_guard const lock(mutex_);
    if (--in_flight_ == 0) {
      ++idle_times_;
      wake = trimmer_waiting_;  // a trimmer in its delay sees the count when the delay ends
    }
  }
  if (wake) idle_.notify_all();
}

// One request's sequences on their way through the batches. `next` is guarded by mutex_; `output`, `done`,
// `tokens_done` and `error` belong to the thread running the batches until `settled` is set (under mutex_),
// after which the request's thread reads them without the mutex.
struct BatchQueue::Job {
  std::vector<tokenizer::Encoding>* encodings = nullptr;
  std::size_t next = 0;          // the first sequence no batch has taken yet
  std::size_t done = 0;          // sequences whose rows are in `output`
  std::int64_t tokens_done = 0;  // their tokens: where the next rows' token indices start
  std::atomic<int> settled = 0;  // 1: `output` or `error` is final (an int: std::atomic<int>::wait is a futex)
  std::exception_ptr error;
  HeadOutput output;
  Clock::time_point enqueued;
};

BatchQueue::BatchQueue(runtime::Pipeline const& pipeline, std::int64_t max_batch_tokens, Metrics& metrics,
                       ForwardThread forward_thread)
    : pipeline_(pipeline),
      max_batch_tokens_(max_batch_tokens),
      metrics_(metrics),
      forward_thread_(forward_thread),
      worker_([this] { work(); }) {}

BatchQueue::~BatchQueue() {
  stop();
  if (worker_.joinable()) worker_.join();
  std::unique_lock lock(mutex_);
  left_.wait(lock, [&] { return callers_ == 0; });
}

HeadOutput BatchQueue::run(std::vector<tokenizer::Encoding>& encodings) const {
  if (encodings.empty()) return {};
  auto const job = std::make_shared<Job>();
  job->encodings = &encodings;
  job->enqueued = Clock::now();
  {
    std::unique_lock lock(mutex_);
    if (stopping_) throw ApiError(kUnavailable, ErrorType::kUnhealthy, "the server is shutting down");
    ++callers_;
    queue_.push_back(job);
    queued_sequences_ += encodings.size();
    if (forward_thread_ == ForwardThread::kCaller && !forward_running_ && queue_.size() == 1) {
      // Nothing runs and nothing else waits: this thread runs its request's batches (with whatever joins the
      // queue meanwhile), then leaves what is queued to the worker.
      while (job->settled.load(std::memory_order_relaxed) == 0) run_next_batch(lock);
      if (!queue_.empty()) wake_.notify_one();
    } else {
      wake_.notify_one();
    }
  }
  wait_settled(*job);
  leave();
  if (job->error) std::rethrow_exception(job->error);  // the ApiError of a failed forward
  return std::move(job->output);
}

void BatchQueue::wait_settled(Job const& job) {
  while (job.settled.load(std::memory_order_acquire) == 0) job.settled.wait(0, std::memory_order_acquire);
}

// Without mutex_ while other threads remain inside; the last one leaves under it, since the destructor checks
// callers_ under mutex_ and may free the queue as soon as it reads 0.
void BatchQueue::leave() const {
  std::size_t inside = callers_.load(std::memory_order_relaxed);
  while (inside > 1)
    if (callers_.compare_exchange_weak(inside, inside - 1, std::memory_order_acq_rel)) return;
  std::lock_guard const lock(mutex_);
  if (callers_.fetch_sub(1, std::memory_order_acq_rel) == 1 && stopping_) left_.notify_all();
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
  name_this_thread("fd-batch");
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return (!queue_.empty() && !forward_running_) || (stopping_ && queue_.empty()); });
    if (queue_.empty()) return;  // stopping, every request answered
    run_next_batch(lock);
  }
}

void BatchQueue::run_next_batch(std::unique_lock<std::mutex>& lock) const {
  forward_running_ = true;
  std::vector<Slice> const slices = take_batch(lock);
  lock.unlock();
  run_and_settle(slices);
  lock.lock();
  forward_running_ = false;
}

std::vector<BatchQueue::Slice> BatchQueue::take_batch(std::unique_lock<std::mutex>&) const {
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

void BatchQueue::settle(Job& job, std::exception_ptr error) {
  job.error = std::move(error);
  job.settled.store(1, std::memory_order_release);
}

// The slices hold their jobs: a job whose thread has already seen `settled` and left is still alive here.
void BatchQueue::wake_settled(std::vector<Slice> const& slices) {
  for (Slice const& slice : slices)
    if (slice.job->settled.load(std::memory_order_relaxed) != 0) slice.job->settled.notify_one();
}

void BatchQueue::run_and_settle(std::vector<Slice> const& slices) const {
  try {
    run_batch(slices);
  } catch (std::exception const& e) {
    // A forward that fails fails every request in it; the requests queued behind them go on.
    auto const error = std::make_exception_ptr(
        ApiError(kFailedDependency, ErrorType::kBackend, std::string("the forward pass failed: ") + e.what()));
    {
      std::lock_guard const lock(mutex_);
      for (Slice const& slice : slices) {
        Job& job = *slice.job;
        if (job.settled.load(std::memory_order_relaxed) != 0) continue;
        if (auto const at = std::find(queue_.begin(), queue_.end(), slice.job); at != queue_.end()) {
          queued_sequences_ -= job.encodings->size() - job.next;
          queue_.erase(at);
        }
        settle(job, error);
      }
    }
    wake_settled(slices);
    return;
  }
  {
    std::lock_guard const lock(mutex_);
    for (Slice const& slice : slices) {
      Job& job = *slice.job;
      if (job.done == job.encodings->size() && job.settled.load(std::memory_order_relaxed) == 0) settle(job, nullptr);
    }
  }
  wake_settled(slices);
}

void BatchQueue::run_batch(std::vector<Slice> const& slices) const {
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
  }
}

}  // namespace flashdeberta::cli::server

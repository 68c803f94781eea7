// Dynamic batching: the sequences of concurrent requests packed into one forward pass of the model.
//
// HTTP threads tokenize their request and call BatchQueue::run, which queues the encodings and waits. The
// batches are taken from the front of the queue, in arrival order, until the next sequence would pass
// --max-batch-tokens (a request larger than that is spread over several forwards); each runs as one packed
// batch and hands each request the head's rows of its own sequences. Every route of a model shares the
// forward: a checkpoint has one head, and /predict, /rerank and /zero-shot all read the same
// sequence-classification logits, so they batch together.
//
// Who runs the forwards (ForwardThread): one worker thread per model, which takes a batch whenever requests wait
// and no forward runs; with kCaller (the GPU's default), a request that finds no forward running and nothing
// queued runs its batch on its own thread instead, so that a lone client's request crosses no thread between
// its tokens and its answer, while under load the worker batches as before. The host backends keep every
// forward on the worker (kDedicated): a host forward keeps per-thread state (an OpenMP team per calling
// thread, oneDNN's scratch buffers) that one thread keeps warm and bounded.
//
// RequestGate bounds what is admitted at all (--max-concurrent-requests): a request that finds it full
// is answered 429 at once instead of waiting behind the others.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "flashdeberta/heads/head_output.hpp"
#include "flashdeberta/runtime/pipeline.hpp"
#include "flashdeberta/tokenizer/encoding.hpp"
#include "server/metrics.hpp"

namespace flashdeberta::cli::server {

// At most `limit` requests in flight; a Permit holds one place until it is destroyed. Shortly after the last
// request in flight leaves (its answer sent and freed by then), a thread of the gate gives the heap memory
// the requests freed back to the system (release_free_memory in batch_queue.cpp): glibc keeps it otherwise,
// and six large requests left a 26 MB server at 679 MB.
class RequestGate {
 public:
  explicit RequestGate(std::size_t limit);
  ~RequestGate();
  RequestGate(RequestGate const&) = delete;
  RequestGate& operator=(RequestGate const&) = delete;

  class Permit {
   public:
    explicit Permit(RequestGate* gate) : gate_(gate) {}
    Permit(Permit&& other) noexcept : gate_(std::exchange(other.gate_, nullptr)) {}
    Permit(Permit const&) = delete;
    Permit& operator=(Permit const&) = delete;
    Permit& operator=(Permit&&) = delete;
    ~Permit() {
      if (gate_ != nullptr) gate_->leave();
    }

   private:
    RequestGate* gate_;
  };

  std::optional<Permit> try_enter();  // nullopt when `limit` requests are in flight
  std::size_t in_flight() const;
  std::size_t limit() const { return limit_; }

 private:
  void leave();
  void return_memory();  // the trimmer's loop

  std::size_t const limit_;
  mutable std::mutex mutex_;
  std::condition_variable idle_;
  std::size_t in_flight_ = 0;
  std::uint64_t idle_times_ = 0;  // how often the gate emptied
  bool trimmer_waiting_ = false;  // for the gate to empty: only then does leave() wake it
  bool stopping_ = false;
  std::thread trimmer_;  // started last
};

enum class ForwardThread { kDedicated, kCaller };

// The server's runtime::HeadRunner: what the routes' task runs go through.
class BatchQueue final : public runtime::HeadRunner {
 public:
  // Starts the worker thread. A masked LM's forwards compute the logits of its mask tokens only (fill-mask).
  BatchQueue(runtime::Pipeline const& pipeline, std::int64_t max_batch_tokens, Metrics& metrics,
             ForwardThread forward_thread);
  ~BatchQueue();  // stop(), then joins the worker and waits for the requests' threads to leave
  BatchQueue(BatchQueue const&) = delete;
  BatchQueue& operator=(BatchQueue const&) = delete;

  // The head's outputs for `encodings`, computed in batches with whatever else is queued; rows and token
  // indices are numbered as if the encodings had run alone (what runtime::rows_by_sequence expects).
  // Blocks until done. Each encoding must hold at most max_batch_tokens tokens. The encodings are moved
  // into the batch and back, and are as given on return. Throws ApiError: 503 once stop() was called,
  // 424 when the forward failed.
  HeadOutput run(std::vector<tokenizer::Encoding>& encodings) const override;

  // Refuses new work; the queued requests are still answered.
  void stop();
  std::size_t queued_sequences() const;
  std::int64_t max_batch_tokens() const { return max_batch_tokens_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Job;
  // The sequences [begin, end) of one job that a batch holds.
  struct Slice {
    std::shared_ptr<Job> job;
    std::size_t begin = 0;
    std::size_t end = 0;
  };

  void work();  // the worker's loop
  // Takes a batch from the front of the queue and runs it; mutex_ held on entry and return, not while it runs.
  void run_next_batch(std::unique_lock<std::mutex>& lock) const;
  std::vector<Slice> take_batch(std::unique_lock<std::mutex>& lock) const;  // mutex_ held
  // Runs a batch (mutex_ not held), then settles the requests it completes, or fails all of its requests.
  void run_and_settle(std::vector<Slice> const& slices) const;
  void run_batch(std::vector<Slice> const& slices) const;
  // Marks the job final (mutex_ held); its thread is woken by wake_settled() once mutex_ is released, so that
  // the requests of a batch wake in parallel instead of queueing on mutex_ behind the settling thread.
  static void settle(Job& job, std::exception_ptr error);
  static void wake_settled(std::vector<Slice> const& slices);
  static void wait_settled(Job const& job);
  void leave() const;  // a request's thread leaves run()

  runtime::Pipeline const& pipeline_;
  std::int64_t max_batch_tokens_;
  Metrics& metrics_;
  ForwardThread forward_thread_;
  mutable std::mutex mutex_;
  mutable std::condition_variable wake_;  // the worker's: work queued, a forward ended, or stop
  mutable std::condition_variable left_;  // the destructor's: the last request's thread left run()
  mutable std::deque<std::shared_ptr<Job>> queue_;
  mutable std::size_t queued_sequences_ = 0;
  mutable std::atomic<std::size_t> callers_ = 0;  // threads inside run()
  mutable bool forward_running_ = false;          // by the worker or a request's thread
  mutable bool stopping_ = false;
  std::thread worker_;  // last: started once everything above exists
};

}  // namespace flashdeberta::cli::server

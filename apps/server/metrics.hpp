// What GET /metrics reports, in Prometheus' text format (version 0.0.4): requests answered per route and
// status with their durations, and for the batching worker the batch sizes (requests, sequences, tokens),
// the time requests waited in the queue, the forward time, the tokens processed and the recent tokens/s.
// Every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace flashdeberta::cli::server {

// A Prometheus histogram: cumulative counts of observations at or below each upper bound, their sum and count.
class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double value);
  // Appends the _bucket, _sum and _count lines of `name`; `labels` ("route=\"/predict\"") go on each.
  void render(std::string& out, std::string_view name, std::string_view labels) const;

 private:
  std::vector<double> bounds_;
  std::vector<std::uint64_t> counts_;  // per bound, not cumulative; the last entry is +Inf
  double sum_ = 0.0;
  std::uint64_t count_ = 0;
};

// The state of the queue when /metrics is asked, read from the batching queue.
struct QueueGauges {
  std::size_t in_flight = 0;         // requests admitted and not yet answered
  std::size_t max_in_flight = 0;     // --max-concurrent-requests
  std::size_t queued_sequences = 0;  // sequences waiting for a forward
};

class Metrics {
 public:
  Metrics();

  // One answered request. `route` is one of the server's paths ("other" for anything else, so a client
  // cannot grow the label set).
  void record_request(std::string_view route, int status, double seconds);
  // A request rejected before it was admitted (429) is counted by record_request; this is the time a
  // request's first sequence waited before a forward took it.
  void record_queue_time(double seconds);
  // One forward of the batching worker.
  void record_batch(std::size_t requests, std::size_t sequences, std::int64_t tokens, double seconds);

  std::string render(QueueGauges const& gauges) const;

 private:
  using Clock = std::chrono::steady_clock;
  // The window of tokens_per_second: long enough to smooth single batches, short enough to show a change.
  static constexpr std::chrono::seconds kRateWindow{10};
  void drop_old_tokens(Clock::time_point now) const;  // with mutex_ held

  mutable std::mutex mutex_;
  Clock::time_point start_;
  std::map<std::pair<std::string, int>, std::uint64_t> requests_;
  std::map<std::string, Histogram> request_seconds_;
  Histogram queue_seconds_;
  Histogram forward_seconds_;
  Histogram batch_requests_;
  Histogram batch_sequences_;
  Histogram batch_tokens_;
  std::uint64_t batches_ = 0;
  std::uint64_t tokens_ = 0;
  double forward_seconds_total_ = 0.0;
  mutable std::deque<std::pair<Clock::time_point, std::int64_t>> recent_tokens_;  // forwards of the last window
};

}  // namespace flashdeberta::cli::server

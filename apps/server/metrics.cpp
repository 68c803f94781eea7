#include "server/metrics.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>

namespace flashdeberta::cli::server {

namespace {

// Seconds from 100 us to 60 s, about x2.5 apart: a tiny model's forward takes well under a millisecond
// on the host, a long batch on a large one seconds.
std::vector<double> duration_bounds() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
}

std::vector<double> powers_of_two(int last) {
  std::vector<double> bounds;
  for (int e = 0; e <= last; ++e) bounds.push_back(std::ldexp(1.0, e));
  return bounds;
}

std::string number(double value) {
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  char buffer[32];
  auto const [end, ec] = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return ec == std::errc() ? std::string(buffer, end) : std::string("NaN");
}

void header(std::string& out, std::string_view name, std::string_view type, std::string_view help) {
  out.append("# HELP ").append(name).append(" ").append(help).append("\n");
  out.append("# TYPE ").append(name).append(" ").append(type).append("\n");
}

void sample(std::string& out, std::string_view name, std::string_view labels, double value) {
  out.append(name);
  if (!labels.empty()) out.append("{").append(labels).append("}");
  out.append(" ").append(number(value)).append("\n");
}

}  // namespace

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double value) {
  auto const at = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  ++counts_[static_cast<std::size_t>(at)];
  sum_ += value;
  ++count_;
}

void Histogram::render(std::string& out, std::string_view name, std::string_view labels) const {
  std::string const bucket = std::string(name) + "_bucket";
  std::string const prefix = labels.empty() ? std::string() : std::string(labels) + ",";
  std::uint64_t cumulative = 0;
  for (std::size_t i = 0; i <= bounds_.size(); ++i) {
    cumulative += counts_[i];
    double const bound = i < bounds_.size() ? bounds_[i] : INFINITY;
    sample(out, bucket, prefix + "le=\"" + number(bound) + "\"", static_cast<double>(cumulative));
  }
  sample(out, std::string(name) + "_sum", labels, sum_);
  sample(out, std::string(name) + "_count", labels, static_cast<double>(count_));
}

Metrics::Metrics()
    : start_(Clock::now()),
      queue_seconds_(duration_bounds()),
      forward_seconds_(duration_bounds()),
      batch_requests_(powers_of_two(10)),
      batch_sequences_(powers_of_two(12)),
      batch_tokens_(powers_of_two(20)) {}

void Metrics::record_request(std::string_view route, int status, double seconds) {
  std::lock_guard const lock(mutex_);
  ++requests_[{std::string(route), status}];
  auto it = request_seconds_.find(std::string(route));
  if (it == request_seconds_.end()) it = request_seconds_.emplace(std::string(route), duration_bounds()).first;
  it->second.observe(seconds);
}

void Metrics::record_queue_time(double seconds) {
  std::lock_guard const lock(mutex_);
  queue_seconds_.observe(seconds);
}

void Metrics::record_batch(std::size_t requests, std::size_t sequences, std::int64_t tokens, double seconds) {
  std::lock_guard const lock(mutex_);
  batch_requests_.observe(static_cast<double>(requests));
  batch_sequences_.observe(static_cast<double>(sequences));
  batch_tokens_.observe(static_cast<double>(tokens));
  forward_seconds_.observe(seconds);
  ++batches_;
  tokens_ += static_cast<std::uint64_t>(tokens);
  forward_seconds_total_ += seconds;
  auto const now = Clock::now();
  recent_tokens_.emplace_back(now, tokens);
  drop_old_tokens(now);
}

void Metrics::drop_old_tokens(Clock::time_point now) const {
  while (!recent_tokens_.empty() && now - recent_tokens_.front().first > kRateWindow) recent_tokens_.pop_front();
}

std::string Metrics::render(QueueGauges const& gauges) const {
  std::lock_guard const lock(mutex_);
  std::string out;
  header(out, "flashdeberta_requests_total", "counter", "HTTP requests answered, by route and status.");
  for (auto const& [key, count] : requests_)
    sample(out, "flashdeberta_requests_total",
           "route=\"" + key.first + "\",status=\"" + std::to_string(key.second) + "\"", static_cast<double>(count));
  header(out, "flashdeberta_request_duration_seconds", "histogram",
         "Time from a request's arrival to its answer (body parsed to response rendered), by route.");
  for (auto const& [route, histogram] : request_seconds_)
    histogram.render(out, "flashdeberta_request_duration_seconds", "route=\"" + route + "\"");
  header(out, "flashdeberta_queue_duration_seconds", "histogram",
         "Time a request's first sequence waited in the queue before a forward took it.");
  queue_seconds_.render(out, "flashdeberta_queue_duration_seconds", "");
  header(out, "flashdeberta_forward_duration_seconds", "histogram", "Time of each batched forward pass.");
  forward_seconds_.render(out, "flashdeberta_forward_duration_seconds", "");
  header(out, "flashdeberta_batch_requests", "histogram", "Requests whose sequences shared a forward pass.");
  batch_requests_.render(out, "flashdeberta_batch_requests", "");
  header(out, "flashdeberta_batch_size", "histogram", "Sequences per forward pass.");
  batch_sequences_.render(out, "flashdeberta_batch_size", "");
  header(out, "flashdeberta_batch_tokens", "histogram", "Tokens per forward pass (at most --max-batch-tokens).");
  batch_tokens_.render(out, "flashdeberta_batch_tokens", "");
  header(out, "flashdeberta_batches_total", "counter", "Forward passes run.");
  sample(out, "flashdeberta_batches_total", "", static_cast<double>(batches_));
  header(out, "flashdeberta_tokens_total", "counter", "Tokens through the model.");
  sample(out, "flashdeberta_tokens_total", "", static_cast<double>(tokens_));
  header(out, "flashdeberta_forward_seconds_total", "counter", "Time spent in forward passes.");
  sample(out, "flashdeberta_forward_seconds_total", "", forward_seconds_total_);
  // Tokens of the forwards that ended within the window, over the window (or the uptime, when shorter).
  auto const now = Clock::now();
  drop_old_tokens(now);
  std::int64_t recent = 0;
  for (auto const& entry : recent_tokens_) recent += entry.second;
  double const window =
      std::min(std::chrono::duration<double>(kRateWindow).count(), std::chrono::duration<double>(now - start_).count());
  header(out, "flashdeberta_tokens_per_second", "gauge", "Tokens through the model per second over the last 10 s.");
  sample(out, "flashdeberta_tokens_per_second", "", window > 0.0 ? static_cast<double>(recent) / window : 0.0);
  header(out, "flashdeberta_requests_in_flight", "gauge", "Requests admitted and not yet answered.");
  sample(out, "flashdeberta_requests_in_flight", "", static_cast<double>(gauges.in_flight));
  header(out, "flashdeberta_max_concurrent_requests", "gauge",
         "Requests admitted at once (--max-concurrent-requests); more are answered 429.");
  sample(out, "flashdeberta_max_concurrent_requests", "", static_cast<double>(gauges.max_in_flight));
  header(out, "flashdeberta_queue_sequences", "gauge", "Sequences waiting for a forward pass.");
  sample(out, "flashdeberta_queue_sequences", "", static_cast<double>(gauges.queued_sequences));
  return out;
}

}  // namespace flashdeberta::cli::server

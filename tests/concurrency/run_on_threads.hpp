// Runs one job per std::thread, all released at once so that they overlap, and hands the first
// exception back to the calling thread (doctest's assertions stay on the test's own thread).
#pragma once

#include <exception>
#include <latch>
#include <thread>
#include <vector>

namespace flashdeberta::testing {

inline constexpr int kThreads = 8;

template <class Job>
void run_on_threads(int count, Job const& job) {
  std::latch start(count);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(count));
  std::vector<std::thread> threads;
  threads.reserve(static_cast<std::size_t>(count));
  for (int t = 0; t < count; ++t) {
    threads.emplace_back([&, t] {
      start.arrive_and_wait();
      try {
        job(t);
      } catch (...) {
        errors[static_cast<std::size_t>(t)] = std::current_exception();
      }
    });
  }
  for (auto& thread : threads) thread.join();
  for (auto const& error : errors) {
    if (error) std::rethrow_exception(error);
  }
}

}  // namespace flashdeberta::testing

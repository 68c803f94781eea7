// The threads that run the routes' handlers (parsing, tokenization, the wait for the model), apart from the
// I/O threads, which never block. Threads are started as work comes, up to a bound, and end after a while
// without work, so an idle server holds few threads whatever it held under load.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <vector>

namespace flashdeberta::cli::server::http {

class WorkerPool {
 public:
  explicit WorkerPool(std::size_t max_threads);
  ~WorkerPool();  // stop()
  WorkerPool(WorkerPool const&) = delete;
  WorkerPool& operator=(WorkerPool const&) = delete;

  // Runs `task` on a pool thread: an idle one, a new one below the bound, else the first to be free.
  void post(std::function<void()> task);
  // Runs every task posted, then joins the threads; posts after it are dropped.
  void stop();
  std::size_t threads() const;

 private:
  // Threads kept when idle, and how long one more waits for work before it ends.
  static constexpr std::size_t kKeptThreads = 2;
  static constexpr std::chrono::seconds kIdleExit{20};

  void work();
  void join_finished(std::unique_lock<std::mutex>& lock);

  std::size_t const max_threads_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable ended_;
  std::deque<std::function<void()>> tasks_;
  std::map<std::thread::id, std::thread> threads_;
  std::vector<std::thread::id> finished_;  // ended threads still to be joined
  std::size_t running_ = 0;                // threads in work(), busy or idle
  std::size_t idle_ = 0;
  bool stopping_ = false;
};

}  // namespace flashdeberta::cli::server::http

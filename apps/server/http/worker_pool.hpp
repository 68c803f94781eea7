// The threads that run the routes' handlers (parsing, tokenization, the wait for the model), apart from the
// I/O threads, which never block. Threads are started as work comes, up to a bound, and end after a while
// without work, so an idle server holds few threads whatever it held under load.
#pragma once

#include <atomic>
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
  // Polling takes a core: only where one is likely to be spare. On the 2-core VM it took the core the client on
  // the same machine needed (one client: 485-546 against 531-608 requests/s without it).
  static constexpr unsigned kPollingCores = 8;

  // `polls`: whether a thread polls for a follow-up task (kIdleSpin); by default where the machine has
  // kPollingCores or more.
  explicit WorkerPool(std::size_t max_threads, bool polls = std::thread::hardware_concurrency() >= kPollingCores);
  ~WorkerPool();  // stop()
  WorkerPool(WorkerPool const&) = delete;
  WorkerPool& operator=(WorkerPool const&) = delete;

  // Runs `task` on a pool thread: an idle one, a new one below the bound, else the first to be free.
  // `follow_up`: the task's sender is likely to post the next one as soon as it is answered (one client alone
  // on the server): the thread then polls for it a while before it sleeps, if no other thread is busy.
  void post(std::function<void()> task, bool follow_up = false);
  // Runs every task posted, then joins the threads; posts after it are dropped.
  void stop();
  std::size_t threads() const;

 private:
  // Threads kept when idle, and how long one more waits for work before it ends.
  static constexpr std::size_t kKeptThreads = 2;
  static constexpr std::chrono::seconds kIdleExit{20};

  // How long a thread polls for the next task after a follow-up task, when no other thread is running one: a
  // lone client's next request then skips a sleeping thread's wake-up. On the H100 machine (16 Xeon cores,
  // CUDA, bench/results/server-load-2026-12-07-h100-spin.md) 400 us took one client from 802-890 to 1,003-1,071
  // requests/s, 100 us did nothing. Polling after every task instead cost a third of the throughput of eight
  // clients on the 2-core VM (the pollers took the cores the handlers needed).
  static constexpr std::chrono::microseconds kIdleSpin{400};

  struct Task {
    std::function<void()> run;
    bool follow_up = false;
  };

  void work();
  void join_finished(std::unique_lock<std::mutex>& lock);

  std::size_t const max_threads_;
  bool const polls_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable ended_;
  std::deque<Task> tasks_;
  std::map<std::thread::id, std::thread> threads_;
  std::vector<std::thread::id> finished_;  // ended threads still to be joined
  std::size_t running_ = 0;                // threads in work(), busy or idle
  std::size_t idle_ = 0;
  bool stopping_ = false;
  std::size_t busy_ = 0;                 // threads running a task
  bool spinning_ = false;                // one idle thread polls `pending_` instead of sleeping
  std::atomic<std::size_t> pending_{0};  // tasks_.size(), readable without the mutex
};

}  // namespace flashdeberta::cli::server::http

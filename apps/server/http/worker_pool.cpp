#include "server/http/worker_pool.hpp"

#include <utility>

#include "server/thread_name.hpp"

namespace flashdeberta::cli::server::http {

namespace {

void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

}  // namespace

WorkerPool::WorkerPool(std::size_t max_threads, bool polls)
    : max_threads_(max_threads < 1 ? 1 : max_threads), polls_(polls) {}

WorkerPool::~WorkerPool() { stop(); }

void WorkerPool::post(std::function<void()> task, bool follow_up) {
  std::unique_lock lock(mutex_);
  if (stopping_) return;
  tasks_.push_back(Task{std::move(task), follow_up});
  pending_.store(tasks_.size(), std::memory_order_release);
  join_finished(lock);
  if (spinning_ && tasks_.size() == 1) return;  // the polling thread takes it, or sees it under the mutex after
  if (idle_ < tasks_.size() && running_ < max_threads_) {
    ++running_;
    std::thread thread([this] { work(); });
    threads_.emplace(thread.get_id(), std::move(thread));
  } else {
    lock.unlock();  // the woken thread takes the mutex at once: not while it is held
    wake_.notify_one();
  }
}

void WorkerPool::stop() {
  std::unique_lock lock(mutex_);
  stopping_ = true;
  wake_.notify_all();
  ended_.wait(lock, [this] { return running_ == 0; });
  std::map<std::thread::id, std::thread> threads = std::move(threads_);
  finished_.clear();
  lock.unlock();
  for (auto& [id, thread] : threads) thread.join();
}

std::size_t WorkerPool::threads() const {
  std::lock_guard lock(mutex_);
  return running_;
}

void WorkerPool::work() {
  name_this_thread("fd-http");
  std::unique_lock lock(mutex_);
  bool follow_up = false;  // the last task's
  for (;;) {
    if (!tasks_.empty()) {
      Task task = std::move(tasks_.front());
      tasks_.pop_front();
      pending_.store(tasks_.size(), std::memory_order_relaxed);
      ++busy_;
      lock.unlock();
      task.run();
      task.run = nullptr;  // what the task holds (a connection, its request) goes before the lock is taken
      follow_up = task.follow_up;
      lock.lock();
      --busy_;
      continue;
    }
    if (stopping_) break;
    if (std::exchange(follow_up, false) && polls_ && busy_ == 0 && !spinning_) {
      spinning_ = true;
      ++idle_;
      lock.unlock();
      auto const until = std::chrono::steady_clock::now() + kIdleSpin;
      while (pending_.load(std::memory_order_acquire) == 0 && std::chrono::steady_clock::now() < until) cpu_relax();
      lock.lock();
      --idle_;
      spinning_ = false;
      if (!tasks_.empty() || stopping_) continue;
    }
    ++idle_;
    bool const woken = wake_.wait_for(lock, kIdleExit, [this] { return !tasks_.empty() || stopping_; });
    --idle_;
    if (!woken && running_ > kKeptThreads) break;
  }
  --running_;
  finished_.push_back(std::this_thread::get_id());
  ended_.notify_all();
}

// Joins the threads that ended after their idle wait (each is past its last use of the pool, or about to be).
void WorkerPool::join_finished(std::unique_lock<std::mutex>& lock) {
  if (finished_.empty()) return;
  std::vector<std::thread> ended;
  for (std::thread::id const id : finished_) {
    auto const it = threads_.find(id);
    if (it == threads_.end()) continue;
    ended.push_back(std::move(it->second));
    threads_.erase(it);
  }
  finished_.clear();
  lock.unlock();
  for (std::thread& thread : ended) thread.join();
  lock.lock();
}

}  // namespace flashdeberta::cli::server::http

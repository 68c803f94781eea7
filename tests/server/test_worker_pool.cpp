// The server's handler pool (apps/server/http/worker_pool.hpp): every task posted runs exactly once, from any
// number of posting threads, with and without the polling for a lone client's follow-up request, and stop() runs
// what was posted before it. Polling is forced on here, where the 2-core CI machine would leave it off.
#include <doctest/doctest.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "server/http/worker_pool.hpp"

using flashdeberta::cli::server::http::WorkerPool;

namespace {

// Posts `count` tasks one after another, each only once the previous has run, as one keep-alive client does.
void run_one_client(WorkerPool& pool, int count, bool follow_up, std::atomic<int>& ran) {
  std::mutex mutex;
  std::condition_variable done;
  for (int i = 0; i < count; ++i) {
    bool finished = false;
    pool.post(
        [&] {
          ran.fetch_add(1);
          std::lock_guard const lock(mutex);
          finished = true;
          done.notify_one();
        },
        follow_up);
    std::unique_lock lock(mutex);
    done.wait(lock, [&] { return finished; });
  }
}

}  // namespace

TEST_CASE("worker pool: one client's sequential tasks all run, polled for or not") {
  for (bool const polls : {false, true}) {
    for (bool const follow_up : {false, true}) {
      WorkerPool pool(4, polls);
      std::atomic<int> ran = 0;
      run_one_client(pool, 2000, follow_up, ran);
      CHECK_MESSAGE(ran.load() == 2000, "polls " << polls << ", follow_up " << follow_up);
      CHECK(pool.threads() <= 4);  // its bound
    }
  }
}

TEST_CASE("worker pool: tasks from many threads at once run exactly once, and stop runs what is queued") {
  WorkerPool pool(8, /*polls=*/true);
  std::atomic<int> ran = 0;
  std::vector<std::thread> clients;
  for (int c = 0; c < 8; ++c) clients.emplace_back([&, c] { run_one_client(pool, 500, c % 2 == 0, ran); });
  for (std::thread& client : clients) client.join();
  CHECK(ran.load() == 8 * 500);
  CHECK(pool.threads() <= 8);

  // Slow tasks queued behind a full pool: stop() returns only when every one has run.
  std::atomic<int> slow = 0;
  for (int i = 0; i < 32; ++i)
    pool.post(
        [&] {
          std::this_thread::sleep_for(std::chrono::milliseconds(2));
          slow.fetch_add(1);
        },
        true);
  pool.stop();
  CHECK(slow.load() == 32);
  pool.post([&] { slow.fetch_add(1); });  // dropped after stop
  CHECK(slow.load() == 32);
}

// How many of this process's cores other processes leave it: an EigenPolicy whose thread count was left to it
// (threads <= 0) runs each operation on at most that many threads. Every operation ends at a barrier, so a team
// of as many threads as cores, on a machine where other processes keep the cores busy, waits at every barrier
// for its slowest (descheduled) member: 1.2x the time of one thread on the 2-core VM with a busy process per core
// (bench/results/threads-2026-12-05-host.md). A team sized to the cores left free does not.
//
// The measure, over the last kWindow: the busy time of the cores this process may run on (/proc/stat's per-CPU
// lines, the CPUs of sched_getaffinity) less this process's own CPU time (CLOCK_PROCESS_CPUTIME_ID), in cores;
// the free cores are the rest, a core counting where at least kFreeShare of it is left (at least one). Its own
// threads never count against it, so a process alone on the machine keeps every core. Where /proc/stat cannot be
// read, nothing changes: every core.
#pragma once

#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <mutex>
#include <optional>

namespace flashdeberta::eigen_detail {

class FreeCores {
 public:
  // Sampled at most this often; one sample reads /proc/stat (a few microseconds per CPU line). The first window
  // is short, so that the first operations after a load (which takes longer) already see the load's window.
  static constexpr std::chrono::milliseconds kWindow{200};
  static constexpr std::chrono::milliseconds kFirstWindow{20};
  // The share of a core that must be left for it to count as free. A core others use part of the time still
  // deschedules the team member on it at every barrier; and with a busy process per core this process's own
  // share makes the others' measure fall below the cores (2 cores, 3 runnable threads: 1.33 cores for them),
  // which rounding to the nearest core counted as one free core (bench/results/threads-2026-12-07-host.md).
  static constexpr double kFreeShare = 0.75;

  // Until the first window has passed, the count comes from /proc/stat's procs_running (the threads running or
  // waiting for a CPU now, this one among them), shared out over the machine's CPUs: a load's first parallel
  // regions, on a machine other processes keep busy, would otherwise wait at every barrier for a descheduled
  // member of a team of every core.
  explicit FreeCores(int cores) : cores_(std::max(1, cores)), free_(cores_) {
    if (auto const sample = take()) {
      last_ = *sample;
      due_.store((last_.at + kFirstWindow).time_since_epoch().count(), std::memory_order_relaxed);
      long const online = ::sysconf(_SC_NPROCESSORS_ONLN);
      if (sample->running > 0 && online > 0) {
        double const others = static_cast<double>(sample->running - 1) * cores_ / static_cast<double>(online);
        int const free = whole_cores(static_cast<double>(cores_) - others);
        free_.store(std::clamp(free, 1, cores_), std::memory_order_relaxed);
      }
    }
  }

  // The threads an operation may use now, at most `max`. One caller at a time takes a new sample when the last
  // is kWindow old; the others use the last count.
  int threads(int max) {
    Clock::rep const now = Clock::now().time_since_epoch().count();
    if (now >= due_.load(std::memory_order_relaxed) && update_.try_lock()) {
      std::lock_guard const lock(update_, std::adopt_lock);
      if (now >= due_.load(std::memory_order_relaxed)) refresh();
    }
    return std::clamp(free_.load(std::memory_order_relaxed), 1, std::max(1, max));
  }

 private:
  using Clock = std::chrono::steady_clock;

  struct Sample {
    Clock::time_point at;
    double busy_s = 0.0;     // of this process's CPUs, everyone's
    double process_s = 0.0;  // this process's
    long running = 0;        // procs_running: the machine's threads running or runnable now (0: not read)
  };

  static int whole_cores(double left) { return static_cast<int>(std::floor(left + (1.0 - kFreeShare))); }

  void refresh() {
    std::optional<Sample> const next = take();
    if (!next) {
      due_.store(std::numeric_limits<Clock::rep>::max(), std::memory_order_relaxed);
      return;
    }
    double const wall = std::chrono::duration<double>(next->at - last_.at).count();
    double const others = (next->busy_s - last_.busy_s - (next->process_s - last_.process_s)) / wall;
    last_ = *next;
    due_.store((last_.at + kWindow).time_since_epoch().count(), std::memory_order_relaxed);
    int const free = whole_cores(static_cast<double>(cores_) - std::max(0.0, others));
    free_.store(std::clamp(free, 1, cores_), std::memory_order_relaxed);
  }

  static std::optional<Sample> take() {
    Sample s;
    s.at = Clock::now();
    timespec cpu{};
    if (::clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &cpu) != 0) return std::nullopt;
    s.process_s = static_cast<double>(cpu.tv_sec) + 1e-9 * static_cast<double>(cpu.tv_nsec);
    cpu_set_t mine;
    CPU_ZERO(&mine);
    if (::sched_getaffinity(0, sizeof mine, &mine) != 0) return std::nullopt;
    std::FILE* stat = std::fopen("/proc/stat", "r");
    if (stat == nullptr) return std::nullopt;
    long const ticks = ::sysconf(_SC_CLK_TCK);
    char line[512];
    std::uint64_t busy = 0;
    int seen = 0;
    while (std::fgets(line, sizeof line, stat) != nullptr) {
      if (std::strncmp(line, "procs_running ", 14) == 0) {
        s.running = std::strtol(line + 14, nullptr, 10);
        continue;
      }
      int cpu_index = 0;
      unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
      // "cpu3 user nice system idle iowait irq softirq steal ..."; the first line ("cpu ") is the total.
      if (std::strncmp(line, "cpu", 3) != 0 || line[3] == ' ') continue;
      if (std::sscanf(line + 3, "%d %llu %llu %llu %llu %llu %llu %llu %llu", &cpu_index, &user, &nice, &system, &idle,
                      &iowait, &irq, &softirq, &steal) < 8) {
        continue;
      }
      if (cpu_index < 0 || cpu_index >= CPU_SETSIZE || !CPU_ISSET(cpu_index, &mine)) continue;
      busy += user + nice + system + irq + softirq + steal;
      ++seen;
    }
    std::fclose(stat);
    if (seen == 0 || ticks <= 0) return std::nullopt;
    s.busy_s = static_cast<double>(busy) / static_cast<double>(ticks);
    return s;
  }

  int const cores_;
  std::atomic<int> free_;
  // When the next sample is due; never while /proc/stat cannot be read (the count stays every core).
  std::atomic<Clock::rep> due_{std::numeric_limits<Clock::rep>::max()};
  std::mutex update_;
  Sample last_;  // guarded by update_ once constructed
};

}  // namespace flashdeberta::eigen_detail

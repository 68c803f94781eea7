// load_time --model DIR [--threads N] [--copy] [--prefault] [--profile] [--loads N] [--batch B] [--seq-len L]:
// what loading a checkpoint on EigenPolicy costs, and where the cost goes when weights stay in the mapped
// file (docs/loading.md). Each of --loads rounds loads the model, then runs two forwards of one random
// B x L batch, and prints for each phase the wall time, the process's CPU time (user + system, the
// measure to trust on a shared machine) and its page faults, then the resident memory: anonymous (the
// copies a load made, plus activations) and file-backed (pages of the mapped checkpoint in use).
//   --copy      CheckpointOptions::zero_copy = false: every weight copied out of the file (the old load)
//   --prefault  CheckpointOptions::prefault: the whole file mapped at open, so the load pays the faults
//   --profile   through ProfilingPolicy: the policy ops a load runs (the relative tables' GEMMs), and those of
//               a third forward, each timed
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <random>
#include <string>
#include <type_traits>

#include "flashdeberta/eigen/eigen_policy.hpp"
#include "flashdeberta/flashdeberta.hpp"
#include "flashdeberta/policy/profiling_policy.hpp"
#include "proc_status.hpp"

namespace {

// Wall and CPU milliseconds and minor + major page faults since construction.
class Phase {
 public:
  Phase() : wall_(std::chrono::steady_clock::now()), cpu_(cpu_ms()), faults_(faults()) {}
  void print(char const* name) const {
    double const wall = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - wall_).count();
    std::printf("  %-15s wall %8.1f ms   cpu %8.1f ms   page faults %7ld\n", name, wall, cpu_ms() - cpu_,
                faults() - faults_);
  }

 private:
  static double cpu_ms() {
    timespec t{};
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return static_cast<double>(t.tv_sec) * 1e3 + static_cast<double>(t.tv_nsec) / 1e6;
  }
  static long faults() {
    rusage usage{};
    getrusage(RUSAGE_SELF, &usage);
    return usage.ru_minflt + usage.ru_majflt;
  }
  std::chrono::steady_clock::time_point wall_;
  double cpu_;
  long faults_;
};

using flashdeberta::bench::status_mib;

void print_memory(char const* when) {
  std::printf("  resident %-17s anonymous %7.1f MiB   mapped file %7.1f MiB\n", when, status_mib("RssAnon:"),
              status_mib("RssFile:"));
}

template <flashdeberta::Variant V, class P>
void run_round(P const& policy, std::filesystem::path const& dir, flashdeberta::ModelOptions const& options,
               flashdeberta::Batch const& batch) {
  using Model = flashdeberta::DebertaModel<V, P>;
  Phase const load;
  Model const model = Model::load(policy, dir, options);
  load.print("load");
  if constexpr (!std::is_same_v<P, flashdeberta::EigenPolicy>) {
    std::printf("  of which policy ops:\n%s", policy.report().format().c_str());
    policy.reset();
  }
  print_memory("after load");
  for (char const* name : {"first forward", "second forward"}) {
    Phase const forward;
    (void)model.forward(batch);
    forward.print(name);
  }
  if constexpr (!std::is_same_v<P, flashdeberta::EigenPolicy>) {  // a warm forward's ops, each one fenced
    policy.reset();
    (void)model.forward(batch);
    std::printf("  a third forward's policy ops:\n%s", policy.report().format().c_str());
  }
  print_memory("after forwards");
}

}  // namespace

int main(int argc, char** argv) {
  namespace fd = flashdeberta;
  std::filesystem::path dir;
  int threads = 0, loads = 2;
  std::int64_t batch_size = 1, seq_len = 128;
  fd::ModelOptions options;
  bool profile = false;
  for (int i = 1; i < argc; ++i) {
    std::string const arg = argv[i];
    bool const has_value = i + 1 < argc;
    if (arg == "--model" && has_value) {
      dir = argv[++i];
    } else if (arg == "--threads" && has_value) {
      threads = std::atoi(argv[++i]);
    } else if (arg == "--loads" && has_value) {
      loads = std::atoi(argv[++i]);
    } else if (arg == "--batch" && has_value) {
      batch_size = std::atoll(argv[++i]);
    } else if (arg == "--seq-len" && has_value) {
      seq_len = std::atoll(argv[++i]);
    } else if (arg == "--copy") {
      options.checkpoint.zero_copy = false;
    } else if (arg == "--prefault") {
      options.checkpoint.prefault = true;
    } else if (arg == "--profile") {
      profile = true;
    } else {
      std::fprintf(stderr,
                   "usage: load_time --model DIR [--threads N] [--copy] [--prefault] [--profile] [--loads N] "
                   "[--batch B] [--seq-len L]\n");
      return 2;
    }
  }
  if (dir.empty()) {
    std::fprintf(stderr, "load_time: --model DIR is required (bench/random_checkpoint writes one)\n");
    return 2;
  }
  try {
    fd::ModelConfig const config = fd::load_model_config(dir);
    std::mt19937 rng(7);
    std::vector<std::vector<std::int32_t>> ids(static_cast<std::size_t>(batch_size));
    for (auto& row : ids) {
      for (std::int64_t t = 0; t < seq_len; ++t)
        row.push_back(static_cast<std::int32_t>(rng() % static_cast<std::uint32_t>(config.vocab_size)));
    }
    fd::Batch const batch = fd::Batch::from_sequences(ids);
    fd::EigenPolicy const policy(threads);
    std::printf("%s: %s, %d threads, B x L = %lld x %lld\n", dir.string().c_str(),
                options.checkpoint.zero_copy ? "zero copy" : "every weight copied", policy.threads(),
                static_cast<long long>(batch_size), static_cast<long long>(seq_len));
    for (int round = 0; round < loads; ++round) {
      std::printf("round %d%s\n", round + 1, options.checkpoint.prefault ? " (prefault)" : "");
      fd::dispatch_variant(config, [&]<fd::Variant V>() {
        if (profile) {
          run_round<V>(fd::ProfilingPolicy<fd::EigenPolicy>(policy), dir, options, batch);
        } else {
          run_round<V>(policy, dir, options, batch);
        }
      });
    }
  } catch (std::exception const& e) {
    std::fprintf(stderr, "load_time: %s\n", e.what());
    return 1;
  }
  return 0;
}

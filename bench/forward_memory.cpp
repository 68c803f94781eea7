// forward_memory L [eager|flash] [threads]: peak resident memory of one forward of the random v3-base
// model, apart from loading it.
//
// `/usr/bin/time -v flashdeberta run` reports the peak of the whole process, which for this model is set
// while loading (the mapped checkpoint and the weights copied out of it coexist) and hides how the
// forward pass itself grows with L. Here Linux's peak-RSS counter is reset after loading
// (/proc/self/clear_refs, "5"), so VmHWM afterwards is weights plus the forward's working set.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "bench_common.hpp"
#include "flashdeberta/flashdeberta.hpp"
#include "proc_status.hpp"

namespace {

using flashdeberta::bench::status_mib;

}  // namespace

int main(int argc, char** argv) {
  using namespace flashdeberta;
  if (argc < 2) {
    std::fprintf(stderr, "usage: forward_memory L [eager|flash] [threads]\n");
    return 2;
  }
  std::int64_t const length = std::atoll(argv[1]);
  bool const eager = argc > 2 && std::string(argv[2]) == "eager";
  int const threads = argc > 3 ? std::atoi(argv[3]) : 0;
  auto model = DebertaV3<EigenPolicy>::load(EigenPolicy(threads),
                                            bench::random_checkpoint(bench::RandomCheckpointSpec::v3_base()),
                                            {.attention = eager ? AttentionImpl::kEager : AttentionImpl::kFlash});
  Batch const batch = bench::random_batch({1, length}, model.config().vocab_size);
  double const peak_at_load = status_mib("VmHWM:");
  double const loaded = status_mib("VmRSS:");
  std::ofstream("/proc/self/clear_refs") << "5";  // peak RSS := current RSS
  HiddenStates<EigenPolicy> const out = model.forward(batch);
  double const peak = status_mib("VmHWM:");
  std::printf("L=%lld %s: load peak %.0f MiB, after load %.0f MiB, forward peak %.0f MiB (+%.0f MiB, %.1f KiB/token)\n",
              static_cast<long long>(length), eager ? "eager" : "flash", peak_at_load, loaded, peak, peak - loaded,
              (peak - loaded) * 1024.0 / static_cast<double>(length));
  return out.tokens == length ? 0 : 1;
}

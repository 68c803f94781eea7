// The Kokkos backend for the front ends: its registry entry (runtime/src/backend_registry.cpp) and the model
// instantiations over KokkosPolicy<> (the default execution space), compiled into flashdeberta::runtime, with
// the one Kokkos initialization the process may have.
#include <Kokkos_Core.hpp>

#include <memory>
#include <mutex>

#include "flashdeberta/kokkos/kokkos_policy.hpp"
#include "flashdeberta/runtime/backend_entry.hpp"
#include "flashdeberta/runtime/policy_backend.hpp"

namespace flashdeberta::runtime {

namespace {

// Kokkos may be initialized once per process: every backend of the process shares one guard, which
// finalizes Kokkos when the last of them goes away (a Python session may load several models). Warnings
// are off because the CLI promises errors as one line on stderr and nothing else there.
std::shared_ptr<void> start_kokkos(int threads) {
  static std::mutex mutex;
  static std::weak_ptr<void> running;
  std::lock_guard const lock(mutex);
  if (auto guard = running.lock()) return guard;
  if (Kokkos::is_initialized()) return nullptr;  // the application started it and will finalize it
#if KOKKOS_VERSION >= 30700
  auto settings = Kokkos::InitializationSettings().set_disable_warnings(true);
  if (threads > 0) settings.set_num_threads(threads);
  auto guard = std::make_shared<Kokkos::ScopeGuard>(settings);
#else
  auto guard = std::make_shared<Kokkos::ScopeGuard>(Kokkos::InitArguments(threads > 0 ? threads : -1, -1, -1, true));
#endif
  running = guard;
  return guard;
}

std::unique_ptr<StartedBackend> start(RuntimeOptions const& options) {
  std::shared_ptr<void> guard = start_kokkos(options.threads);
  KokkosPolicy<> policy;
  // Threads come from Kokkos' initialization, which may predate this backend.
  int const threads = static_cast<int>(policy.space().concurrency());
  return std::make_unique<PolicyBackend<KokkosPolicy<>>>(std::move(policy), threads, options.attention,
                                                         std::move(guard));
}

}  // namespace

BackendEntry const& kokkos_backend_entry() {
  static constexpr BackendEntry kEntry{.kind = BackendKind::kKokkos, .computes_in = "fp32 only", .start = &start};
  return kEntry;
}

}  // namespace flashdeberta::runtime

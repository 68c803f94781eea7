// What every oneDNN linear layer of the process shares: the CPU engine, a stream per calling thread, and the
// matmul primitives, created once per shape and reused by every weight of that shape.
//
// Threads: Debian's oneDNN is built on GNU OpenMP (DNNL_CPU_RUNTIME OMP), so a primitive's team has
// omp_get_max_threads() threads of the thread that creates it (brgemm fixes its split of the work then). The
// Eigen backend sets that per thread for each of its ops (eigen_policy.hpp, OmpThreadsScope); the cache key
// holds the thread count, so each count gets a primitive planned for it.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "flashdeberta/core/error.hpp"

namespace flashdeberta::onednn {

inline dnnl::engine const& cpu_engine() {
  static dnnl::engine const engine(dnnl::engine::kind::cpu, 0);
  return engine;
}

// CPU streams execute in order on the calling thread; one per thread keeps callers from sharing one.
inline dnnl::stream& thread_stream() {
  thread_local dnnl::stream stream(cpu_engine());
  return stream;
}

// The instruction set oneDNN dispatches to on this CPU ("avx512_core_amx", "avx512_core_bf16", ...).
// oneDNN 2.6 uses AMX by default where the CPU has it: its default ISA limit is "all", and it asks Linux
// for the AMX tile state itself (arch_prctl ARCH_REQ_XCOMP_PERM, kernel 5.16 or later); see
// docs/host-dtypes.md.
inline std::string effective_isa_name() {
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::avx512_core_amx:
      return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_bf16:
      return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_vnni:
      return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core:
      return "avx512_core";
    case dnnl::cpu_isa::avx2_vnni:
      return "avx2_vnni";
    case dnnl::cpu_isa::avx2:
      return "avx2";
    default:
      return "older than avx2";
  }
}

// One matmul's shape and fused epilogue: out (m, n) with row strides lda, ldc, over weights (n, k) packed in the
// layout the primitive picks (ldb 0) or plain rows of stride ldb.
struct MatmulKey {
  int kind = 0;  // LinearTraits<D>::kKind
  std::int64_t m = 0, k = 0, n = 0, lda = 0, ldb = 0, ldc = 0;
  bool bias = false;
  int activation = -1;  // a dnnl::algorithm fused after the bias, or -1
  int threads = 1;

  auto tie() const { return std::tie(kind, m, k, n, lda, ldb, ldc, bias, activation, threads); }
  bool operator<(MatmulKey const& o) const { return tie() < o.tie(); }
};

struct CachedMatmul {
  dnnl::matmul primitive;
  dnnl::memory::desc weights;     // the packed layout the primitive reads its weights in
  dnnl::memory::desc scratchpad;  // the work memory each execution passes (scratchpad_mode::user)
};

// Creating a primitive JIT-compiles its kernels: 0.4-6 ms each on an AVX512-BF16 EPYC, against 0.1-2 ms to
// run a v3-base projection at 128 tokens. Keyed by shape, the cache holds at most kCapacity entries (a
// server seeing every token count from 1 to 512 needs 4 x 512 of them per thread count); past that it starts
// over rather than track use.
class MatmulCache {
 public:
  static constexpr std::size_t kCapacity = 4096;

  template <class Create>
  CachedMatmul get(MatmulKey const& key, Create&& create) {
    {
      std::lock_guard const lock(mutex_);
      auto const it = entries_.find(key);
      if (it != entries_.end()) return it->second;
    }
    CachedMatmul made = create();  // outside the lock: creation takes milliseconds
    std::lock_guard const lock(mutex_);
    if (entries_.size() >= kCapacity) entries_.clear();
    return entries_.emplace(key, std::move(made)).first->second;
  }

  static MatmulCache& instance() {
    static MatmulCache cache;
    return cache;
  }

 private:
  std::mutex mutex_;
  std::map<MatmulKey, CachedMatmul> entries_;
};

}  // namespace flashdeberta::onednn

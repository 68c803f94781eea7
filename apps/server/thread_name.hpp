// Names the calling thread (Linux: at most 15 characters), so that top -H, perf and gdb tell the server's
// threads apart: fd-io-N (I/O contexts), fd-http (handlers), fd-batch (the batching worker), fd-trim (memory).
#pragma once

#if defined(__linux__)
#include <pthread.h>
#endif

namespace flashdeberta::cli::server {

inline void name_this_thread([[maybe_unused]] char const* name) {
#if defined(__linux__)
  ::pthread_setname_np(::pthread_self(), name);
#endif
}

}  // namespace flashdeberta::cli::server

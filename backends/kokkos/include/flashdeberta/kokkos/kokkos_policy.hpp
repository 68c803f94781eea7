// KokkosPolicy<ExecSpace>: the portable execution policy. Every operation is a Kokkos kernel launched on
// the policy's execution space instance, so the same code runs on a user's Serial, OpenMP, CUDA or HIP
// Kokkos build; float32 compute.
//
// Kokkos must be initialized (Kokkos::ScopeGuard) before a policy is constructed and stay initialized
// until every buffer and model using it is destroyed.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <optional>
#include <span>
#include <type_traits>
#include <utility>

#include "flashdeberta/kokkos/ops/attention_backward.hpp"
#include "flashdeberta/kokkos/ops/attention_eager.hpp"
#include "flashdeberta/kokkos/ops/attention_flash.hpp"
#include "flashdeberta/kokkos/ops/dense_ops.hpp"
#include "flashdeberta/kokkos/ops/gemm.hpp"
#include "flashdeberta/kokkos/ops/training_ops.hpp"
#include "flashdeberta/policy/concepts.hpp"
#include "flashdeberta/policy/host_memory.hpp"
#include "flashdeberta/policy/training_concepts.hpp"

namespace flashdeberta {

// Owning storage of `size()` elements of `dtype()` in MemorySpace. Move-only, like HostBuffer: a model's
// activations and weights each have one owner.
template <class MemorySpace>
class KokkosBuffer {
 public:
  using Storage = Kokkos::View<std::byte*, MemorySpace>;

  KokkosBuffer() = default;
  KokkosBuffer(std::int64_t size, DType dtype) : size_(size), dtype_(dtype) {
    FLASHDEBERTA_REQUIRE(size >= 0, "cannot allocate a buffer of " << size << " elements");
    // Uninitialized like HostBuffer: every operation writes its whole output.
    storage_ = Storage(Kokkos::view_alloc(Kokkos::WithoutInitializing, "flashdeberta::buffer"), size_bytes());
  }
  KokkosBuffer(KokkosBuffer&& other) noexcept
      : storage_(std::exchange(other.storage_, Storage())),
        size_(std::exchange(other.size_, 0)),
        dtype_(other.dtype_) {}
  KokkosBuffer& operator=(KokkosBuffer&& other) noexcept {
    storage_ = std::exchange(other.storage_, Storage());
    size_ = std::exchange(other.size_, 0);
    dtype_ = other.dtype_;
    return *this;
  }
  KokkosBuffer(KokkosBuffer const&) = delete;
  KokkosBuffer& operator=(KokkosBuffer const&) = delete;

  void* data() const { return storage_.data(); }
  template <class T>
  T* as() const {  // as HostBuffer::as: a typed pointer into MemorySpace, for the training layers' op arguments
    return static_cast<T*>(data());
  }
  std::int64_t size() const { return size_; }
  DType dtype() const { return dtype_; }
  std::size_t size_bytes() const { return static_cast<std::size_t>(size_) * dtype_size(dtype_); }
  Storage const& view() const { return storage_; }

 private:
  Storage storage_;
  std::int64_t size_ = 0;
  DType dtype_ = DType::kF32;
};

namespace kokkos_detail {

// Kokkos before 3.5 runs every Serial team kernel and reduction in one process-wide scratch block
// (Impl::serial_get_thread_team_data), resized at each launch: two host threads launching at once
// overwrite each other's scratch, or free it under each other (kokkos/kokkos#4053; 3.5 takes a lock of its
// own around the launch). For those versions the policy takes this lock around each of its kernels.
template <class ExecSpace>
constexpr bool kSerializeLaunches =
#if defined(KOKKOS_ENABLE_SERIAL) && KOKKOS_VERSION < 30500
    std::is_same_v<ExecSpace, Kokkos::Serial>;
#else
    false;
#endif

inline std::mutex& serial_launch_mutex() {
  static std::mutex mutex;
  return mutex;
}

// Held for the duration of one operation (Serial kernels run to completion inside the launch).
template <class ExecSpace>
std::unique_lock<std::mutex> launch_lock() {
  if constexpr (kSerializeLaunches<ExecSpace>) {
    return std::unique_lock<std::mutex>(serial_launch_mutex());
  } else {
    return {};
  }
}

}  // namespace kokkos_detail

// Thread safety: any number of threads may share one. On Kokkos::Serial before Kokkos 3.5 its operations
// take one process-wide lock (kSerializeLaunches), so they run one at a time; other execution spaces
// follow Kokkos' own rules (docs/thread-safety.md).
template <class ExecSpace = Kokkos::DefaultExecutionSpace>
class KokkosPolicy {
 public:
  using execution_space = ExecSpace;
  using memory_space = typename ExecSpace::memory_space;
  using Buffer = KokkosBuffer<memory_space>;

  KokkosPolicy() : space_() {}
  explicit KokkosPolicy(ExecSpace space) : space_(std::move(space)) {}

  static char const* name() { return "kokkos"; }
  DType compute_dtype() const { return DType::kF32; }
  ExecSpace const& space() const { return space_; }

  Buffer allocate(std::int64_t size, DType dtype) const { return Buffer(size, dtype); }

  Buffer upload(std::span<float const> host, DType dtype) const {
    FLASHDEBERTA_REQUIRE(dtype == DType::kF32, "KokkosPolicy stores weights in float32, not " << dtype_name(dtype));
    Buffer buffer(static_cast<std::int64_t>(host.size()), DType::kF32);
    copy_to_device<float>(host.data(), buffer);
    return buffer;
  }

  Buffer upload_indices(std::span<std::int32_t const> host) const {
    Buffer buffer(static_cast<std::int64_t>(host.size()), DType::kI32);
    copy_to_device<std::int32_t>(host.data(), buffer);
    return buffer;
  }

  void download(Buffer const& buffer, std::span<float> host) const {
    FLASHDEBERTA_REQUIRE(buffer.dtype() == DType::kF32 && static_cast<std::int64_t>(host.size()) == buffer.size(),
                         "download of " << buffer.size() << " " << dtype_name(buffer.dtype()) << " elements into "
                                        << host.size() << " floats");
    if (host.empty()) return;
    Kokkos::View<float*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> const host_view(host.data(),
                                                                                                     host.size());
    Kokkos::deep_copy(space_, host_view, device_view<float const>(buffer));
    space_.fence();  // the caller reads host right after
  }

  void gemm(GemmArgs const& args) const {
    auto const lock = kokkos_detail::launch_lock<ExecSpace>();
    kokkos_ops::gemm(space_, args);
  }
  void layer_norm(LayerNormArgs const& args) const {
    auto const lock = kokkos_detail::launch_lock<ExecSpace>();
    kokkos_ops::layer_norm(space_, args);
  }
  void embedding(EmbeddingArgs const& args) const {
    auto const lock = kokkos_detail::launch_lock<ExecSpace>();
    kokkos_ops::embedding(space_, args);
  }
  void conv1d(Conv1dArgs const& args) const {
    auto const lock = kokkos_detail::launch_lock<ExecSpace>();
    kokkos_ops::conv1d(space_, args);
  }
  void disentangled_attention(AttentionArgs const& args) const {
    auto const lock = kokkos_detail::launch_lock<ExecSpace>();
    if (args.impl == AttentionImpl::kEager) {
      kokkos_ops::attention_eager(space_, args);
    } else {
      kokkos_ops::attention_flash(space_, args);
    }
  }
  void lstm_cell(LstmCellArgs const& args) const {
    auto const lock = kokkos_detail::launch_lock<ExecSpace>();
    kokkos_ops::lstm_cell(space_, args);
  }
  void fence() const { space_.fence(); }

  // Training (training_op_args.hpp), float32 throughout; deterministic: no atomics, every sum in an order fixed by
  // the shapes (ops/training_ops.hpp, ops/attention_backward.hpp).
  void linear_backward(LinearBackwardArgs const& args) const { run(kokkos_ops::linear_backward<ExecSpace>, args); }
  void layer_norm_backward(LayerNormBackwardArgs const& args) const {
    run(kokkos_ops::layer_norm_backward<ExecSpace>, args);
  }
  void activation(ActivationArgs const& args) const { run(kokkos_ops::activation<ExecSpace>, args); }
  void embedding_backward(EmbeddingBackwardArgs const& args) const {
    run(kokkos_ops::embedding_backward<ExecSpace>, args);
  }
  void conv1d_backward(Conv1dBackwardArgs const& args) const { run(kokkos_ops::conv1d_backward<ExecSpace>, args); }
  void disentangled_attention_backward(AttentionBackwardArgs const& args) const {
    run(kokkos_ops::attention_backward<ExecSpace>, args);
  }
  void dropout(DropoutArgs const& args) const { run(kokkos_ops::dropout<ExecSpace>, args); }
  void adamw(AdamWArgs const& args) const { run(kokkos_ops::adamw<ExecSpace>, args); }
  void fill(MatrixRef const& out, float value) const {
    auto const lock = kokkos_detail::launch_lock<ExecSpace>();
    kokkos_ops::fill(space_, out, value);
  }
  double sum_of_squares(float const* values, std::int64_t count) const {
    auto const lock = kokkos_detail::launch_lock<ExecSpace>();
    return kokkos_ops::sum_of_squares(space_, values, count);
  }

  // Host memory spaces report what the host has available; Kokkos has no portable query for device memory,
  // so device spaces report nothing (and the model does not refuse on memory grounds there).
  std::optional<std::int64_t> available_memory_bytes() const {
    if constexpr (std::is_same_v<memory_space, Kokkos::HostSpace>) return host_available_memory_bytes();
    return std::nullopt;
  }

  // What attention_eager / attention_flash allocate (ops/): eager the (heads, L, L) scores of one sequence and
  // the (T, heads, 2k) c2p and p2c products; flash the p2c products (its tiles live in team scratch).
  std::int64_t attention_workspace_bytes(AttentionShape const& s) const {
    double const f = sizeof(float);
    double const heads = static_cast<double>(s.num_heads);
    double const length = static_cast<double>(s.max_seqlen);
    double const projected = static_cast<double>(s.total_tokens) * heads * static_cast<double>(s.relative_rows) * f;
    double bytes = s.p2c ? projected : 0.0;
    if (s.impl == AttentionImpl::kEager) bytes += heads * length * length * f + (s.c2p ? projected : 0.0);
    return detail::saturated_bytes(bytes);
  }

 private:
  // op(space, args) under the launch lock.
  template <class Args>
  void run(void (*op)(ExecSpace const&, Args const&), Args const& args) const {
    auto const lock = kokkos_detail::launch_lock<ExecSpace>();
    op(space_, args);
  }

  template <class T>
  static Kokkos::View<T*, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>> device_view(Buffer const& buffer) {
    return Kokkos::View<T*, memory_space, Kokkos::MemoryTraits<Kokkos::Unmanaged>>(
        static_cast<T*>(buffer.data()), static_cast<std::size_t>(buffer.size()));
  }

  // The host span is wrapped as an unmanaged host view (the mirror of the device buffer) and copied;
  // the fence keeps the caller's memory alive for the duration of an asynchronous copy.
  template <class T>
  void copy_to_device(T const* host, Buffer const& buffer) const {
    if (buffer.size() == 0) return;
    Kokkos::View<T const*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>> const host_view(
        host, static_cast<std::size_t>(buffer.size()));
    Kokkos::deep_copy(space_, device_view<T>(buffer), host_view);
    space_.fence();
  }

  ExecSpace space_;
};

static_assert(ExecutionPolicy<KokkosPolicy<>>);
static_assert(ReportsAvailableMemory<KokkosPolicy<>> && ReportsAttentionWorkspace<KokkosPolicy<>>);
static_assert(TrainingPolicy<KokkosPolicy<>>);

}  // namespace flashdeberta

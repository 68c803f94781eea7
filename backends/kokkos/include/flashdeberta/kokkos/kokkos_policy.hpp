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
#include <span>
#include <utility>

#include "flashdeberta/kokkos/ops/attention_eager.hpp"
#include "flashdeberta/kokkos/ops/attention_flash.hpp"
#include "flashdeberta/kokkos/ops/dense_ops.hpp"
#include "flashdeberta/kokkos/ops/gemm.hpp"
#include "flashdeberta/policy/concepts.hpp"

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
  std::int64_t size() const { return size_; }
  DType dtype() const { return dtype_; }
  std::size_t size_bytes() const { return static_cast<std::size_t>(size_) * dtype_size(dtype_); }
  Storage const& view() const { return storage_; }

 private:
  Storage storage_;
  std::int64_t size_ = 0;
  DType dtype_ = DType::kF32;
};

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

  void gemm(GemmArgs const& args) const { kokkos_ops::gemm(space_, args); }
  void layer_norm(LayerNormArgs const& args) const { kokkos_ops::layer_norm(space_, args); }
  void embedding(EmbeddingArgs const& args) const { kokkos_ops::embedding(space_, args); }
  void conv1d(Conv1dArgs const& args) const { kokkos_ops::conv1d(space_, args); }
  void disentangled_attention(AttentionArgs const& args) const {
    if (args.impl == AttentionImpl::kEager) {
      kokkos_ops::attention_eager(space_, args);
    } else {
      kokkos_ops::attention_flash(space_, args);
    }
  }
  void fence() const { space_.fence(); }

 private:
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

}  // namespace flashdeberta

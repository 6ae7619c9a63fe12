#pragma once
// CUDA's thread model on the CPU, for kernels that the host compiler compiles
// as well as nvcc (src/qkv/cuda/point_kernels_device.h): launch() runs a
// grid's blocks one after another, each block's threads as CPU threads;
// __syncthreads is a barrier of the block, __shfl_down_sync an exchange
// among a warp's 32 threads, and the block's shared memory is what they all
// see (the includer defines __shared__ as static; blocks never overlap).
// Barriers are real waits between real threads, so a kernel that reads a
// neighbour's write without one can fail here as on a GPU; a barrier that
// not every thread of the block (or warp) reaches throws instead of hanging
// (a thread that returned, or after kBarrierPatience of waiting).
// Not modelled: blocks running at once, warps running in lockstep, and the
// GPU's weaker memory ordering between barriers.
//
// The names are CUDA's, so that the kernels compile unchanged; they live in
// qkv::cuda::on_cpu, which the includer brings into qkv::cuda (the kernels'
// namespace) with a using-directive.
#include <algorithm>
#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

namespace qkv::cuda::on_cpu {

struct Dim3 {
  unsigned x = 0, y = 1, z = 1;
};

inline thread_local Dim3 threadIdx, blockIdx;
inline Dim3 blockDim, gridDim;

constexpr unsigned kWarpSize = 32;
// Longer than any wait of a test's kernel at a barrier, on a loaded machine;
// past it the threads are taken to wait at different barriers.
constexpr std::chrono::seconds kBarrierPatience{60};

// A barrier of `count` threads that a thread may leave for good (by
// returning from the kernel). A barrier some thread will never reach breaks:
// every thread waiting at it, and every later arrival, throws Broken.
class Barrier {
 public:
  struct Broken {};

  explicit Barrier(unsigned count) : count_(count) {}

  void arrive_and_wait() {
    std::unique_lock<std::mutex> lock(mutex_);
    if (broken_ || left_ > 0) break_and_throw();
    if (++arrived_ == count_) {
      arrived_ = 0;
      ++generation_;
      released_.notify_all();
      return;
    }
    const uint64_t mine = generation_;
    if (!released_.wait_for(lock, kBarrierPatience, [&] { return generation_ != mine || broken_; })) break_and_throw();
    if (generation_ == mine) throw Broken{};
  }

  void leave() {
    std::lock_guard<std::mutex> lock(mutex_);
    ++left_;
    if (arrived_ > 0) {
      broken_ = true;
      released_.notify_all();
    }
  }

  bool broken() {
    std::lock_guard<std::mutex> lock(mutex_);
    return broken_;
  }

 private:
  [[noreturn]] void break_and_throw() {
    broken_ = true;
    released_.notify_all();
    throw Broken{};
  }

  const unsigned count_;
  unsigned arrived_ = 0, left_ = 0;
  uint64_t generation_ = 0;
  bool broken_ = false;
  std::mutex mutex_;
  std::condition_variable released_;
};

// What one block's threads share.
struct Block {
  Block(unsigned threads, size_t shared_bytes) : barrier(threads), dynamic_shared(shared_bytes) {
    for (unsigned w = 0; w < (threads + kWarpSize - 1) / kWarpSize; ++w) {
      const unsigned lanes = std::min(kWarpSize, threads - w * kWarpSize);
      warps.push_back(std::make_unique<Warp>(lanes));
    }
  }

  struct Warp {
    explicit Warp(unsigned lane_count) : lanes(lane_count), barrier(lane_count) {}
    const unsigned lanes;  // 32 but in a last warp of fewer threads
    Barrier barrier;
    std::array<std::array<unsigned char, 16>, kWarpSize> slots{};
  };

  Barrier barrier;
  std::vector<std::unique_ptr<Warp>> warps;
  std::vector<unsigned char> dynamic_shared;
};

inline thread_local Block* current_block = nullptr;

inline void __syncthreads() { current_block->barrier.arrive_and_wait(); }

// The block's dynamic shared memory (the launch's shared_bytes).
inline unsigned char* dynamic_shared_memory() { return current_block->dynamic_shared.data(); }

// `value` of the lane `delta` above this one in the warp; a lane with none
// above keeps its own (CUDA's rule). Every lane of the warp takes part.
template <typename T>
T __shfl_down_sync(unsigned /*mask: every lane*/, T value, unsigned delta) {
  static_assert(std::is_trivially_copyable<T>::value && sizeof(T) <= 16, "a shuffled value is a register");
  auto& warp = *current_block->warps[threadIdx.x / kWarpSize];
  const unsigned lane = threadIdx.x % kWarpSize, source = lane + delta;
  std::memcpy(warp.slots[lane].data(), &value, sizeof(T));
  warp.barrier.arrive_and_wait();
  T result = value;
  if (source < warp.lanes) std::memcpy(&result, warp.slots[source].data(), sizeof(T));
  warp.barrier.arrive_and_wait();  // nobody writes a slot again before every lane has read
  return result;
}

// kernel(args...) on `blocks` blocks of `threads` threads, block after block.
// Throws std::runtime_error where a block's threads did not all reach one of
// its barriers, or a thread threw.
template <typename Kernel, typename... Args>
void launch(unsigned blocks, unsigned threads, size_t shared_bytes, Kernel kernel, Args... args) {
  gridDim = {blocks, 1, 1};
  blockDim = {threads, 1, 1};
  for (unsigned b = 0; b < blocks; ++b) {
    Block block(threads, shared_bytes);
    std::mutex failure_mutex;
    std::string failure;
    std::vector<std::thread> pool;
    pool.reserve(threads);
    for (unsigned t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        threadIdx = {t, 1, 1};
        blockIdx = {b, 1, 1};
        current_block = &block;
        try {
          kernel(args...);
        } catch (const Barrier::Broken&) {
          // reported below, from the barrier's state
        } catch (const std::exception& e) {
          std::lock_guard<std::mutex> lock(failure_mutex);
          if (failure.empty()) failure = "thread " + std::to_string(t) + " threw: " + e.what();
        }
        block.warps[t / kWarpSize]->barrier.leave();
        block.barrier.leave();
      });
    for (auto& thread : pool) thread.join();
    bool warp_broken = false;
    for (const auto& warp : block.warps) warp_broken = warp_broken || warp->barrier.broken();
    if (failure.empty() && block.barrier.broken())
      failure = "a __syncthreads that not every thread of the block reached";
    if (failure.empty() && warp_broken) failure = "a warp shuffle that not every lane of the warp reached";
    if (!failure.empty()) throw std::runtime_error("block " + std::to_string(b) + ": " + failure);
  }
}

}  // namespace qkv::cuda::on_cpu

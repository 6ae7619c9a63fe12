// ProcessGroup through c10d's ProcessGroupGloo, which needs Gloo's headers; a
// build without them compiles process_group_absent.cpp instead
// (runtime/build_parts.h). Where CMake sets QKV_WITH_NCCL (a LibTorch 2.11 or
// later with CUDA, and NCCL's header), also through c10d's ProcessGroupNCCL.
// The options it is given: parallel_options.cpp.
#include "qkv/distributed/process_group.h"

#include <torch/torch.h>
// Debian builds LibTorch with gloo; its header hides the class without this.
#ifndef USE_C10D_GLOO
#define USE_C10D_GLOO
#endif
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#if QKV_WITH_NCCL
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <thread>

#include "qkv/core/errors.h"
#include "qkv/core/text.h"

// c10d's log threshold. Debian's LibTorch logs through glog (no glog headers
// are installed: its flag is a plain exported int); PyTorch's wheels log
// through c10's own logger, whose threshold c10/util/Logging.h declares.
#ifdef C10_USE_GLOG
namespace fLI {
extern int32_t FLAGS_minloglevel;
}
#endif

namespace qkv::distributed {
namespace {

// Held while a collective is launched (not while it runs). PyTorch 2.x's c10d
// records every collective in one flight recorder per process, and its
// record() adds a group it has not seen yet to a std::map before taking its
// own lock (FlightRecorderDetail.hpp, recordWithResetEnabled): two groups of
// one process launching their first collectives at once corrupted that map
// (SIGSEGV in std::_Rb_tree_insert_and_rebalance under c10d::ProcessGroupGloo::
// enqueue, in the tests whose ranks are threads). A launch only queues the
// work, so one at a time costs nothing; LibTorch 1.13 has no recorder.
std::mutex g_launch_mutex;

// Returns once something accepts TCP connections at host:port, trying every
// 50 ms; throws std::runtime_error at `deadline`.
void wait_for_listener(const std::string& host, int port, std::chrono::steady_clock::time_point deadline) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  for (;;) {
    addrinfo* found = nullptr;
    if (getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found) == 0) {
      for (addrinfo* a = found; a; a = a->ai_next) {
        const int fd = socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
        if (fd < 0) continue;
        bool accepted = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0;
        if (!accepted && errno == EINPROGRESS) {
          pollfd p{fd, POLLOUT, 0};
          int error = 0;
          socklen_t size = sizeof error;
          accepted = poll(&p, 1, 200) == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &size) == 0 && error == 0;
        }
        close(fd);
        if (accepted) {
          freeaddrinfo(found);
          return;
        }
      }
      freeaddrinfo(found);
    }
    if (std::chrono::steady_clock::now() + std::chrono::milliseconds(50) >= deadline)
      throw std::runtime_error("nothing accepted connections at " + host + ":" + std::to_string(port));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }

}  // namespace

struct ProcessGroup::Impl {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> gloo;
#if QKV_WITH_NCCL
  c10::intrusive_ptr<c10d::ProcessGroupNCCL> nccl;
#endif
  // Where NCCL's collectives run (this rank's GPU); CPU for gloo, which takes
  // tensors where they are.
  c10::Device device{c10::kCPU};
  std::string where;  // "rank R of W (master ADDR:PORT)" for messages

  ~Impl() {
#if QKV_WITH_NCCL
    // Without it c10d warns, at exit, that the group was never destroyed.
    if (nccl) try {
        nccl->shutdown();
      } catch (const std::exception&) {
      }
#endif
  }

  // `call` on whichever of c10d's groups this is: call(group) -> Work.
  template <typename Call>
  c10::intrusive_ptr<c10d::Work> launch_on_group(Call&& call) {
#if QKV_WITH_NCCL
    if (nccl) return call(*nccl);
#endif
    return call(*gloo);
  }

  // `tensor` where the collectives run: itself for gloo or when it is there
  // already, else a copy on the GPU (the caller copies the result back).
  at::Tensor on_collective_device(const at::Tensor& tensor) const {
    return device.is_cpu() || tensor.device() == device ? tensor : tensor.to(device);
  }

  [[noreturn]] void fail(const std::string& what, const std::exception& e, double timeout) const {
    throw DataError("distributed " + what + " failed on " + where + ": " + first_line(e.what()) +
                    " (a peer died, stopped answering within {dist_timeout} " + std::to_string(int64_t(timeout)) +
                    " s, or never joined)");
  }

  void all_reduce(at::Tensor& tensor, c10d::ReduceOp::RedOpType op, const std::string& what, double timeout) {
    std::vector<at::Tensor> one{on_collective_device(tensor)};
    run(what, timeout, [&] {
      c10d::AllreduceOptions o;
      o.reduceOp = op;
      return launch_on_group([&](auto& group) { return group.allreduce(one, o); });
    });
    if (!one[0].is_same(tensor)) tensor.copy_(one[0]);
  }

  template <typename Launch>
  void run(const std::string& what, double timeout, Launch&& launch) const {
    try {
      c10::intrusive_ptr<c10d::Work> work;
      {
        std::lock_guard<std::mutex> one_launch_at_a_time(g_launch_mutex);
        work = launch();
      }
      // Outside the lock: a rank waits for the others, which launch theirs.
      work->wait();
    } catch (const DataError&) {
      throw;
    } catch (const std::exception& e) {
      fail(what, e, timeout);
    }
  }
};

ProcessGroup::ProcessGroup(const ParallelOptions& options, c10::Device device)
    : impl_(std::make_unique<Impl>()), options_(options), backend_(collective_backend(options, device)) {
  // c10d logs every failed connection attempt and timeout on stderr before
  // throwing; the exception becomes our one-line error. GLOG_minloglevel=0
  // (Debian's LibTorch) or TORCH_CPP_LOG_LEVEL=INFO (PyTorch's) in the
  // environment brings the log back for debugging.
#ifdef C10_USE_GLOG
  if (!std::getenv("GLOG_minloglevel")) fLI::FLAGS_minloglevel = 3;
#else
  if (!std::getenv("TORCH_CPP_LOG_LEVEL")) FLAGS_caffe2_log_level = 3;
#endif
  const auto [host, port] = parse_master(options.master, "master");
  impl_->where = "rank " + std::to_string(options.rank) + " of " + std::to_string(options.world_size) + " (master " +
                 options.master + ")";
  // One deadline for the whole rendezvous: connecting to the store, waiting
  // for every rank to join and the gloo connection setup share
  // --dist-timeout, instead of each step waiting the full timeout in turn.
  using Clock = std::chrono::steady_clock;
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(options.timeout_seconds * 1000));
  const auto deadline = Clock::now() + timeout;
  auto time_left = [&] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    return std::max(left, std::chrono::milliseconds(1));
  };
  const std::string timeout_text = "{dist_timeout} " + std::to_string(int64_t(options.timeout_seconds)) + " s";
  try {
    c10d::TCPStoreOptions so;
    so.port = static_cast<uint16_t>(port);
    so.isServer = options.rank == 0;
    so.numWorkers = static_cast<size_t>(options.world_size);
    // The wait for the others is done below, where it can name who is missing.
    so.waitWorkers = false;
    // A worker first waits, on our deadline, until rank 0's port takes
    // connections: LibTorch 2.x's client retries with a growing backoff that
    // overran one attempt's timeout by seconds (--dist-timeout 3 without
    // rank 0: 4.85 s).
    if (!so.isServer) wait_for_listener(host, port, deadline);
    so.timeout = timeout;
    impl_->store = c10::make_intrusive<c10d::TCPStore>(host, so);
  } catch (const std::exception& e) {
    const std::string role = options.rank == 0 ? "serve the rendezvous store on port " + std::to_string(port)
                                               : "reach rank 0's store at " + options.master;
    std::string why = first_line(e.what());
    // LibTorch's text for a busy port runs to several sentences.
    if (options.rank == 0 && why.find("Address already in use") != std::string::npos)
      why = "another process listens on that port; give --master another one";
    throw DataError("distributed rendezvous failed on " + impl_->where + ": could not " + role + " within " +
                    timeout_text + ": " + why);
  }
  std::vector<int64_t> missing;
  try {
    impl_->store->set("qkv/joined/" + std::to_string(options.rank), std::vector<uint8_t>{1});
    impl_->store->add("qkv/joined", 1);
    while (impl_->store->add("qkv/joined", 0) < options.world_size) {
      if (Clock::now() >= deadline) {
        for (int64_t r = 0; r < options.world_size; ++r)
          if (!impl_->store->check({"qkv/joined/" + std::to_string(r)})) missing.push_back(r);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  } catch (const std::exception& e) {
    throw DataError("distributed rendezvous failed on " + impl_->where + ": lost rank 0's store at " + options.master +
                    " while waiting for the other ranks: " + first_line(e.what()));
  }
  if (!missing.empty()) {
    std::string names;
    for (const int64_t r : missing) names += (names.empty() ? "" : ", ") + std::to_string(r);
    throw DataError("distributed rendezvous failed on " + impl_->where + ": rank" + (missing.size() > 1 ? "s " : " ") +
                    names + " of " + std::to_string(options.world_size) + " did not join within " + timeout_text);
  }
  auto prefixed = c10::make_intrusive<c10d::PrefixStore>("qkv", impl_->store);
#if QKV_WITH_NCCL
  if (backend_ == "nccl") {
    try {
      impl_->store->setTimeout(time_left());
      // c10d reads it as the group is made: each wait() then blocks this
      // thread until the collective ends or times out, and throws; without it
      // a watchdog thread aborts the whole process on a timeout. (Set here,
      // not at start-up, so that the tests' groups get it too; no other
      // thread of ours reads the environment meanwhile.)
      setenv("TORCH_NCCL_BLOCKING_WAIT", "1", /*overwrite=*/0);
      auto no = c10d::ProcessGroupNCCL::Options::create();
      no->timeout = timeout;
      impl_->nccl = c10::make_intrusive<c10d::ProcessGroupNCCL>(prefixed, static_cast<int>(options.rank),
                                                                static_cast<int>(options.world_size), no);
      impl_->device = device;
      // Connects now, on this rank's GPU, so that a failure is the setup's.
      impl_->nccl->setBoundDeviceId(device);
      impl_->nccl->eagerConnectSingleDevice(device);
      impl_->store->setTimeout(timeout);
    } catch (const std::exception& e) {
      impl_->fail("NCCL connection setup", e, options.timeout_seconds);
    }
    return;
  }
#endif
  try {
    impl_->store->setTimeout(time_left());
    auto go = c10d::ProcessGroupGloo::Options::create();
    // Also each collective's timeout (gloo has one for both): the full one.
    // Every rank has joined by now, so the connection setup is quick.
    go->timeout = timeout;
    // GLOO_SOCKET_IFNAME picks the interface as in PyTorch; a loopback master
    // means one machine; otherwise the address this host's name resolves to.
    if (const char* ifname = std::getenv("GLOO_SOCKET_IFNAME"); ifname && *ifname)
      go->devices.push_back(c10d::ProcessGroupGloo::createDeviceForInterface(ifname));
    else if (is_loopback(host))
      go->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname("127.0.0.1"));
    else
      go->devices.push_back(c10d::ProcessGroupGloo::createDefaultDevice());
    impl_->gloo = c10::make_intrusive<c10d::ProcessGroupGloo>(prefixed, static_cast<int>(options.rank),
                                                              static_cast<int>(options.world_size), go);
    impl_->store->setTimeout(timeout);
  } catch (const std::exception& e) {
    impl_->fail("connection setup", e, options.timeout_seconds);
  }
}

ProcessGroup::~ProcessGroup() = default;

void ProcessGroup::all_reduce_sum(at::Tensor& tensor, const std::string& what) {
  impl_->all_reduce(tensor, c10d::ReduceOp::SUM, what, options_.timeout_seconds);
}

void ProcessGroup::all_reduce_max(at::Tensor& tensor, const std::string& what) {
  impl_->all_reduce(tensor, c10d::ReduceOp::MAX, what, options_.timeout_seconds);
}

void ProcessGroup::broadcast(std::vector<at::Tensor>& tensors, int64_t root, const std::string& what) {
  for (auto& t : tensors) {
    std::vector<at::Tensor> one{impl_->on_collective_device(t)};
    impl_->run(what, options_.timeout_seconds, [&] {
      c10d::BroadcastOptions o;
      o.rootRank = root;
      return impl_->launch_on_group([&](auto& group) { return group.broadcast(one, o); });
    });
    if (!one[0].is_same(t)) t.copy_(one[0]);
  }
}

std::vector<at::Tensor> ProcessGroup::all_gather(const at::Tensor& tensor, const std::string& what) {
  std::vector<at::Tensor> input{impl_->on_collective_device(tensor).contiguous()};
  std::vector<std::vector<at::Tensor>> output(1);
  for (int64_t r = 0; r < options_.world_size; ++r) output[0].push_back(torch::empty_like(input[0]));
  impl_->run(what, options_.timeout_seconds,
             [&] { return impl_->launch_on_group([&](auto& group) { return group.allgather(output, input); }); });
  for (auto& part : output[0]) part = part.to(tensor.device());
  return output[0];
}

void ProcessGroup::barrier(const std::string& what) {
  // A one-element all-reduce: gloo's barrier has no per-call timeout of its own.
  auto t = torch::zeros({1});
  all_reduce_sum(t, what);
}

void ProcessGroup::all_reduce_gradients(const std::vector<at::Tensor>& parameters, int64_t bucket_bytes) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> grads;
  for (const auto& p : parameters) {
    if (!p.requires_grad()) continue;
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  size_t begin = 0;
  while (begin < grads.size()) {
    // A bucket: consecutive gradients of one dtype and device, up to bucket_bytes.
    size_t end = begin;
    int64_t bytes = 0;
    while (end < grads.size() && grads[end].scalar_type() == grads[begin].scalar_type() &&
           grads[end].device() == grads[begin].device() &&
           (end == begin || bytes + grads[end].nbytes() <= static_cast<size_t>(bucket_bytes))) {
      bytes += static_cast<int64_t>(grads[end].nbytes());
      ++end;
    }
    std::vector<at::Tensor> flat_parts;
    for (size_t i = begin; i < end; ++i) flat_parts.push_back(grads[i].reshape({-1}));
    auto flat = torch::cat(flat_parts);
    all_reduce_sum(flat, "gradient all-reduce");
    int64_t offset = 0;
    for (size_t i = begin; i < end; ++i) {
      const int64_t n = grads[i].numel();
      grads[i].copy_(flat.slice(0, offset, offset + n).view_as(grads[i]));
      offset += n;
    }
    begin = end;
  }
}

void ProcessGroup::broadcast_module(torch::nn::Module& module, int64_t root) {
  torch::NoGradGuard no_grad;
  std::vector<at::Tensor> state;
  for (auto& p : module.parameters()) state.push_back(p);
  for (auto& b : module.buffers()) state.push_back(b);
  // Tensors are updated in place, one call each: models have tens to hundreds.
  broadcast(state, root, "broadcast of the model state");
}

std::string ProcessGroup::broadcast_bytes(const std::string& bytes, int64_t root) {
  auto size = torch::tensor({static_cast<int64_t>(rank() == root ? bytes.size() : 0)}, torch::kLong);
  std::vector<at::Tensor> one{size};
  broadcast(one, root, "broadcast of a checkpoint");
  auto data = torch::empty({one[0].item<int64_t>()}, torch::kUInt8);
  if (rank() == root && !bytes.empty()) std::memcpy(data.data_ptr(), bytes.data(), bytes.size());
  std::vector<at::Tensor> payload{data};
  if (data.numel() > 0) broadcast(payload, root, "broadcast of a checkpoint");
  return std::string(static_cast<const char*>(data.data_ptr()), static_cast<size_t>(data.numel()));
}

bool ProcessGroup::any(bool flag, const std::string& what) {
  auto t = torch::tensor({flag ? 1.0f : 0.0f});
  all_reduce_max(t, what);
  return t.item<float>() > 0;
}

}  // namespace qkv::distributed

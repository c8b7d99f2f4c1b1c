// The C side of ono-dist: torch's own c10d (TCPStore, PrefixStore, ProcessGroupGloo and, when
// built with ONO_NCCL, ProcessGroupNCCL) behind six extern "C" functions, one of them a
// differentiable all-reduce (an autograd node of its own).
//
// Rules every function keeps:
// * No exception leaves it. Unwinding across the FFI boundary is undefined behaviour, and c10d
//   reports everything (a peer that died, a timeout, an unreachable store) by throwing. Each body
//   runs in `guarded`, which catches c10::Error (torch's message without the C++ backtrace) and any
//   std::exception, writes the message into the caller's buffer and returns failure.
// * Tensors arrive as `const at::Tensor* const*`: tch's `Tensor::as_ptr()` is a `torch::Tensor*`
//   (torch-sys's torch_api.h). They are copied into a std::vector (a reference count each), so the
//   collective's in-place result lands in the caller's storage.
// * Every collective waits for its own completion, bounded by the group's timeout: the caller's
//   tensors are safe to read when the call returns, and a hung peer becomes an error, not a hang.
//   On NCCL "waits" means stream order (work queued after the call sees the result) and the
//   bound is torch's watchdog: a host wait per collective would sync every training step.

#include <ATen/ATen.h>
#include "guarded.hpp"
#include <c10/util/Exception.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/autograd/function.h>
#include <torch/csrc/autograd/functions/utils.h>

#ifdef ONO_NCCL
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#endif

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace {

// What a handle owns: the store (kept alive for the backend, which holds it too) and the backend.
struct Group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  std::chrono::milliseconds timeout;
  bool nccl;
};

std::vector<at::Tensor> tensors(const at::Tensor* const* ts, int n) {
  std::vector<at::Tensor> out;
  out.reserve(n);
  for (int i = 0; i < n; ++i) {
    out.push_back(*ts[i]);
  }
  return out;
}

// Starts one collective per tensor (a vector of several tensors means "one per local device" to
// c10d, which would reduce them into each other), then waits for all of them in order.
template <typename Start>
int each(Group* g, const at::Tensor* const* ts, int n, Start start) {
  std::vector<c10::intrusive_ptr<c10d::Work>> works;
  works.reserve(n);
  for (auto& t : tensors(ts, n)) {
    std::vector<at::Tensor> one{t};
    works.push_back(start(one));
  }
  for (auto& w : works) {
    if (g->nccl) {
      // NCCL's wait with a timeout blocks this thread until the kernel has run: a host sync per
      // collective. Without one it only orders the current stream after the collective; the
      // group's timeout is then enforced by torch's NCCL watchdog, which aborts the
      // communicator (and, by default, the process) instead of hanging.
      w->wait();
    } else {
      w->wait(g->timeout);
    }
  }
  return 0;
}

}  // namespace

extern "C" {

// Backend codes, as in src/ffi.rs.
enum { ONO_GLOO = 0, ONO_NCCL_BACKEND = 1 };

// Connects to (or, with is_server, hosts) the TCPStore at addr:port, wraps it in a PrefixStore
// when `prefix` is not null, and creates the backend. `*stage` tells the caller where a failure
// happened: 1 the store (rendezvous), 2 the backend. Returns null on failure.
void* ono_dist_create(const char* addr, uint16_t port, int rank, int world, int is_server,
                      const char* prefix, int backend, int device, int64_t timeout_ms,
                      int* stage, char* err, size_t errlen) {
  *stage = 1;
  return guarded<void*>(err, errlen, nullptr, [&]() -> void* {
    auto timeout = std::chrono::milliseconds(timeout_ms);

    // As torch.distributed.rendezvous._create_c10d_store: numWorkers = world (the server waits
    // for all of them, a client adds itself to the count), multi-tenant and libuv as torch does.
    c10d::TCPStoreOptions so;
    so.port = port;
    so.isServer = is_server != 0;
    so.numWorkers = static_cast<size_t>(world);
    so.waitWorkers = true;
    so.timeout = timeout;
    so.multiTenant = true;
    c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::TCPStore>(addr, so);
    if (prefix != nullptr) {
      store = c10::make_intrusive<c10d::PrefixStore>(prefix, store);
    }

    *stage = 2;
    auto g = std::make_unique<Group>();
    g->store = store;
    g->timeout = timeout;
    g->nccl = backend == ONO_NCCL_BACKEND;
    if (backend == ONO_GLOO) {
      // create_default: the device of GLOO_SOCKET_IFNAME, else this host's name, else loopback
      // (what torch.distributed's Python constructor does). Connects the full mesh through the
      // store before returning.
      auto opts = c10d::ProcessGroupGloo::Options::create_default(timeout);
      g->backend = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, opts);
    } else if (backend == ONO_NCCL_BACKEND) {
#ifdef ONO_NCCL
      auto count = static_cast<int>(c10::cuda::device_count());
      TORCH_CHECK(device >= 0 && device < count, "NCCL device cuda:", device,
                  " does not exist (this process sees ", count, " CUDA devices)");
      c10::cuda::set_device(static_cast<c10::DeviceIndex>(device));
      auto opts = c10d::ProcessGroupNCCL::Options::create();
      opts->timeout = timeout;
      auto pg = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, world, opts);
      // As init_process_group(device_id=...): bind the group to this rank's device (barrier
      // uses it instead of guessing one from the global rank) and create the communicator now,
      // so that a missing peer fails here rather than in the first collective.
      at::Device dev(at::kCUDA, static_cast<c10::DeviceIndex>(device));
      pg->setBoundDeviceId(dev);
      pg->eagerConnectSingleDevice(dev);
      g->backend = pg;
#else
      (void)device;
      TORCH_CHECK(false, "this build of ono-dist has no NCCL");
#endif
    } else {
      TORCH_CHECK(false, "unknown backend code ", backend);
    }
    return g.release();
  });
}

// Reduces each tensor in place over all ranks: op 0 sums (ONO_SUM), op 1 takes the elementwise
// maximum (ONO_MAX), as in src/ffi.rs.
int ono_dist_all_reduce(void* h, const at::Tensor* const* ts, int n, int op, char* err,
                        size_t errlen) {
  auto g = static_cast<Group*>(h);
  return guarded<int>(err, errlen, -1, [&] {
    TORCH_CHECK(op == 0 || op == 1, "unknown reduction code ", op);
    return each(g, ts, n, [&](std::vector<at::Tensor>& one) {
      c10d::AllreduceOptions o;
      o.reduceOp = op == 0 ? c10d::ReduceOp::SUM : c10d::ReduceOp::MAX;
      return g->backend->allreduce(one, o);
    });
  });
}

// Overwrites each tensor with rank `root`'s.
int ono_dist_broadcast(void* h, const at::Tensor* const* ts, int n, int root, char* err,
                       size_t errlen) {
  auto g = static_cast<Group*>(h);
  return guarded<int>(err, errlen, -1, [&] {
    return each(g, ts, n, [&](std::vector<at::Tensor>& one) {
      c10d::BroadcastOptions o;
      o.rootRank = root;
      o.rootTensor = 0;
      return g->backend->broadcast(one, o);
    });
  });
}

// Returns when every rank has entered the barrier.
int ono_dist_barrier(void* h, char* err, size_t errlen) {
  auto g = static_cast<Group*>(h);
  return guarded<int>(err, errlen, -1, [&] {
    c10d::BarrierOptions o;
    o.timeout = g->timeout;
    g->backend->barrier(o)->wait(g->timeout);
    return 0;
  });
}

// Frees the group. ProcessGroupNCCL is shut down first (its destructor warns otherwise);
// ProcessGroupGloo's destructor drains its queue and joins its threads, which takes at most the
// timeout when a collective is still stuck on a dead peer.
void ono_dist_destroy(void* h) {
  auto g = static_cast<Group*>(h);
  char ignored[1];
  guarded<int>(ignored, sizeof ignored, -1, [&] {
    if (g->nccl) {
      g->backend->shutdown();
    }
    return 0;
  });
  guarded<int>(ignored, sizeof ignored, -1, [&] {
    delete g;
    return 0;
  });
}

}  // extern "C"

// ---- Sums over points split across ranks: a differentiable all-reduce. ----------------------
//
// y = Σ_ranks x, the same on every rank. Its backward node sums the ranks' incoming gradients:
// each rank's gradient at the replicated y is that rank's share (the rank-local computations
// downstream of y), and the gradient of x is the whole, Σ of the shares. The node holds the
// backend by reference count, so a graph that outlives the Rust handle still reduces safely.
// Every rank runs the same graph, so the autograd engine (one thread per device) calls the
// nodes' collectives in the same order on every rank.

namespace {

// The first collective `op` on one tensor, waited for as `each` waits.
void reduce_one(const c10::intrusive_ptr<c10d::Backend>& backend, bool nccl,
                std::chrono::milliseconds timeout, at::Tensor& t, c10d::ReduceOp::RedOpType op) {
  std::vector<at::Tensor> one{t};
  c10d::AllreduceOptions o;
  o.reduceOp = op;
  auto w = backend->allreduce(one, o);
  if (nccl) {
    w->wait();
  } else {
    w->wait(timeout);
  }
}

struct AllReduceSumBackward : public torch::autograd::Node {
  c10::intrusive_ptr<c10d::Backend> backend;
  std::chrono::milliseconds timeout{0};
  bool nccl = false;
  std::vector<int64_t> sizes;
  at::TensorOptions options;

  torch::autograd::variable_list apply(torch::autograd::variable_list&& grads) override {
    // An undefined gradient is a zero one: every rank must still take part in the collective.
    at::Tensor g = grads[0].defined() ? grads[0].contiguous().clone()
                                      : at::zeros(sizes, options);
    reduce_one(backend, nccl, timeout, g, c10d::ReduceOp::SUM);
    return {g};
  }

  std::string name() const override { return "OnoAllReduceSumBackward"; }
};

}  // namespace

extern "C" {

// *out = a new tensor, Σ over ranks of x (contiguous, x's shape, kind and device), with the
// backward above when x requires a gradient and grad mode is on. Returns 0, or -1 with `err`.
int ono_dist_all_reduce_sum_grad(void* h, const at::Tensor* x, at::Tensor** out, char* err,
                                 size_t errlen) {
  auto g = static_cast<Group*>(h);
  *out = nullptr;
  return guarded<int>(err, errlen, -1, [&] {
    at::Tensor y;
    {
      at::NoGradGuard no_grad;
      y = x->detach().contiguous().clone();
      reduce_one(g->backend, g->nccl, g->timeout, y, c10d::ReduceOp::SUM);
    }
    if (x->requires_grad() && at::GradMode::is_enabled()) {
      auto node = std::shared_ptr<AllReduceSumBackward>(new AllReduceSumBackward(),
                                                        torch::autograd::deleteNode);
      node->backend = g->backend;
      node->timeout = g->timeout;
      node->nccl = g->nccl;
      node->sizes = x->sizes().vec();
      node->options = x->options();
      node->set_next_edges(torch::autograd::collect_next_edges(*x));
      torch::autograd::set_history(y, node);
    }
    *out = new at::Tensor(std::move(y));
    return 0;
  });
}


}  // extern "C"

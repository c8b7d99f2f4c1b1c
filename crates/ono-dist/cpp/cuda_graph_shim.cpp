// CUDA graphs for ono-train: libtorch's own at::cuda::CUDAGraph (what torch.cuda.graph wraps;
// tch has no binding) behind a few extern "C" functions. Only functions exported by libc10_cuda
// and libtorch_cuda are called (no inline CUDA runtime call, such as c10's stream guards make):
// the binaries then need no libcudart of their own beside torch's. Compiled only when the CUDA headers are
// found (build.rs; cfg(ono_cuda_graphs) on the Rust side).
//
// What capture means here, as torch.cuda.graph does it:
// * The device first finishes everything queued so far, then the capture runs on a side stream
//   from torch's pool (CUDA cannot capture the legacy default stream), made this thread's current
//   stream from ono_graph_capture_begin to ono_graph_capture_end. Every kernel the caller queues
//   in between (the autograd engine's backward kernels included: they follow their forward's
//   stream) is recorded, not run; allocations come from the graph's private memory pool, so the
//   tensors made during capture stay valid and are rewritten by every replay.
// * capture_begin registers torch's default CUDA generator: each replay reads the generator's
//   seed and offset at launch and advances the offset, so a step reseeded before its replay
//   draws what the eager step draws.
// * ono_graph_replay launches the whole graph on the current stream, ordered after the work the
//   caller queued before it (the copies of the step's inputs into the static buffers).

#include "guarded.hpp"

#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include <optional>

namespace {

struct Graph {
  at::cuda::CUDAGraph graph;
  // The stream that was current before the capture, while capturing (the side stream is then
  // current).
  std::optional<c10::cuda::CUDAStream> stream;
  bool captured = false;
};

// Makes the stream that was current before the capture current again.
void restore(Graph* g) {
  if (g->stream) {
    c10::cuda::setCurrentCUDAStream(*g->stream);
    g->stream.reset();
  }
}

}  // namespace

extern "C" {

// The number of CUDA devices this process sees (0 without a driver or device).
int ono_graph_device_count() {
  char ignored[8];
  return guarded<int>(ignored, sizeof ignored, 0,
                      [] { return static_cast<int>(c10::cuda::device_count()); });
}

// A graph not yet captured, or null with `err`.
void* ono_graph_new(char* err, size_t errlen) {
  return guarded<void*>(err, errlen, nullptr, []() -> void* { return new Graph(); });
}

// Starts recording what this thread queues on `device` (see the file's comment).
int ono_graph_capture_begin(void* h, int device, char* err, size_t errlen) {
  auto g = static_cast<Graph*>(h);
  return guarded<int>(err, errlen, -1, [&] {
    TORCH_CHECK(!g->captured && !g->stream, "this graph was captured already");
    auto count = static_cast<int>(c10::cuda::device_count());
    TORCH_CHECK(device >= 0 && device < count, "cuda:", device, " does not exist (",
                count, " CUDA devices)");
    auto dev = static_cast<c10::DeviceIndex>(device);
    c10::cuda::set_device(dev);
    c10::cuda::device_synchronize();
    g->stream.emplace(c10::cuda::getCurrentCUDAStream(dev));
    c10::cuda::setCurrentCUDAStream(c10::cuda::getStreamFromPool(false, dev));
    try {
      g->graph.capture_begin();
    } catch (...) {
      restore(g);
      throw;
    }
    return 0;
  });
}

// Ends the recording and instantiates the graph; the side stream stops being current either way.
int ono_graph_capture_end(void* h, char* err, size_t errlen) {
  auto g = static_cast<Graph*>(h);
  return guarded<int>(err, errlen, -1, [&] {
    TORCH_CHECK(g->stream.has_value(), "this graph is not capturing");
    try {
      g->graph.capture_end();
    } catch (...) {
      restore(g);
      throw;
    }
    restore(g);
    g->captured = true;
    return 0;
  });
}

// Launches the captured graph on the current stream.
int ono_graph_replay(void* h, char* err, size_t errlen) {
  auto g = static_cast<Graph*>(h);
  return guarded<int>(err, errlen, -1, [&] {
    TORCH_CHECK(g->captured, "this graph was not captured");
    g->graph.replay();
    return 0;
  });
}

// Frees the graph and its memory pool (after the work queued so far, as torch's allocator frees
// a pool).
void ono_graph_free(void* h) {
  char ignored[8];
  guarded<int>(ignored, sizeof ignored, -1, [&] {
    delete static_cast<Graph*>(h);
    return 0;
  });
}

}  // extern "C"

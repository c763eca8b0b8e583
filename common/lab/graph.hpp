// CUDA graphs: capture the work a function launches on a stream once, replay it with one launch.
#pragma once

#include <cstddef>
#include <utility>

#include <cuda_runtime.h>

#include "lab/check.hpp"

namespace lab {

class GraphExec {
 public:
  GraphExec() = default;
  GraphExec(const GraphExec&) = delete;
  GraphExec& operator=(const GraphExec&) = delete;
  ~GraphExec() {
    if (exec_) cudaGraphExecDestroy(exec_);
  }

  // Records what f() launches on s (and on streams that join s) into a graph and instantiates
  // it with flags (cudaGraphInstantiateFlagUseNodePriority: each kernel keeps the priority of the
  // stream it was captured on). Nothing runs during capture. On an exception the capture is ended
  // and the stream is usable.
  template <class F>
  void capture(cudaStream_t s, F&& f, unsigned long long flags = 0) {
    LAB_CHECK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    cudaGraph_t g = nullptr;
    try {
      f();
    } catch (...) {
      cudaStreamEndCapture(s, &g);
      if (g) cudaGraphDestroy(g);
      cudaGetLastError();
      throw;
    }
    LAB_CHECK(cudaStreamEndCapture(s, &g));
    std::size_t n = 0;
    cudaGraphGetNodes(g, nullptr, &n);
    const cudaError_t r = cudaGraphInstantiate(&exec_, g, flags);
    cudaGraphDestroy(g);
    LAB_CHECK(r);
    nodes_ = n;
  }
  void launch(cudaStream_t s) const { LAB_CHECK(cudaGraphLaunch(exec_, s)); }
  explicit operator bool() const { return exec_ != nullptr; }
  std::size_t nodes() const { return nodes_; }

 private:
  cudaGraphExec_t exec_ = nullptr;
  std::size_t nodes_ = 0;
};

}  // namespace lab

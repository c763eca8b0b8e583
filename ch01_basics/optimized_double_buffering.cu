// Optimized pipeline: the buffer in 32 chunks and one stream per stage: every copy in on one
// stream, every kernel on a second, every copy out on a third, ordered chunk by chunk with events
// (chunk c's kernel waits for its copy in; its copy out waits for its kernel). Each engine then
// works through its queue without pause: chunk c+1 travels to the GPU while chunk c is computed and
// chunk c-1 travels back (H100s have a copy engine for each direction). Pinned host memory is
// what makes the copies asynchronous. The time approaches the slowest stage alone plus the
// pipeline's fill and drain (one chunk's worth of the other stages): more chunks shrink that, but
// smaller copies run less efficiently.
// Run: make ch01 && ./ch01_basics/optimized_double_buffering
#include "double_buffering.cuh"

namespace {
constexpr std::size_t kChunks = 32;
}

LAB_VARIANT(DoubleBuffering, optimized, "32 chunks, a stream per stage: copies in, compute and copies out overlap") {
  cudaStream_t in = p.streams[0], compute = p.streams[1], out = p.streams[2];
  const std::size_t chunk = (p.n + kChunks - 1) / kChunks;
  const std::size_t chunks = (p.n + chunk - 1) / chunk;
  // Fork: the pipeline's streams start after whatever came before on the timed stream.
  p.event(0).record(stream);
  for (cudaStream_t s : {in, compute, out}) LAB_CHECK(cudaStreamWaitEvent(s, p.event(0)));
  for (std::size_t c = 0; c < chunks; ++c) {
    const std::size_t first = c * chunk, count = std::min(chunk, p.n - first), bytes = count * sizeof(float);
    lab::Event& copied = p.event(1 + 2 * c);
    lab::Event& computed = p.event(2 + 2 * c);
    LAB_CHECK(cudaMemcpyAsync(p.dev.data() + first, p.in.data() + first, bytes, cudaMemcpyHostToDevice, in));
    copied.record(in);
    LAB_CHECK(cudaStreamWaitEvent(compute, copied));
    double_buffering_launch(p.dev.data() + first, count, p.fmas, compute);
    computed.record(compute);
    LAB_CHECK(cudaStreamWaitEvent(out, computed));
    LAB_CHECK(cudaMemcpyAsync(p.out.data() + first, p.dev.data() + first, bytes, cudaMemcpyDeviceToHost, out));
  }
  // Join: the timed stream continues only when every chunk is back.
  lab::Event& done = p.event(1 + 2 * chunks);
  done.record(out);
  LAB_CHECK(cudaStreamWaitEvent(stream, done));
}

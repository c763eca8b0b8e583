// Optimized pipeline: the buffer in about 32 chunks and one stream per stage: every copy in on one
// stream, every kernel on a second, every copy out on a third, ordered chunk by chunk with events
// (chunk c's kernel waits for its copy in; its copy out waits for its kernel). Each engine then
// works through its queue without pause: chunk c+1 travels to the GPU while chunk c is computed and
// chunk c-1 travels back (H100s have a copy engine for each direction). Pinned host memory is
// what makes the copies asynchronous. The time approaches the slowest stage alone plus the
// pipeline's fill and drain (one chunk's worth of the other stages): more chunks shrink that, but
// smaller copies run less efficiently. So the chunks ramp: a quarter and a half chunk first and
// last, full chunks in between. The pipeline fills and drains on small copies while the long middle
// moves large ones.
// Run: make ch01 && ./ch01_basics/optimized_double_buffering
#include "double_buffering.cuh"

namespace {
constexpr std::size_t kChunks = 32;

// Chunk sizes (elements) summing to n: q/4, q/2, q, ..., q, q/2, q/4 with q = n / kChunks; equal
// chunks when n is too small to ramp.
std::vector<std::size_t> chunk_sizes(std::size_t n) {
  const std::size_t q = (n + kChunks - 1) / kChunks;
  std::vector<std::size_t> s;
  if (q < 4) {
    for (std::size_t first = 0; first < n; first += q) s.push_back(std::min(q, n - first));
    return s;
  }
  const std::size_t ramp = q / 4 + q / 2;  // at each end
  s = {q / 4, q / 2};
  std::size_t middle = n - 2 * ramp;
  while (middle > 0) {
    s.push_back(std::min(q, middle));
    middle -= s.back();
  }
  s.insert(s.end(), {q / 2, q / 4});
  return s;
}
// The variant's state: a stream for each stage of the pipeline, the chunk sizes, and the events
// that order the chunks (a fork, a copied and a computed event a chunk, a join).
struct Pipeline {
  using Topic = DoubleBuffering;
  std::array<lab::Stream, 3> streams;  // copies in, kernels, copies out
  std::vector<std::size_t> sizes;
  std::vector<lab::Event> events;
  explicit Pipeline(const DoubleBuffering::Problem& p) : sizes(chunk_sizes(p.n)), events(2 + 2 * sizes.size()) {}

  void run(DoubleBuffering::Problem& p, cudaStream_t stream) {
    cudaStream_t in = streams[0], compute = streams[1], out = streams[2];
    const std::size_t chunks = sizes.size();
    // Fork: the pipeline's streams start after whatever came before on the timed stream.
    events[0].record(stream);
    for (cudaStream_t s : {in, compute, out}) LAB_CHECK(cudaStreamWaitEvent(s, events[0]));
    std::size_t first = 0;
    for (std::size_t c = 0; c < chunks; first += sizes[c], ++c) {
      const std::size_t count = sizes[c], bytes = count * sizeof(float);
      lab::Event& copied = events[1 + 2 * c];
      lab::Event& computed = events[2 + 2 * c];
      LAB_CHECK(cudaMemcpyAsync(p.dev.data() + first, p.in.data() + first, bytes, cudaMemcpyHostToDevice, in));
      copied.record(in);
      LAB_CHECK(cudaStreamWaitEvent(compute, copied));
      double_buffering_launch(p.dev.data() + first, count, p.fmas, compute);
      computed.record(compute);
      LAB_CHECK(cudaStreamWaitEvent(out, computed));
      LAB_CHECK(cudaMemcpyAsync(p.out.data() + first, p.dev.data() + first, bytes, cudaMemcpyDeviceToHost, out));
    }
    // Join: the timed stream continues only when every chunk is back.
    lab::Event& done = events[1 + 2 * chunks];
    done.record(out);
    LAB_CHECK(cudaStreamWaitEvent(stream, done));
  }
};
}  // namespace

LAB_VARIANT_CLASS(Pipeline, optimized,
                  "chunks ramped at both ends, a stream per stage: copies in, compute and copies out overlap");

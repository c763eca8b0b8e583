// A GPT-2 variant trained on the device for the training check (gpt2.cuh: train_on_device): the
// variant's own prepare step and run, fed the synthetic corpus batch by batch.
#include "gpt2/gpt2.cuh"
#include "lab/harness.hpp"

namespace gpt2 {

TrainRun train_on_device(const lab::Variant& v, std::uint64_t seed, int steps) {
  const Config c = kTrainConfig;
  const lab::Shape shape{c.layers, c.d, c.heads, c.context, c.batch, c.vocab, static_cast<int>(Phase::step)};
  if (const std::string why = lab::unsupported(v, shape); !why.empty())
    throw lab::Error(v.program + " does not run the training configuration " + shape.str() + ": " + why);
  const std::vector<std::int32_t> corpus = synthetic_corpus(c.vocab, kTrainCorpusLength);
  lab::Stream stream;
  lab::Prepared pr = lab::prepare(v, shape, seed, stream);
  auto& p = dynamic_cast<Gpt2Step::Problem&>(*pr.problem);
  TrainRun out;
  out.params0 = p.params.download();
  // AdamW from zero moments, as a training run starts (the Problem's are as after a few steps).
  LAB_CHECK(cudaMemsetAsync(p.m.data(), 0, p.m.size() * sizeof(float), stream));
  LAB_CHECK(cudaMemsetAsync(p.v.data(), 0, p.v.size() * sizeof(float), stream));
  LAB_CHECK(cudaStreamSynchronize(stream));
  std::vector<std::int32_t> tokens, targets;
  float loss = 0;
  for (int s = 0; s < steps; ++s) {
    corpus_batch(corpus, c, s, tokens, targets);
    p.tokens.upload(tokens);  // synchronous: the last step has finished (synchronized below)
    p.targets.upload(targets);
    p.step = s + 1;
    pr.instance->run(p, stream);
    LAB_CHECK_LAUNCH();
    LAB_CHECK(cudaMemcpyAsync(&loss, p.loss.data(), sizeof loss, cudaMemcpyDeviceToHost, stream));
    LAB_CHECK(cudaStreamSynchronize(stream));
    out.losses.push_back(loss);
  }
  return out;
}

}  // namespace gpt2

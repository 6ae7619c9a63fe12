// Decoding speed of the byte-level transformer with and without the KV cache.
// For each context length C the model first reads C-1 tokens, then generates
// kSteps tokens one at a time: with the cache each step runs one position
// (attending over the cached keys and values); without it each step reruns
// the whole prefix. Prints ms per token, tokens/s and the speed-up.
// Not a test: numbers depend on the machine. Run: make bench && build/bench_lm_decode
#include <torch/torch.h>

#include <chrono>
#include <cstdio>

#include "qkv/attention/kv_cache.h"
#include "qkv/models/transformer_lm.h"
#include "qkv/runtime/openblas_core.h"
#include "qkv/runtime/runtime.h"

namespace {

constexpr int64_t kSteps = 32;   // generated tokens per measurement
constexpr int64_t kRepeats = 3;  // measurements per cell; the median is printed
constexpr int64_t kContexts[] = {64, 256, 1024};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double ms_per_token(qkv::models::TransformerLM& lm, int64_t context, bool cached) {
  torch::NoGradGuard no_grad;
  const auto& o = lm.options();
  auto prompt = torch::randint(0, o.vocab, {1, context - 1}, torch::kLong);
  auto next = torch::randint(0, o.vocab, {1, 1}, torch::kLong);
  std::vector<double> runs;
  for (int64_t r = 0; r < kRepeats; ++r) {
    qkv::attention::KVCache cache(o.layers, 1, o.heads, context + kSteps, o.head_dk(), o.head_dv());
    auto sequence = prompt;
    if (cached) lm.forward_tokens(prompt, &cache);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < kSteps; ++s) {
      if (cached) {
        lm.forward_tokens(next, &cache);
      } else {
        // Recompute: the window stays at `context` tokens, as a fixed-context decoder would.
        lm.forward_tokens(torch::cat({sequence.slice(1, sequence.size(1) - (context - 1)), next}, 1));
      }
      sequence = torch::cat({sequence, next}, 1);
    }
    runs.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
                   kSteps);
  }
  return median(runs);
}

}  // namespace

int main(int, char** argv) {
  qkv::blas::choose_openblas_core(argv);
  qkv::models::TransformerLMOptions o;
  o.d_model = 256;
  o.layers = 4;
  o.heads = 8;
  torch::manual_seed(0);
  qkv::models::TransformerLM lm(o);
  lm.eval();
  for (int threads : {1, 0}) {
    qkv::set_threads(threads);
    std::printf(
        "\nTransformerLM d_model %lld, %lld layers, %lld heads, float32; %d thread(s), %s; median of %lld x %lld "
        "steps\n",
        static_cast<long long>(o.d_model), static_cast<long long>(o.layers), static_cast<long long>(o.heads),
        at::get_num_threads(), qkv::blas_summary().c_str(), static_cast<long long>(kRepeats),
        static_cast<long long>(kSteps));
    std::printf("%8s | %12s %10s | %12s %10s | %8s\n", "context", "cache ms/tok", "tok/s", "recomp ms/tok", "tok/s",
                "speed-up");
    for (int64_t c : kContexts) {
      const double with = ms_per_token(lm, c, true), without = ms_per_token(lm, c, false);
      std::printf("%8lld | %12.3f %10.1f | %12.3f %10.1f | %7.1fx\n", static_cast<long long>(c), with, 1000.0 / with,
                  without, 1000.0 / without, without / with);
    }
  }
  return 0;
}

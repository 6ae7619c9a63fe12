// What each way of making the KV cache small costs and saves, side by side:
// bytes a position (all layers), and decode speed with 1k and 8k positions
// already cached. Each variant is the same kind of model (d_model 256, 4
// layers, 8 heads of width 32, random weights: speed does not depend on
// training); the cache is filled by a chunked prefill, then kSteps tokens are
// decoded one at a time and timed. Quality (exact match, bits per byte) needs
// trained models: `qkv lm eval --cache-dtype` measures it (docs/lm.md).
// Not a test: numbers depend on the machine. Run: make bench && build/bench_lm_cache
#include <torch/torch.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "qkv/attention/kv_cache.h"
#include "qkv/models/transformer_lm.h"
#include "qkv/runtime/openblas_core.h"
#include "qkv/runtime/runtime.h"

namespace qa = qkv::attention;

namespace {

constexpr int64_t kSteps = 32;   // decoded tokens per measurement
constexpr int64_t kRepeats = 5;  // measurements per cell; the median is printed
constexpr int64_t kChunk = 512;  // prefill block
constexpr int64_t kContexts[] = {1024, 8192};

struct Variant {
  std::string name;
  int64_t kv_heads;
  qa::CacheDtype dtype;
  int64_t window;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

double ms_per_token(qkv::models::TransformerLM& lm, const Variant& v, int64_t context) {
  torch::NoGradGuard no_grad;
  const auto& o = lm.options();
  std::vector<double> runs;
  for (int64_t r = 0; r < kRepeats; ++r) {
    qa::KVCache cache(qkv::models::kv_cache_settings(o, v.dtype, 1, c10::kCPU));
    const auto prompt = torch::randint(0, o.vocab, {1, context}, torch::kLong);
    for (int64_t at = 0; at < context; at += kChunk)
      lm.forward_tokens(prompt.narrow(1, at, std::min(kChunk, context - at)), &cache);
    const auto next = torch::randint(0, o.vocab, {1, 1}, torch::kLong);
    const auto start = std::chrono::steady_clock::now();
    for (int64_t s = 0; s < kSteps; ++s) lm.forward_tokens(next, &cache);
    runs.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() /
                   kSteps);
  }
  return median(runs);
}

}  // namespace

int main(int, char** argv) {
  qkv::blas::choose_openblas_core(argv);
  const std::vector<Variant> variants = {{"f32", 8, qa::CacheDtype::kFloat32, 0},
                                         {"f16", 8, qa::CacheDtype::kFloat16, 0},
                                         {"bf16", 8, qa::CacheDtype::kBFloat16, 0},
                                         {"int8", 8, qa::CacheDtype::kInt8, 0},
                                         {"int4", 8, qa::CacheDtype::kInt4, 0},
                                         {"kv_heads 2, f32", 2, qa::CacheDtype::kFloat32, 0},
                                         {"kv_heads 1, f32", 1, qa::CacheDtype::kFloat32, 0},
                                         {"kv_heads 1, int8", 1, qa::CacheDtype::kInt8, 0},
                                         {"window 1024, f32", 8, qa::CacheDtype::kFloat32, 1024}};
  for (int threads : {1, 0}) {
    qkv::set_threads(threads);
    std::printf("\nd_model 256, 4 layers, 8 query heads of width 32; %d thread(s), %s; median of %lld x %lld steps\n",
                at::get_num_threads(), qkv::blas_summary().c_str(), static_cast<long long>(kRepeats),
                static_cast<long long>(kSteps));
    std::printf("%-18s | %10s %8s | %9s %9s %7s | %9s %9s %7s\n", "cache", "bytes/pos", "of f32", "1k ms/tok", "tok/s",
                "vs f32", "8k ms/tok", "tok/s", "vs f32");
    double base[2] = {0, 0};
    int64_t base_bytes = 0;
    for (const auto& v : variants) {
      qkv::models::TransformerLMOptions o;
      o.d_model = 256;
      o.layers = 4;
      o.heads = 8;
      o.kv_heads = v.kv_heads;
      o.window = v.window;
      torch::manual_seed(0);
      qkv::models::TransformerLM lm(o);
      lm.eval();
      auto shape = qa::KVCacheShape{o.layers, 1, o.head_kv(), o.head_dk(), o.head_dv(), 1, v.dtype};
      const int64_t bytes = qa::kv_cache_bytes(shape).total_bytes;
      if (base_bytes == 0) base_bytes = bytes;
      double ms[2];
      for (int i = 0; i < 2; ++i) {
        ms[i] = ms_per_token(lm, v, kContexts[i]);
        if (base[i] == 0) base[i] = ms[i];
      }
      std::printf("%-18s | %10lld %7.3fx | %9.3f %9.1f %6.2fx | %9.3f %9.1f %6.2fx%s\n", v.name.c_str(),
                  static_cast<long long>(bytes), static_cast<double>(bytes) / static_cast<double>(base_bytes), ms[0],
                  1000.0 / ms[0], base[0] / ms[0], ms[1], 1000.0 / ms[1], base[1] / ms[1],
                  v.window > 0 ? "  (holds 1024 positions)" : "");
      std::fflush(stdout);
    }
  }
  return 0;
}

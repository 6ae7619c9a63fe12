// The ways the KV cache is made small, each against a reference: shared
// key/value heads against per-head loops, int8/int4 rows within one
// quantisation step, the decode kernel against attention over the dequantised
// rows, the sliding window against full attention under the window mask,
// growth against a preallocated cache, and the byte arithmetic by hand.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cmath>
#include <string>

#include "qkv/attention/kv_cache.h"
#include "qkv/attention/multi_head_attention.h"
#include "qkv/attention/sdpa.h"
#include "qkv/core/errors.h"
#include "support/test_files.h"
#include "support/tolerance.h"

namespace qa = qkv::attention;

using qkv::testing::expect_usage_error;
using qkv::testing::max_abs_difference;
using qkv::testing::rnd;

namespace {

qa::KVCacheSettings settings(int64_t kv_heads, int64_t dk, int64_t dv, qa::CacheDtype dtype) {
  qa::KVCacheSettings s;
  s.layers = 2;
  s.batch = 2;
  s.kv_heads = kv_heads;
  s.dk = dk;
  s.dv = dv;
  s.dtype = dtype;
  return s;
}

}  // namespace

TEST(GroupedQueryAttention, KvHeadsEqualToHeadsIsStandardMultiHead) {
  const int64_t B = 2, N = 7, D = 12, h = 4;
  torch::manual_seed(3);
  qa::MultiHeadAttention standard(qa::MultiHeadAttentionOptions(D, h));
  torch::manual_seed(3);
  qa::MultiHeadAttention grouped(qa::MultiHeadAttentionOptions(D, h).kv_heads(h));
  for (const auto& item : standard->named_parameters())
    EXPECT_TRUE(item.value().equal(grouped->named_parameters()[item.key()])) << item.key();
  const auto x = at::randn({B, N, D});
  qa::SdpaOptions o;
  o.causal = true;
  EXPECT_TRUE(standard(x, x, x, o).output.equal(grouped(x, x, x, o).output));
}

TEST(GroupedQueryAttention, MultiQueryEqualsPerHeadLoops) {
  // kv_heads 1: every query head attends the one key/value head.
  torch::manual_seed(4);
  const int64_t B = 2, N = 5, D = 8, h = 4, r = 3, dv = 2;
  qa::MultiHeadAttention mha(qa::MultiHeadAttentionOptions(D, h).kv_heads(1).qk_dim(r).v_dim(dv));
  mha->to(at::kDouble);
  EXPECT_EQ(mha->w_k.sizes(), (std::vector<int64_t>{r, D}));
  EXPECT_EQ(mha->w_v.sizes(), (std::vector<int64_t>{dv, D}));
  const auto x = rnd({B, N, D});
  qa::SdpaOptions o;
  o.causal = true;
  const auto out = mha(x, x, x, o).output;
  const auto k = at::linear(x, mha->w_k, mha->b_k), v = at::linear(x, mha->w_v, mha->b_v);  // [B,N,r], [B,N,dv]
  std::vector<at::Tensor> heads;
  for (int64_t j = 0; j < h; ++j) {
    const auto q = at::linear(x, mha->w_q.narrow(0, j * r, r), mha->b_q.narrow(0, j * r, r));
    auto s = at::matmul(q, k.transpose(1, 2)) / std::sqrt(static_cast<double>(r));
    s = s.masked_fill(at::ones({N, N}, at::kBool).triu(1), -INFINITY);
    heads.push_back(at::matmul(at::softmax(s, -1), v));
  }
  const auto expected = at::linear(at::cat(heads, 2), mha->w_o, mha->b_o);
  EXPECT_LT(max_abs_difference(out, expected), 1e-12);
  expect_usage_error([] { qa::MultiHeadAttention(qa::MultiHeadAttentionOptions(8, 4).kv_heads(3)); }, "kv_heads");
}

// The cache keeps no autograd graph: with gradients wanted, decoding through
// it would train W_O alone, so it is refused before anything is appended.
TEST(GroupedQueryAttention, CachedDecodingWithGradientsWantedIsRefused) {
  qa::MultiHeadAttention mha(qa::MultiHeadAttentionOptions(8, 4).kv_heads(2));
  qa::KVCache cache(settings(2, 2, 2, qa::CacheDtype::kFloat32));
  qa::SdpaOptions o;
  o.causal = true;
  expect_usage_error(
      [&] {
        mha->forward_cached(at::randn({2, 3, 8}), cache, 0, o);
      },
      "a KV cache keeps no autograd graph");
  EXPECT_EQ(cache.length(0), 0);
  torch::NoGradGuard no_grad;
  EXPECT_EQ(mha->forward_cached(at::randn({2, 3, 8}), cache, 0, o).output.sizes(), (std::vector<int64_t>{2, 3, 8}));
  EXPECT_EQ(cache.length(0), 3);
}

TEST(GroupedQueryAttention, CachedDecodingEqualsFullForward) {
  torch::NoGradGuard no_grad;  // decoding with a cache keeps no graph
  torch::manual_seed(5);
  const int64_t B = 2, N = 11, D = 8, h = 4, g = 2;
  qa::MultiHeadAttention mha(qa::MultiHeadAttentionOptions(D, h).kv_heads(g));
  mha->to(at::kDouble);
  const auto x = rnd({B, N, D});
  qa::SdpaOptions o;
  o.causal = true;
  const auto full = mha(x, x, x, o).output;
  qa::KVCache cache(settings(g, D / h, D / h, qa::CacheDtype::kFloat64));
  std::vector<at::Tensor> pieces{mha->forward_cached(x.narrow(1, 0, 4), cache, 1, o).output};
  for (int64_t t = 4; t < N; ++t) pieces.push_back(mha->forward_cached(x.narrow(1, t, 1), cache, 1, o).output);
  EXPECT_LT(max_abs_difference(at::cat(pieces, 1), full), 1e-12);
  EXPECT_EQ(cache.heads(), g);  // the cache stores g heads, not h
  EXPECT_LT(max_abs_difference(cache.keys(1), mha->project_k(x)), 1e-12);
}

TEST(QuantizedCache, RowsWithinOneStepOfTheFloats) {
  torch::manual_seed(6);
  for (auto dtype : {qa::CacheDtype::kInt8, qa::CacheDtype::kInt4}) {
    const double qmax = dtype == qa::CacheDtype::kInt8 ? 127 : 7;
    qa::KVCache cache(settings(2, 64, 48, dtype));
    // Rows of very different sizes: each block has its own scale.
    const auto k = at::randn({2, 2, 9, 64}) * at::logspace(-1, 3, 9).view({1, 1, 9, 1});
    const auto v = at::randn({2, 2, 9, 48});
    cache.append(0, k, v);
    const auto& st = cache.storage(0);
    ASSERT_EQ(st.key_scales.size(3), 2);    // 64 / 32
    ASSERT_EQ(st.value_scales.size(3), 3);  // 48 / 16
    for (const auto& [stored, scales, original, block] :
         {std::tuple{cache.keys(0), st.key_scales, k, 32}, std::tuple{cache.values(0), st.value_scales, v, 16}}) {
      const auto step = scales.narrow(2, 0, 9).to(at::kFloat).repeat_interleave(block, 3);
      const auto error = (stored - original).abs();
      EXPECT_TRUE((error <= step * 0.51 + 1e-12).all().item<bool>()) << qa::cache_dtype_name(dtype);
      // The scale is the block's largest |x| / qmax, to float16's precision.
      const auto amax = original.abs().view({2, 2, 9, -1, block}).amax(-1);
      EXPECT_LT((step.view({2, 2, 9, -1, block}).select(-1, 0) * qmax / amax - 1).abs().max().item<double>(), 1e-3);
    }
  }
}

TEST(QuantizedCache, DecodeKernelEqualsAttentionOverTheStoredRows) {
  torch::manual_seed(7);
  const int64_t B = 2, h = 6, g = 3, prompt = 70;  // more than one 64-row chunk
  // Widths of one block of 16 / 8 and of whole 32-blocks (the AVX2 int4 path).
  for (auto [dk, dv] : {std::pair<int64_t, int64_t>{16, 8}, {64, 32}})
    for (auto dtype : {qa::CacheDtype::kInt8, qa::CacheDtype::kInt4, qa::CacheDtype::kFloat16,
                       qa::CacheDtype::kBFloat16, qa::CacheDtype::kFloat32}) {
      qa::KVCache cache(settings(g, dk, dv, dtype));
      cache.append(0, at::randn({B, g, prompt, dk}), at::randn({B, g, prompt, dv}));
      const auto q = at::randn({B, h, 1, dk});
      const auto k_new = at::randn({B, g, 1, dk}), v_new = at::randn({B, g, 1, dv});
      const auto out = cache.append_and_attend(0, q, k_new, v_new, 0.25);
      // Reference in float64 over what the cache holds, heads expanded by hand.
      const auto k = cache.keys(0).to(at::kDouble).repeat_interleave(h / g, 1);
      const auto v = cache.values(0).to(at::kDouble).repeat_interleave(h / g, 1);
      const auto p = at::softmax(at::matmul(q.to(at::kDouble), k.transpose(2, 3)) * 0.25, -1);
      const auto expected = at::matmul(p, v);
      EXPECT_LT(max_abs_difference(out, expected), 1e-5) << qa::cache_dtype_name(dtype) << " dk " << dk;
      EXPECT_EQ(out.scalar_type(), at::kFloat);
    }
}

TEST(QuantizedCache, NonFiniteOrOutOfRangeRefusedAndNothingWritten) {
  qa::KVCache cache(settings(1, 4, 4, qa::CacheDtype::kInt8));
  cache.append(0, at::ones({2, 1, 1, 4}), at::ones({2, 1, 1, 4}));
  auto k = at::ones({2, 1, 1, 4});
  k[0][0][0][1] = NAN;
  expect_usage_error([&] { cache.append(0, k, at::ones({2, 1, 1, 4})); }, "k_new");
  expect_usage_error([&] { cache.append(0, at::ones({2, 1, 1, 4}), at::full({2, 1, 1, 4}, 1e9)); }, "v_new");
  EXPECT_EQ(cache.length(0), 1);
  expect_usage_error([] { qa::KVCache(settings(1, 3, 4, qa::CacheDtype::kInt4)); }, "even");
}

TEST(SlidingWindowCache, DecodeEqualsFullAttentionWithTheWindowMask) {
  torch::NoGradGuard no_grad;  // decoding with a cache keeps no graph
  torch::manual_seed(8);
  const int64_t B = 2, N = 23, D = 8, h = 2;
  for (auto [window, sinks] : {std::pair<int64_t, int64_t>{4, 0}, {5, 2}, {1, 1}}) {
    qa::MultiHeadAttention mha(qa::MultiHeadAttentionOptions(D, h));
    mha->to(at::kDouble);
    const auto x = rnd({B, N, D});
    qa::SdpaOptions o;
    o.causal = true;
    o.bool_mask = qa::window_attend_mask(N, window, sinks, at::kCPU);
    const auto full = mha(x, x, x, o).output;
    auto s = settings(h, D / h, D / h, qa::CacheDtype::kFloat64);
    s.window = window;
    s.sinks = sinks;
    s.initial_length = 1;
    qa::KVCache cache(s);
    qa::SdpaOptions step;
    step.causal = true;
    // A prompt longer than the window (it overwrites its own start), then
    // single steps, then another block.
    std::vector<at::Tensor> pieces{mha->forward_cached(x.narrow(1, 0, 9), cache, 0, step).output};
    for (int64_t t = 9; t < 17; ++t) pieces.push_back(mha->forward_cached(x.narrow(1, t, 1), cache, 0, step).output);
    pieces.push_back(mha->forward_cached(x.narrow(1, 17, N - 17), cache, 0, step).output);
    EXPECT_LT(max_abs_difference(at::cat(pieces, 1), full), 1e-12) << "window " << window << " sinks " << sinks;
    EXPECT_EQ(cache.capacity(), window + sinks);  // a ring, never more
    EXPECT_EQ(cache.held(0), window + sinks);
    // The ring holds the sinks and the last `window` positions.
    auto held = cache.positions(0);
    std::vector<int64_t> got(held.data_ptr<int64_t>(), held.data_ptr<int64_t>() + held.numel());
    std::sort(got.begin(), got.end());
    std::vector<int64_t> want;
    for (int64_t p = 0; p < sinks; ++p) want.push_back(p);
    for (int64_t p = N - window; p < N; ++p) want.push_back(p);
    EXPECT_EQ(got, want);
  }
  expect_usage_error(
      [] {
        auto s = settings(1, 2, 2, qa::CacheDtype::kFloat32);
        s.sinks = 2;
        qa::KVCache c(s);
      },
      "sinks need a window");
}

TEST(GrowingCache, SameOutputsAsPreallocatedAndBoundedByTheMemoryLimit) {
  torch::NoGradGuard no_grad;  // decoding with a cache keeps no graph
  torch::manual_seed(9);
  const int64_t B = 2, N = 40, D = 8, h = 2;
  qa::MultiHeadAttention mha(qa::MultiHeadAttentionOptions(D, h));
  const auto x = at::randn({B, N, D});
  qa::SdpaOptions o;
  o.causal = true;
  auto decode = [&](qa::KVCache& cache) {
    std::vector<at::Tensor> pieces{mha->forward_cached(x.narrow(1, 0, 3), cache, 0, o).output};
    for (int64_t t = 3; t < N; ++t) pieces.push_back(mha->forward_cached(x.narrow(1, t, 1), cache, 0, o).output);
    return at::cat(pieces, 1);
  };
  for (auto dtype : {qa::CacheDtype::kFloat32, qa::CacheDtype::kInt8}) {
    auto s = settings(h, D / h, D / h, dtype);
    s.initial_length = N;
    s.max_length = N;
    qa::KVCache fixed(s);
    s.initial_length = 2;
    s.max_length = 0;
    qa::KVCache growing(s);
    EXPECT_EQ(growing.capacity(), 2);
    EXPECT_TRUE(decode(growing).equal(decode(fixed))) << qa::cache_dtype_name(dtype);
    EXPECT_EQ(growing.capacity(), 64);  // 2, then doubled: 4 (the prompt), 8, 16, 32, 64
    EXPECT_TRUE(growing.keys(0).equal(fixed.keys(0)));
  }
  // 2 layers x 2 x 2 heads x (4 + 4) x 4 bytes = 256 bytes a position.
  auto s = settings(2, 4, 4, qa::CacheDtype::kFloat32);
  s.initial_length = 4;
  s.memory_limit_bytes = 256 * 10;
  qa::KVCache limited(s);
  limited.append(0, at::randn({2, 2, 8, 4}), at::randn({2, 2, 8, 4}));
  EXPECT_EQ(limited.capacity(), 8);
  // Doubling to 16 would pass the limit: exactly what is needed instead.
  limited.append(0, at::randn({2, 2, 1, 4}), at::randn({2, 2, 1, 4}));
  EXPECT_EQ(limited.capacity(), 9);
  expect_usage_error([&] { limited.append(0, at::randn({2, 2, 3, 4}), at::randn({2, 2, 3, 4})); }, "memory limit");
  EXPECT_EQ(limited.length(0), 9);
  EXPECT_EQ(limited.capacity(), 9);
}

TEST(CacheBytes, EveryVariantByHand) {
  using D = qa::CacheDtype;
  // int8: 32 numbers + a 2-byte scale per block; int4: 16 bytes + 2.
  EXPECT_EQ(qa::head_row_bytes(D::kInt8, 128), 128 + 4 * 2);
  EXPECT_EQ(qa::head_row_bytes(D::kInt4, 128), 64 + 4 * 2);
  EXPECT_EQ(qa::head_row_bytes(D::kInt8, 16), 16 + 2);      // one block of 16
  EXPECT_EQ(qa::head_row_bytes(D::kInt8, 24), 24 + 3 * 2);  // blocks of 8
  EXPECT_EQ(qa::head_row_bytes(D::kFloat16, 10), 20);
  EXPECT_EQ(qa::head_row_bytes(D::kBFloat16, 10), 20);
  EXPECT_EQ(qa::head_row_bytes(D::kFloat32, 10), 40);
  // The article: 50 layers, 20 heads, r = 1000, 5000 positions, 2 bytes.
  qa::KVCacheShape a{50, 1, 20, 1000, 1000, 5000, D::kFloat16};
  EXPECT_EQ(qa::kv_cache_bytes(a).key_bytes, 10'000'000'000LL);
  a.dk = a.dv = 200;
  EXPECT_EQ(qa::kv_cache_bytes(a).total_bytes, 4'000'000'000LL);
  a.kv_heads = 4;
  EXPECT_EQ(qa::kv_cache_bytes(a).total_bytes, 800'000'000LL);
  a.dtype = D::kInt8;  // 200 = 25 blocks of 8: 200 + 50 bytes a row
  EXPECT_EQ(qa::kv_cache_bytes(a).total_bytes, 2LL * 50 * 4 * 5000 * 250);
  a.window = 1000;
  a.sinks = 24;
  EXPECT_EQ(qa::kv_cache_bytes(a).total_bytes, 2LL * 50 * 4 * 1024 * 250);
  a.seq = 100;  // shorter than the window: what was appended
  EXPECT_EQ(qa::kv_cache_bytes(a).total_bytes, 2LL * 50 * 4 * 100 * 250);
  // int8 against float32 at a head width of 64: 0.266x.
  EXPECT_NEAR(static_cast<double>(qa::head_row_bytes(D::kInt8, 64)) / qa::head_row_bytes(D::kFloat32, 64), 0.2656,
              1e-3);
  qa::KVCacheShape huge{1LL << 40, 1, 1LL << 20, 1LL << 10, 2, 1, D::kInt4};
  expect_usage_error(
      [&] {
        qa::KVCacheShape odd{1, 1, 1, 4, 3, 1, D::kInt4};
        qa::kv_cache_bytes(odd);
      },
      "even");
  expect_usage_error([&] { qa::kv_cache_bytes(huge); }, "more than");
  EXPECT_EQ(qa::parse_cache_dtype("FP16", "--dtype"), D::kFloat16);
  EXPECT_EQ(qa::parse_cache_dtype("float16", "--dtype"), D::kFloat16);
  EXPECT_EQ(qa::parse_cache_dtype("bfloat16", "--dtype"), D::kBFloat16);
  EXPECT_EQ(qa::parse_cache_dtype("q8", "--dtype"), D::kInt8);
  expect_usage_error([] { qa::parse_cache_dtype("int3", "--cache-dtype"); }, "--cache-dtype 'int3'");
}

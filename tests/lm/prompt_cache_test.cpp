// The language model's small caches end to end: shared heads and a sliding
// window decode what the full forward computes, a saved prompt cache resumes
// into the very same continuation, and a damaged, truncated or foreign cache
// file is refused without anything being changed.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "qkv/attention/kv_cache.h"
#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/lm/generate.h"
#include "qkv/lm/prompt_cache.h"
#include "qkv/models/transformer_lm.h"
#include "support/test_files.h"
#include "support/tolerance.h"

namespace fs = std::filesystem;
namespace qa = qkv::attention;

namespace qkv::testing {
namespace {

models::TransformerLMOptions small_options() {
  models::TransformerLMOptions o;
  o.d_model = 32;
  o.layers = 2;
  o.heads = 4;
  return o;
}

std::vector<int64_t> tokens_of(const std::string& text) { return std::vector<int64_t>(text.begin(), text.end()); }

TEST(LmSmallCaches, SharedHeadsAndWindowDecodeWhatTheFullForwardComputes) {
  for (auto [kv_heads, window, sinks] : {std::tuple<int64_t, int64_t, int64_t>{1, 0, 0}, {2, 5, 0}, {4, 6, 2}}) {
    torch::manual_seed(11);
    auto o = small_options();
    o.kv_heads = kv_heads;
    o.window = window;
    o.sinks = sinks;
    models::TransformerLM lm(o);
    lm.to(at::kDouble);
    lm.eval();
    torch::NoGradGuard no_grad;
    const auto tokens = at::randint(0, 256, {2, 19}, at::kLong);
    const auto full = lm.forward_tokens(tokens);
    qa::KVCacheSettings s;
    s.layers = o.layers;
    s.batch = 2;
    s.kv_heads = o.head_kv();
    s.dk = o.head_dk();
    s.dv = o.head_dv();
    s.dtype = qa::CacheDtype::kFloat64;
    s.window = window;
    s.sinks = sinks;
    s.initial_length = 1;
    qa::KVCache cache(s);
    std::vector<at::Tensor> pieces{lm.forward_tokens(tokens.narrow(1, 0, 8), &cache)};
    for (int64_t t = 8; t < 19; ++t) pieces.push_back(lm.forward_tokens(tokens.narrow(1, t, 1), &cache));
    EXPECT_LT(max_abs_difference(at::cat(pieces, 1), full), 1e-10) << kv_heads << " " << window << " " << sinks;
    // A window changes what the model computes: it is not the full causal model.
    if (window > 0) {
      auto plain = o;
      plain.window = plain.sinks = 0;
      torch::manual_seed(11);
      models::TransformerLM unwindowed(plain);
      unwindowed.to(at::kDouble);
      unwindowed.eval();
      EXPECT_GT(max_abs_difference(unwindowed.forward_tokens(tokens), full), 1e-6);
    }
  }
}

TEST(LmSmallCaches, ParameterCountFollowsKvHeads) {
  for (int64_t kv : {0, 1, 2, 4}) {
    auto o = small_options();
    o.kv_heads = kv;
    models::TransformerLM lm(o);
    int64_t n = 0;
    for (const auto& p : lm.parameters()) n += p.numel();
    EXPECT_EQ(models::transformer_lm_size(o, 16).parameters, n) << kv;
  }
  auto bad = nlohmann::json{{"heads", 4}, {"kv_heads", 3}};
  EXPECT_NE(usage_error_of([&] { models::TransformerLMOptions::from_json(bad); }).find("kv_heads"), std::string::npos);
}

class PromptCacheFile : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fresh_dir("prompt_cache");
    fs::create_directories(dir_);
    torch::manual_seed(12);
    lm_ = std::make_unique<models::TransformerLM>(small_options());
  }
  void TearDown() override { fs::remove_all(dir_); }

  lm::Generation run(const std::string& prompt, const std::string& load, const std::string& save,
                     std::optional<qa::CacheDtype> dtype = std::nullopt) {
    lm::GenerateOptions o;
    o.max_new = 24;
    o.temperature = 0.8;  // sampled: the generator's draws must line up too
    o.seed = 5;
    o.keep_logits = true;
    o.load_cache = load;
    o.save_cache = save;
    o.cache_dtype = dtype;
    return lm::generate(*lm_, tokens_of(prompt), o);
  }

  std::string dir_;
  std::unique_ptr<models::TransformerLM> lm_;
};

TEST_F(PromptCacheFile, ResumedGenerationIsBitIdentical) {
  const std::string prompt = "a long prompt that is read once and continued many times: ";
  for (auto dtype : {qa::CacheDtype::kFloat32, qa::CacheDtype::kInt8, qa::CacheDtype::kInt4}) {
    const std::string file = dir_ + "/p-" + qa::cache_dtype_name(dtype) + ".kvc";
    const auto straight = run(prompt, "", file, dtype);
    ASSERT_TRUE(fs::exists(file));
    const auto resumed = run(prompt, file, "", dtype);
    EXPECT_EQ(resumed.resumed, static_cast<int64_t>(prompt.size()));
    EXPECT_EQ(resumed.tokens, straight.tokens) << qa::cache_dtype_name(dtype);
    ASSERT_EQ(resumed.logits.size(), straight.logits.size());
    for (size_t i = 0; i < resumed.logits.size(); ++i) EXPECT_TRUE(resumed.logits[i].equal(straight.logits[i])) << i;
    // A longer prompt that begins with the cached one reads only its new part.
    const auto longer = run(prompt + "more", file, "", dtype);
    EXPECT_EQ(longer.resumed, static_cast<int64_t>(prompt.size()));
    const auto fresh = run(prompt + "more", "", "", dtype);
    EXPECT_EQ(longer.tokens.size(), fresh.tokens.size());
    EXPECT_LT(max_abs_difference(longer.logits[0], fresh.logits[0]),
              1e-4 * std::max(1.0, fresh.logits[0].abs().max().item<double>()));
  }
}

TEST_F(PromptCacheFile, DamagedTruncatedOrForeignFilesAreRefused) {
  const std::string file = dir_ + "/p.kvc";
  run("hello there", "", file);
  const auto good = read_file_bytes(file);
  auto refused = [&](const std::vector<char>& bytes, const std::string& needle) {
    const std::string path = dir_ + "/bad.kvc";
    write_file_atomic(path, bytes);
    expect_data_error([&] { run("hello there", path, ""); }, path, needle);
    EXPECT_EQ(read_file_bytes(path), bytes);  // reading changes nothing
  };
  auto flipped = good;
  flipped[flipped.size() / 2] ^= 0x20;
  refused(flipped, "damaged");
  refused(std::vector<char>(good.begin(), good.begin() + static_cast<long>(good.size() / 2)), "");
  refused(std::vector<char>(good.begin(), good.begin() + 10), "not a qkv prompt cache");
  refused(std::vector<char>{'h', 'e', 'l', 'l', 'o'}, "not a qkv prompt cache");
  // Another model's parameters.
  torch::manual_seed(99);
  lm_ = std::make_unique<models::TransformerLM>(small_options());
  expect_data_error([&] { run("hello there", file, ""); }, file, "another model");
  EXPECT_EQ(read_file_bytes(file), good);
}

TEST_F(PromptCacheFile, PromptOrDtypeThatDoesNotMatchIsAUsageError) {
  const std::string file = dir_ + "/p.kvc";
  run("hello there", "", file);
  EXPECT_NE(usage_error_of([&] { run("goodbye", file, ""); }).find("does not begin with the 11 tokens"),
            std::string::npos);
  EXPECT_NE(usage_error_of([&] { run("hello there", file, "", qa::CacheDtype::kInt8); }).find("holds an f32 cache"),
            std::string::npos);
  lm::GenerateOptions o;
  o.use_cache = false;
  o.save_cache = dir_ + "/q.kvc";
  EXPECT_NE(usage_error_of([&] { lm::generate(*lm_, tokens_of("x"), o); }).find("no_cache"), std::string::npos);
  EXPECT_FALSE(fs::exists(dir_ + "/q.kvc"));
}

}  // namespace
}  // namespace qkv::testing

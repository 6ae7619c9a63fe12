// The byte-level transformer: tasks are what they claim, the KV cache changes
// nothing but speed, a small model learns to copy, the MLP inspection reads
// the right numbers, and bad text is refused by name.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "qkv/attention/kv_cache.h"
#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/data/lm_data.h"
#include "qkv/lm/exact_match.h"
#include "qkv/lm/generate.h"
#include "qkv/lm/mlp_memory.h"
#include "qkv/models/transformer_lm.h"
#include "qkv/train/trainer.h"
#include "support/test_files.h"

namespace fs = std::filesystem;
using namespace qkv;
using qkv::testing::temp_path;

namespace {

std::shared_ptr<models::TransformerLM> small_lm(int64_t d = 32, int64_t layers = 2, int64_t heads = 4) {
  models::TransformerLMOptions o;
  o.d_model = d;
  o.layers = layers;
  o.heads = heads;
  torch::manual_seed(5);
  return std::make_shared<models::TransformerLM>(o);
}

}  // namespace

TEST(LmTasks, InstancesAreCorrect) {
  std::mt19937_64 rng(1);
  data::LmTaskOptions o;
  o.max_digits = 5;
  for (int i = 0; i < 200; ++i) {
    o.task = "copy";
    auto c = data::make_lm_example(o, rng);
    EXPECT_EQ(c.prompt, c.answer + "|");
    o.task = "reverse";
    auto r = data::make_lm_example(o, rng);
    EXPECT_EQ(r.prompt, std::string(r.answer.rbegin(), r.answer.rend()) + "|");
    o.task = "addition";
    auto a = data::make_lm_example(o, rng);
    const auto plus = a.prompt.find('+');
    EXPECT_EQ(std::stoll(a.prompt.substr(0, plus)) + std::stoll(a.prompt.substr(plus + 1)), std::stoll(a.answer))
        << a.prompt << a.answer;
    o.task = "induction";
    auto ind = data::make_lm_example(o, rng);
    const auto bar = ind.prompt.find('|');
    const std::string context = ind.prompt.substr(0, bar);
    const char query = ind.prompt[bar + 1];
    ASSERT_EQ(std::count(context.begin(), context.end(), query), 1) << ind.prompt;
    EXPECT_EQ(context[context.find(query) + 1], ind.answer[0]) << ind.prompt;
  }
}

TEST(LmTasks, OnlyAnswerAndTerminatorAreScored) {
  auto ds = data::lm_example_dataset({{"ab|", "ab"}, {"abcd|", "abcd"}});
  auto b = ds->get({0, 1});
  const auto tokens = b.input("tokens");
  ASSERT_EQ(tokens.size(1), 9);  // "abcd|abcd\n" minus one
  // Row 0: "ab|ab\n": inputs a b | a b, targets at positions 2,3,4 = a b \n.
  std::vector<int64_t> expected = {-100, -100, 'a', 'b', '\n', -100, -100, -100, -100};
  for (int64_t t = 0; t < 9; ++t) EXPECT_EQ(b.target[0][t].item<int64_t>(), expected[static_cast<size_t>(t)]) << t;
  EXPECT_EQ(data::tokens_to_bytes(tokens[1]), std::string("abcd|abcd"));
}

TEST(LmTasks, BadOptionsAreUsageErrors) {
  data::LmTaskOptions o;
  o.task = "sorting";
  EXPECT_THROW(o.validate(), UsageError);
  o = {};
  o.min_length = 5;
  o.max_length = 3;
  EXPECT_THROW(o.validate(), UsageError);
}

TEST(Utf8, ValidAndInvalid) {
  EXPECT_NO_THROW(data::check_utf8("plain, caf\xc3\xa9, \xe2\x82\xac, \xf0\x9f\x98\x80", "x"));
  EXPECT_NE(qkv::testing::data_error_of([] {
              data::check_utf8("ab\xff", "f.txt");
            }).find("f.txt: not valid UTF-8 (byte offset 2)"),
            std::string::npos);
  EXPECT_NE(qkv::testing::data_error_of([] { data::check_utf8("a\xe2\x82", "f.txt"); }).find("truncated"),
            std::string::npos);
  EXPECT_NE(qkv::testing::data_error_of([] { data::check_utf8("\xc0\xaf", "f.txt"); }).find("byte offset 0"),
            std::string::npos);
  EXPECT_NE(qkv::testing::data_error_of([] { data::check_utf8("\xed\xa0\x80", "f.txt"); }).find("byte offset 0"),
            std::string::npos);
}

TEST(TextCorpus, WindowsSplitsAndBadFiles) {
  const auto path = temp_path("corpus.txt");
  std::string text;
  for (int i = 0; i < 200; ++i) text += "the quick brown fox " + std::to_string(i) + "\n";
  write_file_atomic(path, text);
  auto s = data::load_text_corpus(path, 16);
  const int64_t windows = s.train->size() + s.val->size() + s.test->size();
  EXPECT_EQ(windows, static_cast<int64_t>((text.size() - 1) / 16));
  auto b = s.train->get({0});
  // Target is the input shifted by one byte.
  EXPECT_TRUE(torch::equal(b.input("tokens")[0].slice(0, 1), b.target[0].slice(0, 0, 15)));
  EXPECT_EQ(data::tokens_to_bytes(b.input("tokens")[0]), text.substr(0, 16));

  const auto empty = temp_path("empty.txt");
  write_file_atomic(empty, std::string());
  EXPECT_NE(
      qkv::testing::data_error_of([&] { data::load_text_corpus(empty, 16); }).find(empty + ": the text file is empty"),
      std::string::npos);
  const auto binary = temp_path("binary.txt");
  write_file_atomic(binary, std::string("ok\x80\x80 nope"));
  EXPECT_NE(qkv::testing::data_error_of([&] { data::load_text_corpus(binary, 16); }).find(binary + ": not valid UTF-8"),
            std::string::npos);
  EXPECT_NE(
      qkv::testing::data_error_of([&] { data::load_text_corpus(temp_path("missing.txt"), 16); }).find("missing.txt"),
      std::string::npos);
}

TEST(TransformerLM, SinusoidalPositionsFollowTheFormula) {
  auto p = models::sinusoidal_positions(3, 2, 8, torch::TensorOptions(torch::kDouble));
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t i = 0; i < 4; ++i) {
      const double angle = static_cast<double>(n + 3) / std::pow(10000.0, 2.0 * static_cast<double>(i) / 8.0);
      EXPECT_NEAR(p[n][2 * i].item<double>(), std::sin(angle), 1e-12);
      EXPECT_NEAR(p[n][2 * i + 1].item<double>(), std::cos(angle), 1e-12);
    }
}

TEST(TransformerLM, IsCausal) {
  auto lm = small_lm();
  lm->eval();
  torch::NoGradGuard no_grad;
  auto a = torch::randint(0, 256, {1, 12}, torch::kLong);
  auto b = a.clone();
  b[0][8] = (b[0][8].item<int64_t>() + 1) % 256;
  auto la = lm->forward_tokens(a), lb = lm->forward_tokens(b);
  EXPECT_TRUE(torch::allclose(la.slice(1, 0, 8), lb.slice(1, 0, 8), 1e-6, 1e-6));
  EXPECT_FALSE(torch::allclose(la.slice(1, 8), lb.slice(1, 8), 1e-3, 1e-3));
}

TEST(TransformerLM, CachedStepsEqualTheFullForward) {
  auto lm = small_lm();
  lm->eval();
  torch::NoGradGuard no_grad;
  auto tokens = torch::randint(0, 256, {2, 11}, torch::kLong);
  auto full = lm->forward_tokens(tokens);
  const auto& o = lm->options();
  attention::KVCache cache(o.layers, 2, o.heads, 16, o.head_dk(), o.head_dv());
  std::vector<at::Tensor> pieces = {lm->forward_tokens(tokens.slice(1, 0, 5), &cache)};
  for (int64_t t = 5; t < 11; ++t) pieces.push_back(lm->forward_tokens(tokens.slice(1, t, t + 1), &cache));
  EXPECT_EQ(cache.length(), 11);
  EXPECT_TRUE(torch::allclose(torch::cat(pieces, 1), full, 1e-5, 1e-5))
      << (torch::cat(pieces, 1) - full).abs().max().item<double>();
  // Another model's cache (more layers, a window the model lacks) would give
  // other logits with no error: refused, naming both.
  attention::KVCache deeper(o.layers + 1, 2, o.heads, 16, o.head_dk(), o.head_dv());
  qkv::testing::expect_usage_error([&] { lm->forward_tokens(tokens.slice(1, 0, 5), &deeper); },
                                   "the KV cache has 3 layer(s), window 0 and 0 sink(s); this model has 2, window 0");
  auto windowed = models::kv_cache_settings(o, attention::CacheDtype::kFloat32, 2, torch::kCPU);
  windowed.window = 4;
  attention::KVCache ring(windowed);
  qkv::testing::expect_usage_error([&] { lm->forward_tokens(tokens.slice(1, 0, 5), &ring); }, "window 4");
  EXPECT_EQ(ring.length(), 0);
}

TEST(Generate, CacheAndRecomputeGiveTheSameTokensAndLogits) {
  auto lm = small_lm();
  for (double temperature : {0.0, 1.0}) {
    lm::GenerateOptions o;
    o.max_new = 24;
    o.temperature = temperature;
    o.top_k = temperature > 0 ? 20 : 0;
    o.seed = 11;
    o.keep_logits = true;
    const std::vector<int64_t> prompt = {'h', 'e', 'l', 'l', 'o'};
    o.use_cache = true;
    auto cached = lm::generate(*lm, prompt, o);
    o.use_cache = false;
    auto recomputed = lm::generate(*lm, prompt, o);
    ASSERT_EQ(cached.tokens.size(), 24u);
    EXPECT_EQ(cached.tokens, recomputed.tokens) << "temperature " << temperature;
    for (size_t i = 0; i < cached.logits.size(); ++i)
      EXPECT_LT((cached.logits[i] - recomputed.logits[i]).abs().max().item<double>(), 1e-5) << "step " << i;
  }
}

TEST(Generate, BadOptionsAreUsageErrors) {
  auto lm = small_lm();
  lm::GenerateOptions o;
  EXPECT_THROW(lm::generate(*lm, {}, o), UsageError);
  o.temperature = -1;
  EXPECT_THROW(lm::generate(*lm, {1, 2}, o), UsageError);
  o = {};
  EXPECT_THROW(lm::generate(*lm, {300}, o), UsageError);
}

TEST(Generate, EachTokenReachesTheCallbackAsItIsMadeAndFalseStops) {
  auto lm = small_lm();
  lm::GenerateOptions o;
  o.max_new = 20;
  o.temperature = 0;
  const std::vector<int64_t> prompt = {'h', 'i'};
  const auto all = lm::generate(*lm, prompt, o);
  std::vector<int64_t> seen;
  o.on_token = [&](int64_t t) {
    seen.push_back(t);
    return seen.size() < 7;
  };
  const auto part = lm::generate(*lm, prompt, o);
  EXPECT_TRUE(part.stopped_by_caller);
  EXPECT_EQ(seen, part.tokens);
  ASSERT_EQ(part.tokens.size(), 7u);
  EXPECT_EQ(part.tokens, std::vector<int64_t>(all.tokens.begin(), all.tokens.begin() + 7));
  EXPECT_FALSE(all.stopped_by_caller);
}

TEST(Generate, MaxNewBeyondTheMemoryLimitIsRefusedByName) {
  auto lm = small_lm();  // 2 layers x 4 heads x (8 + 8) floats = 512 bytes a position
  lm::GenerateOptions o;
  o.memory_limit_bytes = 512 * 100;
  o.max_new = 98;  // with a 2-token prompt, exactly 100 positions
  o.temperature = 0;
  EXPECT_EQ(lm::generate(*lm, {1, 2}, o).tokens.size(), 98u);
  o.max_new = 99;
  try {
    lm::generate(*lm, {1, 2}, o);
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("max_new 99"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("at most 98"), std::string::npos) << e.what();
  }
  o.memory_limit_bytes = 0;
  o.max_new = std::numeric_limits<int64_t>::max();  // prompt + max_new itself overflows
  EXPECT_THROW(lm::generate(*lm, {1, 2}, o), UsageError);
  // A sliding window's cache holds its ring however many bytes follow: the
  // overflowing count was refused as needing "more than 2^63 bytes".
  models::TransformerLMOptions windowed;
  windowed.d_model = 32;
  windowed.window = 8;
  windowed.sinks = 2;
  models::TransformerLM ring(windowed);
  ring.eval();
  int64_t seen = 0;
  o.on_token = [&](int64_t) { return ++seen < 5; };
  EXPECT_EQ(lm::generate(ring, {1, 2}, o).tokens.size(), 5u);
}

TEST(KVCacheBytes, OverflowThrowsInsteadOfWrapping) {
  EXPECT_EQ(attention::kv_cache_bytes(50, 20, 1000, 1000, 5000, 1, 2).total_bytes, 20000000000LL);
  EXPECT_THROW(attention::kv_cache_bytes(int64_t{1} << 32, int64_t{1} << 32, 1, 1, 1, 1, 2), UsageError);
  EXPECT_THROW(attention::kv_cache_bytes(std::numeric_limits<int64_t>::max(), 1, 1, 1, 1, 1, 2), UsageError);
  // Keys and values each fit, their sum does not.
  EXPECT_THROW(attention::kv_cache_bytes(int64_t{1} << 61, 1, 1, 1, 1, 1, 2), UsageError);
  EXPECT_EQ(attention::kv_cache_bytes(int64_t{1} << 60, 1, 1, 1, 1, 1, 2).total_bytes, int64_t{1} << 62);
}

TEST(ExactMatch, CountsWholeSequences) {
  lm::ExactMatchMetric m;
  // Two sequences of 2 positions over a 3-token vocabulary; the second has one miss.
  auto logits = torch::zeros({2, 2, 3});
  logits[0][0][1] = 1, logits[0][1][2] = 1, logits[1][0][1] = 1, logits[1][1][0] = 1;
  auto target = torch::tensor({int64_t{1}, int64_t{2}, int64_t{1}, int64_t{2}}).reshape({2, 2});
  m.add(logits, target);
  auto r = m.result();
  EXPECT_DOUBLE_EQ(r.at("exact_match").get<double>(), 0.5);
  EXPECT_DOUBLE_EQ(r.at("accuracy").get<double>(), 0.75);
}

TEST(MlpMemory, ReadsKeysAndValuesOffTheModel) {
  auto lm = small_lm(32, 2, 4);
  const int64_t unit = 7;
  {
    torch::NoGradGuard no_grad;
    // Make unit 7's value vector the embedding of 'z': through the tied
    // unembedding it must promote 'z' above every other byte.
    auto& b = lm->block(1);
    b->mlp_out->weight.select(1, unit).copy_(lm->embedding()->weight[static_cast<int64_t>('z')] * 50);
  }
  const std::string text = "abcabcabc zzz hello world, hello qkv.";
  lm::MemoryOptions o;
  o.layer = 1;
  o.units = 128;
  o.contexts = 2;
  o.tokens = 3;
  auto units = lm::inspect_mlp(*lm, text, o);
  ASSERT_EQ(units.size(), 128u);
  for (size_t i = 1; i < units.size(); ++i) EXPECT_GE(units[i - 1].mean_activation, units[i].mean_activation);
  auto act = lm->mlp_activations(data::bytes_to_tokens(text).unsqueeze(0), 1).squeeze(0);
  for (const auto& u : units) {
    EXPECT_NEAR(u.mean_activation, act.select(1, u.unit).mean().item<double>(), 1e-4);
    EXPECT_NEAR(u.max_activation, u.top_contexts[0].second, 1e-5);
    if (u.unit == unit) {
      EXPECT_EQ(u.top_tokens[0].first, "z");
    }
  }
  // Read in windows of 8 bytes, each unit's keys are the top activations
  // over the whole text, as of the activations computed window by window.
  o.window = 8;
  o.contexts = 3;
  const auto windowed = lm::inspect_mlp(*lm, text, o);
  std::vector<at::Tensor> parts;
  const auto tokens = data::bytes_to_tokens(text);
  for (int64_t start = 0; start < tokens.size(0); start += 8)
    parts.push_back(lm->mlp_activations(tokens.slice(0, start, start + 8).unsqueeze(0), 1).squeeze(0));
  const auto all = torch::cat(parts, 0);
  for (const auto& u : windowed) {
    const auto column = all.select(1, u.unit);
    const double scale = column.abs().max().item<double>() + 1e-12;
    EXPECT_NEAR(u.mean_activation, column.mean().item<double>(), 1e-5 * scale);
    EXPECT_NEAR(u.max_activation, column.max().item<double>(), 1e-6 * scale);
    const auto top = std::get<0>(column.topk(3));
    ASSERT_EQ(u.top_contexts.size(), 3u);
    for (int64_t i = 0; i < 3; ++i) EXPECT_NEAR(u.top_contexts[i].second, top[i].item<double>(), 1e-6 * scale);
  }
  EXPECT_THROW(lm::inspect_mlp(*lm, text, lm::MemoryOptions{5}), UsageError);
}

TEST(TransformerLM, LearnsToCopy) {
  at::set_num_threads(1);
  data::LmTaskOptions task;
  task.samples = 4000;
  task.max_length = 5;
  const auto examples = data::make_lm_task(task, 0);
  const auto splits = data::lm_task_datasets(examples);
  models::TransformerLMOptions o;
  o.d_model = 64;
  o.layers = 2;
  o.heads = 4;
  torch::manual_seed(0);
  auto lm = std::make_shared<models::TransformerLM>(o);
  train::TrainConfig config;
  config.epochs = 16;
  config.batch_size = 32;
  config.optim.lr = 5e-3;
  config.optim.weight_decay = 0.01;
  config.clip_grad_norm = 1.0;
  config.select_metric = "exact_match";
  train::TrainHooks hooks;
  hooks.quiet = true;
  hooks.metrics = [] { return std::make_unique<lm::ExactMatchMetric>(); };
  auto result = train::train(*lm, splits, config, torch::kCPU, temp_path("copy_run"), {}, false, hooks);
  const double teacher_forced = result.summary.at("test").at("exact_match").get<double>();
  EXPECT_GE(teacher_forced, 0.95);
  // The same by real greedy decoding with the KV cache.
  int right = 0;
  for (const auto& e : examples.test) right += lm::complete(*lm, e.prompt, 8) == e.answer;
  const double generated = static_cast<double>(right) / static_cast<double>(examples.test.size());
  EXPECT_GE(generated, 0.95);
  EXPECT_NEAR(generated, teacher_forced, 1e-9);
}

TEST(PickToken, LogitsHoldingNaNOrPlusInfinityAreAnErrorNotByteZero) {
  lm::GenerateOptions greedy, sampled;
  greedy.temperature = 0;
  sampled.temperature = 1.0;
  auto gen = at::make_generator<at::CPUGeneratorImpl>(1);
  auto logits = torch::zeros({256});
  logits[5] = 3.0;
  EXPECT_EQ(lm::pick_token(logits, greedy, gen), 5);
  // -inf rules a byte out and stays allowed.
  logits[7] = -std::numeric_limits<float>::infinity();
  EXPECT_EQ(lm::pick_token(logits, greedy, gen), 5);
  for (const float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()}) {
    auto poisoned = logits.clone();
    poisoned[9] = bad;
    EXPECT_THROW(lm::pick_token(poisoned, greedy, gen), lm::NonFiniteLogits);
    EXPECT_THROW(lm::pick_token(poisoned, sampled, gen), lm::NonFiniteLogits);
  }
}

// However small the temperature, sampling is the greedy pick in the limit:
// logits divided by 1e-40 used to overflow to +inf and fail in softmax.
TEST(PickToken, ATinyTemperatureSamplesTheLargestLogit) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(3);
  auto logits = torch::linspace(-2, 2, 256);
  logits[40] = 50.0;  // large logits overflow first
  logits[41] = 49.9f;
  for (const double temperature : {1e-3, 1e-20, 1e-40, 1e-300}) {
    lm::GenerateOptions o;
    o.temperature = temperature;
    for (int draw = 0; draw < 20; ++draw) EXPECT_EQ(lm::pick_token(logits, o, gen), 40) << temperature;
  }
  // Ties at the top stay a fair draw between them.
  logits[41] = 50.0;
  lm::GenerateOptions o;
  o.temperature = 1e-40;
  std::set<int64_t> picked;
  for (int draw = 0; draw < 64; ++draw) picked.insert(lm::pick_token(logits, o, gen));
  EXPECT_EQ(picked, (std::set<int64_t>{40, 41}));
}

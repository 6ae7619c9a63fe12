// The recurrent baseline: feeding a sequence in pieces through the state
// gives the logits of feeding it whole, greedy decoding through the state is
// the arg-max of recomputing the prefix, the hidden size picked for a budget
// is the largest that fits, bad options are refused by name, a small LSTM
// learns to copy short strings, and `lm train --model lstm` then `lm eval`
// work from the command line.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <filesystem>

#include "qkv/core/errors.h"
#include "qkv/data/lm_data.h"
#include "qkv/lm/exact_match.h"
#include "qkv/lm/recurrent_generate.h"
#include "qkv/models/recurrent_lm.h"
#include "qkv/models/transformer_lm.h"
#include "qkv/tasks/lm_task.h"
#include "qkv/train/trainer.h"
#include "support/cli_run.h"
#include "support/test_files.h"

namespace fs = std::filesystem;
using namespace qkv;
using qkv::testing::config_error_key_of;

namespace {

std::shared_ptr<models::RecurrentLM> small_recurrent(const std::string& cell, int64_t layers = 2) {
  models::RecurrentLMOptions o;
  o.cell = cell;
  o.embed = 16;
  o.hidden = 24;
  o.layers = layers;
  torch::manual_seed(3);
  return std::make_shared<models::RecurrentLM>(o);
}

}  // namespace

TEST(RecurrentLM, StepsThroughTheStateEqualTheFullForward) {
  for (const std::string cell : {"lstm", "gru"}) {
    SCOPED_TRACE(cell);
    auto lm = small_recurrent(cell);
    lm->to(torch::kDouble);
    lm->eval();
    torch::NoGradGuard no_grad;
    const auto tokens = torch::randint(0, 256, {2, 13}, torch::kLong);
    const auto full = lm->forward_tokens(tokens);
    models::RecurrentState state;
    std::vector<at::Tensor> pieces = {lm->forward_tokens(tokens.slice(1, 0, 5), &state)};
    for (int64_t t = 5; t < 13; ++t) pieces.push_back(lm->forward_tokens(tokens.slice(1, t, t + 1), &state));
    const auto stepped = torch::cat(pieces, 1);
    ASSERT_EQ(stepped.sizes(), full.sizes());
    EXPECT_EQ(stepped.scalar_type(), torch::kDouble);
    EXPECT_LT((stepped - full).abs().max().item<double>(), 1e-12);
    // The state is as large after 13 tokens as after 1.
    const auto& o = lm->options();
    EXPECT_EQ(state.h.sizes(), (std::vector<int64_t>{o.layers, 2, o.hidden}));
    EXPECT_EQ(state.c.defined(), cell == "lstm");
    EXPECT_EQ(state.h.numel() + (state.c.defined() ? state.c.numel() : 0), 2 * models::recurrent_state_floats(o));
  }
}

TEST(RecurrentLM, ForwardMatchesTheTransformersContract) {
  auto lm = small_recurrent("lstm");
  data::Batch batch;
  batch.inputs["tokens"] = torch::randint(0, 256, {3, 7}, torch::kLong);
  EXPECT_EQ(lm->forward(batch).sizes(), (std::vector<int64_t>{3, 7, 256}));
  EXPECT_EQ(models::count_parameters(*lm), models::recurrent_lm_size(lm->options(), 7).parameters);
  models::RecurrentState state;
  lm->forward_tokens(torch::zeros({2, 3}, torch::kLong), &state);
  EXPECT_THROW(lm->forward_tokens(torch::zeros({3, 1}, torch::kLong), &state), UsageError);
}

TEST(RecurrentGenerate, GreedyIsTheArgMaxOfRecomputingThePrefix) {
  for (const std::string cell : {"lstm", "gru"}) {
    SCOPED_TRACE(cell);
    auto lm = small_recurrent(cell);
    lm->to(torch::kDouble);
    lm::GenerateOptions o;
    o.max_new = 16;
    o.temperature = 0;
    o.keep_logits = true;
    const std::vector<int64_t> prompt = {'h', 'e', 'l', 'l', 'o'};
    const auto g = lm::generate_recurrent(*lm, prompt, o);
    ASSERT_EQ(g.tokens.size(), 16u);
    torch::NoGradGuard no_grad;
    std::vector<int64_t> sequence = prompt;
    for (size_t i = 0; i < g.tokens.size(); ++i) {
      const auto logits = lm->forward_tokens(torch::tensor(sequence, torch::kLong).unsqueeze(0));
      const auto last = logits[0][logits.size(1) - 1];
      EXPECT_EQ(last.argmax().item<int64_t>(), g.tokens[i]) << "step " << i;
      EXPECT_LT((last.to(torch::kFloat) - g.logits[i]).abs().max().item<double>(), 1e-6) << "step " << i;
      sequence.push_back(g.tokens[i]);
    }
    // Sampling draws the same tokens through the state as by recomputation.
    o.temperature = 1.0;
    o.top_k = 20;
    o.seed = 9;
    const auto through_state = lm::generate_recurrent(*lm, prompt, o);
    o.use_cache = false;
    EXPECT_EQ(lm::generate_recurrent(*lm, prompt, o).tokens, through_state.tokens);
  }
}

TEST(RecurrentGenerate, StopTokenAndBadOptions) {
  auto lm = small_recurrent("gru", 1);
  lm::GenerateOptions o;
  o.max_new = 12;
  o.temperature = 0;
  const auto all = lm::generate_recurrent(*lm, {'a', 'b'}, o);
  o.stop_token = all.tokens[3];
  const auto stopped = lm::generate_recurrent(*lm, {'a', 'b'}, o);
  EXPECT_LE(stopped.tokens.size(), 3u);
  EXPECT_EQ(stopped.tokens,
            std::vector<int64_t>(all.tokens.begin(), all.tokens.begin() + static_cast<long>(stopped.tokens.size())));
  o = {};
  EXPECT_THROW(lm::generate_recurrent(*lm, {}, o), UsageError);
  EXPECT_THROW(lm::generate_recurrent(*lm, {300}, o), UsageError);
  o.temperature = -1;
  EXPECT_THROW(lm::generate_recurrent(*lm, {1}, o), UsageError);
}

TEST(RecurrentLM, HiddenForAParameterBudgetIsTheLargestThatFits) {
  models::RecurrentLMOptions o;
  for (const std::string cell : {"lstm", "gru"})
    for (const int64_t layers : {1, 2, 3})
      for (const int64_t target : {int64_t{40000}, int64_t{116480}, int64_t{1000003}}) {
        SCOPED_TRACE(cell + " " + std::to_string(layers) + " layers, " + std::to_string(target));
        o.cell = cell;
        o.layers = layers;
        const int64_t hidden = models::recurrent_hidden_for_parameters(o, target);
        o.hidden = hidden;
        EXPECT_LE(models::recurrent_lm_size(o, 1).parameters, target);
        o.hidden = hidden + 1;
        EXPECT_GT(models::recurrent_lm_size(o, 1).parameters, target);
      }
  o.hidden = 1;
  const int64_t smallest = models::recurrent_lm_size(o, 1).parameters;
  EXPECT_EQ(models::recurrent_hidden_for_parameters(o, smallest), 1);
  EXPECT_THROW(models::recurrent_hidden_for_parameters(o, smallest - 1), UsageError);
}

TEST(LmModel, RecurrentKindsTakeTheTransformersBudget) {
  models::TransformerLMOptions t;
  t.d_model = 64;
  const auto transformer = tasks::lm_model("transformer", t);
  EXPECT_EQ(transformer.name, "transformer-lm");
  EXPECT_EQ(transformer.parameters, transformer.budget);
  for (const std::string kind : {"lstm", "gru"}) {
    SCOPED_TRACE(kind);
    const auto m = tasks::lm_model(kind, t);
    EXPECT_EQ(m.name, kind + "-lm");
    EXPECT_EQ(m.budget, transformer.parameters);
    EXPECT_LE(m.parameters, m.budget);
    EXPECT_EQ(m.options.at("embed"), 64);
    EXPECT_EQ(m.options.at("layers"), t.layers);
    EXPECT_EQ(m.options.at("cell"), kind);
    auto built = models::find_model(m.name).make(m.options);
    EXPECT_EQ(models::count_parameters(*built), m.parameters);
    EXPECT_EQ(tasks::lm_model(kind, t, 17).options.at("hidden"), 17);
  }
}

TEST(LmModel, BadChoicesAreRefusedByKey) {
  models::TransformerLMOptions t;
  EXPECT_EQ(config_error_key_of([&] { tasks::lm_model("rnn", t); }), "model");
  EXPECT_EQ(config_error_key_of([&] { tasks::lm_model("lstm", t, -1); }), "hidden");
  EXPECT_EQ(config_error_key_of([&] { tasks::lm_model("transformer", t, 8); }), "hidden");
  t.window = 4;  // a recurrent model has no attention to window
  EXPECT_EQ(config_error_key_of([&] { tasks::lm_model("lstm", t); }), "window");
  EXPECT_NO_THROW(tasks::lm_model("transformer", t));
  t.window = 0;
  t.sinks = 2;
  EXPECT_EQ(config_error_key_of([&] { tasks::lm_model("gru", t); }), "sinks");
  t.sinks = 0;
  t.heads = 3;  // 128 is not divisible by 3
  EXPECT_THROW(tasks::lm_model("lstm", t), UsageError);
}

TEST(RecurrentLM, BadOptionsAreUsageErrorsNamingTheKey) {
  using models::RecurrentLMOptions;
  using qkv::testing::usage_error_of;
  auto refused = [&](const nlohmann::json& j, const std::string& model = "lstm-lm") {
    return usage_error_of([&] { RecurrentLMOptions::from_json(j, model); });
  };
  EXPECT_NE(refused({{"cell", "rnn"}}).find("lstm-lm option 'cell' = \"rnn\": expected lstm or gru"),
            std::string::npos);
  for (const char* key : {"hidden", "embed", "layers", "vocab"}) {
    SCOPED_TRACE(key);
    EXPECT_NE(refused({{key, -1}}).find(std::string("option '") + key + "'"), std::string::npos);
  }
  EXPECT_NE(refused({{"hidden", 0}}, "gru-lm").find("gru-lm option 'hidden'"), std::string::npos);
  EXPECT_NE(refused({{"dropout", 1.5}}).find("'dropout'"), std::string::npos);
  EXPECT_NE(refused({{"heads", 4}}).find("unknown option 'heads'"), std::string::npos);
  EXPECT_EQ(RecurrentLMOptions::from_json({}, "gru-lm").cell, "gru");
  EXPECT_EQ(RecurrentLMOptions::from_json({}, "lstm-lm").cell, "lstm");
}

TEST(RecurrentLM, LearnsToCopyShortStrings) {
  at::set_num_threads(1);
  data::LmTaskOptions task;
  task.samples = 2000;
  task.min_length = 2;
  task.max_length = 3;
  const auto examples = data::make_lm_task(task, 0);
  const auto splits = data::lm_task_datasets(examples);
  models::RecurrentLMOptions o;
  o.embed = 32;
  o.hidden = 64;
  o.layers = 1;
  torch::manual_seed(0);
  auto lm = std::make_shared<models::RecurrentLM>(o);
  train::TrainConfig config;  // `lm train`'s settings; 16 epochs reach ~95 % (0.955 when written)
  config.epochs = 16;
  config.batch_size = 32;
  config.optim.lr = 5e-3;
  config.optim.weight_decay = 0.01;
  config.clip_grad_norm = 1.0;
  config.select_metric = "exact_match";
  train::TrainHooks hooks;
  hooks.quiet = true;
  hooks.metrics = [] { return std::make_unique<lm::ExactMatchMetric>(); };
  auto result =
      train::train(*lm, splits, config, torch::kCPU, qkv::testing::temp_path("recurrent_copy_run"), {}, false, hooks);
  const double teacher_forced = result.summary.at("test").at("exact_match").get<double>();
  EXPECT_GE(teacher_forced, 0.9);
  // The same event by real greedy decoding through the state.
  int right = 0;
  for (const auto& e : examples.test) right += lm::complete_recurrent(*lm, e.prompt, 8) == e.answer;
  EXPECT_NEAR(static_cast<double>(right) / static_cast<double>(examples.test.size()), teacher_forced, 1e-9);
}

namespace qkv::testing {
namespace {

TEST(RecurrentCli, TrainThenEvalAnLstm) {
  const auto dir = fresh_dir("recurrent_cli");
  const auto train = run_qkv(
      "lm train --model lstm --task copy --samples 200 --epochs 1 --d-model 16 --heads 2 "
      "--layers 1 --threads 1 --out " +
      dir);
  ASSERT_EQ(train.status, 0) << train.output;
  // The budget it matched is shown next to what it got.
  EXPECT_NE(train.output.find("lstm-lm with hidden"), std::string::npos) << train.output;
  EXPECT_NE(train.output.find("the transformer-lm of these options"), std::string::npos) << train.output;
  const auto config = read_json(dir + "/config.json");
  EXPECT_EQ(config.at("model").at("name"), "lstm-lm");
  EXPECT_EQ(config.at("model").at("options").at("embed"), 16);
  const auto eval = run_qkv_stderr_to("lm eval --threads 1 --checkpoint " + dir + "/checkpoints/best.ckpt",
                                      temp_path("recurrent_eval.err"));
  ASSERT_EQ(eval.status, 0) << eval.output;
  const auto metrics = nlohmann::json::parse(eval.output);
  for (const char* key : {"loss", "bits_per_byte", "exact_match", "generated_exact_match"})
    EXPECT_TRUE(metrics.contains(key)) << key << " in " << eval.output;
  // Teacher-forced and decoded exact match are the same event.
  EXPECT_NEAR(metrics.at("exact_match").get<double>(), metrics.at("generated_exact_match").get<double>(), 1e-9);
  // generate continues a prompt through the state; what needs a KV cache says why it has none.
  const auto generated = run_qkv("lm generate --checkpoint " + dir + "/checkpoints/best.ckpt --prompt 'ab|' --json");
  ASSERT_EQ(generated.status, 0) << generated.output;
  EXPECT_FALSE(nlohmann::json::parse(generated.output).at("tokens").empty());
  expect_clean_failure(
      run_qkv("lm generate --checkpoint " + dir + "/checkpoints/best.ckpt --prompt a --cache-dtype int8"), 2,
      "is a recurrent model, whose fixed state is all its memory");
  expect_clean_failure(run_qkv("lm cache-size --checkpoint " + dir + "/checkpoints/best.ckpt --seq 8"), 2,
                       "its model is lstm-lm; this command reads transformer-lm checkpoints only");
  fs::remove_all(dir);
}

TEST(RecurrentCli, UnknownModelAndMisplacedHiddenAreOneLine) {
  const auto dir = fresh_dir("recurrent_cli_bad");
  expect_clean_failure(run_qkv("lm train --model foo --out " + dir), 2,
                       "--model foo: expected transformer, lstm or gru");
  expect_clean_failure(run_qkv("lm train --hidden 32 --out " + dir), 2, "--hidden");
  expect_clean_failure(run_qkv("lm train --model gru --hidden -3 --out " + dir), 2, "--hidden");
  EXPECT_FALSE(fs::exists(dir + "/config.json"));
  fs::remove_all(dir);
}

}  // namespace
}  // namespace qkv::testing

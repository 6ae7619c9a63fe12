// Test-time voting: averaging equals the naive mean of softmaxes, the views
// travel in one batch, and a trained model scored through VoteAveraged in
// eval mode gives what scoring each view alone and averaging gives.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <memory>

#include "qkv/data/dataset.h"
#include "qkv/tasks/voting.h"

using namespace qkv;

namespace {

// logits = x W, with a batch norm to tell train mode from eval mode.
struct TinyModel : models::Model {
  TinyModel() {
    w = register_parameter("w", torch::randn({4, 3}, torch::kDouble));
    bn = register_module("bn", torch::nn::BatchNorm1d(torch::nn::BatchNorm1dOptions(3).track_running_stats(true)));
    bn->to(torch::kDouble);
  }
  at::Tensor forward(const data::Batch& batch) override { return bn->forward(batch.input("x").matmul(w)); }
  at::Tensor w;
  torch::nn::BatchNorm1d bn{nullptr};
};

data::DatasetPtr view(const at::Tensor& x, const at::Tensor& y) {
  return std::make_shared<data::TensorDataset>(std::map<std::string, at::Tensor>{{"x", x}}, y);
}

}  // namespace

TEST(Voting, AverageIsTheLogOfTheMeanProbability) {
  torch::manual_seed(1);
  const auto logits = torch::randn({3 * 5, 4}, torch::kDouble) * 30;  // large: a naive log would meet 0
  const auto got = tasks::average_votes(logits, 3);
  ASSERT_EQ(got.sizes(), (std::vector<int64_t>{5, 4}));
  const auto naive = torch::softmax(logits.view({3, 5, 4}), -1).mean(0);
  EXPECT_TRUE(torch::allclose(got.exp(), naive, 1e-12, 1e-15));
  EXPECT_TRUE(torch::isfinite(got).all().item<bool>());
  EXPECT_TRUE(torch::allclose(tasks::average_votes(logits, 1), torch::log_softmax(logits, -1)));
  EXPECT_THROW(tasks::average_votes(torch::zeros({7, 4}), 3), c10::Error);
}

TEST(Voting, ViewsInOneBatchScoreAsEachViewAlone) {
  torch::manual_seed(2);
  const auto y = torch::tensor({0, 1, 2, 1, 0}, torch::kLong);
  std::vector<at::Tensor> xs;
  std::vector<data::DatasetPtr> views;
  for (int v = 0; v < 3; ++v) {
    xs.push_back(torch::randn({5, 4}, torch::kDouble));
    views.push_back(view(xs.back(), y));
  }
  const tasks::VotedViews voted(views);
  EXPECT_EQ(voted.size(), 5);
  const auto batch = voted.get({4, 1});
  EXPECT_TRUE(torch::equal(batch.target, torch::tensor({0, 1}, torch::kLong)));
  EXPECT_TRUE(torch::equal(batch.input("x").slice(0, 2, 4), xs[1].index_select(0, torch::tensor({4, 1}))));

  TinyModel model;
  model.train();
  model.forward(views[0]->get({0, 1, 2, 3, 4}));  // running statistics away from (0, 1)
  tasks::VoteAveraged averaged(model, 3);
  averaged.eval();  // the wrapper's mode reaches the model
  torch::NoGradGuard no_grad;
  const auto got = averaged.forward(batch);
  EXPECT_FALSE(model.is_training());
  at::Tensor expected = torch::zeros({2, 3}, torch::kDouble);
  for (int v = 0; v < 3; ++v) expected += torch::softmax(model.forward(views[v]->get({4, 1})), -1) / 3;
  EXPECT_TRUE(torch::allclose(got.exp(), expected, 1e-12, 1e-14));
  EXPECT_THROW(tasks::VotedViews({views[0], view(torch::zeros({2, 4}), torch::zeros({2}, torch::kLong))}),
               std::invalid_argument);
}

// The batch-norm momentum schedule (Vector Neurons' part segmentation) and
// that setting it reaches every batch-norm layer a model has.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/layers/sync_batch_norm.h"
#include "qkv/models/model.h"
#include "qkv/train/trainer.h"
#include "qkv/vn/vn_layers.h"

using namespace qkv;

TEST(BatchNormMomentum, StepDecayWithAFloor) {
  train::TrainConfig c;
  c.optim.step_size = 20;
  EXPECT_DOUBLE_EQ(train::batch_norm_momentum_at(c, 0), 0.1);  // constant by default
  EXPECT_DOUBLE_EQ(train::batch_norm_momentum_at(c, 100), 0.1);
  c.bn_momentum_gamma = 0.5;
  c.bn_momentum_min = 0.01;
  EXPECT_DOUBLE_EQ(train::batch_norm_momentum_at(c, 19), 0.1);
  EXPECT_DOUBLE_EQ(train::batch_norm_momentum_at(c, 20), 0.05);
  EXPECT_DOUBLE_EQ(train::batch_norm_momentum_at(c, 60), 0.0125);
  EXPECT_DOUBLE_EQ(train::batch_norm_momentum_at(c, 80), 0.01);
  c.bn_momentum_min = 0.2;
  EXPECT_THROW(c.validate(), ConfigError);
}

TEST(BatchNormMomentum, ReachesEveryBatchNormLayer) {
  struct Net : torch::nn::Module {
    Net() {
      sync = register_module("sync", layers::SyncBatchNorm(4));
      vn = register_module("vn", vn::VNBatchNorm(3));
      plain = register_module("plain", torch::nn::BatchNorm1d(5));
      inner = register_module("inner", torch::nn::Sequential(torch::nn::BatchNorm3d(2)));
    }
    layers::SyncBatchNorm sync{nullptr};
    vn::VNBatchNorm vn{nullptr};
    torch::nn::BatchNorm1d plain{nullptr};
    torch::nn::Sequential inner{nullptr};
  } net;
  train::set_batch_norm_momentum(net, 0.025);
  EXPECT_DOUBLE_EQ(net.sync->momentum, 0.025);
  EXPECT_DOUBLE_EQ(net.vn->momentum, 0.025);
  EXPECT_DOUBLE_EQ(net.plain->options.momentum().value(), 0.025);
  EXPECT_DOUBLE_EQ(net.inner[0]->as<torch::nn::BatchNorm3d>()->options.momentum().value(), 0.025);
  // And the running statistics move by that much: one batch of all-ones from (0, 1).
  net.sync->train();
  net.sync->forward(torch::ones({8, 4}));
  EXPECT_NEAR(net.sync->running_mean[0].item<double>(), 0.025, 1e-7);
}

// One value per channel in training: torch::batch_norm would take it and turn
// the running variance NaN for good (var * n / (n - 1)); it is refused, as
// PyTorch's BatchNorm refuses it, and nothing is updated.
TEST(SyncBatchNorm, ATrainingBatchOfOneValuePerChannelIsRefused) {
  layers::SyncBatchNorm bn(4);
  bn->train();
  try {
    bn->forward(torch::randn({1, 4}));
    FAIL() << "a training batch of one was taken";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("a training batch of 1 value per channel (input [1, 4])"), std::string::npos)
        << e.what();
  }
  EXPECT_TRUE(torch::equal(bn->running_var, torch::ones({4})));
  EXPECT_TRUE(torch::equal(bn->running_mean, torch::zeros({4})));
  // Two samples, or one sample of several points per channel, train.
  EXPECT_NO_THROW(bn->forward(torch::randn({2, 4})));
  EXPECT_NO_THROW(bn->forward(torch::randn({1, 4, 5})));
  EXPECT_TRUE(torch::isfinite(bn->running_var).all().item<bool>());
  bn->eval();
  EXPECT_NO_THROW(bn->forward(torch::randn({1, 4})));
}

// Whole point-cloud models: VNT-Net and VN-DGCNN (classifiers and part
// segmenters) give the same logits for a rotated cloud, per point for the
// segmenters; the xyz baselines do not; parameter counts match the papers'.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "qkv/models/model.h"
#include "qkv/models/part_seg.h"
#include "qkv/models/vnt_net.h"
#include "qkv/vn/edge_conv.h"
#include "qkv/vn/vn_ops.h"
#include "support/gradcheck.h"
#include "support/haar_rotation.h"
#include "support/tolerance.h"

using namespace qkv;
using qkv::testing::haar_rotation;

namespace {

data::Batch cloud_batch(int64_t b, int64_t n, torch::Dtype dtype, int64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  data::Batch batch;
  batch.inputs["points"] = torch::randn({b, 3, n}, gen, torch::kDouble).to(dtype);
  auto normals = torch::randn({b, 3, n}, gen, torch::kDouble);
  batch.inputs["normals"] = (normals / normals.norm(2, 1, true)).to(dtype);
  batch.inputs["category"] = torch::arange(b, torch::kLong) * 5 % 16;                // for the part segmenters
  batch.inputs["features"] = torch::rand({b, 2, n}, gen, torch::kDouble).to(dtype);  // for point_features = 2
  batch.target = torch::zeros({b}, torch::kLong);
  return batch;
}

data::Batch rotated(const data::Batch& batch, const at::Tensor& r) {
  data::Batch out = batch;
  for (auto& [name, t] : out.inputs)
    if (name != "category" && name != "features") t = torch::matmul(r, t);  // [3,3] @ [B,3,N]; features stay
  return out;
}

// Largest logit change over three rotations, with the model in eval mode:
// absolute in float64, relative to the logits' scale in float32.
double invariance_error(models::Model& model, torch::Dtype dtype, int64_t n = 48) {
  model.to(dtype);
  model.eval();
  torch::NoGradGuard no_grad;
  const auto batch = cloud_batch(2, n, dtype, 3);
  const auto logits = model.forward(batch);
  double worst = 0;
  for (int64_t s = 1; s <= 3; ++s)
    worst = std::max(
        worst, qkv::testing::precision_difference(model.forward(rotated(batch, haar_rotation(s, dtype))), logits));
  EXPECT_GT(logits.abs().max().item<double>(), 1e-3);
  return worst;
}

models::ModelPtr make(const std::string& name, const nlohmann::json& options = nlohmann::json::object()) {
  torch::manual_seed(11);
  return models::find_model(name).make(options);
}

// Small widths keep the float64 runs quick; the structure is the paper's.
const nlohmann::json kSmallVnt = {{"classes", 5}, {"linear_dim", 8}, {"heads", 3}, {"head_dim", 4}, {"k", 8}};

}  // namespace

TEST(VNModels, VNTNetIsInvariantInFloat64AndFloat32) {
  EXPECT_LE(invariance_error(*make("vnt", kSmallVnt), torch::kDouble), 1e-9);
  EXPECT_LE(invariance_error(*make("vnt", kSmallVnt), torch::kFloat), 1e-4);
}

TEST(VNModels, VNTNetVariantsAreInvariant) {
  auto with = [](nlohmann::json j, const char* key, nlohmann::json v) {
    j[key] = v;
    return j;
  };
  EXPECT_LE(invariance_error(*make("vnt+n", kSmallVnt), torch::kDouble), 1e-9);
  EXPECT_LE(invariance_error(*make("vnt", with(kSmallVnt, "edge_cross", true)), torch::kDouble), 1e-9);
  EXPECT_LE(invariance_error(*make("vnt", with(kSmallVnt, "layer_norm", true)), torch::kDouble), 1e-9);
  EXPECT_LE(invariance_error(*make("vnt", with(kSmallVnt, "normalize_frame", true)), torch::kDouble), 1e-9);
  EXPECT_LE(invariance_error(*make("vnt", with(kSmallVnt, "pooling", "max")), torch::kDouble), 1e-9);
}

TEST(VNModels, VNTNetWithPaperSettingsIsInvariantInFloat32) {
  // Linear dimension 16, 24 heads of size 16 (the paper's classification setup).
  EXPECT_LE(invariance_error(*make("vnt"), torch::kFloat, 40), 1e-4);
}

TEST(VNModels, VNDGCNNIsInvariant) {
  EXPECT_LE(invariance_error(*make("vn-dgcnn", {{"classes", 5}, {"k", 8}}), torch::kDouble), 1e-9);
  EXPECT_LE(invariance_error(*make("vn-dgcnn", {{"classes", 5}, {"k", 8}, {"pooling", "max"}}), torch::kDouble), 1e-9);
  EXPECT_LE(invariance_error(*make("vn-dgcnn", {{"classes", 5}, {"k", 8}}), torch::kFloat), 1e-4);
}

// Per-point features enter as the channels f x: the logits stay exactly
// invariant, and they depend on the features.
TEST(VNModels, PointFeaturesKeepTheModelsInvariantAndAreRead) {
  for (const auto& [name, options] : std::vector<std::pair<std::string, nlohmann::json>>{
           {"vnt", kSmallVnt},
           {"vnt-local",
            {{"classes", 5}, {"linear_dim", 8}, {"heads", 3}, {"head_dim", 4}, {"k", 8}, {"neighbours", 6}}},
           {"vn-dgcnn", {{"classes", 5}, {"k", 8}}}}) {
    auto with_features = options;
    with_features["point_features"] = 2;
    auto model = make(name, with_features);
    EXPECT_EQ(models::find_model(name).inputs_with(with_features)[1], "features") << name;
    EXPECT_LE(invariance_error(*model, torch::kDouble), 1e-9) << name;
    torch::NoGradGuard no_grad;
    auto batch = cloud_batch(2, 48, torch::kDouble, 3);
    const auto logits = model->forward(batch);
    batch.inputs["features"] = batch.inputs["features"].flip(2);
    EXPECT_GT((model->forward(batch) - logits).abs().max().item<double>(), 1e-6) << name << ": features not read";
    batch.inputs["features"] = batch.inputs["features"].slice(1, 0, 1);
    EXPECT_THROW(model->forward(batch), UsageError) << name;
  }
}

// The factorised edge convolution (W_a x_j + (W_b - W_a) x_i, gathered)
// equals the composed one (the linear on edge_features), values and the
// gradients of x and of both weights, in float64 and float32; and passes a
// gradient check by central differences.
TEST(VNModels, FactorisedEdgeConvEqualsTheComposedOne) {
  for (const auto dtype : {torch::kDouble, torch::kFloat}) {
    SCOPED_TRACE(dtype == torch::kDouble ? "float64" : "float32");
    torch::manual_seed(3);
    vn::VNLinearLeakyReLU conv(2 * 5, 7);
    conv->to(dtype);
    conv->train();  // batch norm over the edges, as in training
    const auto x = torch::randn({2, 5, 3, 12}, torch::TensorOptions().dtype(dtype));
    const auto idx = vn::knn_indices(x.reshape({2, -1, 12}), 4);
    const double tolerance = dtype == torch::kDouble ? 1e-10 : 2e-4;
    std::vector<at::Tensor> grads[2];
    at::Tensor outs[2];
    const auto up = torch::randn({2, 7, 3, 12, 4}, torch::TensorOptions().dtype(dtype));
    for (int factorised = 0; factorised < 2; ++factorised) {
      const auto leaf = x.detach().clone().requires_grad_();
      conv->zero_grad();
      outs[factorised] =
          factorised ? vn::factorised_edge_conv(*conv, leaf, idx) : conv->forward(vn::edge_features(leaf, idx, false));
      (outs[factorised] * up).sum().backward();
      grads[factorised] = {leaf.grad(), conv->map_to_feat->weight.grad().clone(),
                           conv->map_to_dir->weight.grad().clone()};
    }
    ASSERT_EQ(outs[0].sizes(), outs[1].sizes());
    EXPECT_LE((outs[0] - outs[1]).abs().max().item<double>(), tolerance);
    for (size_t g = 0; g < 3; ++g)
      EXPECT_LE(qkv::testing::precision_difference(grads[1][g], grads[0][g]), tolerance * 10) << "gradient " << g;
  }
  // Central differences, float64, without batch norm's batch coupling noise.
  vn::VNLinearLeakyReLU small(2 * 2, 3, false, 0.2, /*batch_norm=*/false);
  small->to(torch::kDouble);
  const auto x = torch::randn({1, 2, 3, 6}, torch::kDouble);
  const auto idx = vn::knn_indices(x.reshape({1, -1, 6}), 3);
  const double error = qkv::testing::max_gradient_error(
      [&](const std::vector<at::Tensor>& in) { return vn::factorised_edge_conv(*small, in[0], idx); }, {x});
  EXPECT_LE(error, 1e-6);
  EXPECT_THROW(vn::factorised_edge_conv(*small, torch::randn({1, 3, 3, 6}, torch::kDouble), idx), UsageError);
}

TEST(VNModels, FactorisedEdgeConvMeanEqualsTheComposedOne) {
  // The fused pass (gather + batch norm + leaky ReLU + mean over k) against the
  // mean of the composed edge conv, in training (batch statistics over the
  // edges) and eval; the batch norm counts the batch once either way.
  for (const auto dtype : {torch::kDouble, torch::kFloat})
    for (const bool training : {true, false}) {
      SCOPED_TRACE(std::string(dtype == torch::kDouble ? "float64" : "float32") + (training ? " training" : " eval"));
      torch::manual_seed(4);
      vn::VNLinearLeakyReLU conv(2 * 5, 7);
      conv->to(dtype);
      {
        torch::NoGradGuard no_grad;
        conv->batchnorm->running_mean.uniform_(0.5, 1.5);
        conv->batchnorm->running_var.uniform_(0.5, 1.5);
      }
      conv->train(training);
      const auto x = torch::randn({2, 5, 3, 16}, torch::TensorOptions().dtype(dtype));
      const auto idx = vn::knn_indices(x.reshape({2, -1, 16}), 5);
      const double tolerance = dtype == torch::kDouble ? 1e-10 : 2e-4;
      const auto up = torch::randn({2, 7, 3, 16}, torch::TensorOptions().dtype(dtype));
      std::vector<at::Tensor> grads[2];
      at::Tensor outs[2], running[2];
      const auto running_before = conv->batchnorm->running_mean.clone();
      for (int fused = 0; fused < 2; ++fused) {
        {
          torch::NoGradGuard no_grad;
          conv->batchnorm->running_mean.copy_(running_before);
        }
        const auto leaf = x.detach().clone().requires_grad_();
        conv->zero_grad();
        const int64_t tracked = conv->batchnorm->num_batches_tracked.item<int64_t>();
        outs[fused] = fused ? vn::factorised_edge_conv_mean(*conv, leaf, idx)
                            : vn::vn_mean_pool(conv->forward(vn::edge_features(leaf, idx, false)));
        EXPECT_EQ(conv->batchnorm->num_batches_tracked.item<int64_t>(), tracked + (training ? 1 : 0));
        running[fused] = conv->batchnorm->running_mean.clone();
        (outs[fused] * up).sum().backward();
        grads[fused] = {leaf.grad(), conv->map_to_feat->weight.grad().clone(), conv->map_to_dir->weight.grad().clone(),
                        conv->batchnorm->weight.grad().clone(), conv->batchnorm->bias.grad().clone()};
      }
      ASSERT_EQ(outs[1].sizes(), (std::vector<int64_t>{2, 7, 3, 16}));
      EXPECT_LE((outs[0] - outs[1]).abs().max().item<double>(), tolerance);
      EXPECT_LE((running[0] - running[1]).abs().max().item<double>(), tolerance);
      for (size_t g = 0; g < grads[0].size(); ++g)
        EXPECT_LE(qkv::testing::precision_difference(grads[1][g], grads[0][g]), tolerance * 10) << "gradient " << g;
    }
  vn::VNLinearLeakyReLU conv(2 * 2, 3);
  EXPECT_THROW(vn::factorised_edge_conv_mean(*conv, torch::randn({1, 3, 3, 6}), torch::zeros({1, 6, 2}, torch::kLong)),
               UsageError);
}

TEST(VNModels, StdFeatureWithMeanEqualsTheConcatenatedInput) {
  // VNStdFeature on [x; mean over N of x] without the concatenation: values,
  // frame, running statistics and every gradient against forward(cat(...)),
  // with free and orthonormal frames, in training and eval.
  for (const auto dtype : {torch::kDouble, torch::kFloat})
    for (const bool normalize : {false, true})
      for (const bool training : {true, false}) {
        SCOPED_TRACE(std::string(dtype == torch::kDouble ? "float64" : "float32") +
                     (normalize ? " orthonormal" : " free") + (training ? " training" : " eval"));
        torch::manual_seed(5);
        vn::VNStdFeature layer(2 * 6, normalize);
        layer->to(dtype);
        layer->train(training);
        const auto x = torch::randn({2, 6, 3, 10}, torch::TensorOptions().dtype(dtype));
        const double tolerance = dtype == torch::kDouble ? 1e-10 : 2e-4;
        const auto up = torch::randn({2, 12, 3, 10}, torch::TensorOptions().dtype(dtype));
        const auto state = [&] {
          std::vector<at::Tensor> s;
          for (const auto& b : layer->buffers()) s.push_back(b.clone());
          return s;
        };
        const auto before = state();
        std::vector<at::Tensor> grads[2], buffers[2];
        at::Tensor outs[2], frames[2];
        for (int factorised = 0; factorised < 2; ++factorised) {
          {
            torch::NoGradGuard no_grad;
            auto live = layer->buffers();
            for (size_t i = 0; i < live.size(); ++i) live[i].copy_(before[i]);
          }
          const auto leaf = x.detach().clone().requires_grad_();
          layer->zero_grad();
          auto [out, frame] = factorised ? layer->forward_with_mean(leaf)
                                         : layer->forward(torch::cat({leaf, leaf.mean(-1, true).expand_as(leaf)}, 1));
          outs[factorised] = out, frames[factorised] = frame;
          buffers[factorised] = state();
          ((out * up).sum() + frame.sum()).backward();
          grads[factorised] = {leaf.grad()};
          for (const auto& p : layer->parameters()) grads[factorised].push_back(p.grad().clone());
        }
        ASSERT_EQ(outs[1].sizes(), outs[0].sizes());
        EXPECT_LE(qkv::testing::precision_difference(outs[1], outs[0]), tolerance);
        EXPECT_LE((frames[0] - frames[1]).abs().max().item<double>(), tolerance);
        for (size_t i = 0; i < buffers[0].size(); ++i)
          EXPECT_LE((buffers[0][i] - buffers[1][i]).abs().max().item<double>(), tolerance) << "buffer " << i;
        for (size_t g = 0; g < grads[0].size(); ++g)
          EXPECT_LE(qkv::testing::precision_difference(grads[1][g], grads[0][g]), tolerance * 10) << "gradient " << g;
      }
  vn::VNStdFeature layer(8);
  EXPECT_THROW(layer->forward_with_mean(torch::randn({1, 3, 3, 6})), UsageError);  // 2 * 3 != 8
  EXPECT_THROW(layer->forward_with_mean(torch::randn({1, 4, 3})), UsageError);
}

TEST(VNModels, XYZBaselineIsNotInvariant) {
  // The control: the same check fails for an ordinary transformer on xyz.
  EXPECT_GT(invariance_error(*make("xyz-transformer", {{"classes", 5}}), torch::kDouble), 1e-3);
}

TEST(VNModels, ParameterCounts) {
  // Vector Neurons' vn_dgcnn_cls with 40 classes (mean pooling, its default).
  EXPECT_EQ(models::count_parameters(*make("vn-dgcnn")), 2899830);
  // VNT-Net, paper settings: edge conv 2->16 (96), 3 blocks of 3*16*384 + 384*16
  // attention and 16*64 + 64*64 + 64*16 FFN weights, the invariant layer on
  // 96 channels (11,736) and the 576-512-256-40 head (438,568).
  const int64_t block = 3 * 16 * 384 + 384 * 16 + 16 * 64 + 64 * 64 + 64 * 16;
  const int64_t head = 576 * 512 + 512 + 2 * 512 + 512 * 256 + 256 + 2 * 256 + 256 * 40 + 40;
  const int64_t invariant = (96 * 48 * 2 + 2 * 48) + (48 * 24 * 2 + 2 * 24) + 24 * 3;
  EXPECT_EQ(models::count_parameters(*make("vnt")), 96 + 3 * block + invariant + head);
}

TEST(VNModels, BadInputsAreClearErrors) {
  auto model = make("vnt", kSmallVnt);
  model->eval();
  data::Batch batch = cloud_batch(1, 20, torch::kFloat, 1);
  batch.inputs["points"] = batch.inputs["points"].transpose(1, 2).contiguous();  // [B, N, 3]
  EXPECT_THROW(model->forward(batch), UsageError);
  batch = cloud_batch(1, 20, torch::kFloat, 1);
  batch.inputs["points"][0][1][3] = std::nan("");
  EXPECT_THROW(model->forward(batch), DataError);
  batch = cloud_batch(1, 5, torch::kFloat, 1);  // fewer points than k = 8
  EXPECT_THROW(model->forward(batch), DataError);
  EXPECT_THROW(make("vnt", {{"pooling", "sum"}}), UsageError);
  EXPECT_THROW(make("vnt", {{"heads", 0}}), UsageError);
}

// ---------------------------------------------------------------------------- part segmentation

namespace {

const nlohmann::json kSmallSeg = {{"linear_dim", 8}, {"heads", 3},        {"head_dim", 4},
                                  {"k", 8},          {"category_dim", 8}, {"seg_hidden", {32, 16, 16}}};

}  // namespace

TEST(VNSegModels, VNTSegIsInvariantPerPointInFloat64AndFloat32) {
  auto model = make("vnt-seg", kSmallSeg);
  {
    torch::NoGradGuard no_grad;
    model->eval();
    EXPECT_EQ(model->forward(cloud_batch(2, 48, torch::kFloat, 3)).sizes(), (std::vector<int64_t>{2, 48, 50}));
  }
  EXPECT_LE(invariance_error(*model, torch::kDouble), 1e-9);
  EXPECT_LE(invariance_error(*make("vnt-seg", kSmallSeg), torch::kFloat), 1e-4);
  auto with_normals = kSmallSeg;
  with_normals["normals"] = true;
  EXPECT_LE(invariance_error(*make("vnt-seg", with_normals), torch::kDouble), 1e-9);
}

TEST(VNSegModels, VNDGCNNSegIsInvariantPerPoint) {
  EXPECT_LE(invariance_error(*make("vn-dgcnn-seg", {{"k", 8}}), torch::kDouble), 1e-9);
  EXPECT_LE(invariance_error(*make("vn-dgcnn-seg", {{"k", 8}, {"pooling", "max"}}), torch::kDouble), 1e-9);
  EXPECT_LE(invariance_error(*make("vn-dgcnn-seg", {{"k", 8}}), torch::kFloat), 1e-4);
}

TEST(VNSegModels, XYZSegBaselineIsNotInvariant) {
  EXPECT_GT(invariance_error(*make("xyz-transformer-seg"), torch::kDouble), 1e-3);
}

TEST(VNSegModels, TheCategoryChangesThePrediction) {
  auto model = make("vnt-seg", kSmallSeg);
  model->eval();
  torch::NoGradGuard no_grad;
  auto batch = cloud_batch(2, 48, torch::kFloat, 3);
  const auto a = model->forward(batch);
  batch.inputs["category"] = torch::tensor({7, 2}, torch::kLong);
  EXPECT_GT((model->forward(batch) - a).abs().max().item<double>(), 1e-4);
}

TEST(VNSegModels, ParameterCounts) {
  // Vector Neurons' vn_dgcnn_partseg with 50 parts and 16 categories.
  EXPECT_EQ(models::count_parameters(*make("vn-dgcnn-seg")), 1306090);
  // vnt-seg = the classifier's backbone at the paper's segmentation sizes
  // (C 128, 14 heads of 16), with the head swapped: the classifier with no
  // hidden head layers ends in Linear(2 * 2304 -> 2); the segmentation head is
  // the category code (16*64 + BN 2*64) and 1x1 convolutions from 2304 point
  // + 2304 pooled + 64 category features through 256, 256, 128 (each + BN) to 50.
  const int64_t backbone =
      models::count_parameters(*make(
          "vnt", {{"linear_dim", 128}, {"heads", 14}, {"classes", 2}, {"head_hidden", nlohmann::json::array()}})) -
      (2 * 2304 * 2 + 2);
  const int64_t seg_head =
      (16 * 64 + 2 * 64) + (4672 * 256 + 2 * 256) + (256 * 256 + 2 * 256) + (256 * 128 + 2 * 128) + 128 * 50;
  EXPECT_EQ(models::count_parameters(*make("vnt-seg")), backbone + seg_head);
}

TEST(VNSegModels, BadCategoryInputsAreClearErrors) {
  auto model = make("vnt-seg", kSmallSeg);
  model->eval();
  torch::NoGradGuard no_grad;
  auto batch = cloud_batch(2, 48, torch::kFloat, 3);
  batch.inputs["category"] = torch::tensor({0, 16}, torch::kLong);
  EXPECT_THROW(model->forward(batch), UsageError);
  batch.inputs["category"] = torch::tensor({0.0, 1.0});
  EXPECT_THROW(model->forward(batch), UsageError);
  batch.inputs.erase("category");
  EXPECT_THROW(model->forward(batch), std::out_of_range);
}

// Whole point-cloud classifiers: VNT-Net and VN-DGCNN give the same logits for
// a rotated cloud; the xyz baseline does not; parameter counts match the papers'.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include "qkv/core/errors.h"
#include "support/haar_rotation.h"
#include "qkv/models/model.h"
#include "qkv/models/vnt_net.h"

using namespace qkv;
using qkv::testing::haar_rotation;

namespace {

data::Batch cloud_batch(int64_t b, int64_t n, torch::Dtype dtype, int64_t seed) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(seed);
  data::Batch batch;
  batch.inputs["points"] = torch::randn({b, 3, n}, gen, torch::kDouble).to(dtype);
  auto normals = torch::randn({b, 3, n}, gen, torch::kDouble);
  batch.inputs["normals"] = (normals / normals.norm(2, 1, true)).to(dtype);
  batch.target = torch::zeros({b}, torch::kLong);
  return batch;
}

data::Batch rotated(const data::Batch& batch, const at::Tensor& r) {
  data::Batch out = batch;
  for (auto& [name, t] : out.inputs) t = torch::matmul(r, t);  // [3,3] @ [B,3,N]
  return out;
}

// Largest logit change over three rotations, with the model in eval mode.
double invariance_error(models::Model& model, torch::Dtype dtype, int64_t n = 48) {
  model.to(dtype);
  model.eval();
  torch::NoGradGuard no_grad;
  const auto batch = cloud_batch(2, n, dtype, 3);
  const auto logits = model.forward(batch);
  double worst = 0;
  for (int64_t s = 1; s <= 3; ++s)
    worst = std::max(worst, (model.forward(rotated(batch, haar_rotation(s, dtype))) - logits)
                                .abs()
                                .max()
                                .item<double>());
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
  EXPECT_LE(invariance_error(*make("vn-dgcnn", {{"classes", 5}, {"k", 8}, {"pooling", "max"}}), torch::kDouble),
            1e-9);
  EXPECT_LE(invariance_error(*make("vn-dgcnn", {{"classes", 5}, {"k", 8}}), torch::kFloat), 1e-4);
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

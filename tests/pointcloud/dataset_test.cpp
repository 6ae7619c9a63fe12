// PointCloudDataset: what the model sees, and which draws are repeatable.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <ATen/CPUGeneratorImpl.h>

#include <memory>

#include "qkv/core/errors.h"
#include "qkv/pointcloud/point_dataset.h"

using namespace qkv;
using namespace qkv::pointcloud;

namespace {

// S shapes of P points on spheres of different centres and radii, with the
// outward unit normals.
std::shared_ptr<PointCloudSet> sphere_set(int64_t s = 6, int64_t p = 256) {
  auto gen = at::make_generator<at::CPUGeneratorImpl>(17);
  auto set = std::make_shared<PointCloudSet>();
  auto dirs = torch::randn({s, p, 3}, gen, torch::kFloat);
  dirs = dirs / dirs.norm(2, 2, true);
  const auto centres = torch::randn({s, 1, 3}, gen, torch::kFloat) * 3;
  const auto radii = torch::rand({s, 1, 1}, gen, torch::kFloat) * 4 + 0.5;
  // Flatten the spheres a little so that a rotation is visible in the coordinates' spread.
  const auto squash = torch::tensor({1.0f, 0.6f, 0.3f});
  set->points = centres + radii * dirs * squash;
  set->normals = dirs / squash;
  set->normals = set->normals / set->normals.norm(2, 2, true);
  set->labels = torch::arange(s, torch::kLong) % 3;
  set->class_names = {"a", "b", "c"};
  for (int64_t i = 0; i < s; ++i) set->sources.push_back("shape" + std::to_string(i));
  return set;
}

double max_abs(const at::Tensor& t) { return t.abs().max().item<double>(); }

PointViewOptions view(Rotation rotation, bool normals = true) {
  PointViewOptions o;
  o.num_points = 64;
  o.rotation = rotation;
  o.use_normals = normals;
  return o;
}

}  // namespace

TEST(PointDataset, ShapesDtypesAndNormalisedPoints) {
  const auto set = sphere_set();
  PointCloudDataset ds(set, view(Rotation::None));
  EXPECT_EQ(ds.size(), 6);
  const auto b = ds.get({0, 4, 5});
  const auto& pts = b.input("points");
  EXPECT_EQ(pts.sizes(), (std::vector<int64_t>{3, 3, 64}));
  EXPECT_EQ(pts.scalar_type(), torch::kFloat);
  EXPECT_TRUE(pts.is_contiguous());
  EXPECT_EQ(b.input("normals").sizes(), pts.sizes());
  EXPECT_EQ(b.target.scalar_type(), torch::kLong);
  EXPECT_TRUE(torch::equal(b.target, torch::tensor({0, 1, 2}, torch::kLong)));
  // Unit sphere: centroid 0, farthest point at 1.
  EXPECT_LT(max_abs(pts.mean(2)), 1e-5);
  EXPECT_LT(max_abs(pts.norm(2, 1).amax(1) - 1), 1e-5);
  EXPECT_LT(max_abs(b.input("normals").norm(2, 1) - 1), 1e-5);
  // FPS from point 0 in eval mode: the first column is stored point 0, normalised.
  EXPECT_LT(max_abs(b.input("normals").select(2, 0)[0] - set->normals[0][0]), 1e-6);
  EXPECT_THROW(b.input("colors"), std::out_of_range);
  EXPECT_EQ(PointCloudDataset(set, view(Rotation::None, false)).get({1}).inputs.count("normals"), 0u);
}

TEST(PointDataset, EvalModeIsTheSameOnEveryCall) {
  const auto set = sphere_set();
  for (const char* sampling : {"fps", "random", "first"}) {
    auto o = view(Rotation::SO3);
    o.sampling = sampling;
    o.random_scale = o.random_shift = true;  // train mode only: no effect here
    PointCloudDataset ds(set, o);
    torch::manual_seed(1);
    const auto a = ds.get({0, 1, 2, 3});
    torch::manual_seed(2);  // the global generator plays no part
    const auto b = PointCloudDataset(set, o).get({3, 2});
    EXPECT_TRUE(torch::equal(a.input("points")[3], b.input("points")[0])) << sampling;
    EXPECT_TRUE(torch::equal(a.input("normals")[2], b.input("normals")[1])) << sampling;
    // Different shapes get different rotations; another seed, other rotations.
    o.seed = 9;
    const auto c = PointCloudDataset(set, o).get({0, 1, 2, 3});
    EXPECT_FALSE(torch::equal(a.input("points"), c.input("points"))) << sampling;
    // Scale and shift are not applied in eval mode.
    auto plain = o;
    plain.seed = 0;
    plain.random_scale = plain.random_shift = false;
    EXPECT_TRUE(torch::equal(PointCloudDataset(set, plain).get({0, 1, 2, 3}).input("points"), a.input("points")));
  }
}

TEST(PointDataset, TrainModeDrawsFromTheGlobalGenerator) {
  const auto set = sphere_set();
  auto o = view(Rotation::SO3);
  o.train = true;
  o.random_scale = o.random_shift = true;
  PointCloudDataset ds(set, o);
  torch::manual_seed(3);
  const auto a = ds.get({0, 1, 2});
  const auto b = ds.get({0, 1, 2});
  EXPECT_FALSE(torch::equal(a.input("points"), b.input("points")));  // new draws every call
  torch::manual_seed(3);
  const auto again = ds.get({0, 1, 2});  // a resumed run repeats them
  EXPECT_TRUE(torch::equal(a.input("points"), again.input("points")));
  EXPECT_TRUE(torch::equal(a.input("normals"), again.input("normals")));
  // Scale and shift apply: the farthest point is no longer exactly at 1 from the centroid.
  const auto centred = a.input("points") - a.input("points").mean(2, true);
  EXPECT_GT(max_abs(centred.norm(2, 1).amax(1) - 1), 1e-3);
  EXPECT_LT(max_abs(a.input("normals").norm(2, 1) - 1), 1e-5);
}

TEST(PointDataset, NormalsRotateWithThePoints) {
  const auto set = sphere_set();
  for (auto rotation : {Rotation::Up, Rotation::SO3}) {
    const auto plain = PointCloudDataset(set, view(Rotation::None)).get({0, 1, 2, 3, 4, 5});
    const auto turned = PointCloudDataset(set, view(rotation)).get({0, 1, 2, 3, 4, 5});
    const auto p0 = plain.input("points"), n0 = plain.input("normals");
    const auto p1 = turned.input("points"), n1 = turned.input("normals");
    EXPECT_GT(max_abs(p1 - p0), 0.1);  // it did rotate
    // The same rotation on points and normals keeps every dot product n_i . p_j.
    EXPECT_LT(max_abs(n1.transpose(1, 2).bmm(p1) - n0.transpose(1, 2).bmm(p0)), 1e-4);
    EXPECT_LT(max_abs(n1.norm(2, 1) - 1), 1e-5);
    // And it is a rotation of the points: the Gram matrix is unchanged.
    EXPECT_LT(max_abs(p1.transpose(1, 2).bmm(p1) - p0.transpose(1, 2).bmm(p0)), 1e-4);
    if (rotation == Rotation::Up) {  // y-up: the y coordinates stay
      EXPECT_LT(max_abs(p1.select(1, 1) - p0.select(1, 1)), 1e-6);
    }
  }
}

TEST(PointDataset, OptionErrors) {
  const auto set = sphere_set();
  auto o = view(Rotation::None);
  o.num_points = 257;
  EXPECT_THROW(PointCloudDataset(set, o), UsageError);
  o = view(Rotation::None);
  o.sampling = "grid";
  EXPECT_THROW(PointCloudDataset(set, o), UsageError);
  auto bare = std::make_shared<PointCloudSet>(*set);
  bare->normals = at::Tensor();
  EXPECT_THROW(PointCloudDataset(bare, view(Rotation::None)), UsageError);
  EXPECT_NO_THROW(PointCloudDataset(bare, view(Rotation::None, false)));

  EXPECT_EQ(parse_rotation("none"), Rotation::None);
  EXPECT_EQ(parse_rotation("z"), Rotation::Up);
  EXPECT_EQ(parse_rotation("SO3"), Rotation::SO3);
  EXPECT_THROW(parse_rotation("x"), UsageError);
  try {
    parse_rotation("x", "rotate");
    ADD_FAILURE() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key, "rotate");
  }
  for (auto r : {Rotation::None, Rotation::Up, Rotation::SO3}) EXPECT_EQ(parse_rotation(rotation_name(r)), r);
}

TEST(PrepareSingleCloud, MeshAndPointCloud) {
  Mesh cube;
  for (int i = 0; i < 8; ++i) cube.vertices.push_back({(i & 1) ? 2.f : 1.f, (i & 2) ? 2.f : 1.f, (i & 4) ? 2.f : 1.f});
  const int quads[6][4] = {{0, 1, 3, 2}, {4, 5, 7, 6}, {0, 1, 5, 4}, {2, 3, 7, 6}, {0, 2, 6, 4}, {1, 3, 7, 5}};
  for (const auto& q : quads) {
    cube.faces.push_back({q[0], q[1], q[2]});
    cube.faces.push_back({q[0], q[2], q[3]});
  }
  auto o = view(Rotation::SO3);
  at::Tensor normals;
  const auto x = prepare_single_cloud(cube, o, &normals, "cube.off");
  EXPECT_EQ(x.sizes(), (std::vector<int64_t>{1, 3, 64}));
  EXPECT_EQ(x.scalar_type(), torch::kFloat);
  ASSERT_TRUE(normals.defined());
  EXPECT_EQ(normals.sizes(), x.sizes());
  EXPECT_LT(max_abs(normals.norm(2, 1) - 1), 1e-5);
  EXPECT_LT(max_abs(x.norm(2, 1).amax(1) - 1), 1e-5);
  EXPECT_TRUE(torch::equal(prepare_single_cloud(cube, o), x));  // deterministic

  Mesh cloud;
  for (int i = 0; i < 10; ++i) cloud.vertices.push_back({float(i), float(i * i % 7), 1});
  o.use_normals = false;
  EXPECT_EQ(prepare_single_cloud(cloud, o).sizes(), (std::vector<int64_t>{1, 3, 64}));
  o.use_normals = true;
  EXPECT_THROW(prepare_single_cloud(cloud, o, &normals, "cloud.xyz"), DataError);
}

TEST(PrepareEveryPoint, KeepsEveryPointOfACloudInFileOrder) {
  Mesh cloud;
  for (int i = 0; i < 5; ++i) cloud.vertices.push_back({float(i), float(2 * i), -float(i)});
  PointViewOptions o;
  o.num_points = 2;  // ignored for a cloud: every point is kept
  o.normalize = false;
  const auto points = prepare_every_point(cloud, o);
  ASSERT_EQ(points.sizes(), (std::vector<int64_t>{1, 3, 5}));
  for (int i = 0; i < 5; ++i) EXPECT_EQ(points[0][1][i].item<float>(), float(2 * i));
  // Rotated as the eval view: same norms, same seed gives the same rotation.
  o.rotation = Rotation::SO3;
  o.seed = 4;
  const auto turned = prepare_every_point(cloud, o);
  EXPECT_TRUE(torch::allclose(turned.norm(2, 1), points.norm(2, 1), 1e-5, 1e-5));
  EXPECT_FALSE(torch::allclose(turned, points));
  EXPECT_TRUE(torch::equal(prepare_every_point(cloud, o), turned));
  o.use_normals = true;
  EXPECT_THROW(prepare_every_point(cloud, o, nullptr, "c.xyz"), DataError);
}

TEST(PointDataset, PointDropoutReplacesPointsByTheFirstInTrainingOnly) {
  const auto set = sphere_set(6, 256);
  auto o = view(Rotation::None);
  o.sampling = "first";
  o.point_dropout = 0.875;
  torch::manual_seed(5);
  o.train = true;
  const auto pts = PointCloudDataset(set, o).get({0, 1, 2, 3, 4, 5}).input("points");  // [B, 3, N]
  // Per shape: how many points equal the first one. Shapes draw their ratio
  // from U[0, 0.875), so some lose many points, and no shape loses them all by chance.
  const auto same = (pts - pts.slice(2, 0, 1)).abs().amax(1).eq(0).sum(1);  // [B], the first point included
  EXPECT_GT(same.max().item<int64_t>(), 8) << same;
  EXPECT_LT(same.max().item<int64_t>(), 64);
  // Normals follow their points.
  const auto normals = PointCloudDataset(set, o).get({0}).input("normals");
  EXPECT_EQ(normals.sizes(), (std::vector<int64_t>{1, 3, 64}));
  // The same options in eval mode, and a dropout of 0, drop nothing: the sphere's points are distinct.
  o.train = false;
  const auto eval = PointCloudDataset(set, o).get({0, 1}).input("points");
  EXPECT_EQ((eval - eval.slice(2, 0, 1)).abs().amax(1).eq(0).sum().item<int64_t>(), 2);
  o.train = true;
  o.point_dropout = 0;
  const auto none = PointCloudDataset(set, o).get({0, 1}).input("points");
  EXPECT_EQ((none - none.slice(2, 0, 1)).abs().amax(1).eq(0).sum().item<int64_t>(), 2);
  o.point_dropout = 1.0;
  EXPECT_THROW(PointCloudDataset(set, o), UsageError);
}

// Features are picked and dropped with their points and never rotated,
// scaled or shifted: each shape's stored point index, carried as a feature,
// gives back points whose distances are the view's up to one scale.
TEST(PointDataset, FeaturesFollowTheirPointsAndAreNeverTransformed) {
  auto set = sphere_set(6, 256);
  set->features = torch::arange(256, torch::kFloat).view({1, 256, 1}).expand({6, 256, 1}).contiguous();
  auto o = view(Rotation::SO3, false);
  o.point_features = "index";
  o.train = true;
  o.random_scale = o.random_shift = true;
  o.point_dropout = 0.5;
  torch::manual_seed(9);
  const auto b = PointCloudDataset(set, o).get({0, 1, 2, 3, 4, 5});
  const auto& f = b.input("features");
  ASSERT_EQ(f.sizes(), (std::vector<int64_t>{6, 1, 64}));
  EXPECT_TRUE(torch::equal(f, f.round()));  // stored values, as they were
  for (int64_t k = 0; k < 6; ++k) {
    const auto stored = set->points[k].index_select(0, f[k][0].to(torch::kLong)).to(torch::kDouble);  // [64, 3]
    const auto seen = b.input("points")[k].t().to(torch::kDouble);                                    // [64, 3]
    const auto d_stored = torch::cdist(stored, stored), d_seen = torch::cdist(seen, seen);
    const auto scale = d_seen.sum() / d_stored.sum();
    EXPECT_LT(max_abs(d_seen - scale * d_stored), 1e-4 * max_abs(d_seen)) << "shape " << k;
  }
  // Asked of a set loaded without them: refused.
  set->features = at::Tensor();
  EXPECT_THROW(PointCloudDataset(set, o), UsageError);
}

TEST(PointDataset, VotesDrawOtherPointsOfTheSamePose) {
  const auto set = sphere_set(4, 256);
  auto o = view(Rotation::SO3);
  o.sampling = "fps";
  o.seed = 9;
  const auto standard = PointCloudDataset(set, o).get({0, 1, 2, 3});
  o.vote = 0;
  EXPECT_TRUE(torch::equal(PointCloudDataset(set, o).get({0, 1, 2, 3}).input("points"), standard.input("points")));
  o.vote = 1;
  const auto first_vote = PointCloudDataset(set, o).get({0, 1, 2, 3});
  o.vote = 2;
  const auto second_vote = PointCloudDataset(set, o).get({0, 1, 2, 3});
  // Other FPS starts: other points ...
  EXPECT_FALSE(torch::equal(first_vote.input("points"), standard.input("points")));
  EXPECT_FALSE(torch::equal(first_vote.input("points"), second_vote.input("points")));
  // ... of the same rotated shape: its flattened ellipsoid gives the same spread
  // (second moments) to a few percent, which a different rotation would not.
  auto moments = [](const at::Tensor& p) { return p.matmul(p.transpose(1, 2)) / p.size(2); };  // [B, 3, 3]
  EXPECT_LT(max_abs(moments(first_vote.input("points")) - moments(standard.input("points"))), 0.05);
  // A vote is repeatable, and with sampling "first" every vote is view 0.
  o.vote = 1;
  EXPECT_TRUE(torch::equal(PointCloudDataset(set, o).get({0, 1, 2, 3}).input("points"), first_vote.input("points")));
  o.sampling = "first";
  const auto first_points = PointCloudDataset(set, o).get({0, 1}).input("points");
  o.vote = 0;
  EXPECT_TRUE(torch::equal(PointCloudDataset(set, o).get({0, 1}).input("points"), first_points));
}

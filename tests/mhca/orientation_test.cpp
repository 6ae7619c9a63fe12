// Turning volumes to RAS+: every voxel keeps its value and its place in the
// world, the axis codes come out "RAS", the file round-trips, and a cohort of
// scans stored in different axis orders is accepted with --reorient and
// refused without it.
#include "qkv/medical/orientation.h"

#include <gtest/gtest.h>
#include <torch/torch.h>

#include <array>
#include <cmath>
#include <string>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "qkv/medical/cohort_data.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

// 3 x 4 x 5 voxels of distinct values whose i axis runs towards posterior
// (-y), j towards superior (+z), k towards left (-x): "PSL", 2 x 3 x 4 mm.
medical::Volume psl_volume() {
  medical::Volume v;
  v.dims = {3, 4, 5};
  for (int64_t n = 0; n < 60; ++n) v.voxels.push_back(static_cast<float>(n) * 0.5f + 1.0f);
  v.geometry.spacing = {2, 3, 4};
  v.geometry.sform_code = 2;
  v.geometry.sform = {0,  0, -4, 10,   //
                      -2, 0, 0,  20,   //
                      0,  3, 0,  -30,  //
                      0,  0, 0,  1};
  v.geometry.qform_code = 1;
  v.geometry.qform = v.geometry.sform;
  return v;
}

std::array<double, 3> world_of(const std::array<double, 16>& m, int64_t i, int64_t j, int64_t k) {
  std::array<double, 3> w{};
  for (int r = 0; r < 3; ++r)
    w[r] = m[4 * r] * static_cast<double>(i) + m[4 * r + 1] * static_cast<double>(j) +
           m[4 * r + 2] * static_cast<double>(k) + m[4 * r + 3];
  return w;
}

TEST(Orientation, CodesNameWhereEachVoxelAxisRuns) {
  EXPECT_EQ(medical::orientation_code(psl_volume().geometry), "PSL");
  EXPECT_EQ(medical::orientation_code(medical::mni_2mm_geometry()), "LAS");  // MNI's sform: x runs right to left
  EXPECT_EQ(medical::orientation_code(medical::NiftiGeometry{}), "RAS");     // spacing alone
}

TEST(Orientation, TurningToRasKeepsEveryVoxelWhereItWas) {
  const auto v = psl_volume();
  const auto r = medical::reorient_to_ras(v, "psl.nii");
  EXPECT_EQ(medical::orientation_code(r.geometry), "RAS");
  EXPECT_EQ(r.dims, (std::array<int64_t, 3>{5, 3, 4}));
  EXPECT_EQ(r.geometry.spacing, (std::array<double, 3>{4, 2, 3}));
  // The old voxel at world w is found in the new volume at the index whose
  // world position is w, with the same value.
  int matched = 0;
  for (int64_t k = 0; k < 5; ++k)
    for (int64_t j = 0; j < 4; ++j)
      for (int64_t i = 0; i < 3; ++i) {
        const auto w = world_of(v.geometry.sform, i, j, k);
        // RAS with a diagonal affine: index = (world - origin) / spacing.
        const auto& m = r.geometry.sform;
        const int64_t x = std::llround((w[0] - m[3]) / m[0]), y = std::llround((w[1] - m[7]) / m[5]),
                      z = std::llround((w[2] - m[11]) / m[10]);
        ASSERT_TRUE(x >= 0 && x < 5 && y >= 0 && y < 3 && z >= 0 && z < 4) << i << " " << j << " " << k;
        const auto back = world_of(m, x, y, z);
        for (int a = 0; a < 3; ++a) EXPECT_NEAR(back[a], w[a], 1e-9);
        EXPECT_EQ(r.at(x, y, z), v.at(i, j, k));
        ++matched;
      }
  EXPECT_EQ(matched, 60);
  EXPECT_EQ(r.geometry.qform, r.geometry.sform);  // both rewritten the same way
  // A file of the turned volume reads back as RAS, through the qform too.
  const auto path = temp_path("orientation_ras.nii.gz");
  medical::write_nifti(path, r);
  auto back = medical::read_nifti(path);
  EXPECT_EQ(medical::orientation_code(back.geometry), "RAS");
  back.geometry.sform_code = 0;
  EXPECT_EQ(medical::orientation_code(back.geometry), "RAS");
  EXPECT_EQ(back.voxels, r.voxels);
  // Turning twice changes nothing more.
  const auto again = medical::reorient_to_ras(r, path);
  EXPECT_EQ(again.voxels, r.voxels);
  EXPECT_EQ(again.geometry.sform, r.geometry.sform);
}

TEST(Orientation, ASingularAffineIsRefusedNamingTheFile) {
  auto v = psl_volume();
  for (int r = 0; r < 3; ++r) v.geometry.sform[4 * r + 1] = 0;  // voxel axis j goes nowhere
  expect_data_error([&] { medical::reorient_to_ras(v, "flat.nii"); }, "flat.nii", "cannot be turned to RAS+");
}

TEST(Orientation, ACohortStoredInTwoAxisOrdersLoadsTheSameWayRoundWithReorient) {
  const auto dir = fresh_dir("orientation_cohort");
  make_directories(dir);
  const auto psl = psl_volume();
  medical::write_nifti(dir + "/a.nii.gz", psl);
  medical::write_nifti(dir + "/b.nii.gz", medical::reorient_to_ras(psl, "a"));  // the same scan, stored RAS
  write_text_file(dir + "/manifest.csv", "subject_id,label,spect\ns1,0,a.nii.gz\ns2,1,b.nii.gz\n");
  write_text_file(dir + "/meth.csv", "subject_id,cg1,cg2\ns1,0.1,0.2\ns2,0.3,0.4\n");
  const auto manifest = dir + "/manifest.csv", table = dir + "/meth.csv";
  expect_data_error([&] { medical::load_cohort(manifest, table, true, 1, true); }, "b.nii.gz",
                    "grid 5x3x4 differs from");
  const auto c = medical::load_cohort(manifest, table, true, 1, true, {}, 1.0, /*to_ras=*/true);
  EXPECT_TRUE(c.reoriented);
  EXPECT_EQ(c.volume_shape(), (std::vector<int64_t>{5, 3, 4}));
  EXPECT_TRUE(torch::equal(c.volumes[0], c.volumes[1]));
  EXPECT_EQ(medical::orientation_code(c.geometry), "RAS");
  // A checkpoint's grid is compared with the turned one.
  expect_data_error(
      [&] {
        medical::load_cohort(manifest, table, true, 1, true, {3, 4, 5}, 1.0, true);
      },
      "a.nii.gz", "turned to RAS+ differs from the checkpoint's 3x4x5");
  EXPECT_EQ(medical::load_cohort(manifest, table, true, 1, true, {5, 3, 4}, 1.0, true).size(), 2);
}

TEST(Orientation, AMaskIsReadInTheCohortsSpaceOrRefused) {
  // A striatum mask lies where the volumes lie: turned to RAS+ with them,
  // and refused on another grid or affine (a mirrored mask would score the
  // other hemisphere). The maps explain writes take the same geometry.
  const auto dir = fresh_dir("orientation_mask");
  make_directories(dir);
  const auto psl = psl_volume();
  const auto ras = medical::reorient_to_ras(psl, "a");
  medical::write_nifti(dir + "/a.nii.gz", psl);
  medical::write_nifti(dir + "/b.nii.gz", ras);
  auto moved = ras;
  moved.geometry.sform[3] += 10;
  moved.geometry.qform[3] += 10;
  medical::write_nifti(dir + "/moved.nii.gz", moved);
  write_text_file(dir + "/meth.csv", "subject_id,cg1,cg2\ns1,0.1,0.2\ns2,0.3,0.4\n");
  write_text_file(dir + "/mixed.csv", "subject_id,label,spect\ns1,0,a.nii.gz\ns2,1,b.nii.gz\n");
  const auto turned = medical::load_cohort(dir + "/mixed.csv", dir + "/meth.csv", true, 1, true, {}, 1.0, true);
  for (const char* mask : {"/a.nii.gz", "/b.nii.gz"}) {
    EXPECT_TRUE(torch::equal(medical::read_cohort_label_mask(turned, dir + mask, "striatum mask"), turned.volumes[0]))
        << mask;
    const auto header = medical::read_cohort_volume(dir + mask, turned.reoriented);
    EXPECT_EQ(header.geometry.affine(), turned.geometry.affine()) << mask;  // the map's affine
  }
  expect_data_error([&] { medical::read_cohort_label_mask(turned, dir + "/moved.nii.gz", "striatum mask"); },
                    "moved.nii.gz", "striatum mask: its origin differs from the volumes'");
  write_text_file(dir + "/ras.csv", "subject_id,label,spect\ns1,0,b.nii.gz\ns2,1,b.nii.gz\n");
  const auto plain = medical::load_cohort(dir + "/ras.csv", dir + "/meth.csv", true, 1, true);
  expect_data_error([&] { medical::read_cohort_label_mask(plain, dir + "/a.nii.gz", "striatum mask"); }, "a.nii.gz",
                    "striatum mask on grid 3x4x5, not the volumes' 5x3x4");
}

TEST(Orientation, AVolumeWhoseAffineHasNoDirectionIsNamedByItsFileAsItIsRead) {
  const auto dir = fresh_dir("orientation_flat");
  make_directories(dir);
  const auto good = psl_volume();
  auto flat = good;
  for (int r = 0; r < 3; ++r) flat.geometry.sform[4 * r + 1] = 0;
  medical::write_nifti(dir + "/a.nii.gz", good);
  medical::write_nifti(dir + "/flat.nii.gz", flat);
  write_text_file(dir + "/manifest.csv", "subject_id,label,spect\ns1,0,a.nii.gz\ns2,1,flat.nii.gz\n");
  write_text_file(dir + "/meth.csv", "subject_id,cg1,cg2\ns1,0.1,0.2\ns2,0.3,0.4\n");
  // Without --reorient too: its orientation is recorded and compared.
  expect_data_error([&] { medical::load_cohort(dir + "/manifest.csv", dir + "/meth.csv", true, 1, true); },
                    "flat.nii.gz", "has no direction");
}

}  // namespace
}  // namespace qkv::testing

// How many CpG sites RFE keeps in mhca train and cv when --n-features is not
// given: as many as the SPECT tokens of the volumes a network reads (MHCA
// needs one CpG token per SPECT token), else the paper's count.
#include <gtest/gtest.h>

#include <vector>

#include "qkv/tasks/mhca_cv.h"

TEST(RfeTarget, FollowsTheSpectTokensUnlessGiven) {
  qkv::tasks::FeatureSelection selection;  // n_features 0: not given
  const nlohmann::json defaults = nlohmann::json::object();
  // The paper's volumes give the paper's count: 7 x 9 x 7 tokens.
  EXPECT_EQ(qkv::tasks::rfe_target(selection, defaults, {91, 109, 91}), 441);
  EXPECT_EQ(qkv::tasks::kPaperCpgSites, 441);
  // Other volumes, or other encoder options, give their own token count:
  // four 3-wide convolutions with three 2-pools between them take 48 voxels
  // to 46, 23, 21, 10, 8, 4, 2 and 56 to 3 unpadded; padded by 1, to 6 and 7.
  const std::vector<int64_t> small = {48, 56, 48};
  EXPECT_EQ(qkv::tasks::rfe_target(selection, defaults, small), 2 * 3 * 2);
  EXPECT_EQ(qkv::tasks::rfe_target(selection, {{"padding", 1}}, small), 6 * 7 * 6);
  // No volumes read (only XGBoost): the paper's count.
  EXPECT_EQ(qkv::tasks::rfe_target(selection, defaults, {}), qkv::tasks::kPaperCpgSites);
  // A count given wins over both.
  selection.n_features = 50;
  EXPECT_EQ(qkv::tasks::rfe_target(selection, defaults, {91, 109, 91}), 50);
  EXPECT_EQ(qkv::tasks::rfe_target(selection, defaults, {}), 50);
}

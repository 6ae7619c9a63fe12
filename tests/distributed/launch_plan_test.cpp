// The launch plan's checks called directly (no rank is started): what `qkv
// launch` refuses before it starts, by key for its own settings and as typed
// for the command's arguments, which would win over the environment it sets.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/distributed/launcher.h"
#include "qkv/distributed/process_group.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

using distributed::LocalRanks;

LocalRanks plan_of(std::vector<std::string> command, int64_t nodes = 1, int64_t node_rank = 0,
                   std::string master = "") {
  LocalRanks plan;
  plan.procs = 2;
  plan.nodes = nodes;
  plan.node_rank = node_rank;
  plan.master = std::move(master);
  plan.command = std::move(command);
  return plan;
}

TEST(LaunchPlan, AnEmptyMasterBecomesAFreeLoopbackPortAndTheCommandIsKept) {
  const auto plan = distributed::checked_launch_plan(plan_of({"vnt", "train", "--epochs", "3"}));
  const auto [host, port] = distributed::parse_master(plan.master, "master");
  EXPECT_EQ(host, "127.0.0.1");
  EXPECT_GT(port, 0);
  EXPECT_EQ(plan.command, (std::vector<std::string>{"vnt", "train", "--epochs", "3"}));
}

TEST(LaunchPlan, ItsOwnSettingsAreRefusedByKey) {
  const auto refused_key = [](const LocalRanks& plan) {
    return config_error_key_of([&] { distributed::checked_launch_plan(plan); });
  };
  EXPECT_EQ(refused_key(plan_of({"vnt", "train"}, 2, 2, "10.0.0.1:29500")), "node_rank");
  EXPECT_EQ(refused_key(plan_of({"vnt", "train"}, 2, 0)), "nodes");
  EXPECT_EQ(refused_key(plan_of({"vnt", "train"}, 1, 0, "nohost")), "master");
  // The ranges the options show hold for a plan made in code.
  EXPECT_EQ(refused_key(plan_of({"vnt", "train"}, 0)), "nodes");
  EXPECT_EQ(refused_key(plan_of({"vnt", "train"}, 65537, 0, "10.0.0.1:29500")), "nodes");
  EXPECT_EQ(refused_key(plan_of({"vnt", "train"}, 1, -1)), "node_rank");
  LocalRanks none = plan_of({"vnt", "train"});
  none.procs = 0;
  EXPECT_EQ(refused_key(none), "procs");
  none.procs = 1025;
  EXPECT_EQ(refused_key(none), "procs");
  // Several nodes with a master are fine.
  EXPECT_EQ(distributed::checked_launch_plan(plan_of({"vnt", "train"}, 2, 1, "10.0.0.1:29500")).master,
            "10.0.0.1:29500");
}

TEST(LaunchPlan, TheCommandsRankArgumentsAreRefusedAsTyped) {
  const auto refusal = [](std::vector<std::string> command, std::string master = "") {
    return usage_error_of([&] { distributed::checked_launch_plan(plan_of(std::move(command), 1, 0, master)); });
  };
  // 2 ranks: a world size of 3 would wait for a rank that never comes.
  EXPECT_NE(refusal({"vnt", "train", "--world-size", "3"}).find("--world-size 3 in the command"), std::string::npos);
  EXPECT_NE(refusal({"vnt", "train", "--world-size=1"}).find("--world-size 1 in the command"), std::string::npos);
  EXPECT_EQ(refusal({"vnt", "train", "--world-size", "2"}), "(no UsageError)");  // what launch sets anyway
  EXPECT_NE(refusal({"vnt", "train", "--rank", "1"}).find("--rank 1 in the command"), std::string::npos);
  EXPECT_NE(refusal({"vnt", "train", "--master", "127.0.0.1:29999"}).find("give the rendezvous to launch"),
            std::string::npos);
  EXPECT_NE(refusal({"vnt", "train", "--master-port", "29999"}).find("--master-port 29999"), std::string::npos);
  // The launch's own master repeated in the command says nothing new.
  EXPECT_EQ(refusal({"vnt", "train", "--master", "127.0.0.1:29998"}, "127.0.0.1:29998"), "(no UsageError)");
  EXPECT_NE(refusal({"vnt", "train", "--master", "127.0.0.1:29999"}, "127.0.0.1:29998").find("--master"),
            std::string::npos);
  // Options that only look alike are the command's own business.
  EXPECT_EQ(refusal({"lm", "train", "--ranks-file", "x", "--epochs", "2"}), "(no UsageError)");
}

}  // namespace
}  // namespace qkv::testing

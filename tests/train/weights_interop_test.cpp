// --init-weights files from PyTorch: torch.save of a dict of tensors
// (fixtures made by tests/train/fixtures/make_pt_fixtures.py, which writes
// torch.save's zip layout and protocol-2 pickle without needing PyTorch),
// and hostile weights and checkpoint paths.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <torch/torch.h>

#include <limits>
#include <string>

#include "qkv/train/checkpoint.h"
#include "qkv/train/weights.h"
#include "support/bounded_child.h"
#include "support/paths.h"
#include "support/test_files.h"

namespace qkv::testing {
namespace {

std::string fixture(const std::string& name) {
  return std::string(qkv::testing::source_dir()) + "/tests/train/fixtures/" + name;
}

struct Foo : torch::nn::Module {
  Foo() { foo = register_parameter("foo", torch::full({3}, 7.0f)); }
  at::Tensor foo;
};

struct FooBar : Foo {
  FooBar() { bar = register_parameter("bar", torch::full({2}, 7.0f)); }
  at::Tensor bar;
};

TEST(WeightsInterop, TorchSaveOfAOneEntryDictLoads) {
  // Python pickles a one-entry dict with SETITEM, which LibTorch's unpickler lacks.
  Foo m;
  train::load_weights(m, fixture("one_entry.pt"));
  EXPECT_TRUE(torch::equal(m.foo, torch::zeros({3})));
}

TEST(WeightsInterop, TorchSaveOfATwoEntryDictLoads) {
  FooBar m;
  train::load_weights(m, fixture("two_entries.pt"));
  EXPECT_TRUE(torch::equal(m.foo, torch::zeros({3})));
  EXPECT_TRUE(torch::equal(m.bar, torch::ones({2})));
}

// Python's torch.save(module.state_dict()): an OrderedDict with _metadata
// (tests/train/fixtures/make_state_dict_fixtures.py).
TEST(WeightsInterop, PythonStateDictOfOneEntryLoads) {
  Foo m;
  train::load_weights(m, fixture("state_dict_one_entry.pt"));
  EXPECT_TRUE(torch::equal(m.foo, torch::full({3}, 2.0f)));
}

struct LinBn : torch::nn::Module {
  torch::nn::Linear lin{register_module("lin", torch::nn::Linear(3, 2))};
  torch::nn::BatchNorm1d bn{register_module("bn", torch::nn::BatchNorm1d(2))};
};

TEST(WeightsInterop, PythonStateDictOfNestedModulesLoads) {
  LinBn m;
  train::load_weights(m, fixture("state_dict_nested.pt"));
  EXPECT_TRUE(torch::equal(m.lin->weight, torch::arange(6.0f).view({2, 3})));
  EXPECT_TRUE(torch::equal(m.lin->bias, torch::full({2}, -1.0f)));
  EXPECT_TRUE(torch::equal(m.bn->running_mean, torch::full({2}, 0.5f)));
  EXPECT_EQ(m.bn->num_batches_tracked.item<int64_t>(), 7);
}

TEST(WeightsInterop, NonFiniteWeightsAreRefusedNamingTheFileAndKey) {
  Foo m;
  const auto path = fixture("nan_entry.pt");
  expect_data_error([&] { train::load_weights(m, path); }, path, "'foo' holds NaN or infinite values");
  EXPECT_TRUE(torch::equal(m.foo, torch::full({3}, 7.0f))) << "a refused file leaves the model as it was";

  const auto inf = temp_path("inf.pt");
  Foo bad;
  {
    torch::NoGradGuard no_grad;
    bad.foo.fill_(std::numeric_limits<float>::infinity());
  }
  train::export_weights(bad, inf);
  expect_data_error([&] { train::load_weights(m, inf); }, inf, "'foo'");
}

// An input fuzz_weights found, kept in fuzz/regressions/weights/.
std::string weights_regression(const std::string& name) {
  return std::string(qkv::testing::source_dir()) + "/fuzz/regressions/weights/" + name;
}

TEST(WeightsInterop, FuzzFindingsStayFixed) {
  // fuzz_weights: a damaged pickle made LibTorch's unpickler throw a standard
  // exception (not c10::Error), which ended the process.
  Foo m;
  const std::string crash = weights_regression("crash-bcb2918c1da6250c360ce6a4967e79df668df52b");
  expect_data_error([&] { train::load_weights(m, crash); }, crash, "not a weights file");
  // fuzz_weights: a zip whose directory names bytes past the end of the file
  // made torch::pickle_load's reader copy past its buffer (a heap overflow
  // AddressSanitizer reports in make check-asan); zip files are now read
  // through a stream that stops at the end.
  const std::string overflow = weights_regression("crash-ee11987f4db9116dd5a5637a08e23a4065cac667");
  expect_data_error([&] { train::load_weights(m, overflow); }, overflow, "zip");
  // fuzz_weights: 1.5 KB files whose pickle declares a string of 1.7 and
  // 2 GB, which LibTorch's Unpickler reserved before reading (2.1 GB RSS);
  // the pickle's lengths are checked first now.
  for (const char* name :
       {"oom-c4ff7a0a494e55231d1c955bbd6c33d44c55bac9", "oom-444aed7ee321959a42fd97109c10541ff2c72171"}) {
    const std::string path = weights_regression(name);
    expect_bounded_data_error(
        256 * kMiB, [&] { train::load_weights(m, path); }, path, "its pickle declares");
  }
  // fuzz_weights: TUPLE3 opcodes on a stack of fewer than three items; the
  // Unpickler popped without looking and corrupted its stack (a heap overflow
  // when it was destroyed). The pickle's stack is walked first now.
  const std::string underflow = weights_regression("crash-1e34d8207f24d924b87d583a2046fe577d593fc0");
  expect_data_error([&] { train::load_weights(m, underflow); }, underflow, "its pickle pops 3 items with");
  // fuzz_weights: a file that does not start like a zip went to
  // torch::pickle_load, whose in-memory zip reader still found a directory at
  // its end and read freed memory. Only zip archives are read now.
  const std::string not_zip = weights_regression("crash-757838fe57d97b8f93ff001b00a226af3c73fcba");
  expect_data_error([&] { train::load_weights(m, not_zip); }, not_zip, "does not start like one");
  // fuzz_weights: a tensor rebuilt with sizes past its storage (a read through
  // a null storage in isfinite); each entry's extent is checked first now.
  const std::string past_storage = weights_regression("crash-b64bbdbd96a302cad262f7bf540daf2ec58f0c7f");
  expect_data_error([&] { train::load_weights(m, past_storage); }, past_storage, "reaches past the data stored for it");
}

// The stack walk refuses only what cannot be unpickled: every weights file
// LibTorch writes, of any size, loads back.
TEST(WeightsInterop, PickleWalkAcceptsWhatLibTorchWrites) {
  for (int64_t n : {0, 1, 2, 999, 1000, 1001, 2500}) {
    torch::nn::Module many;
    for (int64_t i = 0; i < n; ++i)
      many.register_buffer("b" + std::to_string(i), torch::full({1}, static_cast<double>(i)));
    const auto path = temp_path("many_" + std::to_string(n) + ".pt");
    train::export_weights(many, path);
    torch::nn::Module back;
    for (int64_t i = 0; i < n; ++i) back.register_buffer("b" + std::to_string(i), torch::zeros({1}, torch::kDouble));
    ASSERT_NO_THROW(train::load_weights(back, path)) << n << " tensors";
    for (int64_t i = 0; i < n; i += 250) EXPECT_EQ(back.named_buffers()["b" + std::to_string(i)].item<double>(), i);
  }
}

TEST(WeightsInterop, FifosAreRefusedWithoutOpeningThem) {
  const auto path = temp_path("weights_fifo.pt");
  ::unlink(path.c_str());
  ASSERT_EQ(::mkfifo(path.c_str(), 0600), 0);
  Foo m;
  expect_bounded_data_error(
      64 * kMiB, [&] { train::load_weights(m, path); }, path, "not a regular file");
  expect_bounded_data_error(
      64 * kMiB, [&] { train::read_checkpoint_config(path); }, path, "not a regular file");
  expect_bounded_data_error(
      64 * kMiB, [&] { train::load_checkpoint(path, m, nullptr); }, path, "not a regular file");
}

}  // namespace
}  // namespace qkv::testing

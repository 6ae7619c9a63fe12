#include "qkv/data/lm_data.h"

#include <torch/torch.h>

#include <algorithm>

#include "qkv/core/crc32.h"
#include "qkv/core/errors.h"
#include "qkv/core/text.h"

namespace qkv::data {
namespace {

std::string random_letters(int64_t n, std::mt19937_64& rng) {
  std::uniform_int_distribution<int> letter(0, 25);
  std::string s;
  for (int64_t i = 0; i < n; ++i) s += static_cast<char>('a' + letter(rng));
  return s;
}

std::string random_number(int64_t max_digits, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> digits(1, max_digits);
  const int64_t n = digits(rng);
  std::uniform_int_distribution<int> digit(0, 9), lead(1, 9);
  std::string s(1, static_cast<char>('0' + (n == 1 ? digit(rng) : lead(rng))));
  for (int64_t i = 1; i < n; ++i) s += static_cast<char>('0' + digit(rng));
  return s;
}

std::string add_decimal(const std::string& a, const std::string& b) {
  std::string out;
  int carry = 0;
  for (size_t i = 0; i < std::max(a.size(), b.size()) || carry; ++i) {
    int s = carry;
    if (i < a.size()) s += a[a.size() - 1 - i] - '0';
    if (i < b.size()) s += b[b.size() - 1 - i] - '0';
    out += static_cast<char>('0' + s % 10);
    carry = s / 10;
  }
  std::reverse(out.begin(), out.end());
  return out;
}

}  // namespace

void LmTaskOptions::validate() const {
  check_field_ranges(*this);
  if (max_length < min_length) throw ConfigError("max_length", "must be at least {min_length}");
  if (task == "induction" && min_length < 3) throw ConfigError("min_length", "must be at least 3 for induction");
  // 27 is taken as 26 (its letters are distinct): what runs stored with it
  // were trained on. A new run is refused it (check_new_run).
  if (task == "induction" && max_length > 27)
    throw ConfigError("max_length", "must be at most 26 for induction (its letters are distinct)");
}

void LmTaskOptions::check_new_run() const {
  validate();
  if (task == "induction" && max_length > 26)
    throw ConfigError("max_length", "must be at most 26 for induction (its letters are distinct)");
}

LmExample make_lm_example(const LmTaskOptions& o, std::mt19937_64& rng) {
  std::uniform_int_distribution<int64_t> length(o.min_length, o.max_length);
  if (o.task == "copy") {
    auto s = random_letters(length(rng), rng);
    return {s + "|", s};
  }
  if (o.task == "reverse") {
    auto s = random_letters(length(rng), rng);
    return {s + "|", std::string(s.rbegin(), s.rend())};
  }
  if (o.task == "addition") {
    auto a = random_number(o.max_digits, rng), b = random_number(o.max_digits, rng);
    return {a + "+" + b + "=", add_decimal(a, b)};
  }
  // induction: distinct letters so the query has exactly one earlier occurrence
  const int64_t n = length(rng);
  std::string alphabet = "abcdefghijklmnopqrstuvwxyz";
  std::shuffle(alphabet.begin(), alphabet.end(), rng);
  std::string context = alphabet.substr(0, static_cast<size_t>(std::min<int64_t>(n, 26)));
  std::uniform_int_distribution<size_t> pick(0, context.size() - 2);
  const size_t at = pick(rng);
  return {context + "|" + context[at], std::string(1, context[at + 1])};
}

LmTaskSplits make_lm_task(const LmTaskOptions& o, uint64_t seed) {
  o.validate();
  std::mt19937_64 rng(seed);
  std::vector<LmExample> all;
  for (int64_t i = 0; i < o.samples; ++i) all.push_back(make_lm_example(o, rng));
  const auto n_train = static_cast<size_t>(o.samples * 8 / 10), n_val = static_cast<size_t>(o.samples / 10);
  LmTaskSplits s;
  s.train.assign(all.begin(), all.begin() + static_cast<long>(n_train));
  s.val.assign(all.begin() + static_cast<long>(n_train), all.begin() + static_cast<long>(n_train + n_val));
  s.test.assign(all.begin() + static_cast<long>(n_train + n_val), all.end());
  return s;
}

DatasetPtr lm_example_dataset(const std::vector<LmExample>& examples) {
  size_t longest = 2;
  for (const auto& e : examples) longest = std::max(longest, e.prompt.size() + e.answer.size() + 1);
  const auto n = static_cast<int64_t>(examples.size());
  const auto t = static_cast<int64_t>(longest - 1);
  auto tokens = torch::zeros({n, t}, torch::kLong);
  auto target = torch::full({n, t}, kIgnoreIndex, torch::kLong);
  auto tok = tokens.accessor<int64_t, 2>();
  auto tgt = target.accessor<int64_t, 2>();
  for (int64_t i = 0; i < n; ++i) {
    const auto& e = examples[static_cast<size_t>(i)];
    const std::string seq = e.prompt + e.answer + kLmTerminator;
    for (size_t p = 0; p + 1 < seq.size(); ++p) {
      tok[i][static_cast<int64_t>(p)] = static_cast<unsigned char>(seq[p]);
      if (p + 1 >= e.prompt.size()) tgt[i][static_cast<int64_t>(p)] = static_cast<unsigned char>(seq[p + 1]);
    }
  }
  return std::make_shared<TensorDataset>(std::map<std::string, at::Tensor>{{"tokens", tokens}}, target);
}

Splits lm_task_datasets(const LmTaskSplits& task) {
  return {lm_example_dataset(task.train), lm_example_dataset(task.val), lm_example_dataset(task.test)};
}

void check_utf8(const std::string& s, const std::string& source) {
  const size_t at = first_invalid_utf8(s);
  if (at == std::string_view::npos) return;
  // A sequence cut off by the end of the text (a file truncated mid-character).
  const auto lead = static_cast<unsigned char>(s[at]);
  const size_t need = lead > 0xF4 ? 0 : lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC2 ? 2 : 0;
  bool truncated = need > 0 && at + need > s.size();
  for (size_t k = at + 1; truncated && k < s.size(); ++k) truncated = (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80;
  throw DataError(source + ": not valid UTF-8 (" + (truncated ? "truncated sequence at " : "") + "byte offset " +
                  std::to_string(at) + ")");
}

TextFingerprint fingerprint_of(const std::string& text) {
  return {static_cast<int64_t>(text.size()), static_cast<int64_t>(crc32(text.data(), text.size()))};
}

Splits load_text_corpus(const std::string& path, int64_t context, const TextFingerprint& recorded) {
  if (context < 1) throw ConfigError("context", "must be at least 1");
  const std::string text = read_text_file(path);
  if (recorded.bytes > 0) {
    const auto now = fingerprint_of(text);
    if (now.bytes != recorded.bytes || now.crc32 != recorded.crc32)
      throw DataError(path + ": changed since the run trained on it (" +
                      (now.bytes == recorded.bytes
                           ? "the same " + std::to_string(now.bytes) + " bytes, other ones"
                           : std::to_string(recorded.bytes) + " bytes then, " + std::to_string(now.bytes) + " now") +
                      "): its held-out windows would be other text; restore the file or train a new run");
  }
  if (text.empty()) throw DataError(path + ": the text file is empty");
  check_utf8(text, path);
  // Held-out text needs whole windows: 10 at least (8 train, 1 val, 1 test).
  // Fewer would train on everything and select the last epoch without saying.
  constexpr int64_t kMinWindows = 10;
  const auto size = static_cast<int64_t>(text.size());
  if (size < kMinWindows * context + 1)
    throw DataError(path + ": " + std::to_string(size) + " bytes hold " +
                    std::to_string(std::max<int64_t>(0, (size - 1) / context)) + " windows of {context} " +
                    std::to_string(context) + "; training with held-out text needs " + std::to_string(kMinWindows) +
                    " (" + std::to_string(kMinWindows * context + 1) +
                    " bytes): give more text or a smaller {context}");
  const int64_t window = context + 1;
  std::vector<at::Tensor> inputs, targets;
  for (int64_t start = 0; start + window <= static_cast<int64_t>(text.size()); start += window - 1) {
    auto w = bytes_to_tokens(text.substr(static_cast<size_t>(start), static_cast<size_t>(window)));
    inputs.push_back(w.slice(0, 0, window - 1));
    targets.push_back(w.slice(0, 1, window));
  }
  const auto n = static_cast<int64_t>(inputs.size());
  auto all = std::make_shared<TensorDataset>(std::map<std::string, at::Tensor>{{"tokens", torch::stack(inputs)}},
                                             torch::stack(targets));
  auto range = [&](int64_t from, int64_t to) {
    std::vector<int64_t> idx;
    for (int64_t i = from; i < to; ++i) idx.push_back(i);
    return std::make_shared<SubsetDataset>(all, idx);
  };
  const int64_t n_train = n * 8 / 10, n_val = n / 10;
  return {range(0, n_train), range(n_train, n_train + n_val), range(n_train + n_val, n)};
}

at::Tensor bytes_to_tokens(const std::string& text) {
  auto t = torch::empty({static_cast<int64_t>(text.size())}, torch::kLong);
  auto a = t.accessor<int64_t, 1>();
  for (size_t i = 0; i < text.size(); ++i) a[static_cast<int64_t>(i)] = static_cast<unsigned char>(text[i]);
  return t;
}

std::string tokens_to_bytes(const at::Tensor& tokens) {
  auto t = tokens.reshape({-1}).to(torch::kCPU, torch::kLong).contiguous();
  std::string s;
  for (int64_t i = 0; i < t.numel(); ++i) s += static_cast<char>(t.data_ptr<int64_t>()[i]);
  return s;
}

}  // namespace qkv::data

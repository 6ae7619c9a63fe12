#pragma once
// Byte-level data for the autoregressive transformer: built-in tasks that
// need attention (copy, reverse, addition, induction) and plain UTF-8 text.
// A sequence is bytes; the model reads tokens[t] and predicts tokens[t+1].
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "qkv/core/fields.h"
#include "qkv/data/dataset.h"

namespace qkv::data {

// A task instance: the model sees `prompt` and must continue with `answer`
// followed by the terminator '\n'.
struct LmExample {
  std::string prompt, answer;
};

struct LmTaskOptions {
  std::string task = "copy";  // copy | reverse | addition | induction
  int64_t samples = 6000;     // split 80 / 10 / 10 into train / val / test
  int64_t min_length = 2;     // copy, reverse: string length; induction: context length
  int64_t max_length = 8;
  int64_t max_digits = 3;  // addition: operands have 1..max_digits digits

  void validate() const;  // ConfigError naming the key; what a stored run may hold
  // validate(), and what a new run may not take any more (induction past 26
  // letters, which stored runs recorded and were cut to 26).
  void check_new_run() const;
};

template <typename V>
void visit_fields(LmTaskOptions& o, V&& visit) {
  visit(Field{"task", "built-in task: copy, reverse, addition, induction"}.one_of("copy|reverse|addition|induction"),
        o.task);
  visit(Field{"samples", "task instances (80/10/10 train/val/test)"}.range(10, 1e8), o.samples);
  visit(Field{"min_length", "task string length, smallest"}.range(1, 1e5), o.min_length);
  visit(Field{"max_length", "task string length, largest"}.range(1, 1e5), o.max_length);
  visit(Field{"max_digits", "addition: digits per operand, at most"}.range(1, 18), o.max_digits);
}

constexpr char kLmTerminator = '\n';

// One random instance of the task:
//   copy       "qxbw|" -> "qxbw"
//   reverse    "qxbw|" -> "wbxq"
//   addition   "57+864=" -> "921"
//   induction  "qxbwkd|b" -> "w": find the earlier occurrence of the query
//              letter (it occurs exactly once) and say the letter after it.
LmExample make_lm_example(const LmTaskOptions& options, std::mt19937_64& rng);

struct LmTaskSplits {
  std::vector<LmExample> train, val, test;
};
LmTaskSplits make_lm_task(const LmTaskOptions& options, uint64_t seed);

// inputs["tokens"] [N, T] long, target [N, T]: the next byte at answer
// positions and at the terminator, -100 elsewhere (prompt and padding).
// T is the longest prompt + answer + terminator, minus one.
DatasetPtr lm_example_dataset(const std::vector<LmExample>& examples);
// The three parts as datasets, for the trainer.
Splits lm_task_datasets(const LmTaskSplits& task);

// Throws DataError naming `source` and the byte offset of the first invalid
// UTF-8 sequence.
void check_utf8(const std::string& bytes, const std::string& source);

// What a run records of its text file, to tell that text from an edited one:
// the held-out windows are the file's last fifth, so another text would
// evaluate (or resume) on other windows, and say nothing.
struct TextFingerprint {
  int64_t bytes = 0;  // 0: not recorded (a run of an earlier version)
  int64_t crc32 = 0;
};
TextFingerprint fingerprint_of(const std::string& text);

// Text for next-byte prediction: windows of context + 1 bytes taken with
// stride `context`, split in file order 80 / 10 / 10 (so validation and test
// text never overlaps training text). Throws DataError for an unreadable,
// empty, too short or non-UTF-8 file, or one whose bytes are not `recorded`
// (when it holds a fingerprint).
Splits load_text_corpus(const std::string& path, int64_t context, const TextFingerprint& recorded = {});

// Bytes <-> token tensors.
at::Tensor bytes_to_tokens(const std::string& text);
std::string tokens_to_bytes(const at::Tensor& tokens);

}  // namespace qkv::data

// UTF-8 checks for names and text: what JSON can hold, and how a name that is
// not UTF-8 is shown in a message; counts and sizes in messages.
#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "qkv/core/errors.h"
#include "qkv/core/file_input.h"
#include "qkv/core/text.h"
#include "support/test_files.h"

TEST(Utf8, WellFormedSequencesPass) {
  EXPECT_TRUE(qkv::is_valid_utf8(""));
  EXPECT_TRUE(qkv::is_valid_utf8("runs/vnt"));
  EXPECT_TRUE(qkv::is_valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // é € 😀
  EXPECT_TRUE(qkv::is_valid_utf8("\xf4\x8f\xbf\xbf"));                           // U+10FFFF
}

TEST(Utf8, MalformedSequencesAreFoundWhereTheyStart) {
  EXPECT_EQ(qkv::first_invalid_utf8("ab\xff"), 2u);
  EXPECT_EQ(qkv::first_invalid_utf8("a\xc0\xaf"), 1u);         // overlong '/'
  EXPECT_EQ(qkv::first_invalid_utf8("\xed\xa0\x80"), 0u);      // a UTF-16 surrogate
  EXPECT_EQ(qkv::first_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
  EXPECT_EQ(qkv::first_invalid_utf8("abc\xe2\x82"), 3u);       // truncated
  EXPECT_EQ(qkv::first_invalid_utf8("\x80"), 0u);              // a stray continuation byte
}

TEST(Utf8, PrintablePathEscapesOnlyTheBadBytes) {
  EXPECT_EQ(qkv::printable_path("runs/vnt\xff"), "runs/vnt\\xff");
  EXPECT_EQ(qkv::printable_path("caf\xc3\xa9"), "caf\xc3\xa9");
}

TEST(Wording, CountsAndSizesReadAsAPersonWritesThem) {
  EXPECT_EQ(qkv::counted(1, "thread"), "1 thread");
  EXPECT_EQ(qkv::counted(0, "run"), "0 runs");
  EXPECT_EQ(qkv::counted(2, "fold"), "2 folds");
  EXPECT_EQ(qkv::binary_size(0), "0 bytes");
  EXPECT_EQ(qkv::binary_size(1), "1 byte");
  EXPECT_EQ(qkv::binary_size(1023), "1023 bytes");
  EXPECT_EQ(qkv::binary_size(1024), "1 KiB");
  EXPECT_EQ(qkv::binary_size(1536), "1.5 KiB");
  EXPECT_EQ(qkv::binary_size(int64_t{1} << 30), "1 GiB");
  EXPECT_EQ(qkv::binary_size((int64_t{1} << 30) * 3 / 2), "1.5 GiB");
  EXPECT_EQ(qkv::binary_size(std::numeric_limits<int64_t>::max()), "8 EiB");
  EXPECT_EQ(qkv::first_line("one\ntwo"), "one");
  EXPECT_EQ(qkv::first_line("only"), "only");
  EXPECT_EQ(qkv::first_line(""), "");
}

// The "did you mean" of mistyped commands and options: one typo away (a swap
// counts as one), at most a third of the word's letters, else nothing.
TEST(ClosestWord, OneTypoAwayOrNothing) {
  const std::vector<std::string> known = {"--epochs", "--batch-size", "--lr", "train", "eval"};
  EXPECT_EQ(qkv::closest_word("--epoch", known), "--epochs");
  EXPECT_EQ(qkv::closest_word("--batch-szie", known), "--batch-size");  // two letters swapped
  EXPECT_EQ(qkv::closest_word("trian", known), "train");
  EXPECT_EQ(qkv::closest_word("predict", known), "");
  EXPECT_EQ(qkv::closest_word("--lr", known), "--lr");
  EXPECT_EQ(qkv::closest_word("x", {}), "");
}

// Tables as the compare commands print them: numbers right-aligned, words
// left-aligned, "-" counts as a number, two spaces between columns.
TEST(FormatTable, AlignsNumbersRightAndWordsLeft) {
  const auto text = qkv::format_table({"run", "params", "acc"}, {{"runs/a", "1234", "0.5"}, {"b", "7", "-"}});
  EXPECT_EQ(text,
            "run     params  acc\n"
            "runs/a    1234  0.5\n"
            "b            7    -\n");
  EXPECT_EQ(qkv::format_table({"only"}, {}), "only\n");
}

TEST(Wording, LibTorchsOutOfMemoryBecomesOneLineForAUser) {
  // The messages as LibTorch 1.13 (CPU) and 2.x (CUDA) word them.
  EXPECT_EQ(qkv::out_of_memory_line("[enforce fail at alloc_cpu.cpp:75] err == 0. DefaultCPUAllocator: can't "
                                    "allocate memory: you tried to allocate 4294967296 bytes. Error code 12\nmore"),
            "out of memory (LibTorch could not allocate 4294967296 bytes. Error code 12)");
  const std::string cuda =
      "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 1 has a total capacity of 139.81 GiB of which 3.06 GiB "
      "is free. Of the allocated memory 120.50 GiB is allocated by PyTorch\nIf reserved but unallocated ...";
  EXPECT_EQ(qkv::out_of_memory_line(cuda), "out of GPU memory (LibTorch could not allocate 20.00 GiB on cuda:1)");
  // Where it happened follows "memory"; the advice goes inside the parentheses.
  EXPECT_EQ(qkv::out_of_memory_line(cuda, "at batch size 64", "a smaller --batch-size may fit"),
            "out of GPU memory at batch size 64 (LibTorch could not allocate 20.00 GiB on cuda:1; a smaller "
            "--batch-size may fit)");
  EXPECT_EQ(qkv::out_of_memory_line(
                "DefaultCPUAllocator: can't allocate memory: you tried to allocate 8 bytes. Error code 12",
                "evaluating batch 1 of 2", "less"),
            "out of memory evaluating batch 1 of 2 (LibTorch could not allocate 8 bytes. Error code 12; less)");
  EXPECT_EQ(qkv::out_of_memory_line("Expected all tensors to be on the same device"), "");
}

TEST(ReadTextFile, ACompressedFileIsNamedAsWhatItIs) {
  // A gzipped table was parsed as text: "CpG id '<binary>' holds a blank".
  const std::string gz = qkv::testing::temp_path("table.csv.gz");
  qkv::testing::write_text_file(gz, std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00", 8) + "rest");
  try {
    qkv::read_text_file(gz);
    ADD_FAILURE() << "no error";
  } catch (const qkv::DataError& e) {
    EXPECT_EQ(std::string(e.what()), gz + ": a gzip-compressed file; qkv reads it as text: gunzip it first");
  }
  const std::string bz2 = qkv::testing::temp_path("table.csv.bz2");
  qkv::testing::write_text_file(bz2, "BZh91AY&SY...");
  EXPECT_THROW(qkv::read_text_file(bz2), qkv::DataError);
  const std::string plain = qkv::testing::temp_path("plain.csv");  // text that begins as bzip2 does
  qkv::testing::write_text_file(plain, "BZh5,a column\n");
  EXPECT_EQ(qkv::read_text_file(plain), "BZh5,a column\n");
}

TEST(ReadProcFile, AProcessThatHasEndedReadsAsNothing) {
  // A lock's holder or a test's child may end between listing /proc and
  // reading its files: nothing, never an exception.
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_EQ(qkv::read_proc_file("/proc/" + std::to_string(child) + "/cmdline"), "");
  // stat sizes /proc's files 0; they are read to their end, or to the limit.
  const std::string self = qkv::read_proc_file("/proc/self/cmdline");
  EXPECT_NE(self.find("test_core"), std::string::npos) << self;
  EXPECT_EQ(qkv::read_proc_file("/proc/self/cmdline", 3), self.substr(0, 3));
}

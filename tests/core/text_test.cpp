// UTF-8 checks for names and text: what JSON can hold, and how a name that is
// not UTF-8 is shown in a message; counts and sizes in messages.
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>

#include "qkv/core/text.h"

TEST(Utf8, WellFormedSequencesPass) {
  EXPECT_TRUE(qkv::is_valid_utf8(""));
  EXPECT_TRUE(qkv::is_valid_utf8("runs/vnt"));
  EXPECT_TRUE(qkv::is_valid_utf8("caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80"));  // é € 😀
  EXPECT_TRUE(qkv::is_valid_utf8("\xf4\x8f\xbf\xbf"));                          // U+10FFFF
}

TEST(Utf8, MalformedSequencesAreFoundWhereTheyStart) {
  EXPECT_EQ(qkv::first_invalid_utf8("ab\xff"), 2u);
  EXPECT_EQ(qkv::first_invalid_utf8("a\xc0\xaf"), 1u);          // overlong '/'
  EXPECT_EQ(qkv::first_invalid_utf8("\xed\xa0\x80"), 0u);       // a UTF-16 surrogate
  EXPECT_EQ(qkv::first_invalid_utf8("\xf4\x90\x80\x80"), 0u);   // above U+10FFFF
  EXPECT_EQ(qkv::first_invalid_utf8("abc\xe2\x82"), 3u);        // truncated
  EXPECT_EQ(qkv::first_invalid_utf8("\x80"), 0u);               // a stray continuation byte
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

#pragma once
// Text helpers the readers share: case folding, suffixes, trimming, joining, and a
// whole file read into a string with errors naming the file.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace qkv {

// ASCII lower case, byte by byte (std::tolower in the "C" locale): for file
// extensions, keywords and region names.
std::string lower(std::string_view text);

bool starts_with(std::string_view text, std::string_view prefix);
bool ends_with(std::string_view text, std::string_view suffix);

// text without leading and trailing whitespace (std::isspace).
std::string_view trim(std::string_view text);

// text without the UTF-8 byte-order mark that spreadsheets write first (which
// would otherwise become part of the first column's name).
std::string_view without_byte_order_mark(std::string_view text);

// A decimal number read the same in every locale (std::from_chars), true
// when `token` is one whole: an optional '+', digits, point, exponent, or
// inf/nan. A value beyond double's range is read as +-DBL_MAX (so that a
// reader says "beyond float32's range", not "not a number"), one too small
// for it as 0, as any float would hold it.
bool parse_decimal(std::string_view token, double& value);

// "1 thread", "2 threads": n and the noun, with an s unless n is 1.
std::string counted(int64_t n, std::string_view noun);

// A byte count in binary units, three significant digits: "512 bytes",
// "1 GiB" (2^30), "1.5 KiB".
std::string binary_size(int64_t bytes);

// The text up to its first newline: a one-line message from an exception
// whose what() carries a backtrace or a detail paragraph.
std::string first_line(std::string_view text);

// LibTorch's out-of-memory message (worded for its own developers, with a
// paragraph of allocator advice) as one line for a user, or "" when `message`
// is not one: the CPU's "... you tried to allocate N bytes ..." and CUDA's
// "CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has ...". `where`,
// when given, follows "out of memory" (e.g. "in training step 3 of epoch 2 at
// batch size 64"); `advice`, when given, follows what could not be allocated,
// inside the parentheses (what the user can change, what is still intact).
std::string out_of_memory_line(std::string_view message, const std::string& where = "", const std::string& advice = "");

// A value shown in a message: the text when it has at most `max` bytes, else
// its first bytes (cut at a UTF-8 character boundary) and "... (N bytes)", so
// that an error line stays one readable line whatever the user gave.
std::string shortened(std::string_view text, size_t max = 80);

// The items with `separator` between them: {"a", "b"} -> "a, b".
std::string join(const std::vector<std::string>& items, std::string_view separator = ", ");

// The items as alternatives: {"a", "b", "c"} -> "a, b or c"; {"a"} -> "a".
std::string join_alternatives(const std::vector<std::string>& items);

// The byte offset of the first sequence in `text` that is not well-formed
// UTF-8 (overlong forms, surrogates, code points above U+10FFFF, truncated
// or stray bytes), or std::string_view::npos when there is none.
size_t first_invalid_utf8(std::string_view text);
inline bool is_valid_utf8(std::string_view text) { return first_invalid_utf8(text) == std::string_view::npos; }

// `text` with every byte that is not part of well-formed UTF-8 written as
// \xHH, for messages that name a file whose name is not UTF-8.
std::string printable_path(std::string_view text);

// The candidate a mistyped word most likely meant: the nearest by edits
// (insert, delete, replace, swap two neighbours), if it is at most a third
// of the word's letters away (at least one); else "".
std::string closest_word(const std::string& word, const std::vector<std::string>& candidates);

// A text table, one line per row after the header, each column as wide as
// its widest cell, two spaces between columns: a column whose body cells are
// all numbers (or "-") is right-aligned, any other left-aligned.
std::string format_table(const std::vector<std::string>& header, const std::vector<std::vector<std::string>>& rows);

// The whole regular file, as read_regular_file (core/file_input.h) reads it:
// DataError "PATH: no such file", "PATH: is a folder, not a file", "PATH: is
// not a regular file (FIFO, device or socket)", "PATH: cannot open: REASON";
// and "PATH: a gzip-compressed file; ..." for a gzip, zip, bzip2, xz or zstd
// file, told by its first bytes.
std::string read_text_file(const std::string& path);

}  // namespace qkv

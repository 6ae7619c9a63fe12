// The cohort files users bring for MHCA: manifest and methylation table
// readers and writers, CpG lists, cross-modality matching and imputation, on
// small files written byte by byte here.
#include "qkv/medical/cohort.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "qkv/core/atomic_file.h"
#include "qkv/core/errors.h"
#include "support/test_files.h"

using namespace qkv;
using namespace qkv::medical;
using qkv::testing::data_error_of;
using qkv::testing::fresh_dir;
using qkv::testing::temp_path;
using qkv::testing::write_text_file;

namespace fs = std::filesystem;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

std::string write(const std::string& name, const std::string& contents) {
  const auto path = temp_path(name);
  write_text_file(path, contents);
  return path;
}

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// A DataError, on one line, holding every one of `parts` (the file first).
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  const auto message = data_error_of(f);
  for (const auto& part : parts)
    EXPECT_NE(message.find(part), std::string::npos) << "expected '" << part << "' in: " << message;
  EXPECT_EQ(message.find('\n'), std::string::npos) << message;
}

uint32_t bits(float v) {
  uint32_t b;
  std::memcpy(&b, &v, sizeof b);
  return b;
}

// Values equal bit for bit, NaN at the same cells.
void expect_same_values(const MethylationTable& a, const MethylationTable& b) {
  ASSERT_EQ(a.values.size(), b.values.size());
  for (size_t i = 0; i < a.values.size(); ++i) {
    if (std::isnan(a.values[i])) {
      EXPECT_TRUE(std::isnan(b.values[i])) << "cell " << i;
    } else {
      EXPECT_EQ(bits(a.values[i]), bits(b.values[i])) << "cell " << i << ": " << a.values[i] << " vs " << b.values[i];
    }
  }
}

MethylationTable small_table() {
  MethylationTable t;
  t.subject_ids = {"s1", "s2", "s3"};
  t.cpg_ids = {"cg01", "cg02", "cg03", "cg04"};
  t.values = {0.1f, kNaN, 0.3f, 0.4f,  //
              0.5f, 0.6f, kNaN, 0.8f,  //
              0.9f, 1.0f, 0.0f, kNaN};
  return t;
}

}  // namespace

// ---------------------------------------------------------------- manifest

TEST(Manifest, ReadsColumnsInAnyOrderWithLabelWordsCovariatesAndRelativePaths) {
  const auto dir = fresh_dir("cohort_manifest");
  const auto path = (fs::path(dir) / "cohort" / "manifest.csv").string();
  // BOM, CRLF, header in mixed case and its own order, quoted fields with a
  // comma, a doubled quote and a line break, a blank line, a trailing blank row.
  write_text_file(path,
                  "\xEF\xBB\xBFSpect,Age,LABEL,Subject_ID,Site\r\n"
                  "scans/s1.nii.gz,63,Control,s1,\"Munich, DE\"\r\n"
                  "../other/s2.nii,71,PD,s2,\"the \"\"old\"\" scanner\"\r\n"
                  "\r\n"
                  "/abs/s3.nii, 58 ,hc,s3,\"two\r\nlines\"\r\n"
                  "./s4.nii,,parkinson,s4,x\r\n"
                  "s5.nii,50,HEALTHY,s5,y\r\n"
                  "s6.nii,50,Patient,s6,y\r\n"
                  "s7.nii,50,0,s7,y\r\n"
                  "s8.nii,50,1,s8,y\r\n"
                  ",,,,\r\n");
  const Manifest m = read_manifest(path);
  EXPECT_EQ(m.path, path);
  ASSERT_EQ(m.subjects.size(), 8u);
  const std::vector<std::string> ids = {"s1", "s2", "s3", "s4", "s5", "s6", "s7", "s8"};
  const std::vector<int64_t> labels = {0, 1, 0, 1, 0, 1, 0, 1};
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_EQ(m.subjects[i].id, ids[i]);
    EXPECT_EQ(m.subjects[i].label, labels[i]) << ids[i];
  }
  const fs::path folder = fs::path(dir) / "cohort";
  EXPECT_EQ(m.subjects[0].spect_path, (folder / "scans" / "s1.nii.gz").string());
  EXPECT_EQ(m.subjects[1].spect_path, (fs::path(dir) / "other" / "s2.nii").string());
  EXPECT_EQ(m.subjects[2].spect_path, "/abs/s3.nii");
  EXPECT_EQ(m.subjects[3].spect_path, (folder / "s4.nii").string());

  EXPECT_EQ(m.subjects[0].covariates.at("Age"), "63");
  EXPECT_EQ(m.subjects[0].covariates.at("Site"), "Munich, DE");
  EXPECT_EQ(m.subjects[1].covariates.at("Site"), "the \"old\" scanner");
  EXPECT_EQ(m.subjects[2].covariates.at("Age"), "58");  // spaces around a field are not part of it
  EXPECT_EQ(m.subjects[2].covariates.at("Site"), "two\r\nlines");
  EXPECT_EQ(m.subjects[3].covariates.count("Age"), 0u);  // empty cell: not recorded
  EXPECT_EQ(m.subjects[0].covariates.size(), 2u);        // required columns are not covariates
}

TEST(Manifest, SpectPathOfAManifestInTheCurrentFolderIsKeptRelative) {
  const auto dir = fresh_dir("cohort_cwd");
  fs::create_directories(dir);
  // Restored even if the read throws, so later tests see the usual folder.
  struct InFolder {
    fs::path previous = fs::current_path();
    explicit InFolder(const fs::path& dir) { fs::current_path(dir); }
    ~InFolder() { fs::current_path(previous); }
  };
  write_text_file(fs::path(dir) / "m.csv", "subject_id,label,spect\na,0,scans/a.nii\n");
  Manifest m;
  {
    InFolder in(dir);
    m = read_manifest("m.csv");
  }
  ASSERT_EQ(m.subjects.size(), 1u);
  EXPECT_EQ(m.subjects[0].spect_path, "scans/a.nii");
}

TEST(Manifest, ReadsTabSeparatedManifests) {
  const auto path = write("tab_manifest.tsv", "subject_id\tlabel\tspect\tsex\na b\tpd\tx.nii\tF\n");
  const Manifest m = read_manifest(path);
  ASSERT_EQ(m.subjects.size(), 1u);
  EXPECT_EQ(m.subjects[0].id, "a b");
  EXPECT_EQ(m.subjects[0].label, 1);
  EXPECT_EQ(m.subjects[0].covariates.at("sex"), "F");
}

TEST(Manifest, EveryProblemIsADataErrorNamingTheFileAndLine) {
  const std::string header = "subject_id,label,spect\n";
  const auto bad_label = write("bad_label.csv", header + "s1,0,a.nii\ns2,maybe,b.nii\n");
  expect_error([&] { read_manifest(bad_label); }, {bad_label, "line 3", "'maybe'"});

  // Physical lines: a CRLF is one line end, a quoted line break is counted.
  const auto crlf = write("bad_label_crlf.csv", "subject_id,label,spect\r\ns1,0,a.nii\r\ns2,x,b.nii\r\n");
  expect_error([&] { read_manifest(crlf); }, {crlf, "line 3", "'x'"});
  const auto spanning = write("bad_label_spanning.csv", header + "s1,0,\"a\nb.nii\"\ns2,x,b.nii\n");
  expect_error([&] { read_manifest(spanning); }, {spanning, "line 4", "'x'"});

  const auto duplicate = write("dup.csv", header + "s1,0,a.nii\ns2,1,b.nii\ns1,1,c.nii\n");
  expect_error([&] { read_manifest(duplicate); }, {duplicate, "line 4", "'s1'", "line 2"});

  const auto no_spect = write("no_spect_col.csv", "subject_id,label,scan\ns1,0,a.nii\n");
  expect_error([&] { read_manifest(no_spect); }, {no_spect, "line 1", "'spect'"});
  const auto no_label = write("no_label_col.csv", "subject_id,spect\ns1,a.nii\n");
  expect_error([&] { read_manifest(no_label); }, {no_label, "'label'"});
  const auto no_id = write("no_id_col.csv", "id,label,spect\ns1,0,a.nii\n");
  expect_error([&] { read_manifest(no_id); }, {no_id, "'subject_id'"});

  const auto empty_spect = write("empty_spect.csv", header + "s1,0,a.nii\ns2,1,\n");
  expect_error([&] { read_manifest(empty_spect); }, {empty_spect, "line 3", "spect", "'s2'"});
  const auto empty_id = write("empty_id.csv", header + ",1,b.nii\n");
  expect_error([&] { read_manifest(empty_id); }, {empty_id, "line 2", "subject_id"});

  const auto empty = write("empty.csv", "");
  expect_error([&] { read_manifest(empty); }, {empty, "empty"});
  const auto blank = write("blank.csv", "\n\r\n  \n");
  expect_error([&] { read_manifest(blank); }, {blank, "empty"});
  const auto header_only = write("header_only.csv", header);
  expect_error([&] { read_manifest(header_only); }, {header_only, "no subjects"});

  const auto ragged = write("ragged.csv", header + "s1,0,a.nii\ns2,1,b.nii,extra\n");
  expect_error([&] { read_manifest(ragged); }, {ragged, "line 3", "4 fields"});
  const auto twice = write("twice.csv", "subject_id,label,spect,Age,age\ns1,0,a.nii,1,2\n");
  expect_error([&] { read_manifest(twice); }, {twice, "line 1", "twice"});
  // The line where the quote opened, not where the file ended.
  const auto open_quote = write("open_quote.csv", header + "s1,0,a.nii\ns2,1,\"b.nii\ns3,0,c.nii\n");
  expect_error([&] { read_manifest(open_quote); }, {open_quote, "line 3", "never closed"});
  const auto after_quote = write("after_quote.csv", header + "s1,0,\"a.nii\"x\n");
  expect_error([&] { read_manifest(after_quote); }, {after_quote, "line 2", "closing quote"});
  const auto missing = temp_path("no_such_manifest.csv");
  expect_error([&] { read_manifest(missing); }, {missing, "no such file"});
}

TEST(Manifest, WriteThenReadGivesTheSameManifest) {
  Manifest m;
  m.subjects.push_back({"s1", 0, "/data/s1.nii.gz", {{"age", "63"}, {"site", "Munich, DE"}}});
  m.subjects.push_back({"s 2", 1, "/data/with,comma.nii", {{"note", "said \"hi\"\nthen left"}}});
  m.subjects.push_back({"s3", 1, "/data/s3.nii", {}});
  const auto path = temp_path("roundtrip_manifest.csv");
  write_manifest(path, m);
  const Manifest back = read_manifest(path);
  ASSERT_EQ(back.subjects.size(), m.subjects.size());
  for (size_t i = 0; i < m.subjects.size(); ++i) {
    EXPECT_EQ(back.subjects[i].id, m.subjects[i].id);
    EXPECT_EQ(back.subjects[i].label, m.subjects[i].label);
    EXPECT_EQ(back.subjects[i].spect_path, m.subjects[i].spect_path);
    EXPECT_EQ(back.subjects[i].covariates, m.subjects[i].covariates) << m.subjects[i].id;
  }
  EXPECT_EQ(slurp(path).substr(0, 37), "subject_id,label,spect,age,note,site\n");
}

TEST(Manifest, WritesSpectPathsAsGivenAndRefusesWhatItCouldNotReadBack) {
  Manifest m;
  m.subjects.push_back({"s1", 1, "scans/s1.nii", {}});
  const auto path = temp_path("as_given.csv");
  write_manifest(path, m);
  EXPECT_EQ(slurp(path), "subject_id,label,spect\ns1,1,scans/s1.nii\n");
  // Reading resolves against the manifest's folder, where the writer put it.
  EXPECT_EQ(read_manifest(path).subjects[0].spect_path, (fs::path(path).parent_path() / "scans/s1.nii").string());

  const auto bad = temp_path("bad_write.csv");
  Manifest label2 = m;
  label2.subjects[0].label = 2;
  expect_error([&] { write_manifest(bad, label2); }, {bad, "label 2"});
  Manifest twice = m;
  twice.subjects.push_back(m.subjects[0]);
  expect_error([&] { write_manifest(bad, twice); }, {bad, "'s1'", "twice"});
  Manifest no_spect = m;
  no_spect.subjects[0].spect_path.clear();
  expect_error([&] { write_manifest(bad, no_spect); }, {bad, "spect"});
  Manifest shadow = m;
  shadow.subjects[0].covariates["Label"] = "x";
  expect_error([&] { write_manifest(bad, shadow); }, {bad, "'Label'"});
  EXPECT_FALSE(fs::exists(bad));
}

// ---------------------------------------------------------------- methylation

TEST(Methylation, CsvRoundTripIsBitExactWithMissingValuesKept) {
  MethylationTable t = small_table();
  // Values whose shortest decimal form needs all nine digits, and the extremes.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> beta(0.0f, 1.0f);
  t.cpg_ids.push_back("cg05");
  std::vector<float> values;
  for (size_t r = 0; r < 3; ++r) {
    values.insert(values.end(), t.values.begin() + r * 4, t.values.begin() + r * 4 + 4);
    values.push_back(r == 0 ? std::nextafter(1.0f, 0.0f) : r == 1 ? 1e-30f : beta(rng));
  }
  t.values = values;
  const auto path = temp_path("meth_roundtrip.csv");
  write_methylation_table(path, t);
  const std::string text = slurp(path);
  EXPECT_EQ(text.substr(0, 36), "subject_id,cg01,cg02,cg03,cg04,cg05\n") << text;
  EXPECT_NE(text.find("s1,0.1,,0.3"), std::string::npos) << text;  // NaN as an empty cell

  const MethylationTable back = read_methylation_table(path);
  EXPECT_EQ(back.path, path);
  EXPECT_EQ(back.subject_ids, t.subject_ids);
  EXPECT_EQ(back.cpg_ids, t.cpg_ids);
  EXPECT_EQ(back.rows(), 3);
  EXPECT_EQ(back.cols(), 5);
  EXPECT_EQ(back.missing_count(), 3);
  expect_same_values(t, back);
  EXPECT_EQ(back.at(1, 1), 0.6f);
  EXPECT_TRUE(std::isnan(back.at(2, 3)));
}

TEST(Methylation, TsvRoundTripWritesNA) {
  const MethylationTable t = small_table();
  const auto path = temp_path("meth_roundtrip.tsv");
  write_methylation_table(path, t);
  const std::string text = slurp(path);
  EXPECT_NE(text.find("s1\t0.1\tNA\t0.3\t0.4\n"), std::string::npos) << text;
  const MethylationTable back = read_methylation_table(path);
  EXPECT_EQ(back.cpg_ids, t.cpg_ids);
  EXPECT_EQ(back.subject_ids, t.subject_ids);
  EXPECT_EQ(back.missing_count(), 3);
  expect_same_values(t, back);
}

TEST(Methylation, ReadsEveryMissingSpellingQuotedHeadersAndCrlf) {
  // As R's write.csv writes a data frame with row names: "" over the id column.
  const auto path = write("meth_r.csv",
                          "\"\",\"cg1\",\"cg2\",\"cg3\"\r\n"
                          "\"s1\",NA,NaN,nan\r\n"
                          "\"s2\",null,,NULL\r\n"
                          "\"s3\", 0.25 ,+0.5,1e-3\r\n"
                          "\"s4\",1e-400,1e-50,0\r\n"  // below float's range: 0, not "not a number"
                          "\r\n");
  const MethylationTable t = read_methylation_table(path);
  EXPECT_EQ(t.cpg_ids, (std::vector<std::string>{"cg1", "cg2", "cg3"}));
  EXPECT_EQ(t.subject_ids, (std::vector<std::string>{"s1", "s2", "s3", "s4"}));
  EXPECT_EQ(t.missing_count(), 6);
  EXPECT_EQ(t.at(2, 0), 0.25f);
  EXPECT_EQ(t.at(2, 1), 0.5f);
  EXPECT_EQ(t.at(2, 2), 1e-3f);
  for (int64_t c = 0; c < 3; ++c) EXPECT_EQ(t.at(3, c), 0.0f);
}

TEST(Methylation, BadValuesNameTheLineTheCpgAndTheValue) {
  const std::string header = "subject_id,cg0001,cg0002\n";
  const auto high = write("meth_high.csv", header + "s1,0.1,0.2\ns2,0.3,1.2\n");
  expect_error([&] { read_methylation_table(high); }, {high, "line 3", "cg0002", "'1.2'", "[0, 1]"});
  const auto word = write("meth_word.csv", header + "s1,abc,0.2\n");
  expect_error([&] { read_methylation_table(word); }, {word, "line 2", "cg0001", "'abc'"});
  const auto negative = write("meth_neg.tsv", "id\tcg0001\tcg0002\ns1\t0.1\t-0.01\n");
  expect_error([&] { read_methylation_table(negative); }, {negative, "line 2", "cg0002", "'-0.01'"});
  const auto trailing = write("meth_trailing.csv", header + "s1,0.5x,0.2\n");
  expect_error([&] { read_methylation_table(trailing); }, {trailing, "line 2", "cg0001", "'0.5x'"});
  const auto infinite = write("meth_inf.csv", header + "s1,inf,0.2\n");
  expect_error([&] { read_methylation_table(infinite); }, {infinite, "line 2", "cg0001", "'inf'"});
  const auto huge = write("meth_huge.csv", header + "s1,0.1,1e400\n");
  expect_error([&] { read_methylation_table(huge); }, {huge, "line 2", "cg0002", "beta-value '1e400' is outside"});
}

TEST(Methylation, StructuralProblemsAreDataErrorsNamingTheFile) {
  const std::string header = "subject_id,cg1,cg2\n";
  const auto ragged = write("meth_ragged.csv", header + "s1,0.1,0.2\ns2,0.1,0.2\ns3,0.1\n");
  expect_error([&] { read_methylation_table(ragged); }, {ragged, "line 4", "2 fields", "3"});
  const auto too_many = write("meth_too_many.csv", header + "s1,0.1,0.2\ns2,0.1,0.2,0.3\n");
  expect_error([&] { read_methylation_table(too_many); }, {too_many, "line 3", "4 fields"});
  // R's write.table leaves the id column out of the header.
  const auto r_style = write("meth_r_style.tsv", "cg1\tcg2\ns1\t0.1\t0.2\n");
  expect_error([&] { read_methylation_table(r_style); }, {r_style, "line 2", "write.table"});
  const auto dup_subject = write("meth_dup_subject.csv", header + "s1,0.1,0.2\ns1,0.1,0.2\n");
  expect_error([&] { read_methylation_table(dup_subject); }, {dup_subject, "line 3", "'s1'", "line 2"});
  const auto dup_cpg = write("meth_dup_cpg.csv", "subject_id,cg1,cg2,cg1\ns1,0.1,0.2,0.3\n");
  expect_error([&] { read_methylation_table(dup_cpg); }, {dup_cpg, "line 1", "'cg1'", "columns 2 and 4"});
  // An id a CpG list could not hold is refused where it is read, not when a
  // selection of it is written after RFE.
  const auto blank_cpg = write("meth_blank_cpg.csv", "subject_id,\"cg 1\",cg2\ns1,0.1,0.2\n");
  expect_error([&] { read_methylation_table(blank_cpg); }, {blank_cpg, "line 1", "'cg 1' (column 2)"});
  const auto no_cpgs = write("meth_no_cpgs.csv", "subject_id\ns1\n");
  expect_error([&] { read_methylation_table(no_cpgs); }, {no_cpgs, "no CpG column"});
  const auto empty = write("meth_empty.csv", "");
  expect_error([&] { read_methylation_table(empty); }, {empty, "empty file"});
  const auto header_only = write("meth_header_only.csv", header);
  expect_error([&] { read_methylation_table(header_only); }, {header_only, "no subjects"});
  const auto no_id = write("meth_no_id.csv", header + ",0.1,0.2\n");
  expect_error([&] { read_methylation_table(no_id); }, {no_id, "line 2", "subject id"});
  const auto folder = fresh_dir("meth_folder");
  fs::create_directories(folder);
  expect_error([&] { read_methylation_table(folder); }, {folder, "folder"});
}

TEST(Methylation, WriteRefusesTablesItCouldNotReadBack) {
  const auto path = temp_path("meth_bad_write.csv");
  MethylationTable wrong_size = small_table();
  wrong_size.values.pop_back();
  EXPECT_THROW(write_methylation_table(path, wrong_size), UsageError);
  MethylationTable out_of_range = small_table();
  out_of_range.values[5] = 1.5f;
  expect_error([&] { write_methylation_table(path, out_of_range); }, {path, "'s2'", "cg02", "outside"});
  MethylationTable dup = small_table();
  dup.cpg_ids[3] = "cg01";
  expect_error([&] { write_methylation_table(path, dup); }, {path, "'cg01'", "twice"});
  EXPECT_FALSE(fs::exists(path));
}

TEST(Methylation, SelectCpgsKeepsTheRequestedOrder) {
  MethylationTable t = small_table();
  t.path = "/somewhere/meth.csv";
  const MethylationTable s = select_cpgs(t, {"cg04", "cg01"});
  EXPECT_EQ(s.cpg_ids, (std::vector<std::string>{"cg04", "cg01"}));
  EXPECT_EQ(s.subject_ids, t.subject_ids);
  EXPECT_EQ(s.path, t.path);
  ASSERT_EQ(s.values.size(), 6u);
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(bits(s.at(r, 0)), bits(t.at(r, 3))) << r;
    EXPECT_EQ(bits(s.at(r, 1)), bits(t.at(r, 0))) << r;
  }
  expect_error(
      [&] {
        select_cpgs(t, {"cg01", "cgX", "cg02", "cgY"});
      },
      {"/somewhere/meth.csv", "2 of the 4", "cgX, cgY"});
  const std::vector<std::string> many = {"m1", "m2", "m3", "m4", "m5", "m6", "m7"};
  const auto message = data_error_of([&] { select_cpgs(t, many); });
  EXPECT_NE(message.find("m1, m2, m3, m4, m5, ..."), std::string::npos) << message;
  EXPECT_EQ(message.find("m6"), std::string::npos) << message;
  expect_error([&] { select_cpgs(t, {"cg01", "cg01"}); }, {"/somewhere/meth.csv", "'cg01'", "twice"});
}

// ---------------------------------------------------------------- CpG lists

TEST(CpgList, WriteThenReadSkipsCommentsAndBlankLines) {
  const auto path = temp_path("cpgs.txt");
  write_cpg_list(path, {"cg3", "cg1", "cg2"}, "top 3 CpG sites\nby attention");
  EXPECT_EQ(slurp(path), "# top 3 CpG sites\n# by attention\ncg3\ncg1\ncg2\n");
  EXPECT_EQ(read_cpg_list(path), (std::vector<std::string>{"cg3", "cg1", "cg2"}));

  const auto hand = write("cpgs_hand.txt", "# chosen by hand\r\n\r\n  cg9  \r\n#cg8\r\ncg7");
  EXPECT_EQ(read_cpg_list(hand), (std::vector<std::string>{"cg9", "cg7"}));

  const auto dup = write("cpgs_dup.txt", "cg1\ncg2\n\ncg1\n");
  expect_error([&] { read_cpg_list(dup); }, {dup, "line 4", "'cg1'", "line 1"});
  const auto two = write("cpgs_two.txt", "cg1\ncg2,0.93\n");
  expect_error([&] { read_cpg_list(two); }, {two, "line 2", "'cg2,0.93'"});
  const auto none = write("cpgs_none.txt", "# nothing\n\n");
  expect_error([&] { read_cpg_list(none); }, {none, "no CpG ids"});
  const auto bad = temp_path("cpgs_bad.txt");
  expect_error([&] { write_cpg_list(bad, {"cg1", "cg 2"}, ""); }, {bad, "'cg 2'"});
  expect_error([&] { write_cpg_list(bad, {"cg1", "cg1"}, ""); }, {bad, "twice"});
  EXPECT_FALSE(fs::exists(bad));
}

// ---------------------------------------------------------------- matching

TEST(CohortMatch, PairsSubjectsInManifestOrderAndReportsTheRest) {
  Manifest m;
  m.path = "/c/manifest.csv";
  for (const char* id : {"s5", "s1", "s9", "s3", "s8"}) m.subjects.push_back({id, 0, "x.nii", {}});
  MethylationTable t;
  t.path = "/c/methylation.csv";
  t.subject_ids = {"s1", "s2", "s3", "s5", "s7"};
  t.cpg_ids = {"cg1"};
  t.values = {0.1f, 0.2f, 0.3f, 0.4f, 0.5f};
  const CohortMatch match = match_cohort(m, t);
  EXPECT_EQ(match.manifest_rows, (std::vector<int64_t>{0, 1, 3}));
  EXPECT_EQ(match.methylation_rows, (std::vector<int64_t>{3, 0, 2}));
  for (size_t i = 0; i < match.manifest_rows.size(); ++i)
    EXPECT_EQ(m.subjects[match.manifest_rows[i]].id, t.subject_ids[match.methylation_rows[i]]);
  EXPECT_EQ(match.only_in_manifest, (std::vector<std::string>{"s9", "s8"}));
  EXPECT_EQ(match.only_in_methylation, (std::vector<std::string>{"s2", "s7"}));
  EXPECT_EQ(match.describe(),
            "3 subjects in both; 2 only in the manifest (s9, s8); 2 only in methylation.csv (s2, s7)");
}

TEST(CohortMatch, DescribeListsAtMostFiveIdsAndLeavesOutEmptyKinds) {
  Manifest m;
  MethylationTable t;
  t.cpg_ids = {"cg1"};
  t.path = "meth.tsv";
  for (int i = 0; i < 8; ++i) m.subjects.push_back({"m" + std::to_string(i), 0, "x.nii", {}});
  m.subjects.push_back({"both", 1, "x.nii", {}});
  t.subject_ids = {"both"};
  t.values = {0.5f};
  const CohortMatch match = match_cohort(m, t);
  EXPECT_EQ(match.describe(), "1 subject in both; 8 only in the manifest (m0, m1, m2, m3, m4, ...)");
}

TEST(CohortMatch, NoCommonSubjectIsADataErrorNamingBothFiles) {
  Manifest m;
  m.path = "/c/manifest.csv";
  m.subjects.push_back({"s1", 0, "x.nii", {}});
  MethylationTable t;
  t.path = "/c/geo_matrix.csv";
  t.subject_ids = {"cg00000029", "cg00000108"};
  t.cpg_ids = {"s1"};
  t.values = {0.1f, 0.2f};
  expect_error([&] { match_cohort(m, t); },
               {"/c/manifest.csv", "/c/geo_matrix.csv", "no subject is in both", "transpose"});
}

// ---------------------------------------------------------------- imputation

TEST(Imputation, MeansIgnoreNaNAndUseOnlyTheGivenRows) {
  MethylationTable t;
  t.subject_ids = {"train1", "train2", "test", "train3"};
  t.cpg_ids = {"a", "b", "c"};
  t.values = {0.2f, kNaN, kNaN,  //
              0.4f, 0.3f, kNaN,  //
              1.0f, 1.0f, 1.0f,  // a test row: must not move any mean
              kNaN, 0.5f, kNaN};
  const std::vector<float> means = column_means(t, {0, 1, 3});
  ASSERT_EQ(means.size(), 3u);
  EXPECT_FLOAT_EQ(means[0], 0.3f);
  EXPECT_FLOAT_EQ(means[1], 0.4f);
  EXPECT_EQ(means[2], 0.5f);  // nothing observed in the training rows
  // With the test row the means would differ: the rows argument is honoured.
  EXPECT_FLOAT_EQ(column_means(t, {0, 1, 2, 3})[0], (0.2f + 0.4f + 1.0f) / 3.0f);

  impute_missing(t, means);
  EXPECT_EQ(t.missing_count(), 0);
  EXPECT_EQ(t.at(0, 0), 0.2f);  // observed values untouched
  EXPECT_EQ(t.at(0, 1), means[1]);
  EXPECT_EQ(t.at(3, 0), means[0]);
  EXPECT_EQ(t.at(3, 2), 0.5f);
  EXPECT_EQ(t.at(2, 2), 1.0f);

  EXPECT_THROW(column_means(t, {0, 4}), UsageError);
  EXPECT_THROW(impute_missing(t, {0.5f}), UsageError);
}

// ---------------------------------------------------------------- scale

TEST(Methylation, A400By20000TableWritesAndReadsBack) {
  MethylationTable t;
  const int64_t rows = 400, cols = 20000;
  for (int64_t r = 0; r < rows; ++r) t.subject_ids.push_back("PPMI_" + std::to_string(3000 + r));
  for (int64_t c = 0; c < cols; ++c) t.cpg_ids.push_back("cg" + std::to_string(10000000 + c * 37));
  t.values.resize(static_cast<size_t>(rows * cols));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> beta(0.0f, 1.0f);
  for (auto& v : t.values) v = beta(rng);
  for (size_t i = 0; i < t.values.size(); i += 997) t.values[i] = kNaN;
  const auto path = temp_path("meth_large.csv");

  const auto t0 = std::chrono::steady_clock::now();
  write_methylation_table(path, t);
  const auto t1 = std::chrono::steady_clock::now();
  const MethylationTable back = read_methylation_table(path);
  const auto t2 = std::chrono::steady_clock::now();
  const auto seconds = [](auto a, auto b) { return std::chrono::duration<double>(b - a).count(); };
  std::cout << "400 x 20000 table, " << fs::file_size(path) / 1e6 << " MB: write " << seconds(t0, t1) << " s, read "
            << seconds(t1, t2) << " s\n";

  EXPECT_EQ(back.rows(), rows);
  EXPECT_EQ(back.cols(), cols);
  EXPECT_EQ(back.missing_count(), t.missing_count());
  EXPECT_EQ(back.subject_ids.back(), t.subject_ids.back());
  EXPECT_EQ(back.cpg_ids.back(), t.cpg_ids.back());
  expect_same_values(t, back);
  fs::remove(path);
}

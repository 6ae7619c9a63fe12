#pragma once
// A user's own MHCA cohort, in two public-format files: a manifest naming each
// subject's label and SPECT volume, and a DNA-methylation table of beta-values
// (one row per subject, one column per CpG site). Both are plain CSV/TSV so that
// they can come out of R, pandas or a spreadsheet unchanged.
//
// Manifest (CSV, or TSV when the header line holds a tab):
//   subject_id,label,spect,age,sex
//   s001,control,scans/s001.nii.gz,63,F
// Required columns subject_id, label, spect (names case-insensitive, any
// order); every other column is an optional covariate kept as text. label is
// 0/1 or a word: control/hc/healthy -> 0, pd/parkinson/patient -> 1.
//
// Methylation table (CSV, or TSV when the header line holds a tab):
//   subject_id,cg00000029,cg00000108
//   s001,0.4812,NA
// The first column is the subject id whatever its header says (R and pandas
// write "" there); missing values are an empty cell, NA, NaN or null.
//
// Both readers accept RFC 4180 quoting ("a,b", "say ""hi"""), CRLF or CR line
// ends, a UTF-8 byte-order mark, spaces around fields, and skip blank lines.
// Every error is a DataError naming the file and, where it applies, the line
// (physical, counting the header as line 1) and column.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace qkv::medical {

// A subject whose diagnosis is not known: a new patient to predict for.
constexpr int64_t kUnlabelled = -1;

struct CohortSubject {
  std::string id;
  int64_t label = 0;       // 0 healthy control, 1 Parkinson's disease, kUnlabelled (prediction alone)
  std::string spect_path;  // as read_manifest resolved it; see there
  // Covariate columns by header name as written; an empty cell is absent here.
  std::map<std::string, std::string> covariates;
};

struct Manifest {
  std::string path;  // where it was read from ("" if built in memory)
  std::vector<CohortSubject> subjects;
};

// Reads a manifest. A relative spect path is taken relative to the manifest's
// folder and returned joined to it (manifest folder / spect, lexically
// normalised), so that it opens from the current directory; an absolute one is
// kept as written. Throws DataError for a missing or empty file, no subject
// rows, a missing or duplicate column, a row with the wrong number of fields,
// an empty subject id or spect cell, an unknown label, or a repeated subject id.
// With `labels_optional` (prediction), the label column may be left out and
// a label cell empty or NA: that subject is kUnlabelled.
Manifest read_manifest(const std::string& path, bool labels_optional = false);

// Writes subject_id,label,spect then the covariate columns (the union of all
// subjects' names, sorted), quoting fields where CSV needs it; a TSV when the
// path ends in ".tsv". Spect paths are written as given. Atomic. Throws
// DataError naming the path for content read_manifest would reject (a label
// other than 0/1, an empty or repeated id, an empty spect path, a covariate
// named like a required column).
void write_manifest(const std::string& path, const Manifest& manifest);

struct MethylationTable {
  std::string path;                      // where it was read from ("" if built in memory)
  std::vector<std::string> subject_ids;  // rows
  std::vector<std::string> cpg_ids;      // columns
  std::vector<float> values;             // row-major rows x columns, NaN = missing

  int64_t rows() const { return static_cast<int64_t>(subject_ids.size()); }
  int64_t cols() const { return static_cast<int64_t>(cpg_ids.size()); }
  int64_t missing_count() const;  // NaN cells
  // Unchecked, like Volume::at: this sits in per-cell loops.
  float at(int64_t row, int64_t col) const { return values[static_cast<size_t>(row * cols() + col)]; }
};

// Reads a methylation table. Throws DataError naming the file for a missing or
// empty file, a header without CpG columns, no subject rows, an empty or
// repeated subject or CpG id, a row with the wrong number of fields (naming the
// line), and a value that is not a number in [0, 1] (naming the line, the
// column number, the CpG id and the value).
MethylationTable read_methylation_table(const std::string& path);

// Writes CSV, or TSV when the path ends in ".tsv"; the id column's header is
// "subject_id"; NaN is written as an empty cell (CSV) or NA (TSV); values in
// the shortest form that reads back as the same float. Atomic. Throws
// UsageError if values does not hold rows x cols floats, DataError naming the
// path for content read_methylation_table would reject.
void write_methylation_table(const std::string& path, const MethylationTable& table);

// Only the named CpG columns, in the given order (path kept). Throws DataError
// naming the table (its path) and the first few requested ids it lacks, or an
// id requested twice.
MethylationTable select_cpgs(const MethylationTable& table, const std::vector<std::string>& cpg_ids);

// A list of CpG ids, one per line; blank lines and lines starting with '#' are
// ignored. Written by `qkv mhca select`. Throws DataError naming the file (and
// line) for a missing file, no ids, a line holding more than one word, or a
// repeated id.
std::vector<std::string> read_cpg_list(const std::string& path);
// comment_header (may span lines, may be empty) is written first, each line
// prefixed with "# ". Atomic. Throws DataError naming the path for an id that
// read_cpg_list would not give back (empty, holding blanks, starting with '#',
// repeated).
void write_cpg_list(const std::string& path, const std::vector<std::string>& ids, const std::string& comment_header);

// Subjects matched across modalities by exact id, in manifest order, with what
// did not match.
struct CohortMatch {
  std::vector<int64_t> manifest_rows;            // matched subject -> index in manifest.subjects
  std::vector<int64_t> methylation_rows;         // matched subject -> row in the table
  std::vector<std::string> only_in_manifest;     // manifest order
  std::vector<std::string> only_in_methylation;  // table order
  std::string methylation_name;                  // the table's file name, for describe()

  // One line, e.g. "408 subjects in both; 2 only in the manifest (s001, s017);
  // 1 only in methylation.csv (s999)": at most 5 ids of each kind, then "...";
  // a kind with no subject is left out.
  std::string describe() const;
};
// Throws DataError naming both files if no subject is in both.
CohortMatch match_cohort(const Manifest& manifest, const MethylationTable& table);

// Per-CpG missing-value imputation used before training, in two steps so that
// nothing leaks from test rows: column_means gives each column's mean over the
// given rows (the training rows), NaN ignored, 0.5 for a column with no
// observed value there; impute_missing then replaces every NaN of every row by
// its column's mean. Throws UsageError for a row index out of range or means
// of the wrong length.
std::vector<float> column_means(const MethylationTable& table, const std::vector<int64_t>& rows);
void impute_missing(MethylationTable& table, const std::vector<float>& means);

}  // namespace qkv::medical

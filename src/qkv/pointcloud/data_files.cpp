#include "qkv/pointcloud/data_files.h"

#include <torch/torch.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>

#include "qkv/core/errors.h"
#include "qkv/core/file_input.h"

namespace qkv::pointcloud {

namespace fs = std::filesystem;

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

bool is_dir(const fs::path& p) {
  std::error_code ec;
  return fs::is_directory(p, ec);
}

void require_data_folder(const std::string& dir_name) {
  std::error_code ec;
  const auto status = fs::status(dir_name, ec);
  if (fs::is_directory(status)) return;
  if (fs::is_regular_file(status))
    throw DataError(dir_name +
                    ": a file, not a data folder (give the folder of a data set; one shape file is read by "
                    "the predict commands' --input)");
  if (fs::exists(status)) throw DataError(dir_name + ": not a folder (a FIFO, device or socket)");
  throw DataError(dir_name + ": no such folder");
}

std::vector<ListLine> read_list(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) throw DataError(path.string() + ": missing list file");
  regular_file_size(path.string());
  std::ifstream in(path);
  if (!in) throw DataError(path.string() + ": cannot open: " + std::strerror(errno));
  // List lines are names and relative paths; a longer one means a binary or
  // wrong file, said at its first such line.
  constexpr size_t kMaxListLine = 64 * 1024;
  std::vector<ListLine> out;
  std::string line;
  for (int64_t n = 1; std::getline(in, line); ++n) {
    if (line.size() > kMaxListLine)
      throw DataError(path.string() + ": line " + std::to_string(n) + ": longer than " + std::to_string(kMaxListLine) +
                      " bytes (not a list of names)");
    const auto b = line.find_first_not_of(" \t\r");
    if (b == std::string::npos) continue;
    const auto e = line.find_last_not_of(" \t\r");
    out.push_back({line.substr(b, e - b + 1), n});
  }
  if (in.bad()) throw DataError(path.string() + ": read failed");
  return out;
}

std::vector<std::string> listed_h5_files(const std::filesystem::path& dir, const std::filesystem::path& list_path) {
  std::vector<std::string> files;
  for (const auto& l : read_list(list_path)) {
    const auto file = (dir / std::filesystem::path(l.text).filename()).string();
    if (!is_file(file))
      throw DataError(list_path.string() + ": line " + std::to_string(l.line) + ": lists '" + l.text +
                      "', which is not at " + file);
    files.push_back(file);
  }
  return files;
}

H5Clouds read_h5_clouds(const H5File& h5, const std::string& file, int64_t min_points) {
  H5Clouds c;
  c.points = h5.read("data", torch::kFloat, false);
  if (c.points.dim() != 3 || c.points.size(2) != 3) throw DataError(file + ": dataset 'data' is not [S, P, 3]");
  if (c.points.size(1) < min_points)
    throw DataError(file + ": dataset 'data' has " + std::to_string(c.points.size(1)) +
                    " points per shape, fewer than the " + std::to_string(min_points) + " asked for");
  const auto s = c.points.size(0);
  c.labels = h5.read("label", torch::kLong, true);
  if (!(c.labels.dim() == 1 || (c.labels.dim() == 2 && c.labels.size(1) == 1)) || c.labels.size(0) != s)
    throw DataError(file + ": dataset 'label' is not [" + std::to_string(s) + ", 1] like 'data'");
  c.labels = c.labels.reshape({s});
  return c;
}

bool ClassCap::take(int64_t label) {
  auto& count = taken[static_cast<size_t>(label)];
  if (cap_ > 0 && count == cap_) return false;
  ++count;
  return true;
}

bool KeptShapes::keep(const std::string& file, int64_t row, int64_t label) {
  if (!cap.take(label)) return false;
  labels.push_back(label);
  sources.push_back(file + "[" + std::to_string(row) + "]");
  return true;
}

at::Tensor finite_h5_rows(const at::Tensor& values, const std::vector<int64_t>& rows, int64_t points,
                          const std::string& file, const char* name) {
  const auto kept = values.slice(1, 0, points).index_select(0, torch::tensor(rows, torch::kLong));
  if (kept.is_floating_point() && !torch::isfinite(kept).all().item<bool>())
    throw DataError(file + ": dataset '" + name + "' has NaN or infinite values");
  return kept;
}

}  // namespace qkv::pointcloud

#include "qkv/pointcloud/data_files.h"

#include <torch/torch.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include <sys/wait.h>
#include <unistd.h>

#include "qkv/core/checked.h"
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

H5File::H5File(std::string path) : path_(std::move(path)), file_(open(path_), H5Fclose) {}

bool H5File::has(const std::string& name) const { return H5Lexists(file_.get(), name.c_str(), H5P_DEFAULT) > 0; }

at::Tensor H5File::read(const std::string& name, at::ScalarType dtype, bool integer_only) const {
  const auto where = path_ + ": dataset '" + name + "': ";
  if (!has(name)) throw DataError(path_ + ": no dataset '" + name + "'");
  H5Handle ds(H5Dopen2(file_.get(), name.c_str(), H5P_DEFAULT), H5Dclose);
  if (!ds.ok()) throw DataError(where + "cannot open");
  H5Handle type(H5Dget_type(ds.get()), H5Tclose);
  const auto cls = type.ok() ? H5Tget_class(type.get()) : H5T_NO_CLASS;
  if (cls != H5T_INTEGER && (integer_only || cls != H5T_FLOAT))
    throw DataError(where + (integer_only ? "not an integer type" : "not a numeric type"));
  H5Handle space(H5Dget_space(ds.get()), H5Sclose);
  const int rank = space.ok() ? H5Sget_simple_extent_ndims(space.get()) : -1;
  if (rank < 1 || rank > 3) throw DataError(where + "unexpected rank " + std::to_string(rank));
  hsize_t dims[3] = {0, 0, 0};
  H5Sget_simple_extent_dims(space.get(), dims, nullptr);
  std::vector<int64_t> shape(dims, dims + rank);
  // A chunked, compressed dataset can declare any extent in a small file:
  // refused above 2^30 elements (4 GiB as float, far above ModelNet's 2048 x 2048 x 3).
  constexpr int64_t kMaxElements = int64_t{1} << 30;
  int64_t elements = 1;
  for (auto d : shape)
    if (d < 0 || !checked_mul(elements, d, elements) || elements > kMaxElements)
      throw DataError(where + "declares " + std::to_string(rank) + "-D extent too large to read (over " +
                      std::to_string(kMaxElements) + " elements)");
  auto out = guard_memory(path_, "dataset '" + name + "'", [&] { return torch::empty(shape, dtype); });
  const hid_t mem_type = dtype == torch::kFloat ? H5T_NATIVE_FLOAT : H5T_NATIVE_INT64;
  if (out.numel() > 0 && H5Dread(ds.get(), mem_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data_ptr()) < 0)
    throw DataError(where + "read failed (truncated or corrupt file?)");
  return out;
}

namespace {

// Opens every dataset the root group links to, with its type, extent and
// creation properties: the metadata H5File's reads will walk.
herr_t probe_link(hid_t group, const char* name, const H5L_info_t*, void*) {
  const hid_t ds = H5Dopen2(group, name, H5P_DEFAULT);
  if (ds < 0) return 0;  // not a dataset, or one HDF5 refuses: an error the real read reports
  for (const hid_t id : {H5Dget_type(ds), H5Dget_space(ds), H5Dget_create_plist(ds)})
    if (id >= 0) H5Idec_ref(id);
  H5Dclose(ds);
  return 0;
}

// libhdf5 trusts sizes in a file's metadata: a forged local heap or object
// header makes it ask malloc for hundreds of GB, and when malloc fails it
// copies into the null pointer (libhdf5 1.10; found by fuzz_h5_scanobjectnn).
// No check of ours can run first, so the file's metadata is walked once in
// a child process: if HDF5 kills the child, the file is refused here, and
// the read this process then makes walks only metadata that the child walked
// safely. Errors HDF5 reports are left to that read, which names them.
void probe_h5_in_child(const std::string& path) {
  std::fflush(nullptr);
  const pid_t child = ::fork();
  if (child < 0) return;  // no process to spare: read as before
  if (child == 0) {
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    if (file >= 0) {
      H5Literate(file, H5_INDEX_NAME, H5_ITER_NATIVE, nullptr, probe_link, nullptr);
      H5Fclose(file);
    }
    ::_exit(0);  // no destructors or atexit handlers of the parent's state
  }
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFSIGNALED(status))
    throw DataError(path +
                    ": HDF5 cannot read this file's metadata (the library crashed on it in a probe: a "
                    "corrupt or forged HDF5 file)");
}

}  // namespace

hid_t H5File::open(const std::string& path) {
  // HDF5 prints its own error stack to stderr by default; our DataError says it in one line.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  regular_file_size(path);
  probe_h5_in_child(path);
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw DataError(path + ": cannot open as an HDF5 file");
  return id;
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

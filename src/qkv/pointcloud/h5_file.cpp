// H5File through libhdf5; a build without HDF5 compiles h5_file_absent.cpp
// instead (runtime/build_parts.h).
#include "qkv/pointcloud/h5_file.h"

#include <hdf5.h>
#include <torch/torch.h>

#include <cerrno>
#include <cstdio>
#include <type_traits>

#include <sys/wait.h>
#include <unistd.h>

#include "qkv/core/checked.h"
#include "qkv/core/errors.h"
#include "qkv/core/file_input.h"

namespace qkv::pointcloud {

static_assert(std::is_same_v<hid_t, int64_t>, "H5File keeps HDF5's hid_t (64-bit since HDF5 1.10) as an int64_t");

namespace {

// Closes an HDF5 handle on every path out, errors included.
class H5Handle {
 public:
  H5Handle(hid_t id, herr_t (*close)(hid_t)) : id_(id), close_(close) {}
  ~H5Handle() {
    if (id_ >= 0) close_(id_);
  }
  H5Handle(const H5Handle&) = delete;
  H5Handle& operator=(const H5Handle&) = delete;
  hid_t get() const { return id_; }
  bool ok() const { return id_ >= 0; }

 private:
  hid_t id_;
  herr_t (*close_)(hid_t);
};

}  // namespace

H5File::H5File(std::string path) : path_(std::move(path)), id_(open(path_)) {}

H5File::~H5File() {
  if (id_ >= 0) H5Fclose(id_);
}

bool H5File::has(const std::string& name) const { return H5Lexists(id_, name.c_str(), H5P_DEFAULT) > 0; }

at::Tensor H5File::read(const std::string& name, at::ScalarType dtype, bool integer_only) const {
  const auto where = path_ + ": dataset '" + name + "': ";
  if (!has(name)) throw DataError(path_ + ": no dataset '" + name + "'");
  H5Handle ds(H5Dopen2(id_, name.c_str(), H5P_DEFAULT), H5Dclose);
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
// a child process: unless the child exits with 0 (killed by a signal, or made
// to exit otherwise, as AddressSanitizer does on a crash), the file is
// refused here, and the read this process then makes walks only metadata
// that the child walked safely. Errors HDF5 reports are left to that read,
// which names them.
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
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw DataError(path +
                    ": HDF5 cannot read this file's metadata (the library crashed on it in a probe: a "
                    "corrupt or forged HDF5 file)");
}

}  // namespace

int64_t H5File::open(const std::string& path) {
  // HDF5 prints its own error stack to stderr by default; our DataError says it in one line.
  H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  regular_file_size(path);
  probe_h5_in_child(path);
  const hid_t id = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  if (id < 0) throw DataError(path + ": cannot open as an HDF5 file");
  return id;
}

}  // namespace qkv::pointcloud

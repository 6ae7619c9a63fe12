// qkv.data: the library's readers, generators and task views. A data set
// is configured with the keys its run's config.json records ("points",
// "protocol", "up_axis", ...) and loaded exactly as `qkv vnt train` / `qkv
// seg train` load it (tasks::load_point_data, make_splits).
#include <pybind11/stl.h>

#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <type_traits>

#include "bindings.h"
#include "qkv/core/errors.h"
#include "qkv/core/fields.h"
#include "qkv/core/text.h"
#include "qkv/medical/cohort_data.h"
#include "qkv/medical/nifti.h"
#include "qkv/pointcloud/mesh_read.h"
#include "qkv/pointcloud/synth_parts.h"
#include "qkv/pointcloud/synth_shapes.h"
#include "qkv/tasks/classification.h"
#include "qkv/tasks/part_segmentation.h"
#include "qkv/tasks/point_task.h"
#include "qkv/train/trainer.h"

namespace qkv::python {
namespace {

// A data::Dataset for Python: its size and batches of named inputs + target.
struct DatasetHandle {
  data::DatasetPtr dataset;
};

py::tuple batch_of(const DatasetHandle& self, const std::vector<int64_t>& indices) {
  const int64_t n = self.dataset->size();
  for (const auto i : indices)
    if (i < 0 || i >= n)
      throw py::index_error("index " + std::to_string(i) + " is outside a data set of " + std::to_string(n));
  data::Batch batch;
  {
    py::gil_scoped_release release;
    batch = self.dataset->get(indices);
  }
  return py::make_tuple(batch.inputs, batch.target);
}

py::dict mesh_dict(const pointcloud::Mesh& mesh) {
  const auto nv = static_cast<int64_t>(mesh.vertices.size());
  auto vertices = torch::empty({nv, 3}, torch::kFloat);
  std::memcpy(vertices.data_ptr<float>(), mesh.vertices.data(), sizeof(float) * 3 * mesh.vertices.size());
  py::dict out;
  out["vertices"] = vertices;
  out["origin"] = torch::tensor({mesh.origin[0], mesh.origin[1], mesh.origin[2]}, torch::kDouble);
  out["faces"] = py::none();
  out["normals"] = py::none();
  if (!mesh.faces.empty()) {
    auto faces = torch::empty({static_cast<int64_t>(mesh.faces.size()), 3}, torch::kLong);
    std::memcpy(faces.data_ptr<int64_t>(), mesh.faces.data(), sizeof(int64_t) * 3 * mesh.faces.size());
    out["faces"] = faces;
  }
  if (mesh.has_normals()) {
    auto normals = torch::empty({nv, 3}, torch::kFloat);
    std::memcpy(normals.data_ptr<float>(), mesh.normals.data(), sizeof(float) * 3 * mesh.normals.size());
    out["normals"] = normals;
  }
  return out;
}

// A task's data settings: the CLI's defaults (the paper's augmentation
// included), then the caller's keys. Unknown keys and values of the wrong
// type are UsageErrors naming `what` and the key.
template <typename Data>
Data settings_from(const std::string& what, const nlohmann::json& given) {
  Data d;
  train::TrainConfig unused;
  tasks::set_paper_training_defaults(unused, d.view);
  std::set<std::string> known;
  visit_fields(d, [&](const Field& f, auto&) { known.insert(f.key); });
  for (const auto& item : given.items()) {
    if (known.count(item.key())) continue;
    // The part sets' keys say "category" where the CLI's options say
    // "class" (--max-per-class, --synth-classes), as their runs' files do.
    std::string said_so;
    for (const auto& [cli_word, key_word] : {std::pair{"classes", "categories"}, std::pair{"class", "category"}}) {
      std::string key = item.key();
      const auto at = key.find(cli_word);
      if (at == std::string::npos) continue;
      key.replace(at, std::strlen(cli_word), key_word);
      if (known.count(key)) said_so = "this set says '" + key + "'; ";
      break;  // "classes" holds "class": the longer word decides
    }
    throw UsageError(what + ": unknown setting '" + item.key() + "' (" + said_so +
                     "known: " + join(std::vector<std::string>(known.begin(), known.end())) + ")");
  }
  nlohmann::json merged = d.to_json();
  merged.update(given);
  // The up axis by name, as the CLI's --up-axis takes it.
  if (merged.contains("up_axis") && merged.at("up_axis").is_string()) {
    const auto axis = tasks::up_axis_of_name(merged.at("up_axis").get<std::string>());
    if (!axis)
      throw UsageError(what + ": up_axis '" + merged.at("up_axis").get<std::string>() +
                       "': expected x, y, z, layout or auto (or -2..2)");
    merged["up_axis"] = *axis;
  }
  try {
    d = Data::from_json(merged);
  } catch (const DataError& e) {  // from_json words it for a stored run's file: say it as the caller's setting
    std::string why = e.what();
    const std::string stored = "the run's data settings: ";
    if (why.rfind(stored, 0) == 0) why.erase(0, stored.size());
    throw UsageError(what + ": " + why);
  }
  d.validate();
  return d;
}

template <typename Data, typename Splits>
py::dict splits_dict(const Data& d, const Splits& s, const std::string& layout) {
  py::dict out;
  out["train"] = DatasetHandle{s.splits.train};
  out["val"] = DatasetHandle{s.splits.val};
  out["test"] = DatasetHandle{s.splits.test};
  for (const auto& [rotation, dataset] : s.extra_tests) out[("test/" + rotation).c_str()] = DatasetHandle{dataset};
  out["layout"] = layout;
  out["settings"] = d.to_json().dump();
  return out;
}

// A task's data loaded as its train command loads them, with their splits
// and the layout's name; `what` names the Python class in messages.
template <typename Data>
py::dict load_splits(const std::string& what, const std::string& settings) {
  auto d = settings_from<Data>(what, nlohmann::json::parse(settings));
  auto [splits, layout] = interruptible([&] {
    const auto loaded = tasks::load_point_data(d, /*run_dir=*/"", 0, /*overwrite=*/false);
    return std::make_pair(tasks::make_splits(d, loaded), d.source == "synthetic" ? "synthetic" : loaded.layout);
  });
  if constexpr (std::is_same_v<Data, tasks::ClassificationData>) d.class_names = splits.class_names;
  auto out = splits_dict(d, splits, layout);
  if constexpr (std::is_same_v<Data, tasks::ClassificationData>) out["classes"] = splits.class_names;
  return out;
}

py::dict classification_splits(const std::string& what, const std::string& settings) {
  return load_splits<tasks::ClassificationData>(what, settings);
}

py::dict part_segmentation_splits(const std::string& what, const std::string& settings) {
  auto out = load_splits<tasks::PartSegData>(what, settings);
  std::vector<py::dict> categories;
  for (const auto& c : pointcloud::shapenet_part_categories()) {
    py::dict one;
    one["name"] = c.name;
    one["synset"] = c.synset;
    one["first_part"] = c.first_part;
    one["parts"] = c.parts;
    categories.push_back(one);
  }
  out["categories"] = categories;
  return out;
}

// A cohort (manifest + methylation table) and the views of it a model reads.
struct CohortHandle {
  std::shared_ptr<medical::CohortData> cohort;
};

DatasetHandle cohort_dataset(const CohortHandle& self, const std::vector<int64_t>& rows,
                             const std::vector<int64_t>& fit_rows, std::vector<std::string> cpgs,
                             const std::string& normalisation) {
  const int64_t n = self.cohort->size();
  for (const auto& [name, list] :
       {std::pair<const char*, const std::vector<int64_t>*>{"rows", &rows}, {"fit_rows", &fit_rows}})
    for (const auto i : *list)
      if (i < 0 || i >= n)
        throw UsageError(std::string(name) + ": row " + std::to_string(i) + " is outside a cohort of " +
                         std::to_string(n) + " subjects (0.." + std::to_string(n - 1) + ")");
  if (fit_rows.empty()) throw UsageError("fit_rows: empty (the normalisation is fitted on them)");
  if (cpgs.empty()) cpgs = self.cohort->methylation.cpg_ids;
  const auto prep = medical::fit_preprocessing(*self.cohort, fit_rows, cpgs, normalisation);
  return DatasetHandle{medical::make_dataset(*self.cohort, rows, prep)};
}

}  // namespace

void bind_data(py::module_& m) {
  auto d = m.def_submodule("data");
  py::class_<DatasetHandle>(d, "Dataset")
      .def("__len__", [](const DatasetHandle& self) { return self.dataset->size(); })
      .def("get", &batch_of, py::arg("indices"));
  d.def("classification_splits", &classification_splits, py::arg("what"), py::arg("settings"));
  d.def("part_segmentation_splits", &part_segmentation_splits, py::arg("what"), py::arg("settings"));
  d.def("default_settings", [](const std::string& task) {
    train::TrainConfig unused;
    if (task == "classification") {
      tasks::ClassificationData data;
      tasks::set_paper_training_defaults(unused, data.view);
      return data.to_json().dump();
    }
    if (task == "segmentation") {
      tasks::PartSegData data;
      tasks::set_paper_training_defaults(unused, data.view);
      return data.to_json().dump();
    }
    throw UsageError("default_settings: task '" + task + "': expected classification or segmentation");
  });
  d.def(
      "read_shape",
      [](const std::string& path) {
        return mesh_dict(interruptible([&] { return pointcloud::read_shape_file(path); }));
      },
      py::arg("path"));
  d.def("synthetic_shape_classes", &pointcloud::synth_shape_classes);
  d.def(
      "synthetic_shape",
      [](const std::string& cls, uint64_t seed) { return mesh_dict(pointcloud::make_synth_shape(cls, seed)); },
      py::arg("cls"), py::arg("seed") = 0);
  d.def("synthetic_part_categories", &pointcloud::synth_part_categories);
  d.def(
      "read_nifti",
      [](const std::string& path) {
        const auto volume = interruptible([&] { return medical::read_nifti(path); });
        const auto a = volume.geometry.affine();
        auto affine = torch::empty({4, 4}, torch::kDouble);
        std::copy(a.begin(), a.end(), affine.data_ptr<double>());
        py::dict geometry;
        geometry["spacing"] = volume.geometry.spacing;
        geometry["qform_code"] = volume.geometry.qform_code;
        geometry["sform_code"] = volume.geometry.sform_code;
        return py::make_tuple(medical::volume_to_tensor(volume), affine, geometry);
      },
      py::arg("path"));
  py::class_<CohortHandle>(d, "Cohort")
      .def(py::init([](const std::string& manifest, const std::string& methylation, double max_missing, bool reorient) {
             return CohortHandle{interruptible([&] {
               return std::make_shared<medical::CohortData>(medical::load_cohort(
                   manifest, methylation, /*load_volumes=*/true, 0, /*quiet=*/false, {}, max_missing, reorient));
             })};
           }),
           py::arg("manifest"), py::arg("methylation"), py::arg("max_missing") = 1.0, py::arg("reorient") = false)
      .def("__len__", [](const CohortHandle& self) { return self.cohort->size(); })
      .def_property_readonly("subject_ids", [](const CohortHandle& self) { return self.cohort->subject_ids; })
      .def_property_readonly("labels", [](const CohortHandle& self) { return self.cohort->labels; })
      .def_property_readonly("cpg_ids", [](const CohortHandle& self) { return self.cohort->methylation.cpg_ids; })
      .def_property_readonly("volume_shape", [](const CohortHandle& self) { return self.cohort->volume_shape(); })
      .def("dataset", &cohort_dataset, py::arg("rows"), py::arg("fit_rows"), py::arg("cpgs"),
           py::arg("normalisation") = "global");
}

}  // namespace qkv::python

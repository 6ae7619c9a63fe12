#pragma once
// A cohort as the MHCA models see it: the subjects present in both the
// manifest and the methylation table, their SPECT volumes as one tensor and
// their beta-values, plus the preprocessing fitted on training rows only
// (intensity normalisation, missing-value means, the CpG selection), which a
// run records so that `predict` and `explain` apply exactly the same.
#include <ATen/core/Tensor.h>

#include <functional>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "qkv/core/fields.h"
#include "qkv/data/dataset.h"
#include "qkv/medical/cohort.h"
#include "qkv/medical/nifti.h"

namespace qkv::medical {

struct CohortData {
  std::vector<std::string> subject_ids;  // matched subjects, manifest order
  std::vector<int64_t> labels;           // 0 control, 1 PD
  std::vector<std::string> spect_paths;
  medical::MethylationTable methylation;  // rows aligned with subject_ids, all CpG columns
  at::Tensor volumes;                     // [N, X, Y, Z] float32 raw intensities (undefined if not loaded)
  medical::NiftiGeometry geometry;        // the first volume's, for maps written on this grid
  // Each volume's, as read (turned to RAS+ where `reoriented`): the others'
  // agree with the first's within 1e-3 mm, and a subject's own map carries its own.
  std::vector<medical::NiftiGeometry> geometries;
  std::string match_summary;  // CohortMatch::describe()
  bool reoriented = false;    // volumes turned to RAS+ as they were read (load_cohort's to_ras)
  std::string manifest_path, methylation_path;

  int64_t size() const { return static_cast<int64_t>(subject_ids.size()); }
  std::vector<int64_t> volume_shape() const;  // {X, Y, Z}
  std::vector<int64_t> labels_of(const std::vector<int64_t>& rows) const;
};

// Reads the manifest, the table and (with load_volumes) every matched
// subject's volume, using up to `threads` readers (0: 2) on LibTorch's
// threads. Subjects in one modality only are reported on stderr (one line),
// never silently dropped; DataError if a volume has another grid than the
// first, naming both files. With `expected_grid` (a checkpoint's {X, Y, Z}),
// every volume's header is checked against it before any voxel is read, so a
// file declaring a huge grid is refused by name instead of being stacked.
// Subjects with at least half their beta-values missing are named in a
// warning; those with a larger share than `max_missing` are left out (named
// too). Fewer left than `use` needs (2 to fit, 1 to predict or explain) is a
// UsageError naming --max-missing when it left some out, else a DataError
// naming the manifest. To predict, labels may be left out (kUnlabelled).
// Every volume's affine is compared with the first's (1e-3 mm per entry);
// a difference is a DataError naming both files and what differs (origin,
// orientation code such as LPS against RAS, or spacing). With `to_ras`,
// each volume is first turned to RAS+ (orientation.h), so that volumes that
// differ only in axis order and direction are accepted, the same way round.
// What a cohort is loaded for: fitting a model needs labels and 2 subjects;
// predicting and explaining take one subject, labelled or not.
enum class CohortUse { Fit, Predict };

CohortData load_cohort(const std::string& manifest, const std::string& methylation, bool load_volumes, int64_t threads,
                       bool quiet = false, const std::vector<int64_t>& expected_grid = {}, double max_missing = 1.0,
                       bool to_ras = false, CohortUse use = CohortUse::Fit);

// CRC-32 of what a cohort holds as loaded: its subjects in order, their
// labels, the methylation table's CpG ids and values, and the volumes (when
// loaded). A cross validation records it, so that --resume refuses a cohort
// whose files changed since its first folds.
uint32_t cohort_data_crc32(const CohortData& cohort);

// A volume as a cohort holds it: read, and turned to RAS+ (orientation.h)
// where the cohort's volumes were (`to_ras`); `turned`, when given, is set
// to whether it was.
Volume read_cohort_volume(const std::string& path, bool to_ras, bool* turned = nullptr);

// A label volume (a mask) in the cohort's space: read as its volumes were
// (turned to RAS+ with them), as a tensor [X, Y, Z]; DataError naming the
// file and `what` when it is not on their grid or does not lie where they
// lie (its affine against the cohort's, as the volumes' are checked: a
// mirrored mask would score the other hemisphere).
at::Tensor read_cohort_label_mask(const CohortData& cohort, const std::string& path, const std::string& what);

// How volumes become model input: "global" min-max over the training
// subjects' voxels (the paper's [0, 1] normalisation; the same two numbers
// for every subject, so absolute uptake differences stay), or "subject": each
// volume scaled by its own min and max.
struct Preprocessing {
  std::string normalisation = "global";
  double volume_min = 0, volume_max = 1;  // global mode
  std::vector<std::string> cpg_ids;       // the selected features, model input order
  std::vector<float> cpg_means;           // per selected CpG, for missing values

  nlohmann::json to_json() const;
  static Preprocessing from_json(const nlohmann::json& j);  // DataError on a malformed record
};

// Fits the normalisation and the missing-value means on `train_rows`, for
// the given CpG ids. UsageError for an unknown normalisation mode.
Preprocessing fit_preprocessing(const CohortData& cohort, const std::vector<int64_t>& train_rows,
                                const std::vector<std::string>& cpg_ids, const std::string& normalisation);

// The rows' model inputs: "spect" [n, 1, X, Y, Z] (when volumes are loaded)
// and "methylation" [n, F] with missing values imputed, target = labels.
std::shared_ptr<data::TensorDataset> make_dataset(const CohortData& cohort, const std::vector<int64_t>& rows,
                                                  const Preprocessing& prep);

// The rows' selected, imputed beta-values as a row-major float matrix (for XGBoost).
std::vector<float> methylation_matrix(const CohortData& cohort, const std::vector<int64_t>& rows,
                                      const Preprocessing& prep);

// Each selected CpG's standard deviation over the rows [F] (Augmentation::cpg_std).
at::Tensor cpg_std(const CohortData& cohort, const std::vector<int64_t>& rows, const Preprocessing& prep);

// Training-time augmentation (the paper's "10 % augmentation"): each sample of
// a batch, with probability `fraction`, has its volume rotated by a random
// rotation of up to `max_degrees` about each axis (trilinear resampling) and
// Gaussian noise of `noise` x each CpG's training standard deviation added to
// its beta-values (clamped to [0, 1]). Draws from LibTorch's global generator,
// which the trainer seeds.
//
// mode "enlarge" is the authors' code instead (MultiAug's OneOf, applied once
// when the data are loaded): floor(n x fraction) training samples, drawn with
// replacement, each get one augmented copy appended to the training set; a
// copy's volume turns about a random non-empty subset of the axes, and its
// noise is not clamped (enlarge_training_set).
struct Augmentation {
  double fraction = 0.1;
  double max_degrees = 5.0;
  double noise = 0.05;
  std::string mode = "batch";  // batch | enlarge
  at::Tensor cpg_std;          // [F]
  data::Batch operator()(const data::Batch& batch) const;
};

// Its options and config.json keys (core/fields.h).
template <typename V>
void visit_fields(Augmentation& a, V&& visit) {
  visit(Field{"augment", "share of training samples augmented (paper: 10%): per batch, or added once (--augment-mode)"}
            .range(0, 1),
        a.fraction);
  visit(Field{"augment_degrees", "largest random rotation of a volume about each axis, degrees"}.range(0, 180),
        a.max_degrees);
  visit(Field{"augment_noise", "Gaussian noise on beta-values, in units of each CpG's std"}.range(0, 100), a.noise);
  visit(Field{"augment_mode",
              "batch (each batch's samples augmented with probability --augment, noise clamped to [0, 1]) or enlarge "
              "(the authors' code: --augment x n augmented copies added once, turned about random axes, noise "
              "unclamped)"}
            .one_of("batch|enlarge"),
        a.mode);
}

// The training set of mode "enlarge": `train` followed by its augmented
// copies, drawn from a generator seeded with `seed`.
data::DatasetPtr enlarge_training_set(const data::DatasetPtr& train, const Augmentation& a, uint64_t seed);

// What a run trains on: for mode "batch", `train` and the augmentation as the
// trainer's batch hook; for "enlarge", the enlarged set and no hook.
struct AugmentedTraining {
  data::DatasetPtr train;
  std::function<data::Batch(const data::Batch&)> augment;
};
AugmentedTraining augmented_training(const data::DatasetPtr& train, const Augmentation& a, uint64_t seed);

// A float volume tensor [X, Y, Z] <-> NIfTI voxel order (i fastest).
at::Tensor volume_to_tensor(const medical::Volume& volume);
medical::Volume tensor_to_volume(const at::Tensor& xyz, const medical::NiftiGeometry& geometry);

}  // namespace qkv::medical

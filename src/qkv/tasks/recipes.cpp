#include "qkv/tasks/recipes.h"

#include <algorithm>

#include "qkv/core/errors.h"
#include "qkv/core/text.h"

namespace qkv::tasks {
namespace {

// VNT-Net: Sec. 4 ("Data Augmentation") and Appendix C of vnt-net.txt.
Recipe vnt_paper(const std::string& command, const std::vector<std::string>& models, const std::string& points,
                 const std::string& points_source) {
  return {"vnt-paper",
          {command},
          models,
          "VNT-Net paper: Adam 5e-4, batch 16, step decay 0.9 every 20 epochs, scale and shift augmentation",
          "VNT-Net paper, Sec. 4 'Data Augmentation' and Appendix C",
          {{"optimizer", "adam", "the paper (App. C)"},
           {"lr", "0.0005", "the paper (App. C: best of 1e-3..1e-4)"},
           {"batch_size", "16", "the paper (App. C: 16 on an RTX 3090, 8 on a GTX 1080Ti)"},
           {"schedule", "step", "the paper (App. C)"},
           {"step_size", "20", "the paper (App. C)"},
           {"gamma", "0.9", "the paper (App. C)"},
           {"points", points, points_source},
           {"random_scale", "true", "the paper (Sec. 4: U[0.8, 1.25])"},
           {"random_shift", "true", "the paper (Sec. 4: U[-0.1, 0.1])"},
           {"point_dropout", "0", "the paper (Sec. 4: dropping points did not help)"},
           {"epochs", "200", "our choice (the paper is silent)"},
           {"weight_decay", "0.0001", "our choice (the paper is silent)"},
           {"label_smoothing", "0", "our choice (the paper is silent)"}}};
}

std::vector<Recipe> make_recipes() {
  std::vector<Recipe> r;
  auto cls = vnt_paper("vnt train", {"vnt", "vnt+n"}, "1024", "the paper (Sec. 4: 1,024 points by FPS)");
  cls.settings.push_back({"sampling", "fps", "the paper (Sec. 4: FPS from a random start each time)"});
  cls.settings.push_back({"votes", "1", "our choice (the paper is silent)"});
  r.push_back(cls);
  r.push_back(vnt_paper("seg train", {"vnt-seg"}, "2048", "our choice (the paper is silent; ShapeNet-part's usual)"));

  // ScanObjectNN's hardest variant under SO(3) as a rotation-invariant paper
  // of 2024 trains on it: Wang, Yu and Li, "Rethinking Local-to-Global
  // Representation Learning for Rotation-Invariant Point Cloud Analysis"
  // (Pattern Recognition 2024; 78.6 % on PB_T50_RS).
  const std::string l2g = "the reference code (CentauriStar/Rotation-Invariant-Point-Cloud-Analysis ";
  r.push_back(
      {"scanobjectnn",
       {"vnt train"},
       {"vnt", "vnt-local", "vn-dgcnn"},
       "ScanObjectNN PB_T50_RS (background kept), SO(3) in training and test: SGD 0.1 with cosine annealing to "
       "0.001 over 500 epochs, batch 32, 1,024 random points of each scan",
       "Wang, Yu and Li, Rethinking Local-to-Global Representation Learning for Rotation-Invariant Point Cloud "
       "Analysis (Pattern Recognition 2024), reference code github.com/CentauriStar/Rotation-Invariant-Point-Cloud-"
       "Analysis: scripts/train/Scan_so3.sh, cls_trainer.py, Data/ScanObjectNN.py",
       {{"layout", "scanobjectnn", l2g + "Data/ScanObjectNN.py: the h5 files of main_split)"},
        {"scanobjectnn_variant", "PB_T50_RS", l2g + "Data/ScanObjectNN.py: *_augmentedrot_scale75.h5)"},
        {"protocol", "so3/so3", l2g + "Scan_so3.sh: --rand_rot, SO(3) rotations of train and test clouds)"},
        {"points", "1024", l2g + "Scan_so3.sh: --sample_points 1024)"},
        {"sampling", "random", l2g + "Data/ScanObjectNN.py: 1,024 of the 2,048 points, shuffled in training)"},
        {"normalize", "true", l2g + "Data/ScanObjectNN.py: pc_normalize)"},
        {"random_shift", "true", l2g + "cls_trainer.py: RandomTranslate)"},
        {"optimizer", "sgd", l2g + "Scan_so3.sh: --use_sgd)"},
        {"lr", "0.1", l2g + "cls_trainer.py: --lrate 0.001 x 100 for SGD at batch 32)"},
        {"schedule", "cosine", l2g + "Scan_so3.sh: --use_annl, CosineAnnealingLR)"},
        {"min_lr", "0.001", l2g + "cls_trainer.py: CosineAnnealingLR eta_min = --lrate)"},
        {"epochs", "500", l2g + "Scan_so3.sh: --nepoch 500)"},
        {"batch_size", "32", l2g + "Scan_so3.sh: --batch_size 32)"},
        {"drop_last", "false", l2g + "cls_trainer.py: DataLoader drop_last=False)"},
        {"momentum", "0.9", "our choice (the reference code's argument defaults are not in its repository)"}}});

  const std::string vn = "the reference code (FlyingGiraffe/vnn ";
  r.push_back({"vnn",
               {"vnt train"},
               {"vn-dgcnn"},
               "Vector Neurons' train_cls.py: SGD 0.1, StepLR(20, 0.7), batch 32, first 1,024 points, point dropout, "
               "label smoothing 0.2, 3 votes, rotations about z",
               "Vector Neurons reference code, github.com/FlyingGiraffe/vnn: train_cls.py, test_cls.py, provider.py, "
               "data_utils/ModelNetDataLoader.py, models/vn_dgcnn_cls.py",
               {{"optimizer", "sgd", vn + "train_cls.py: --optimizer SGD)"},
                {"lr", "0.1", vn + "train_cls.py: --learning_rate 0.001, x 100 for SGD)"},
                {"momentum", "0.9", vn + "train_cls.py)"},
                {"weight_decay", "0.0001", vn + "train_cls.py: --decay_rate)"},
                {"schedule", "step", vn + "train_cls.py: StepLR)"},
                {"step_size", "20", vn + "train_cls.py: StepLR step_size)"},
                {"gamma", "0.7", vn + "train_cls.py: StepLR gamma)"},
                {"step_offset", "1", vn + "train_cls.py: scheduler.step() before each epoch's batches)"},
                {"epochs", "250", vn + "train_cls.py: --epoch)"},
                {"batch_size", "32", vn + "train_cls.py: --batch_size)"},
                {"drop_last", "false", vn + "train_cls.py: DataLoader's default)"},
                {"points", "1024", vn + "train_cls.py: --num_point)"},
                {"sampling", "first", vn + "ModelNetDataLoader.py: uniform=False keeps the first points)"},
                {"point_dropout", "0.875", vn + "provider.py: random_point_dropout)"},
                {"random_scale", "true", vn + "provider.py: random_scale_point_cloud, U[0.8, 1.25])"},
                {"random_shift", "true", vn + "provider.py: shift_point_cloud, U[-0.1, 0.1])"},
                {"label_smoothing", "0.2", vn + "vn_dgcnn_cls.py: get_loss, eps 0.2)"},
                {"label_smoothing_over", "others", vn + "vn_dgcnn_cls.py: eps / (n_class - 1) to each other class)"},
                {"votes", "3", vn + "test_cls.py: --num_votes 3)"},
                {"up_axis", "2", vn + "train_cls.py: pytorch3d RotateAxisAngle(axis=\"Z\"))"}}});

  r.push_back(
      {"vnn-seg",
       {"seg train"},
       {"vn-dgcnn-seg"},
       "Vector Neurons' train_partseg.py: Adam 1e-3 halved every 20 epochs (floor 1e-5), batch-norm momentum "
       "0.1 halved every 20 epochs (floor 0.01), batch 16, 2,048 points, label smoothing 0.2, rotations about z",
       "Vector Neurons reference code, github.com/FlyingGiraffe/vnn: train_partseg.py, provider.py, "
       "models/vn_dgcnn_partseg.py",
       {{"optimizer", "adam", vn + "train_partseg.py: --optimizer Adam)"},
        {"lr", "0.001", vn + "train_partseg.py: --learning_rate)"},
        {"weight_decay", "0.0001", vn + "train_partseg.py: --decay_rate)"},
        {"schedule", "step", vn + "train_partseg.py: lr x lr_decay^(epoch // step_size))"},
        {"step_size", "20", vn + "train_partseg.py: --step_size)"},
        {"gamma", "0.5", vn + "train_partseg.py: --lr_decay)"},
        {"min_lr", "0.00001", vn + "train_partseg.py: LEARNING_RATE_CLIP)"},
        {"bn_momentum", "0.1", vn + "train_partseg.py: MOMENTUM_ORIGINAL)"},
        {"bn_momentum_gamma", "0.5", vn + "train_partseg.py: MOMENTUM_DECCAY, every step_size epochs)"},
        {"bn_momentum_min", "0.01", vn + "train_partseg.py: momentum floor 0.01)"},
        {"epochs", "250", vn + "train_partseg.py: --epoch)"},
        {"batch_size", "16", vn + "train_partseg.py: --batch_size)"},
        {"drop_last", "false", vn + "train_partseg.py: DataLoader's default)"},
        {"points", "2048", vn + "train_partseg.py: --npoint)"},
        {"sampling", "random", vn + "ShapeNetDataLoader: a random choice, there with replacement)"},
        {"point_dropout", "0", vn + "train_partseg.py: no point dropout)"},
        {"random_scale", "true", vn + "provider.py: random_scale_point_cloud)"},
        {"random_shift", "true", vn + "provider.py: shift_point_cloud)"},
        {"label_smoothing", "0.2", vn + "vn_dgcnn_partseg.py: get_loss, eps 0.2)"},
        {"label_smoothing_over", "others", vn + "vn_dgcnn_partseg.py: eps / (n_class - 1))"},
        {"up_axis", "2", vn + "train_partseg.py: pytorch3d RotateAxisAngle(axis=\"Z\"))"}}});

  const std::string mh = "the reference code (Devin-Taylor/multi-head-co-attention ";
  r.push_back(
      {"mhca-code",
       {"mhca train", "mhca cv"},
       {},
       "the MHCA authors' code: Adam 3e-5 with weight decay 5e-3, constant lr, batch 16, early stop after 20 "
       "epochs, augmentation once: 10% more samples",
       "MHCA authors' code, github.com/Devin-Taylor/multi-head-co-attention: README command, train_ppmi.py, "
       "utils/dataloader.py; MultiAug (Devin-Taylor/MultiAug) meta.py, rotate.py, gaussian_perturbation.py",
       {{"optimizer", "adam", mh + "train_ppmi.py: optim.Adam)"},
        {"lr", "0.00003", mh + "README: --learning_rate 0.00003)"},
        {"weight_decay", "0.005", mh + "train_ppmi.py: weight_decay=5e-3)"},
        {"schedule", "constant", mh + "train_ppmi.py: CosineAnnealingLR built, scheduler.step() commented out)"},
        {"epochs", "200", mh + "README: --epoch 200)"},
        {"batch_size", "16", mh + "README: --batch_size 16)"},
        {"drop_last", "false", mh + "train_ppmi.py: DataLoader's default)"},
        {"patience", "20", mh + "README: --early_stop_epochs 20)"},
        {"select_metric", "loss", mh + "train_ppmi.py: the lowest loss is kept)"},
        {"augment", "0.1", mh + "README: --augment --aug_frac 0.1)"},
        {"augment_mode", "enlarge", mh + "dataloader.py: MultiAug OneOf applied once to the training set)"},
        {"augment_degrees", "5", mh + "dataloader.py: Rotate3d(angle=max_angle=5))"},
        {"augment_noise", "0.05", mh + "dataloader.py: GaussianPerturbation(fraction=0.05))"},
        {"runs", "3", mh + "README: --runs 3)"},
        {"folds", "5", mh + "train_ppmi.py: 5-fold support only)"}}});

  r.push_back({"mhca-paper",
               {"mhca train", "mhca cv"},
               {},
               "the MHCA paper: Adam 3e-5, batch 16, 200 epochs, 10% augmentation, 3 runs of 5-fold CV",
               "MHCA paper, Sec. 4 'Experiments and Results' and its footnote 3 (MultiAug)",
               {{"optimizer", "adam", "the paper (Sec. 4)"},
                {"lr", "0.00003", "the paper (Sec. 4)"},
                {"batch_size", "16", "the paper (Sec. 4)"},
                {"epochs", "200", "the paper (Sec. 4)"},
                {"patience", "0", "the paper (Sec. 4: 200 epochs, no early stopping named)"},
                {"augment", "0.1", "the paper (Sec. 4: 10 % data augmentation)"},
                {"augment_mode", "enlarge", "the paper (footnote 3: MultiAug, which enlarges the set once)"},
                {"augment_degrees", "5", mh + "dataloader.py; the paper gives no angle)"},
                {"augment_noise", "0.05", mh + "dataloader.py; the paper gives no noise level)"},
                {"runs", "3", "the paper (Table 1: 3 runs of 5-fold CV)"},
                {"folds", "5", "the paper (Table 1)"},
                {"schedule", "constant", "our choice (the paper names no schedule)"},
                {"weight_decay", "0", "our choice (the paper names none; Adam's default)"},
                {"select_metric", "loss", "our choice (the paper does not say how a fold's model is picked)"}}});
  return r;
}

}  // namespace

const std::vector<Recipe>& recipes() {
  static const std::vector<Recipe> table = make_recipes();
  return table;
}

std::vector<const Recipe*> recipes_for(const std::string& command) {
  std::vector<const Recipe*> out;
  for (const auto& r : recipes())
    for (const auto& c : r.commands)
      if (c == command) out.push_back(&r);
  return out;
}

const Recipe& find_recipe(const std::string& command, const std::string& name) {
  std::vector<std::string> known;
  for (const auto* r : recipes_for(command)) {
    if (r->name == name) return *r;
    known.push_back(r->name);
  }
  throw ConfigError("recipe", name + ": '" + command + "' knows " + (known.empty() ? "no recipes" : join(known)));
}

nlohmann::json apply_recipe(const Recipe& recipe, const RecipeTarget& target) {
  nlohmann::json set = nlohmann::json::object(), kept = nlohmann::json::array();
  const auto apply = [&](const std::string& key, const std::string& value, const std::string& source) {
    if (target.given(key))
      kept.push_back(key);
    else if (target.set(key, value))
      set[key] = {{"value", value}, {"source", source}};
  };
  if (!recipe.models.empty()) apply("model", recipe.models.front(), recipe.source);
  for (const auto& s : recipe.settings) apply(s.key, s.value, s.source);
  return {{"name", recipe.name}, {"source", recipe.source}, {"set", set}, {"kept_from_command_line", kept}};
}

void check_recipe_models(const Recipe& recipe, const std::vector<std::string>& models) {
  if (recipe.models.empty()) return;
  for (const auto& m : models)
    if (std::find(recipe.models.begin(), recipe.models.end(), m) == recipe.models.end())
      throw ConfigError("recipe", recipe.name + " is for {model} " + join(recipe.models) + ", not " + m);
}

}  // namespace qkv::tasks

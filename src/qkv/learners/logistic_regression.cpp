#include "qkv/learners/logistic_regression.h"

#include <cmath>
#include <string>

#include "qkv/core/errors.h"
#include "qkv/data/folds.h"

namespace qkv::medical {
namespace {

// Solves a x = b for a symmetric positive definite `a` [n, n] (Cholesky);
// false if a pivot is not positive.
bool solve_spd(std::vector<double> a, std::vector<double>& b, int64_t n) {
  for (int64_t j = 0; j < n; ++j) {
    double d = a[j * n + j];
    for (int64_t k = 0; k < j; ++k) d -= a[j * n + k] * a[j * n + k];
    if (!(d > 0)) return false;
    const double l = std::sqrt(d);
    a[j * n + j] = l;
    for (int64_t i = j + 1; i < n; ++i) {
      double s = a[i * n + j];
      for (int64_t k = 0; k < j; ++k) s -= a[i * n + k] * a[j * n + k];
      a[i * n + j] = s / l;
    }
  }
  for (int64_t i = 0; i < n; ++i) {
    double s = b[i];
    for (int64_t k = 0; k < i; ++k) s -= a[i * n + k] * b[k];
    b[i] = s / a[i * n + i];
  }
  for (int64_t i = n - 1; i >= 0; --i) {
    double s = b[i];
    for (int64_t k = i + 1; k < n; ++k) s -= a[k * n + i] * b[k];
    b[i] = s / a[i * n + i];
  }
  return true;
}

double sigmoid(double z) { return 1 / (1 + std::exp(-z)); }

}  // namespace

double LogisticModel::probability(const double* row) const {
  double z = bias;
  for (size_t c = 0; c < weights.size(); ++c) z += weights[c] * (row[c] - mean[c]) / scale[c];
  return sigmoid(z);
}

LogisticModel fit_logistic(const std::vector<double>& x, int64_t rows, int64_t cols, const std::vector<int64_t>& labels,
                           double ridge) {
  if (rows < 1 || cols < 0 || static_cast<int64_t>(x.size()) != rows * cols ||
      static_cast<int64_t>(labels.size()) != rows)
    throw UsageError("fit_logistic: " + std::to_string(rows) + " rows of " + std::to_string(cols) +
                     " columns do not match " + std::to_string(x.size()) + " values and " +
                     std::to_string(labels.size()) + " labels");
  LogisticModel m;
  m.mean.assign(cols, 0);
  m.scale.assign(cols, 1);
  for (int64_t c = 0; c < cols; ++c) {
    double sum = 0, sum_sq = 0;
    for (int64_t r = 0; r < rows; ++r) sum += x[r * cols + c];
    m.mean[c] = sum / static_cast<double>(rows);
    for (int64_t r = 0; r < rows; ++r) sum_sq += (x[r * cols + c] - m.mean[c]) * (x[r * cols + c] - m.mean[c]);
    const double sd = std::sqrt(sum_sq / static_cast<double>(rows));
    m.scale[c] = sd > 1e-12 ? sd : 1;
  }
  // Parameters [bias, weights...]; the design's first column is 1.
  const int64_t p = cols + 1;
  std::vector<double> w(p, 0), z(p);
  for (int iteration = 0; iteration < 50; ++iteration) {
    std::vector<double> gradient(p, 0), hessian(p * p, 0);
    for (int64_t r = 0; r < rows; ++r) {
      z[0] = 1;
      for (int64_t c = 0; c < cols; ++c) z[c + 1] = (x[r * cols + c] - m.mean[c]) / m.scale[c];
      double eta = 0;
      for (int64_t i = 0; i < p; ++i) eta += w[i] * z[i];
      const double prob = sigmoid(eta), weight = prob * (1 - prob);
      const double residual = prob - static_cast<double>(labels[r]);
      for (int64_t i = 0; i < p; ++i) {
        gradient[i] += residual * z[i];
        for (int64_t j = 0; j <= i; ++j) hessian[i * p + j] += weight * z[i] * z[j];
      }
    }
    for (int64_t i = 0; i < p; ++i)
      for (int64_t j = i + 1; j < p; ++j) hessian[i * p + j] = hessian[j * p + i];
    for (int64_t i = 1; i < p; ++i) {
      gradient[i] += ridge * w[i];
      hessian[i * p + i] += ridge;
    }
    hessian[0] += 1e-9;
    if (!solve_spd(hessian, gradient, p)) break;
    double step = 0;
    for (int64_t i = 0; i < p; ++i) {
      w[i] -= gradient[i];
      step = std::max(step, std::abs(gradient[i]));
    }
    if (step < 1e-10) break;
  }
  m.bias = w[0];
  m.weights.assign(w.begin() + 1, w.end());
  return m;
}

double cross_validated_logistic_accuracy(const std::vector<double>& x, int64_t rows, int64_t cols,
                                         const std::vector<int64_t>& labels, int64_t folds, int64_t runs, uint64_t seed,
                                         double ridge) {
  int64_t right = 0, total = 0;
  for (int64_t run = 0; run < runs; ++run) {
    const auto test_folds = data::stratified_kfold(labels, folds, seed + static_cast<uint64_t>(run));
    for (const auto& test : test_folds) {
      std::vector<char> held(rows, 0);
      for (auto r : test) held[r] = 1;
      std::vector<double> train_x;
      std::vector<int64_t> train_y;
      for (int64_t r = 0; r < rows; ++r) {
        if (held[r]) continue;
        train_x.insert(train_x.end(), x.begin() + r * cols, x.begin() + (r + 1) * cols);
        train_y.push_back(labels[r]);
      }
      const auto model = fit_logistic(train_x, static_cast<int64_t>(train_y.size()), cols, train_y, ridge);
      for (auto r : test) {
        const int64_t predicted = model.probability(x.data() + r * cols) >= 0.5 ? 1 : 0;
        right += predicted == labels[r] ? 1 : 0;
        ++total;
      }
    }
  }
  return total > 0 ? static_cast<double>(right) / static_cast<double>(total) : 0;
}

}  // namespace qkv::medical

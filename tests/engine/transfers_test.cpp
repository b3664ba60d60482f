// What crosses between the host and the device in training: each step uploads its batch (images
// and labels) and downloads its figures (loss, correct count and update gate, one download), and
// nothing else; no op of any layer, loss or optimizer goes through the host. On every backend
// present, through a Backend that counts the transfers of the one it wraps.
#include <gtest/gtest.h>

#include <memory>
#include <set>

#include "engine/backend_registry.h"
#include "engine/error.h"
#include "engine/graph.h"
#include "engine/layer_registry.h"
#include "engine/rng.h"
#include "engine/trainer.h"
#include "tests/cpu/backend_test_util.h"

namespace tandem {
namespace {

struct Counts {
  int uploads = 0, downloads = 0, synchronizes = 0, nonfinite_counts = 0, gradient_norms = 0;
  int uploads_ahead = 0;
};

// Every op goes to `inner`; the transfers and waits are counted on the way.
class CountingBackend : public Backend {
 public:
  explicit CountingBackend(Backend& inner) : in_(inner) {}
  Counts counts;

  std::string name() const override { return in_.name(); }
  InfoRows info() const override { return in_.info(); }
  std::shared_ptr<void> allocate(size_t bytes) override { return in_.allocate(bytes); }
  std::shared_ptr<void> allocate_host(size_t bytes) override { return in_.allocate_host(bytes); }
  void upload(Tensor& dst, const void* host) override {
    ++counts.uploads;
    in_.upload(dst, host);
  }
  void upload_ahead(Tensor& dst, const void* host) override {
    ++counts.uploads;
    ++counts.uploads_ahead;
    queued_.insert(host);
    in_.upload_ahead(dst, host);
  }
  void take_uploads() override {
    taken_.insert(queued_.begin(), queued_.end());
    queued_.clear();
    in_.take_uploads();
  }
  void wait_taken_uploads() override {
    taken_.clear();
    in_.wait_taken_uploads();
  }
  // Whether an upload_ahead copy may still be reading `host` by the contract of backend.h: the
  // host has not waited for it (wait_taken_uploads after its take_uploads, a synchronize or a
  // download). On a GPU such a copy runs on a stream of its own, beside the ops.
  bool copy_may_read(const void* host) const {
    return queued_.count(host) != 0 || taken_.count(host) != 0;
  }
  void download(void* host, const Tensor& src) override {
    ++counts.downloads;
    queued_.clear();
    taken_.clear();
    in_.download(host, src);
  }
  void download_later(void* host, const Tensor& src) override {
    ++counts.downloads;
    in_.download_later(host, src);
  }
  void wait_downloads() override { in_.wait_downloads(); }
  void fill(Tensor& t, float value) override { in_.fill(t, value); }
  void copy(Tensor& dst, const Tensor& src) override { in_.copy(dst, src); }
  void synchronize() override {
    ++counts.synchronizes;
    queued_.clear();
    taken_.clear();
    in_.synchronize();
  }
  size_t peak_memory_bytes() const override { return in_.peak_memory_bytes(); }
  void reset_peak_memory() override { in_.reset_peak_memory(); }
  void gemm(Tensor& c, const Tensor& a, const Tensor& b, bool ta, bool tb, float alpha,
            float beta) override {
    in_.gemm(c, a, b, ta, tb, alpha, beta);
  }
  void bias_add(Tensor& y, const Tensor& b) override { in_.bias_add(y, b); }
  void bias_backward(Tensor& db, const Tensor& dy) override { in_.bias_backward(db, dy); }
  void add(Tensor& y, const Tensor& a, const Tensor& b) override { in_.add(y, a, b); }
  void multiply(Tensor& y, const Tensor& a, const Tensor& b) override { in_.multiply(y, a, b); }
  void multiply_backward(Tensor* da, Tensor* db, const Tensor& dy, const Tensor& a,
                         const Tensor& b) override {
    in_.multiply_backward(da, db, dy, a, b);
  }
  void scale_by(Tensor& t, const Tensor& f) override { in_.scale_by(t, f); }
  void copy_columns(Tensor& dst, int64_t dst_col, const Tensor& src, int64_t src_col,
                    int64_t cols) override {
    in_.copy_columns(dst, dst_col, src, src_col, cols);
  }
  void conv2d_forward(Tensor& y, const Tensor& x, const Tensor& w, const Tensor* b,
                      const Conv2dParams& p) override {
    in_.conv2d_forward(y, x, w, b, p);
  }
  void conv2d_backward_data(Tensor& dx, const Tensor& dy, const Tensor& w,
                            const Conv2dParams& p) override {
    in_.conv2d_backward_data(dx, dy, w, p);
  }
  void conv2d_backward_filter(Tensor& dw, const Tensor& dy, const Tensor& x,
                              const Conv2dParams& p) override {
    in_.conv2d_backward_filter(dw, dy, x, p);
  }
  void pool2d_forward(Tensor& y, const Tensor& x, const Pool2dParams& p) override {
    in_.pool2d_forward(y, x, p);
  }
  void pool2d_backward(Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                       const Pool2dParams& p) override {
    in_.pool2d_backward(dx, dy, x, y, p);
  }
  void activation_forward(Tensor& y, const Tensor& x, Activation a, float alpha) override {
    in_.activation_forward(y, x, a, alpha);
  }
  void activation_backward(Tensor& dx, const Tensor& dy, const Tensor& x, const Tensor& y,
                           Activation a, float alpha) override {
    in_.activation_backward(dx, dy, x, y, a, alpha);
  }
  void softmax_cross_entropy_forward(Tensor& loss, Tensor& probs, const Tensor& logits,
                                     const Tensor& labels, float smoothing) override {
    in_.softmax_cross_entropy_forward(loss, probs, logits, labels, smoothing);
  }
  void softmax_cross_entropy_backward(Tensor& dlogits, const Tensor& probs, const Tensor& labels,
                                      float smoothing) override {
    in_.softmax_cross_entropy_backward(dlogits, probs, labels, smoothing);
  }
  void mse_forward(Tensor& loss, const Tensor& pred, const Tensor& labels) override {
    in_.mse_forward(loss, pred, labels);
  }
  void mse_backward(Tensor& dpred, const Tensor& pred, const Tensor& labels) override {
    in_.mse_backward(dpred, pred, labels);
  }
  void accuracy(Tensor& correct, const Tensor& scores, const Tensor& labels) override {
    in_.accuracy(correct, scores, labels);
  }
  void dropout_forward(Tensor& y, Tensor& mask, const Tensor& x, float p, uint64_t seed,
                       uint64_t offset) override {
    in_.dropout_forward(y, mask, x, p, seed, offset);
  }
  void dropout_backward(Tensor& dx, const Tensor& dy, const Tensor& mask) override {
    in_.dropout_backward(dx, dy, mask);
  }
  void batchnorm_forward_training(Tensor& y, Tensor& save_mean, Tensor& save_inv_std,
                                  Tensor& running_mean, Tensor& running_var, const Tensor& x,
                                  const Tensor& gamma, const Tensor& beta, float momentum,
                                  float eps) override {
    in_.batchnorm_forward_training(y, save_mean, save_inv_std, running_mean, running_var, x, gamma,
                                   beta, momentum, eps);
  }
  void batchnorm_forward_inference(Tensor& y, const Tensor& x, const Tensor& gamma,
                                   const Tensor& beta, const Tensor& running_mean,
                                   const Tensor& running_var, float eps) override {
    in_.batchnorm_forward_inference(y, x, gamma, beta, running_mean, running_var, eps);
  }
  void batchnorm_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                          const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                          const Tensor& save_inv_std) override {
    in_.batchnorm_backward(dx, dgamma, dbeta, dy, x, gamma, save_mean, save_inv_std);
  }
  void groupnorm_forward(Tensor& y, Tensor& save_mean, Tensor& save_inv_std, const Tensor& x,
                         const Tensor& gamma, const Tensor& beta, int groups, float eps) override {
    in_.groupnorm_forward(y, save_mean, save_inv_std, x, gamma, beta, groups, eps);
  }
  void groupnorm_backward(Tensor* dx, Tensor& dgamma, Tensor& dbeta, const Tensor& dy,
                          const Tensor& x, const Tensor& gamma, const Tensor& save_mean,
                          const Tensor& save_inv_std, int groups) override {
    in_.groupnorm_backward(dx, dgamma, dbeta, dy, x, gamma, save_mean, save_inv_std, groups);
  }
  void sgd_update(Tensor& w, Tensor& velocity, const Tensor& grad, const SgdParams& p) override {
    in_.sgd_update(w, velocity, grad, p);
  }
  void adam_update(Tensor& w, Tensor& m, Tensor& v, const Tensor& grad,
                   const AdamParams& p) override {
    in_.adam_update(w, m, v, grad, p);
  }
  void gradient_norm(Tensor& norm, const Tensor& grads) override {
    ++counts.gradient_norms;
    in_.gradient_norm(norm, grads);
  }
  void update_gate(Tensor& gate, const Tensor& loss, const Tensor* grad_norm,
                   const GateParams& p) override {
    in_.update_gate(gate, loss, grad_norm, p);
  }
  int64_t count_nonfinite(const Tensor& t) override {
    ++counts.nonfinite_counts;
    return in_.count_nonfinite(t);
  }
  int64_t count_nonfinite(const std::vector<const Tensor*>& ts) override {
    ++counts.nonfinite_counts;
    return in_.count_nonfinite(ts);
  }

 private:
  Backend& in_;
  std::set<const void*> queued_, taken_;  // upload_ahead's host memory, not yet waited for
};

// `batches` batches of 8 samples of `sample` floats, fixed by the batch's index. With a guard, it
// counts the refills of host memory that an upload of the guard may still be reading.
class FixedSource : public BatchSource {
 public:
  FixedSource(int64_t sample, int64_t batches, int classes, const CountingBackend* guard = nullptr)
      : sample_(sample), batches_(batches), classes_(classes), guard_(guard) {}
  mutable int refills_under_copy = 0;
  int64_t size() const override { return 8 * batches_; }
  int64_t batches_per_epoch() const override { return batches_; }
  void start_epoch(int64_t) override {}
  int64_t fill(int64_t b, float* images, int32_t* labels) const override {
    if (guard_ && (guard_->copy_may_read(images) || guard_->copy_may_read(labels)))
      ++refills_under_copy;
    const auto batch = static_cast<uint64_t>(b);
    for (int64_t i = 0; i < 8 * sample_; ++i)
      images[i] = static_cast<float>(philox_normal(5, batch, static_cast<uint64_t>(i)));
    for (int64_t i = 0; i < 8; ++i)
      labels[i] =
          static_cast<int32_t>(philox_uniform(6, batch, static_cast<uint64_t>(i)) * classes_);
    return 8;
  }

 private:
  int64_t sample_, batches_;
  int classes_;
  const CountingBackend* guard_;
};

// Every kind of layer that has a backward, two of them with parameters of their own state
// (batchnorm's running statistics), dropout's masks and Adam's moments.
const char* kModel = R"(
input: {shape: [2, 8, 8]}
layers:
  - conv2d: {filters: 4, kernel: 3, padding: 1}
  - batchnorm
  - relu
  - maxpool: {kernel: 2}
  - conv2d: {filters: 4, kernel: 3, padding: 1}
  - tanh
  - avgpool: {kernel: 2}
  - flatten
  - dense: {units: 16}
  - dropout: {rate: 0.25}
  - sigmoid
  - dense: {units: 5}
loss: softmax_cross_entropy
train: {epochs: 2, batch_size: 8, optimizer: {type: adam, lr: 0.001}, seed: 3}
)";

using Transfers = testing::BackendTest;

// What `train` transfers in 2 epochs of `batches` steps, after the graph's own set-up.
Counts counts_of_training(Backend& backend, int64_t batches) {
  Config config = parse_config(kModel, "transfers.yaml");
  CountingBackend counted(backend);
  Graph graph(config);
  std::unique_ptr<Loss> loss = make_loss(config.loss);
  graph.allocate(counted, config.train.batch_size, config.train.seed);
  counted.counts = {};
  FixedSource data(graph.input_shape().numel(), batches, static_cast<int>(graph.classes()));
  TrainOptions options;
  options.progress = false;
  TrainResult r = train(config, graph, *loss, counted, data, nullptr, options);
  EXPECT_EQ(r.step_losses.size(), static_cast<size_t>(2 * batches));
  return counted.counts;
}

TEST_P(Transfers, EachStepUploadsItsBatchAndDownloadsItsMetricsOnly) {
  // The steps' own transfers: what 6 more steps an epoch (12 in all) add.
  const Counts few = counts_of_training(be(), 6), more = counts_of_training(be(), 12);
  EXPECT_EQ(more.uploads - few.uploads, 2 * 12);  // each step's images and labels
  // Each step's loss, correct count and update gate, at once.
  EXPECT_EQ(more.downloads - few.downloads, 12);
  EXPECT_EQ(more.synchronizes, few.synchronizes);
  EXPECT_EQ(more.nonfinite_counts, few.nonfinite_counts);  // on_nan: stop reads only the loss
  EXPECT_EQ(more.gradient_norms, 0);  // ... and its update gate needs no pass over the gradients
  // Each epoch's own: a wait at its end, and one check that every weight is finite.
  EXPECT_EQ(few.uploads, 2 * 2 * 6);
  EXPECT_EQ(few.downloads, 2 * 6);
  EXPECT_LE(few.synchronizes, 2 * 2);
  EXPECT_EQ(few.nonfinite_counts, 2);
}

// The batch after the current one is uploaded beside the current step from a host buffer of the
// batch queue; the queue refills a buffer once the trainer asks for a later batch. No buffer may
// be refilled while its upload may still read it (on a GPU: a copy stream beside the ops).
TEST_P(Transfers, ABatchBufferIsRefilledOnlyOnceItsUploadHasReadIt) {
  Config config = parse_config(kModel, "transfers.yaml");
  CountingBackend counted(be());
  Graph graph(config);
  std::unique_ptr<Loss> loss = make_loss(config.loss);
  graph.allocate(counted, config.train.batch_size, config.train.seed);
  FixedSource data(graph.input_shape().numel(), 6, static_cast<int>(graph.classes()), &counted);
  TrainOptions options;
  options.progress = false;
  options.data_workers = 0;  // one buffer, refilled as the trainer asks for the next batch
  train(config, graph, *loss, counted, data, nullptr, options);
  EXPECT_EQ(counted.counts.uploads_ahead, 2 * 2 * 5);  // images and labels, 5 of 6 steps, 2 epochs
  EXPECT_EQ(data.refills_under_copy, 0);
}

INSTANTIATE_TEST_SUITE_P(Backends, Transfers, ::testing::Values("cpu", "gpu"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace tandem

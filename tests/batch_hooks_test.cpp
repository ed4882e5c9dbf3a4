// Batch-level callback hooks (Keras's on_*_batch_*), on_test/predict_begin/end, fit's
// steps_per_epoch, validation_steps and validation_freq, and ModelCheckpoint's save_freq.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "crossover.h"
#include "test_util.h"

namespace crossover {
namespace {

using testing_util::Mnist10k;

// No dropout: two fits that make the same steps give the same weights.
Sequential tiny_model() {
  Sequential model({Flatten({28, 28}), Dense(16, "relu"), Dense(10, "softmax")});
  model.compile(Adam(), "sparse_categorical_crossentropy", {"accuracy"}, {.threads = 1, .seed = 3});
  return model;
}

// Writes down every hook call as "name:batch" and keeps each batch's logs.
struct Recorder : Callback {
  bool batches = true;
  std::vector<std::string> calls;
  std::vector<Logs> train_logs, test_logs, epoch_logs, test_end_logs;
  std::vector<std::vector<float>> predicted;
  bool wants_batches(BatchPhase) const override { return batches; }
  void on_train_begin(Sequential&) override { calls.push_back("train_begin"); }
  void on_epoch_begin(Sequential&, int e) override { calls.push_back(fmt("epoch_begin", e)); }
  void on_epoch_end(Sequential&, int e, const Logs& logs) override {
    calls.push_back(fmt("epoch_end", e));
    epoch_logs.push_back(logs);
  }
  void on_train_batch_begin(Sequential&, int64_t b) override {
    calls.push_back(fmt("tb_begin", b));
  }
  void on_train_batch_end(Sequential&, int64_t b, const Logs& logs) override {
    calls.push_back(fmt("tb_end", b));
    train_logs.push_back(logs);
  }
  void on_test_begin(Sequential&) override { calls.push_back("test_begin"); }
  void on_test_end(Sequential&, const Logs& logs) override {
    calls.push_back("test_end");
    test_end_logs.push_back(logs);
  }
  void on_test_batch_begin(Sequential&, int64_t b) override { calls.push_back(fmt("vb_begin", b)); }
  void on_test_batch_end(Sequential&, int64_t b, const Logs& logs) override {
    calls.push_back(fmt("vb_end", b));
    test_logs.push_back(logs);
  }
  void on_predict_begin(Sequential&) override { calls.push_back("predict_begin"); }
  void on_predict_end(Sequential&) override { calls.push_back("predict_end"); }
  void on_predict_batch_begin(Sequential&, int64_t b) override {
    calls.push_back(fmt("pb_begin", b));
  }
  void on_predict_batch_end(Sequential&, int64_t b, const Tensor& out) override {
    calls.push_back(fmt("pb_end", b));
    predicted.emplace_back(out.values().begin(), out.values().end());
  }
  void on_train_end(Sequential&) override { calls.push_back("train_end"); }
  static std::string fmt(const char* name, int64_t i) {
    return std::string(name) + ":" + std::to_string(i);
  }
  int64_t count(const std::string& prefix) const {
    int64_t n = 0;
    for (const std::string& c : calls) n += c.starts_with(prefix) ? 1 : 0;
    return n;
  }
};

TEST(BatchHooks, FitCallsEachTrainBatchHookOnceAndTheLastLogsAreTheEpochs) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = tiny_model();
  auto rec = std::make_shared<Recorder>();
  // 100 training rows in batches of 32: 4 steps; 20 validation rows: 1 test batch.
  const Tensor vx = d.x_test.rows(0, 20), vy = d.y_test.rows(0, 20);
  History h = model.fit(d.x_train.rows(0, 100), d.y_train.rows(0, 100),
                        {.epochs = 2,
                         .batch_size = 32,
                         .validation_x = &vx,
                         .validation_y = &vy,
                         .verbose = 0,
                         .callbacks = {rec}});
  const std::vector<std::string> epoch0 = {
      "epoch_begin:0", "tb_begin:0", "tb_end:0",   "tb_begin:1", "tb_end:1",
      "tb_begin:2",    "tb_end:2",   "tb_begin:3", "tb_end:3",   "test_begin",
      "vb_begin:0",    "vb_end:0",   "test_end",   "epoch_end:0"};
  ASSERT_EQ(rec->calls.size(), 2 + 2 * epoch0.size());
  EXPECT_EQ(std::vector<std::string>(rec->calls.begin() + 1, rec->calls.begin() + 15), epoch0);
  EXPECT_EQ(rec->calls.back(), "train_end");
  ASSERT_EQ(rec->train_logs.size(), 8u);
  for (int e = 0; e < 2; ++e) {
    // The running means after an epoch's last batch are the epoch's loss and accuracy.
    const Logs& last = rec->train_logs[static_cast<std::size_t>(4 * e + 3)];
    EXPECT_DOUBLE_EQ(last.at("loss"), h.history.at("loss")[static_cast<std::size_t>(e)]);
    EXPECT_DOUBLE_EQ(last.at("accuracy"), h.history.at("accuracy")[static_cast<std::size_t>(e)]);
    EXPECT_EQ(last.size(), 2u);  // loss and accuracy only, as Keras's batch logs
    // The validation's only batch and its end give the epoch's val_ numbers.
    EXPECT_DOUBLE_EQ(rec->test_logs[static_cast<std::size_t>(e)].at("loss"),
                     h.history.at("val_loss")[static_cast<std::size_t>(e)]);
    EXPECT_DOUBLE_EQ(rec->test_end_logs[static_cast<std::size_t>(e)].at("accuracy"),
                     h.history.at("val_accuracy")[static_cast<std::size_t>(e)]);
  }
  // A running mean: the first batch's loss is not the epoch's.
  EXPECT_NE(rec->train_logs[0].at("loss"), rec->train_logs[3].at("loss"));
}

TEST(BatchHooks, ACallbackThatDoesNotAskForBatchesGetsOnlyTheLoopHooks) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = tiny_model();
  auto rec = std::make_shared<Recorder>();
  rec->batches = false;
  model.fit(d.x_train.rows(0, 100), d.y_train.rows(0, 100),
            {.epochs = 1, .verbose = 0, .callbacks = {rec}});
  model.evaluate(d.x_test.rows(0, 50), d.y_test.rows(0, 50), {.verbose = 0, .callbacks = {rec}});
  model.predict(d.x_test.rows(0, 50), 32, {rec});
  EXPECT_EQ(rec->calls,
            (std::vector<std::string>{"train_begin", "epoch_begin:0", "epoch_end:0", "train_end",
                                      "test_begin", "test_end", "predict_begin", "predict_end"}));
}

TEST(BatchHooks, BatchesAreTrainedTheSameWithAndWithoutHooks) {
  const Mnist10k& d = Mnist10k::get();
  const Tensor x = d.x_train.rows(0, 200), y = d.y_train.rows(0, 200);
  Sequential plain = tiny_model(), hooked = tiny_model();
  History a = plain.fit(x, y, {.epochs = 2, .verbose = 0});
  History b =
      hooked.fit(x, y, {.epochs = 2, .verbose = 0, .callbacks = {std::make_shared<Recorder>()}});
  EXPECT_EQ(a.history.at("loss"), b.history.at("loss"));
  EXPECT_EQ(plain.get_weights()[0].value.values()[5], hooked.get_weights()[0].value.values()[5]);
}

TEST(BatchHooks, EvaluateAndPredictCallTheirHooksWithTheirBatches) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = tiny_model();
  const Tensor x = d.x_test.rows(0, 70), y = d.y_test.rows(0, 70);
  auto rec = std::make_shared<Recorder>();
  const EvaluateResult r =
      model.evaluate(x, y, {.batch_size = 32, .verbose = 0, .callbacks = {rec}});
  EXPECT_EQ(rec->calls,
            (std::vector<std::string>{"test_begin", "vb_begin:0", "vb_end:0", "vb_begin:1",
                                      "vb_end:1", "vb_begin:2", "vb_end:2", "test_end"}));
  EXPECT_DOUBLE_EQ(rec->test_logs.back().at("loss"), r.loss);
  EXPECT_DOUBLE_EQ(rec->test_end_logs.back().at("accuracy"), r.accuracy);

  rec->calls.clear();
  const Tensor p = model.predict(x, 32, {rec});
  EXPECT_EQ(rec->count("pb_begin"), 3);
  EXPECT_EQ(rec->count("pb_end"), 3);
  ASSERT_EQ(rec->predicted.size(), 3u);
  EXPECT_EQ(rec->predicted[2].size(), 6u * 10u);  // the last batch's 6 rows
  const auto values = p.values();
  EXPECT_EQ(std::vector<float>(values.begin() + 64 * 10, values.end()), rec->predicted[2]);
}

TEST(BatchHooks, StopTrainingInABatchHookEndsTheEpochAfterThatBatch) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = tiny_model();
  struct StopAtTwo : Callback {
    bool wants_batches(BatchPhase) const override { return true; }
    void on_train_batch_end(Sequential& m, int64_t batch, const Logs&) override {
      if (batch == 2) m.stop_training();
    }
  };
  History h = model.fit(d.x_train.rows(0, 320), d.y_train.rows(0, 320),
                        {.epochs = 3, .verbose = 0, .callbacks = {std::make_shared<StopAtTwo>()}});
  ASSERT_EQ(h.epochs.size(), 1u);
  EXPECT_EQ(h.epochs[0].steps, 3);
  EXPECT_TRUE(h.stopped_early);
}

TEST(StepsPerEpoch, EpochsContinueThePassAndEndWhereItRunsOut) {
  const Mnist10k& d = Mnist10k::get();
  const Tensor x = d.x_train.rows(0, 320), y = d.y_train.rows(0, 320);  // 10 batches of 32
  Sequential split = tiny_model(), whole = tiny_model();
  // Keras's EpochIterator: 4, 4, then the 2 left of the pass (with its warning), then a new pass.
  History h = split.fit(x, y, {.epochs = 4, .verbose = 0, .steps_per_epoch = 4});
  ASSERT_EQ(h.epochs.size(), 4u);
  EXPECT_EQ(h.epochs[0].steps, 4);
  EXPECT_EQ(h.epochs[1].steps, 4);
  EXPECT_EQ(h.epochs[2].steps, 2);
  EXPECT_EQ(h.epochs[3].steps, 4);
  // Three epochs of 4, 4 and 2 steps are one pass, in the order one whole epoch takes: the same
  // weights.
  History w = whole.fit(x, y, {.epochs = 1, .verbose = 0});
  Sequential three = tiny_model();
  three.fit(x, y, {.epochs = 3, .verbose = 0, .steps_per_epoch = 4});
  EXPECT_EQ(three.get_weights()[0].value.values()[7], whole.get_weights()[0].value.values()[7]);
  EXPECT_EQ(three.get_weights()[2].value.values()[3], whole.get_weights()[2].value.values()[3]);
  EXPECT_EQ(three.optimizer_steps(), 10);
}

TEST(StepsPerEpoch, MoreStepsThanAPassRunOnePassPerEpoch) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = tiny_model();
  History h = model.fit(d.x_train.rows(0, 100), d.y_train.rows(0, 100),
                        {.epochs = 2, .verbose = 0, .steps_per_epoch = 9});
  EXPECT_EQ(h.epochs[0].steps, 4);
  EXPECT_EQ(h.epochs[1].steps, 4);
  EXPECT_THROW(model.fit(d.x_train.rows(0, 100), d.y_train.rows(0, 100),
                         {.epochs = 1, .verbose = 0, .steps_per_epoch = 0}),
               Error);
}

TEST(Validation, FreqValidatesEveryNthEpochAndStepsLimitTheBatches) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = tiny_model();
  auto rec = std::make_shared<Recorder>();
  const Tensor vx = d.x_test.rows(0, 100), vy = d.y_test.rows(0, 100);
  History h = model.fit(d.x_train.rows(0, 64), d.y_train.rows(0, 64),
                        {.epochs = 4,
                         .validation_x = &vx,
                         .validation_y = &vy,
                         .verbose = 0,
                         .validation_steps = 2,
                         .validation_freq = 2,
                         .callbacks = {rec}});
  EXPECT_EQ(h.history.at("val_loss").size(), 2u);  // after epochs 2 and 4
  EXPECT_FALSE(h.epochs[0].val_loss.has_value());
  EXPECT_TRUE(h.epochs[1].val_loss.has_value());
  EXPECT_EQ(rec->count("test_begin"), 2);
  EXPECT_EQ(rec->count("vb_end"), 4);  // two batches each time
  // The first two batches of the validation data: what evaluate gives on their 64 rows.
  Sequential copy = tiny_model();
  copy.set_weights(model.get_weights());
  const EvaluateResult r =
      copy.evaluate(vx.rows(0, 64), vy.rows(0, 64), {.batch_size = 32, .verbose = 0});
  EXPECT_DOUBLE_EQ(h.history.at("val_loss").back(), r.loss);
  EXPECT_THROW(model.fit(d.x_train.rows(0, 64), d.y_train.rows(0, 64),
                         {.epochs = 1, .verbose = 0, .validation_freq = 0}),
               Error);
}

TEST(ModelCheckpointSaveFreq, SavesEveryNBatchesCountedAcrossEpochsAsKeras) {
  const Mnist10k& d = Mnist10k::get();
  Sequential model = tiny_model();
  std::vector<std::string> saved;
  model.fit(d.x_train.rows(0, 320), d.y_train.rows(0, 320),  // 10 batches an epoch
            {.epochs = 2,
             .verbose = 0,
             .callbacks = {ModelCheckpoint(
                 "m{epoch}-{batch:02d}.x",
                 {.save_freq = 4, .save = [&](const Sequential&, const std::string& path) {
                    saved.push_back(path);
                  }})}});
  // Keras's _should_save_on_batch: 4 and 8 in the first epoch, then 2 left over + 2, 6, 10.
  EXPECT_EQ(saved,
            (std::vector<std::string>{"m1-04.x", "m1-08.x", "m2-02.x", "m2-06.x", "m2-10.x"}));
}

TEST(ModelCheckpointSaveFreq, TheBatchIsNamedFromOneUnlessTheLogsHaveOne) {
  const Logs logs{{"loss", 0.3}};
  EXPECT_EQ(checkpoint_path("w{epoch}-{batch}-{loss:.1f}.h5", 1, logs, 6), "w2-7-0.3.h5");
  EXPECT_EQ(checkpoint_path("w{batch:.0f}.h5", 0, {{"batch", 3.0}}, 6), "w3.h5");
  EXPECT_THROW(checkpoint_path("w{batch}.h5", 0, logs), Error);  // at an epoch's end: no batch
  EXPECT_THROW(ModelCheckpoint("x.h5", {.save_freq = -1}), Error);
}

}  // namespace
}  // namespace crossover
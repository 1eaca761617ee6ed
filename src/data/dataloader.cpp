// src/data/dataloader.cpp — DataLoader: epoch order, batching, and the prefetch thread.
//
// Note [Prefetch protocol]
// One worker thread per iteration, started by begin() at the loader's position. It owns
// a one-batch slot: it waits until the slot is empty, assembles the next batch, puts it
// in the slot, and waits again; so it works on batch k+1 exactly while the caller holds
// batch k. An exception is stored in place of the batch and re-thrown by the caller's
// take(). Stopping sets a flag and joins: the worker checks the flag before and after
// assembling a batch, so shutdown waits for at most one get_batch call.
#include "ember/data/dataloader.hpp"

#include <condition_variable>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <ostream>
#include <sstream>
#include <string>
#include <thread>

#include "data/xoshiro.hpp"
#include "ember/autograd.hpp"

namespace ember::data {

// ---- the epoch order ----

namespace {

// xoshiro256** seeded from (seed, epoch) through splitmix64.
class Xoshiro256 {
 public:
  Xoshiro256(uint64_t seed, uint64_t stream) {
    uint64_t sm = seed;
    uint64_t key = splitmix64(sm);
    sm = key ^ (stream * 0xD1B54A32D192ED03ull);
    for (uint64_t& word : s_) word = splitmix64(sm);
  }
  uint64_t below(uint64_t bound) { return xoshiro256_below(s_, bound); }

 private:
  uint64_t s_[4];
};

}  // namespace

std::vector<int64_t> shuffled_indices(int64_t n, uint64_t seed, int64_t epoch) {
  EMBER_CHECK(n >= 0, "shuffled_indices: n is ", n, " (expected >= 0)");
  EMBER_CHECK(epoch >= 0, "shuffled_indices: epoch is ", epoch, " (expected >= 0)");
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) order[i] = i;
  Xoshiro256 rng(seed, static_cast<uint64_t>(epoch));
  for (int64_t i = n - 1; i > 0; --i) {  // Fisher-Yates
    const auto j = static_cast<int64_t>(rng.below(static_cast<uint64_t>(i) + 1));
    std::swap(order[i], order[j]);
  }
  return order;
}

// ---- the prefetch worker (Note [Prefetch protocol]) ----

struct DataLoader::Prefetcher {
  std::thread thread;
  std::mutex mutex;
  std::condition_variable cv;
  bool stop = false;
  bool has_batch = false;
  Example slot;
  std::exception_ptr error;

  // Runs batches [first, last) of `order` through `make` into the slot.
  template <typename Make>
  void run(int64_t first, int64_t last, Make make) {
    NoGradGuard no_grad;  // grad mode is per thread; batches never record a graph
    for (int64_t k = first; k < last; ++k) {
      {
        std::unique_lock<std::mutex> lock(mutex);
        cv.wait(lock, [&] { return stop || !has_batch; });
        if (stop) return;
      }
      Example batch;
      try {
        batch = make(k);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        error = std::current_exception();
        cv.notify_all();
        return;
      }
      std::lock_guard<std::mutex> lock(mutex);
      if (stop) return;
      slot = std::move(batch);
      has_batch = true;
      cv.notify_all();
    }
  }

  // Waits for the next batch; re-throws the worker's exception.
  Example take() {
    std::unique_lock<std::mutex> lock(mutex);
    cv.wait(lock, [&] { return has_batch || error; });
    if (!has_batch) std::rethrow_exception(error);
    Example batch = std::move(slot);
    slot = Example();
    has_batch = false;
    cv.notify_all();
    return batch;
  }

  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    cv.notify_all();
    if (thread.joinable()) thread.join();
  }
};

// ---- the example workers (Note [Parallel examples] in dataloader.hpp) ----

struct DataLoader::Workers {
  std::vector<std::thread> threads;
  std::mutex mutex;
  std::condition_variable wake, finished;
  const std::function<void(int64_t)>* job = nullptr;
  int64_t count = 0, next = 0, done = 0;
  std::vector<std::exception_ptr> errors;
  bool stop = false;

  explicit Workers(int n) {
    threads.reserve(static_cast<size_t>(n));
    for (int t = 0; t < n; ++t) threads.emplace_back([this] { loop(); });
  }

  ~Workers() {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stop = true;
    }
    wake.notify_all();
    for (std::thread& t : threads) t.join();
  }

  void loop() {
    NoGradGuard no_grad;  // grad mode is per thread; examples never record a graph
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      wake.wait(lock, [&] { return stop || next < count; });
      if (stop) return;
      const int64_t i = next++;
      const std::function<void(int64_t)>& fn = *job;
      lock.unlock();
      std::exception_ptr error;
      try {
        fn(i);
      } catch (...) {
        error = std::current_exception();
      }
      lock.lock();
      errors[static_cast<size_t>(i)] = error;
      if (++done == count) finished.notify_all();
    }
  }

  // Runs fn(0) .. fn(n - 1) on the workers and waits for all of them; re-throws the error of
  // the lowest i that failed.
  void run(int64_t n, const std::function<void(int64_t)>& fn) {
    std::unique_lock<std::mutex> lock(mutex);
    job = &fn;
    errors.assign(static_cast<size_t>(n), nullptr);
    count = n;
    next = 0;
    done = 0;
    wake.notify_all();
    finished.wait(lock, [&] { return done == count; });
    count = next = done = 0;
    job = nullptr;
    for (const std::exception_ptr& e : errors)
      if (e) std::rethrow_exception(e);
  }
};

// Note [Examples copied into the batch]
// With workers, each example is copied into its row of the batch by the worker that made it,
// while its bytes are still in that core's cache, instead of being stacked afterwards on one
// thread. The batch tensors are allocated from the first example to arrive; an example whose
// tensors are not CPU-contiguous or differ from it in dtype, shape or which are defined
// abandons the copy, and collate() then stacks the kept examples, raising its usual errors.
// Both routes give the same values, so batches stay independent of the worker count.
namespace {

class BatchInPlace {
 public:
  explicit BatchInPlace(int64_t rows) : rows_(rows) {}

  // Copies example i into row i (from any worker thread).
  void put(int64_t i, const Example& e) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!usable_) return;
      if (!batch_.input.defined()) {
        usable_ = fits(e);
        if (usable_) allocate(e);
      } else {
        usable_ = matches(e);
      }
      if (!usable_) return;
    }
    copy_row(batch_.input, e.input, i);
    if (e.target.defined()) copy_row(batch_.target, e.target, i);
    for (size_t k = 0; k < e.extra_inputs.size(); ++k)
      copy_row(batch_.extra_inputs[k], e.extra_inputs[k], i);
  }

  bool usable() const { return usable_ && batch_.input.defined(); }
  Example take() { return std::move(batch_); }

 private:
  static bool plain(const Tensor& t) { return t.device().is_cpu() && t.is_contiguous(); }
  static bool fits(const Example& e) {
    if (!e.input.defined() || !plain(e.input)) return false;
    if (e.target.defined() && !plain(e.target)) return false;
    for (const Tensor& x : e.extra_inputs)
      if (!x.defined() || !plain(x)) return false;
    return true;
  }
  static bool same(const Tensor& row, const Tensor& batch) {
    if (!row.defined() || !plain(row) || row.dtype() != batch.dtype()) return false;
    if (row.dim() + 1 != batch.dim()) return false;
    for (int64_t d = 0; d < row.dim(); ++d)
      if (row.size(d) != batch.size(d + 1)) return false;
    return true;
  }
  bool matches(const Example& e) const {
    if (!same(e.input, batch_.input)) return false;
    if (e.target.defined() != batch_.target.defined()) return false;
    if (e.target.defined() && !same(e.target, batch_.target)) return false;
    if (e.extra_inputs.size() != batch_.extra_inputs.size()) return false;
    for (size_t k = 0; k < e.extra_inputs.size(); ++k)
      if (!same(e.extra_inputs[k], batch_.extra_inputs[k])) return false;
    return true;
  }
  Tensor rows_like(const Tensor& t) const {
    std::vector<int64_t> shape{rows_};
    for (int64_t d = 0; d < t.dim(); ++d) shape.push_back(t.size(d));
    return empty(shape, {.dtype = t.dtype(), .device = Device::cpu()});
  }
  void allocate(const Example& e) {
    batch_.input = rows_like(e.input);
    if (e.target.defined()) batch_.target = rows_like(e.target);
    for (const Tensor& x : e.extra_inputs) batch_.extra_inputs.push_back(rows_like(x));
  }
  static void copy_row(const Tensor& batch, const Tensor& row, int64_t i) {
    const size_t bytes = static_cast<size_t>(row.numel()) * element_size(row.dtype());
    std::memcpy(static_cast<char*>(batch.data_ptr()) + static_cast<size_t>(i) * bytes,
                row.data_ptr(), bytes);
  }

  int64_t rows_;
  std::mutex mutex_;
  bool usable_ = true;
  Example batch_;
};

}  // namespace

// ---- DataLoader ----

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options)
    : dataset_(std::move(dataset)), options_(options) {
  EMBER_CHECK(dataset_ != nullptr, "DataLoader: the dataset is null (expected a dataset)");
  EMBER_CHECK(options_.batch_size >= 1, "DataLoader: batch_size is ", options_.batch_size,
              " (expected >= 1)");
  EMBER_CHECK(options_.num_workers >= 0 && options_.num_workers <= 1024,
              "DataLoader: num_workers is ", options_.num_workers,
              " (expected 0 to 1024; 0 makes batches on one thread)");
}

DataLoader::~DataLoader() { stop_worker(); }

int64_t DataLoader::size() const { return dataset_->size(); }

int64_t DataLoader::num_batches() const {
  const int64_t n = dataset_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

void DataLoader::set_state(int64_t epoch, int64_t position) {
  EMBER_CHECK(epoch >= 0, "DataLoader::set_state: epoch is ", epoch, " (expected >= 0)");
  EMBER_CHECK(position >= 0 && position <= num_batches(), "DataLoader::set_state: position is ",
              position, " (expected 0 to ", num_batches(), ", the batches per epoch)");
  stop_worker();
  epoch_ = epoch;
  position_ = position;
}

DataLoaderState DataLoader::state() const {
  return {.epoch = epoch_,
          .position = position_,
          .size = dataset_->size(),
          .batch_size = options_.batch_size,
          .shuffle = options_.shuffle,
          .drop_last = options_.drop_last,
          .seed = options_.seed};
}

void DataLoader::check_state(const DataLoaderState& s) const {
  const DataLoaderState here = state();
  std::string diff;
  auto differs = [&](const char* what, const auto& saved, const auto& mine) {
    if (saved == mine) return;
    diff += detail::concat(diff.empty() ? "" : ", ", what, " (got ", saved,
                           " in the state, expected ", mine, " as this loader has)");
  };
  const auto flag = [](bool b) { return b ? "true" : "false"; };
  differs("dataset size", s.size, here.size);
  differs("batch_size", s.batch_size, here.batch_size);
  differs("shuffle", std::string(flag(s.shuffle)), std::string(flag(here.shuffle)));
  differs("drop_last", std::string(flag(s.drop_last)), std::string(flag(here.drop_last)));
  if (s.shuffle && here.shuffle)
    differs("seed", s.seed, here.seed);  // the order ignores it otherwise
  EMBER_CHECK(diff.empty(),
              "DataLoader::load_state: the state was taken from a loader with other options, so "
              "resuming would not give the same batches: ",
              diff, "; build the loader with the options it was saved with");
  EMBER_CHECK(s.epoch >= 0, "DataLoader::load_state: epoch is ", s.epoch, " (expected >= 0)");
  EMBER_CHECK(s.position >= 0 && s.position <= num_batches(),
              "DataLoader::load_state: position is ", s.position, " (expected 0 to ", num_batches(),
              ", the batches per epoch)");
}

void DataLoader::load_state(const DataLoaderState& s) {
  check_state(s);
  set_state(s.epoch, s.position);
}

std::vector<int64_t> DataLoader::batch_indices(int64_t epoch, int64_t batch) const {
  EMBER_CHECK(batch >= 0 && batch < num_batches(), "DataLoader::batch_indices: batch ", batch,
              " is out of range (expected 0 to ", num_batches() - 1, ")");
  const int64_t n = dataset_->size(), b = options_.batch_size;
  const int64_t first = batch * b, last = std::min(n, first + b);
  if (!options_.shuffle) {
    std::vector<int64_t> rows(static_cast<size_t>(last - first));
    for (int64_t i = first; i < last; ++i) rows[i - first] = i;
    return rows;
  }
  const std::vector<int64_t> order = shuffled_indices(n, options_.seed, epoch);
  return {order.begin() + first, order.begin() + last};
}

Example DataLoader::make_batch(const std::vector<int64_t>& order, int64_t batch,
                               std::optional<Device> device) const {
  const int64_t n = static_cast<int64_t>(order.size()), b = options_.batch_size;
  const int64_t first = batch * b, last = std::min(n, first + b);
  const std::span<const int64_t> rows(order.data() + first, static_cast<size_t>(last - first));
  Example out;
  if (workers_) {  // Note [Parallel examples]
    std::vector<Example> examples(rows.size());
    BatchInPlace in_place(static_cast<int64_t>(rows.size()));
    workers_->run(static_cast<int64_t>(rows.size()), [&](int64_t i) {
      Example e = dataset_->get(rows[i]);
      in_place.put(i, e);
      examples[static_cast<size_t>(i)] = std::move(e);
    });
    out = in_place.usable() ? in_place.take() : collate(std::move(examples));
  } else {
    out = dataset_->get_batch(rows);
  }
  if (device) {
    if (out.input.defined() && out.input.device() != *device) out.input = out.input.to(*device);
    if (out.target.defined() && out.target.device() != *device) out.target = out.target.to(*device);
  }
  return out;
}

void DataLoader::stop_worker() {
  if (worker_) {
    worker_->shutdown();
    worker_.reset();
  }
  active_ = false;
  current_ = Example();
}

// Starts iterating the current epoch at position_ (rolls over a finished epoch first).
void DataLoader::start_epoch(std::optional<Device> device) {
  stop_worker();
  target_ = device;
  if (position_ >= num_batches()) {
    ++epoch_;
    position_ = 0;
  }
  const int64_t n = dataset_->size();
  std::vector<int64_t> order;
  if (options_.shuffle) {
    order = shuffled_indices(n, options_.seed, epoch_);
  } else {
    order.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) order[i] = i;
  }
  order_ = std::make_shared<const std::vector<int64_t>>(std::move(order));
  active_ = true;
  dataset_->begin_epoch(epoch_);  // no batch is being made: the worker was stopped above
  if (options_.num_workers > 0 && !workers_)
    workers_ = std::make_shared<Workers>(options_.num_workers);
  if (options_.prefetch && position_ < num_batches()) {
    worker_ = std::make_unique<Prefetcher>();
    Prefetcher* w = worker_.get();
    // The worker holds its own references: the order and dataset outlive any loader change.
    auto order_ref = order_;
    auto make = [this, order_ref, device](int64_t k) { return make_batch(*order_ref, k, device); };
    w->thread = std::thread(
        [w, first = position_, last = num_batches(), make] { w->run(first, last, make); });
  }
}

// Hands out the batch at position_, or ends the epoch when none is left.
void DataLoader::advance() {
  if (position_ >= num_batches()) {
    stop_worker();
    ++epoch_;
    position_ = 0;
    return;
  }
  current_ = worker_ ? worker_->take() : make_batch(*order_, position_, target_);
  ++position_;
}

DataLoader::Iterator DataLoader::begin() { return start(options_.device); }
DataLoader::Iterator DataLoader::begin_on(Device device) { return start(device); }

DataLoader::Iterator DataLoader::start(std::optional<Device> device) {
  // An epoch that has no batches at all still counts as visited.
  if (num_batches() == 0) {
    stop_worker();
    ++epoch_;
    position_ = 0;
    return end();
  }
  start_epoch(device);
  advance();
  return Iterator(this);
}

Example& DataLoader::Iterator::operator*() const {
  EMBER_CHECK(loader_ && loader_->active_,
              "DataLoader::Iterator: dereferenced past the end or after "
              "the loader started a new iteration");
  return loader_->current_;
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  EMBER_CHECK(loader_ && loader_->active_,
              "DataLoader::Iterator: advanced past the end or after "
              "the loader started a new iteration");
  loader_->advance();
  if (!loader_->active_) loader_ = nullptr;
  return *this;
}

std::string DataLoader::to_string() const {
  const auto yes_no = [](bool b) { return b ? "True" : "False"; };
  std::ostringstream out;
  out << "DataLoader(size=" << size() << ", batch_size=" << options_.batch_size
      << ", batches=" << num_batches() << ", shuffle=" << yes_no(options_.shuffle);
  if (options_.shuffle) out << ", seed=" << options_.seed;
  out << ", drop_last=" << yes_no(options_.drop_last) << ", prefetch=" << yes_no(options_.prefetch);
  if (options_.num_workers > 0) out << ", num_workers=" << options_.num_workers;
  out << ", epoch=" << epoch_ << ", position=" << position_;
  if (options_.device) out << ", device=" << options_.device->str();
  out << ")";
  return out.str();
}

std::ostream& operator<<(std::ostream& os, const DataLoader& loader) {
  return os << loader.to_string();
}

}  // namespace ember::data

// tests/distributed_worker.cpp — the program tests/test_distributed.cpp starts under
// `mpirun -np 2`, and tests/test_distributed_tcp.cpp as two processes with EMBER_RANK,
// EMBER_WORLD_SIZE and EMBER_RENDEZVOUS_FILE (the tcp backend); argv[1] picks what every rank
// does:
//   collectives  all_reduce (sum/avg/max/min, several dtypes, a strided view), broadcast,
//                all_gather, reduce_scatter, the async all-reduce, a shape mismatch that
//                every rank must report
//   ddp          10 Adam steps of DistributedDataParallel (5 plain, 5 accumulated under
//                no_sync) against one process on the combined batches (rank 0 computes the
//                reference), small buckets; unused parameters; BatchNorm buffers per rank
//                and averaged
//   digest       every collective on pseudo-random data of each dtype and op; rank 0 prints
//                "digest <hex>" of all the results' bytes, for the same job run under
//                mpirun and over tcp to compare bit for bit
//   join         (tcp) init() with a 5 s timeout, nothing else: prints "joined <backend>", or
//                "init failed: <what>" and exits 5 (for rendezvous errors across processes)
//   sampler      the shards of DistributedShard are disjoint and cover the data
//   resume DIR   7 steps, rank 0 writes a checkpoint, every rank loads it into fresh objects
//                and runs 3 more: the weights equal 10 uninterrupted steps bit for bit
//   throw        rank 1 throws an uncaught ember::Error while rank 0 waits in a collective
//   kill         rank 1 dies of SIGKILL while rank 0 waits in a collective
//   hang         rank 1 sleeps while rank 0 waits in a collective with a 2 s timeout
//   nccl         (mpirun -np 1, a GPU, NCCL) every collective on CUDA tensors through a
//                one-rank NCCL communicator (CudaCollectives::nccl), values checked; DDP
//                with reduce_in_world_of_one (bucket all-reduces on the communication
//                stream) against the bare model
//   cuda_ddp     (mpirun -np 2, both ranks on cuda:0) the ddp comparison on the GPU: NCCL
//                refuses two ranks on one device, so CUDA collectives are staged over MPI
// Every mode first checks that init() refuses a world_size other than mpirun's -np (or
// EMBER_WORLD_SIZE).
// Every rank prints "FAIL: ..." for a failed check; the exit status is non-zero on every
// rank when any rank failed (the counts are all-reduced at the end).
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "ember/data/dataloader.hpp"
#include "ember/data/distributed_sampler.hpp"
#include "ember/distributed.hpp"
#include "ember/distributed/data_parallel.hpp"
#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/norm.hpp"
#include "ember/optim.hpp"

namespace {

using namespace ember;  // NOLINT: test program
namespace dist = ember::distributed;

int g_failures = 0;

#define WORKER_CHECK(cond, ...)                                                       \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      ++g_failures;                                                                   \
      std::printf("FAIL (rank %d, line %d): %s: %s\n", dist::rank(), __LINE__, #cond, \
                  detail::concat(__VA_ARGS__).c_str());                               \
    }                                                                                 \
  } while (0)

double max_diff(const Tensor& a, const Tensor& b) {
  return (a.to(DType::f64) - b.to(DType::f64)).abs().max().item<double>();
}

void collectives() {
  const int r = dist::rank(), n = dist::world_size();
  const double ranks_sum = n * (n + 1) / 2.0;
  for (auto [op, want] :
       std::vector<std::pair<dist::ReduceOp, double>>{{dist::ReduceOp::sum, ranks_sum},
                                                      {dist::ReduceOp::avg, ranks_sum / n},
                                                      {dist::ReduceOp::max, double(n)},
                                                      {dist::ReduceOp::min, 1.0}}) {
    for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16}) {
      Tensor t = full({3}, r + 1.0, {.dtype = d});
      dist::all_reduce(t, op);
      WORKER_CHECK(max_diff(t, full({3}, want)) == 0, dtype_name(d), " op ", int(op));
    }
  }
  Tensor ints = full({4}, r + 1.0, {.dtype = DType::i64});
  dist::all_reduce(ints);
  WORKER_CHECK(ints.to_vector<int64_t>() == std::vector<int64_t>(4, int64_t(ranks_sum)), "i64");
  Tensor flags = full({2}, r == 1 ? 1.0 : 0.0, {.dtype = DType::boolean});
  dist::all_reduce(flags, dist::ReduceOp::max);
  WORKER_CHECK(flags.to(DType::f32).sum().item<float>() == 2.0f, "bool any");

  // A strided view: the result lands in the view's elements of the base.
  Tensor base = arange(6.0).reshape({2, 3}) + double(r);
  Tensor view = base.transpose(0, 1);
  dist::all_reduce(view);
  WORKER_CHECK(max_diff(base, arange(6.0).reshape({2, 3}) * n + (ranks_sum - n)) == 0,
               "strided view");

  Tensor b = full({2, 2}, double(r));
  dist::broadcast(b, n - 1);
  WORKER_CHECK(max_diff(b, full({2, 2}, n - 1.0)) == 0, "broadcast from the last rank");

  Tensor g = dist::all_gather(full({2}, double(r)));
  WORKER_CHECK(g.shape() == Shape({n, 2}), "all_gather shape ", g.shape().to_string());
  for (int q = 0; q < n; ++q)
    WORKER_CHECK(max_diff(g.narrow(0, q, 1), full({1, 2}, double(q))) == 0, "all_gather row ", q);

  Tensor s = dist::reduce_scatter(arange(double(2 * n)).reshape({n, 2}) + double(r));
  Tensor want = (arange(double(2 * n)).reshape({n, 2}) * n + (ranks_sum - n)).narrow(0, r, 1);
  WORKER_CHECK(max_diff(s, want) == 0, "reduce_scatter");

  Tensor a = full({1000}, 1.0);
  dist::Work w = dist::all_reduce_async(a, dist::ReduceOp::avg);
  w.wait();
  WORKER_CHECK(max_diff(a, full({1000}, 1.0)) == 0, "async avg");

  // Different shapes on different ranks: an error on every rank, naming each rank's tensor.
  std::string message;
  try {
    Tensor bad = zeros({r + 1});
    dist::all_reduce(bad);
  } catch (const Error& e) {
    message = e.what();
  }
  WORKER_CHECK(message.find("rank 0: all_reduce of [1] f32 sum") != std::string::npos &&
                   message.find("rank 1: all_reduce of [2] f32 sum") != std::string::npos,
               "mismatch message: '", message, "'");
  dist::barrier();
}

// FNV-1a over the bytes of every result, in order.
struct Digest {
  uint64_t h = 1469598103934665603ull;
  void add(const Tensor& t) {
    const Tensor c = t.to(Device::cpu()).contiguous();  // on a GPU machine t is on cuda:0
    const auto* p = static_cast<const unsigned char*>(c.data_ptr());
    for (size_t i = 0; i < size_t(c.numel()) * element_size(c.dtype()); ++i)
      h = (h ^ p[i]) * 1099511628211ull;
  }
};

void digest() {
  const int r = dist::world_size() > 1 ? dist::rank() : 0;
  manual_seed(11 + r);
  Digest d;
  const int64_t n = 1001;  // does not split evenly: uneven blocks
  auto random_of = [](DType t, const Shape& shape) {
    if (is_floating(t)) return randn(shape, {.dtype = t});
    return t == DType::u8 ? randint(0, 256, shape, {.dtype = t})
                          : randint(-1000000, 1000000, shape, {.dtype = t});
  };
  for (dist::ReduceOp op :
       {dist::ReduceOp::sum, dist::ReduceOp::avg, dist::ReduceOp::max, dist::ReduceOp::min}) {
    for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8}) {
      if (op == dist::ReduceOp::avg && !is_floating(t)) continue;
      Tensor x = random_of(t, {n});
      dist::all_reduce(x, op);
      d.add(x);
      d.add(dist::reduce_scatter(random_of(t, {2 * dist::world_size(), 7}), op));
    }
  }
  Tensor b = randn({33}, {.dtype = DType::f64});
  dist::broadcast(b, dist::world_size() - 1);
  d.add(b);
  d.add(dist::all_gather(random_of(DType::u8, {5})));
  Tensor a = randn({4097});
  dist::Work w = dist::all_reduce_async(a, dist::ReduceOp::sum);
  w.wait();
  d.add(a);
  if (dist::rank() == 0) std::printf("digest %016llx\n", static_cast<unsigned long long>(d.h));
}

nn::Sequential make_net() {
  nn::Sequential net;
  net->push_back(nn::Linear(6, 16));
  net->push_back(nn::Tanh());
  net->push_back(nn::Linear(16, 3));
  return net;
}

// World size 1 with CudaCollectives::nccl: every collective goes through NCCL, the result is
// the input (one rank), checked for each op and dtype, a strided view and the async path.
void nccl_world_of_one() {
  const Device gpu = Device::cuda(0);
  for (dist::ReduceOp op :
       {dist::ReduceOp::sum, dist::ReduceOp::avg, dist::ReduceOp::max, dist::ReduceOp::min}) {
    for (DType d : {DType::f32, DType::f64, DType::f16, DType::bf16, DType::i32, DType::i64}) {
      if (op == dist::ReduceOp::avg && !is_floating(d)) continue;
      const Tensor want = (arange(6.0) - 2).to(d);
      Tensor t = want.to(gpu);
      dist::all_reduce(t, op);
      WORKER_CHECK(t.device() == gpu && max_diff(t.to(Device::cpu()), want) == 0, dtype_name(d),
                   " op ", int(op));
    }
  }
  Tensor base = arange(6.0).reshape({2, 3}).to(gpu);
  Tensor view = base.transpose(0, 1);
  dist::all_reduce(view, dist::ReduceOp::avg);
  WORKER_CHECK(max_diff(base.to(Device::cpu()), arange(6.0).reshape({2, 3})) == 0, "strided");
  Tensor b = full({2, 2}, 3.0).to(gpu);
  dist::broadcast(b, 0);
  WORKER_CHECK(max_diff(b.to(Device::cpu()), full({2, 2}, 3.0)) == 0, "broadcast");
  Tensor g = dist::all_gather(arange(4.0).to(gpu));
  WORKER_CHECK(g.shape() == Shape({1, 4}) && g.device() == gpu &&
                   max_diff(g.to(Device::cpu()), arange(4.0).reshape({1, 4})) == 0,
               "all_gather ", g.shape().to_string());
  Tensor s = dist::reduce_scatter(arange(8.0).reshape({4, 2}).to(gpu));
  WORKER_CHECK(
      s.shape() == Shape({4, 2}) && max_diff(s.to(Device::cpu()), arange(8.0).reshape({4, 2})) == 0,
      "reduce_scatter");
  Tensor a = full({1 << 20}, 1.5).to(gpu);
  dist::Work w = dist::all_reduce_async(a, dist::ReduceOp::avg);
  w.wait();
  a.mul_(2.0);  // a kernel after wait() sees the reduced values (the streams are joined)
  WORKER_CHECK(max_diff(a.to(Device::cpu()), full({1 << 20}, 3.0)) == 0, "async avg");
}

// DDP that really reduces in a world of one (through NCCL, on the communication stream)
// trains like the bare model.
void nccl_ddp_world_of_one() {
  const Device gpu = Device::cuda(0);
  manual_seed(5);
  nn::Sequential net = make_net(), bare = make_net();
  bare->load_state_dict(net->state_dict());
  net->to(gpu);
  bare->to(gpu);
  dist::DistributedDataParallel model(
      net, {.bucket_cap_mb = 256.0 / (1024 * 1024), .reduce_in_world_of_one = true});
  optim::Adam opt(net->parameters(), {.lr = 1e-2}), bare_opt(bare->parameters(), {.lr = 1e-2});
  for (int step = 0; step < 10; ++step) {
    const Tensor x = randn({8, 6}).to(gpu), y = randn({8, 3}).to(gpu);
    opt.zero_grad();
    mse_loss(model(x), y).backward();
    opt.step();
    bare_opt.zero_grad();
    mse_loss(bare(x), y).backward();
    bare_opt.step();
  }
  const int64_t buckets = int64_t(model->bucket_parameter_names().size());
  WORKER_CHECK(buckets >= 3 && model->reductions_started() == 10 * buckets, "reductions ",
               model->reductions_started(), " for ", buckets, " buckets");
  double worst = 0;
  const auto p = net->parameters(), q = bare->parameters();
  for (size_t i = 0; i < p.size(); ++i) worst = std::max(worst, max_diff(p[i], q[i]));
  WORKER_CHECK(worst <= 1e-6, "max |ddp - bare| = ", worst);
  std::printf("nccl: max |ddp (world of one, NCCL) - bare| after 10 Adam steps = %.3g\n", worst);
}

// 10 Adam steps of DDP on `device` (5 plain, 5 accumulated under no_sync) against one
// process on the combined batches.
void ddp_against_one_process(Device device) {
  const int r = dist::rank(), n = dist::world_size();
  manual_seed(100 + r);  // each rank starts elsewhere: DDP must broadcast rank 0's weights
  nn::Sequential net = make_net();
  nn::StateDict initial;
  for (auto& [name, t] : net->state_dict()) initial.emplace_back(name, t.clone());
  net->to(device);
  manual_seed(7);
  Tensor x = randn({40, 6}), y = randn({40, 3});
  auto ds = std::make_shared<data::TensorDataset>(x, y);

  dist::DistributedDataParallel model(net, {.bucket_cap_mb = 256.0 / (1024 * 1024)});
  WORKER_CHECK(model->bucket_parameter_names().size() >= 3, "expected several buckets");
  optim::Adam opt(net->parameters(), {.lr = 1e-2});
  const data::DistributedSamplerOptions so{.shuffle = true, .seed = 3};
  auto shard = std::make_shared<data::DistributedShard>(ds, so);
  data::DataLoader loader(shard, {.batch_size = 4, .prefetch = false});
  const int64_t per_epoch = loader.num_batches();
  int64_t step = 0;
  for (int64_t epoch = 0; step < 10; ++epoch) {
    shard->set_epoch(epoch);
    for (data::Example& batch : loader) {
      if (step == 10) break;
      const Tensor in = batch.input.to(device), target = batch.target.to(device);
      opt.zero_grad();
      if (step < 5) {
        mse_loss(model(in), target).backward();
      } else {  // two micro-batches, the first accumulated without communicating
        {
          auto guard = model->no_sync();
          (mse_loss(model(in.narrow(0, 0, 2)), target.narrow(0, 0, 2)) * 0.5).backward();
        }
        (mse_loss(model(in.narrow(0, 2, 2)), target.narrow(0, 2, 2)) * 0.5).backward();
      }
      opt.step();
      ++step;
    }
  }
  const int64_t buckets = int64_t(model->bucket_parameter_names().size());
  WORKER_CHECK(model->reductions_started() == 10 * buckets, "reductions ",
               model->reductions_started(), " for ", buckets, " buckets");

  // Every rank holds the same weights.
  std::vector<Tensor> flat;
  for (const Tensor& p : net->parameters()) flat.push_back(p.reshape({p.numel()}));
  Tensor all = dist::all_gather(cat(flat));
  for (int q = 1; q < n; ++q)
    WORKER_CHECK(max_diff(all.narrow(0, q, 1), all.narrow(0, 0, 1)) == 0, "rank ", q,
                 " differs from rank 0");

  if (r == 0) {  // one process, the combined batches, rank 0's initial weights
    nn::Sequential ref = make_net();
    ref->load_state_dict(initial);
    ref->to(device);
    optim::Adam ref_opt(ref->parameters(), {.lr = 1e-2});
    for (int64_t s = 0; s < 10; ++s) {
      std::vector<int64_t> rows;
      for (int q = 0; q < n; ++q) {
        data::DistributedSamplerOptions o = so;
        o.num_replicas = n;
        o.rank = q;
        std::vector<int64_t> idx = data::DistributedSampler(40, o).indices(s / per_epoch);
        const int64_t b = s % per_epoch;
        rows.insert(rows.end(), idx.begin() + b * 4, idx.begin() + b * 4 + 4);
      }
      Tensor index = from_vector<int64_t>(rows, {int64_t(rows.size())});
      ref_opt.zero_grad();
      mse_loss(ref(index_select(x, 0, index).to(device)), index_select(y, 0, index).to(device))
          .backward();
      ref_opt.step();
    }
    double worst = 0;
    const auto a = net->parameters(), b = ref->parameters();
    for (size_t i = 0; i < a.size(); ++i) worst = std::max(worst, max_diff(a[i], b[i]));
    WORKER_CHECK(worst <= 1e-5, "max |ddp - one process| = ", worst);
    std::printf("ddp on %s: max |ddp - one process| after 10 Adam steps = %.3g\n",
                device.str().c_str(), worst);
  }
}

void ddp() {
  const int r = dist::rank(), n = dist::world_size();
  ddp_against_one_process(Device::cpu());
  manual_seed(7);
  Tensor x = randn({40, 6});

  // A parameter without a gradient: the next forward names it; finish_gradient_sync()
  // averages what arrived (d sum(W x + b) / dW = 2 (r + 1) here, so the average is n + 1).
  nn::Sequential two;
  two->push_back(nn::Linear(3, 3));
  two->push_back(nn::Linear(3, 3));
  dist::DistributedDataParallel partial(two, {.bucket_cap_mb = 1e-5});
  Tensor in = full({2, 3}, r + 1.0);
  two->children()[0]->forward(in).sum().backward();
  std::string unused;
  try {
    partial(in);
  } catch (const Error& e) {
    unused = e.what();
  }
  WORKER_CHECK(
      unused.find("no gradient for 2 parameter(s) ('1.weight', '1.bias')") != std::string::npos,
      "'", unused, "'");
  partial->finish_gradient_sync();
  const std::vector<Tensor> pp = two->parameters();
  WORKER_CHECK(max_diff(pp[0].grad(), full({3, 3}, n + 1.0)) == 0, "averaged 0.weight grad");
  WORKER_CHECK(pp[2].grad().defined() && max_diff(pp[2].grad(), zeros({3, 3})) == 0,
               "unused 1.weight grad");
  WORKER_CHECK(partial->reductions_started() == 4, "buckets ", partial->reductions_started());

  // BatchNorm statistics: per rank by default; BufferSync::average makes them agree.
  for (dist::BufferSync mode : {dist::BufferSync::per_rank, dist::BufferSync::average}) {
    nn::Sequential bn_net;
    bn_net->push_back(nn::Linear(6, 4));
    bn_net->push_back(nn::BatchNorm1d(4));
    dist::DistributedDataParallel bn(bn_net, {.buffers = mode});
    bn(x * double(r + 1));
    if (mode == dist::BufferSync::average) bn->sync_buffers();
    Tensor mean = bn_net->named_buffers()[0].second;
    Tensor gathered = dist::all_gather(mean);
    const double spread = max_diff(gathered.narrow(0, 0, 1), gathered.narrow(0, n - 1, 1));
    if (mode == dist::BufferSync::per_rank)
      WORKER_CHECK(spread > 0, "per-rank running_mean should differ");
    else
      WORKER_CHECK(spread == 0, "averaged running_mean differs by ", spread);
  }
}

void sampler() {
  const int n = dist::world_size();
  for (int64_t size : {10, 11}) {
    for (bool drop_last : {false, true}) {
      data::DistributedSampler s(size, {.shuffle = true, .seed = 5, .drop_last = drop_last});
      std::vector<std::vector<int64_t>> epochs;
      for (int64_t e = 0; e < 2; ++e) {
        std::vector<int64_t> mine = s.indices(e);
        Tensor t = from_vector<int64_t>(mine, {int64_t(mine.size())});
        std::vector<int64_t> all = dist::all_gather(t).to_vector<int64_t>();
        std::set<int64_t> distinct(all.begin(), all.end());
        WORKER_CHECK(int64_t(all.size()) == s.total_size(), "size ", all.size());
        if (drop_last) {
          WORKER_CHECK(int64_t(distinct.size()) == int64_t(all.size()), "shards overlap");
        } else {
          WORKER_CHECK(int64_t(distinct.size()) == size, "the shards cover ", distinct.size(),
                       " of ", size, " examples");
        }
        epochs.push_back(all);
      }
      WORKER_CHECK(epochs[0] != epochs[1], "set_epoch did not reshuffle");
    }
  }
  (void)n;
}

// One rank's training run for `resume`: model, optimizer, shard and loader, built fresh.
struct Run {
  nn::Sequential net = make_net();
  dist::DistributedDataParallel model{net, {.bucket_cap_mb = 1e-4}};
  optim::Adam opt{net->parameters(), {.lr = 1e-2}};
  std::shared_ptr<data::DistributedShard> shard;
  std::unique_ptr<data::DataLoader> loader;

  explicit Run(const std::shared_ptr<data::Dataset>& ds) {
    shard = std::make_shared<data::DistributedShard>(
        ds, data::DistributedSamplerOptions{.shuffle = true, .seed = 11});
    loader = std::make_unique<data::DataLoader>(
        shard, data::DataLoaderOptions{.batch_size = 4, .prefetch = false});
  }
  // Steps until `stop`; `save` (rank 0 writes, every rank waits) after the last one.
  void train(int64_t step, int64_t stop, const std::string& save) {
    while (step < stop) {
      shard->set_epoch(loader->epoch());
      for (data::Example& batch : *loader) {
        opt.zero_grad();
        mse_loss(model(batch.input), batch.target).backward();
        opt.step();
        if (++step == stop) break;
      }
    }
    if (save.empty()) return;
    if (dist::rank() == 0) io::save_checkpoint(save, net, opt, nullptr, step, {}, loader.get());
    dist::barrier();
  }
};

void resume(const std::string& dir) {
  manual_seed(7);
  auto ds = std::make_shared<data::TensorDataset>(randn({40, 6}), randn({40, 3}));
  manual_seed(1);
  Run whole(ds);
  manual_seed(1);
  Run first(ds);
  whole.train(0, 10, "");
  const std::string path = dir + "/resume.safetensors";
  first.train(0, 7, path);
  manual_seed(99 + dist::rank());  // other weights, other RNG state: all from the file
  Run second(ds);
  const io::CheckpointInfo info =
      io::load_checkpoint(path, second.net, second.opt, nullptr, second.loader.get());
  WORKER_CHECK(info.step == 7, "step ", info.step);
  second.train(info.step, 10, "");
  const auto a = whole.net->parameters(), b = second.net->parameters();
  for (size_t i = 0; i < a.size(); ++i)
    WORKER_CHECK(max_diff(a[i], b[i]) == 0, "parameter ", i, " differs by ", max_diff(a[i], b[i]));
}

}  // namespace

int main(int argc, char** argv) {
  set_num_threads(1);  // two ranks on two cores: one thread each
  const std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "join") {
    try {
      dist::init({.abort_on_uncaught = false, .timeout_seconds = 5});
    } catch (const Error& e) {
      std::printf("init failed: %s\n", e.what());
      return 5;
    }
    std::printf("joined %s\n", dist::backend_name().c_str());
    dist::finalize();
    return 0;
  }
  std::string wrong_size;  // a world_size that is not the launch's is refused, naming both
  try {
    dist::init({.world_size = 3});
  } catch (const Error& e) {
    wrong_size = e.what();
  }
  // hang: a short timeout, so that rank 0's watchdog ends the job while rank 1 sleeps.
  dist::init({.cuda_collectives =
                  mode == "nccl" ? dist::CudaCollectives::nccl : dist::CudaCollectives::automatic,
              .timeout_seconds = mode == "hang" ? 2.0 : 600.0});
  const std::string np = std::to_string(dist::world_size());
  const bool tcp = dist::backend_name().rfind("tcp", 0) == 0;
  WORKER_CHECK(wrong_size.find(tcp ? "world_size 3 was asked for, but EMBER_WORLD_SIZE is " + np
                                   : "world_size 3 was asked for, but MPI has " + np + " ranks") !=
                   std::string::npos,
               "'", wrong_size, "'");
  const bool gpu_mode = mode == "nccl" || mode == "cuda_ddp";
  if (gpu_mode) set_default_device(Device::cpu());  // data on the host, moved explicitly
  if (gpu_mode && !cuda_available()) {
    std::fprintf(stderr, "distributed_worker %s: no CUDA device\n", mode.c_str());
    return 2;
  }
  if (mode == "collectives") {
    collectives();
  } else if (mode == "ddp") {
    ddp();
  } else if (mode == "digest") {
    digest();
  } else if (mode == "sampler") {
    sampler();
  } else if (mode == "nccl") {
    nccl_world_of_one();
    nccl_ddp_world_of_one();
  } else if (mode == "cuda_ddp") {
    ddp_against_one_process(Device::cuda(0));
  } else if (mode == "resume" && argc > 2) {
    resume(argv[2]);
  } else if (mode == "throw" || mode == "kill" || mode == "hang") {
    dist::barrier();
    if (dist::rank() == 1) {
      if (mode == "kill") std::raise(SIGKILL);
      if (mode == "hang") std::this_thread::sleep_for(std::chrono::seconds(60));
      throw Error("deliberate failure in the worker");
    }
    Tensor t = zeros({4});
    dist::all_reduce(t);  // rank 0 waits here until the job is ended
  } else {
    std::fprintf(stderr,
                 "usage: distributed_worker collectives|digest|join|ddp|sampler|resume DIR|throw|"
                 "kill|hang|nccl|cuda_ddp\n");
    return 2;
  }
  Tensor failures = full({1}, double(g_failures));
  dist::all_reduce(failures, dist::ReduceOp::sum);
  const bool ok = failures.item<float>() == 0;
  if (dist::rank() == 0) std::printf("%s %s\n", mode.c_str(), ok ? "ok" : "FAILED");
  dist::finalize();
  return ok ? 0 : 1;
}

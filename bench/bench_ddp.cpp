// bench/bench_ddp.cpp — what DistributedDataParallel costs per training step (issue 12,
// docs/distributed.md). Run it under mpirun; it validates first (exit 1 on a mismatch), then
// times, and rank 0 prints one JSON line per figure (bench::emit; speedup = reference / DDP,
// so 0.97 is 3% overhead).
//
//   --cpu   (mpirun -np 2) the MLP 784-256-256-10, Adam, batch 64 per rank, one thread per
//           rank: ms per step with DDP (25 MB buckets, and 0.25 MB buckets that overlap the
//           all-reduces with backward) against one process on its 64 without DDP, both ranks
//           stepping at the same time (so both figures share the machine alike); reported.
//   GPU     (default when a CUDA device exists) the 4096-wide MLP 784-4096-4096-10 (fp32):
//           mpirun -np 1: batch 4096; the step without DDP against (a) DDP as it runs in a
//             world of one (no hooks: nothing to do) and (b) DDP with reduce_in_world_of_one
//             (gradient copies into the 25 MB buckets, their all-reduces on the communication
//             stream, the averages copied back) through a one-rank NCCL communicator when
//             $EMBER_NCCL_LIBRARY is set (CudaCollectives::nccl), else with the all-reduce
//             the identity. Target: (b) within 3% of no DDP (speedup ≥ 0.97).
//           mpirun -np 2: two processes on cuda:0, batch 2048 each, staged over MPI (NCCL
//             refuses two ranks on one GPU): DDP against each process on its 2048 without
//             DDP; reported, for information.
//
// Validation: after 3 Adam steps from the same weights, the loss of the DDP model on the
// combined batch equals (within 1e-5) that of the model without DDP (world of one) or of one
// process trained on the combined batch (two ranks, computed on every rank).
//
// Timing: blocks of steps, the variants interleaved (a, b, a, b, ...), the ranks meeting at a
// barrier before each block and the GPU synchronised (a 4-byte read-back) before the clock
// starts and stops; a figure is the median block over ranks' worst (max over ranks).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench_util.hpp"
#include "ember/distributed.hpp"
#include "ember/distributed/data_parallel.hpp"
#include "ember/ember.hpp"
#include "ember/nn/loss.hpp"
#include "ember/optim/adam.hpp"
#include "ember/train/models.hpp"

namespace {

using namespace ember;  // NOLINT: benchmark program
namespace dist = ember::distributed;

struct Config {
  Device device = Device::cpu();
  std::vector<int64_t> hidden;
  int64_t batch = 0;  // per rank
  int warmup = 0, blocks = 0, per_block = 0;
};

// One model and its optimizer, with DDP around it or not.
struct Run {
  nn::Module net;
  std::optional<dist::DistributedDataParallel> ddp;
  std::unique_ptr<optim::Adam> opt;
  Tensor x, y;  // this rank's batch

  Tensor step() {
    opt->zero_grad();
    Tensor loss = cross_entropy(ddp ? (*ddp)(x) : net(x), y);
    loss.backward();
    opt->step();
    return loss;
  }
};

void sync(const Device& d) {
  if (d.is_cuda()) bench::do_not_optimize(zeros({1}, {.device = d}).item<float>());
}

// The same weights on every rank and in every run (seed 42); `ddp` wraps the model when set.
std::unique_ptr<Run> make_run(const Config& c, const Tensor& x, const Tensor& y,
                              std::optional<dist::DistributedDataParallelOptions> ddp) {
  auto r = std::make_unique<Run>();
  manual_seed(42);
  r->net = train::mlp(784, c.hidden, 10);
  r->net->to(c.device);
  if (ddp) r->ddp.emplace(r->net, *ddp);
  r->opt = std::make_unique<optim::Adam>(r->net->parameters(), optim::AdamOptions{.lr = 1e-3});
  r->x = x.to(c.device);
  r->y = y.to(c.device);
  return r;
}

// Loss on `x`, `y` (the combined batch), without recording a graph.
double eval_loss(Run& r, const Tensor& x, const Tensor& y, const Device& d) {
  NoGradGuard no_grad;
  return cross_entropy(r.net(x.to(d)), y.to(d)).item<double>();
}

// Medians over blocks (ms per step, the slowest rank's), the runs interleaved block by block.
std::vector<double> time_runs(const Config& c, const std::vector<Run*>& runs) {
  for (Run* r : runs)
    for (int i = 0; i < c.warmup; ++i) r->step();
  std::vector<std::vector<double>> ms(runs.size());
  for (int b = 0; b < c.blocks; ++b) {
    for (size_t k = 0; k < runs.size(); ++k) {
      sync(c.device);
      dist::barrier();
      const auto start = bench::Clock::now();
      for (int i = 0; i < c.per_block; ++i) runs[k]->step();
      sync(c.device);
      const double t =
          std::chrono::duration<double>(bench::Clock::now() - start).count() * 1e3 / c.per_block;
      Tensor worst = full({1}, t, {.dtype = DType::f64});
      dist::all_reduce(worst, dist::ReduceOp::max);
      ms[k].push_back(worst.item<double>());
    }
  }
  std::vector<double> out;
  for (auto& v : ms) {
    std::sort(v.begin(), v.end());
    out.push_back(v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]));
  }
  return out;
}

// Validation (see the file comment): 3 steps of `ddp_opts` against the reference.
bool validate(const char* name, const Config& c, const dist::DistributedDataParallelOptions& o) {
  const int n = dist::world_size(), rank = dist::rank();
  manual_seed(7);
  const Tensor x = rand({n * c.batch, 784}), y = randint(0, 10, {n * c.batch});
  const Tensor xr = x.narrow(0, rank * c.batch, c.batch), yr = y.narrow(0, rank * c.batch, c.batch);
  std::unique_ptr<Run> ddp = make_run(c, xr, yr, o), ref = make_run(c, x, y, std::nullopt);
  for (int i = 0; i < 3; ++i) {
    ddp->step();
    ref->step();
  }
  const double got = eval_loss(*ddp, x, y, c.device), want = eval_loss(*ref, x, y, c.device);
  const bench::Compare cmp = bench::compare(&got, &want, 1, 1e-5, 0.0);
  Tensor bad = full({1}, cmp.ok ? 0.0 : 1.0);
  dist::all_reduce(bad, dist::ReduceOp::max);
  if (rank == 0)
    bench::report(name,
                  n == 1 ? "DDP loss vs no DDP after 3 Adam steps"
                         : "DDP loss vs one process on the combined batch (3 Adam steps)",
                  cmp, 1);
  return bad.item<float>() == 0;
}

int bench_cpu() {
  const int n = dist::world_size();
  const Config c{.device = Device::cpu(),
                 .hidden = {256, 256},
                 .batch = 64,
                 .warmup = 20,
                 .blocks = 15,
                 .per_block = 20};
  const char* name = "ddp_cpu_mlp_step";
  if (!validate(name, c, {})) return 1;
  manual_seed(8);
  const Tensor x = rand({c.batch, 784}), y = randint(0, 10, {c.batch});
  std::unique_ptr<Run> plain = make_run(c, x, y, std::nullopt);
  std::unique_ptr<Run> big = make_run(c, x, y, dist::DistributedDataParallelOptions{});
  std::unique_ptr<Run> small =
      make_run(c, x, y, dist::DistributedDataParallelOptions{.bucket_cap_mb = 0.25});
  const std::vector<double> ms = time_runs(c, {plain.get(), big.get(), small.get()});
  if (dist::rank() != 0) return 0;
  for (auto [cap, t] : {std::pair{25.0, ms[1]}, std::pair{0.25, ms[2]}}) {
    bench::emit(cap == 25.0 ? name : "ddp_cpu_mlp_step_small_buckets", t, ms[0], "ms/step", false,
                0.0,
                {bench::num("ranks", n), bench::num("batch_per_rank", double(c.batch)),
                 bench::num("bucket_cap_mb", cap), bench::num("ratio", t / ms[0])});
    std::fprintf(stderr,
                 "%s: %d ranks, batch %lld per rank, buckets %.2f MB: %.3f ms/step with DDP, %.3f "
                 "ms/step without (one process on its batch); ratio %.2f\n",
                 name, n, static_cast<long long>(c.batch), cap, t, ms[0], t / ms[0]);
  }
  return 0;
}

int bench_gpu(bool nccl) {
  const int n = dist::world_size();
  const Config c{.device = Device::cuda(0),
                 .hidden = {4096, 4096},
                 .batch = 4096 / n,
                 .warmup = 5,
                 .blocks = 9,
                 .per_block = 5};
  const std::string name = n == 1 ? "ddp_cuda_wide_mlp_step" : "ddp_cuda_wide_mlp_step_2proc";
  const dist::DistributedDataParallelOptions forced{.reduce_in_world_of_one = true};
  if (!validate(name.c_str(), c, n == 1 ? forced : dist::DistributedDataParallelOptions{}))
    return 1;
  manual_seed(8);
  const Tensor x = rand({c.batch, 784}), y = randint(0, 10, {c.batch});
  std::unique_ptr<Run> plain = make_run(c, x, y, std::nullopt);
  std::unique_ptr<Run> ddp = make_run(c, x, y, dist::DistributedDataParallelOptions{});
  std::unique_ptr<Run> machinery = n == 1 ? make_run(c, x, y, forced) : nullptr;
  std::vector<Run*> runs{plain.get(), ddp.get()};
  if (machinery) runs.push_back(machinery.get());
  const std::vector<double> ms = time_runs(c, runs);
  if (dist::rank() != 0) return 0;
  const std::string collectives = n > 1 ? "mpi (host staging)" : nccl ? "nccl" : "identity";
  const auto extra = [&](const char* variant) {
    return std::vector<bench::Field>{
        bench::num("ranks", n), bench::num("batch_per_rank", double(c.batch)),
        bench::str("variant", variant), bench::str("collectives", collectives)};
  };
  if (n == 1) {
    bench::emit(name, ms[2], ms[0], "ms/step", false, 0.97, extra("reduce_in_world_of_one"));
    bench::emit(name + "_no_hooks", ms[1], ms[0], "ms/step", false, 0.97, extra("default"));
    std::fprintf(stderr,
                 "%s: batch 4096: %.3f ms/step without DDP, %.3f with DDP (world of one, no "
                 "hooks), %.3f with the buckets reduced (%s): overhead %.1f%%\n",
                 name.c_str(), ms[0], ms[1], ms[2], collectives.c_str(),
                 100.0 * (ms[2] / ms[0] - 1));
  } else {
    bench::emit(name, ms[1], ms[0], "ms/step", false, 0.0, extra("default"));
    std::fprintf(stderr,
                 "%s: %d processes on cuda:0, batch %lld each: %.3f ms/step with DDP (%s), %.3f "
                 "without\n",
                 name.c_str(), n, static_cast<long long>(c.batch), ms[1], collectives.c_str(),
                 ms[0]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const bool cpu = argc > 1 && std::string(argv[1]) == "--cpu";
  if (argc > 1 && !cpu) {
    std::fprintf(stderr, "usage: mpirun -np N bench_ddp [--cpu]\n");
    return 2;
  }
  const bool gpu = !cpu && cuda_available();
  const char* lib = std::getenv("EMBER_NCCL_LIBRARY");
  const char* np = std::getenv("OMPI_COMM_WORLD_SIZE");
  // A one-rank NCCL communicator for the world of one (two ranks on one GPU: NCCL refuses).
  const bool nccl = gpu && lib && *lib && (!np || std::atoi(np) == 1);
  dist::init(
      {.select_cuda_device = gpu,
       .cuda_collectives = nccl ? dist::CudaCollectives::nccl : dist::CudaCollectives::automatic});
  set_default_device(Device::cpu());  // data made on the host, moved explicitly
  int rc = 0;
  if (cpu) {
    set_num_threads(1);  // N ranks on N cores
    rc = bench_cpu();
  } else if (gpu) {
    rc = bench_gpu(nccl);
  } else {
    if (dist::rank() == 0)
      std::fprintf(stderr, "bench_ddp: no CUDA device; run with --cpu for the CPU figures\n");
  }
  dist::finalize();
  return rc;
}

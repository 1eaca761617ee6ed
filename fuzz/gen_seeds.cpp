// fuzz/gen_seeds.cpp — writes the fuzz seed corpus: valid files of every kind ember reads.
//   gen_seeds DIR   ->  DIR/model.safetensors, checkpoint, f16 and bf16 models, a foreign
//                       file with unaligned data, a tied-weight model, an empty file of no tensors
#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "../tests/io_load_all.hpp"
#include "ember/nn/transformer.hpp"

namespace {

void write_raw(const std::string& path, const std::string& header, const std::string& data) {
  std::ofstream out(path, std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out << header << data;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace ember;  // NOLINT: small program
  if (argc != 2) {
    std::fprintf(stderr, "usage: gen_seeds DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  manual_seed(1);
  ember_test::IoFixture fx;
  fx.step();
  io::save_model(fx.model, dir + "/model.safetensors");
  io::save_model(fx.model, dir + "/model_f16.safetensors", {.storage_dtype = DType::f16});
  io::save_model(fx.model, dir + "/model_bf16.safetensors", {.storage_dtype = DType::bf16});
  io::save_checkpoint(dir + "/checkpoint.safetensors", fx.model, *fx.optimizer, fx.scheduler.get(), 1,
                      {{"note", "seed"}}, fx.loader.get());
  io::save_model(nn::TransformerEncoderLayer(nn::TransformerEncoderLayerOptions{.d_model = 4, .nhead = 2, .dim_feedforward = 8}),
                 dir + "/transformer.safetensors");
  // Another writer's file: odd header length, so the data is unaligned; no ember metadata.
  std::string data(1 + 4 + 12, '\0');
  const float w[3] = {1.0f, -2.0f, 0.5f};
  std::memcpy(&data[5], w, 12);
  write_raw(dir + "/foreign.safetensors",
            R"({"flag":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]},"h":{"dtype":"F16","shape":[2],"data_offsets":[1,5]},)"
            R"("w":{"dtype":"F32","shape":[3],"data_offsets":[5,17]},"__metadata__":{"format":"pt"}} )",
            data);
  write_raw(dir + "/empty.safetensors", "{}      ", "");
  std::printf("gen_seeds: wrote 7 files to %s\n", dir.c_str());
  return 0;
}

// ember/io/pth.hpp — PyTorch `torch.save` files (.pth, .pt) read without Python
// (ARCHITECTURE §7, "Foreign files"; docs/checkpoints.md, "PyTorch .pth files").
//
// A torch.save file (torch >= 1.6) is a zip archive: ARCHIVE/data.pkl, a pickle of the saved
// object whose tensors refer to storages by key, and ARCHIVE/data/KEY, each storage's raw
// little-endian bytes. ember reads the zip directory itself (stored or deflated entries, zip64)
// and runs a safe interpreter of the pickle opcodes torch writes: the only objects it makes
// are None, booleans, integers, floats, strings, tuples, lists, dicts and tensors, and the
// only globals it accepts are the allow-listed torch rebuild functions, storage classes and
// dtypes and collections.OrderedDict. Anything else (os.system, a model class, a numpy
// scalar) is refused by name with its offset in data.pkl; nothing in a file is ever executed.
//
//   nn::Sequential net({nn::Linear(3, 2), nn::BatchNorm1d(2)});
//   net->load_state_dict(io::load_pth("model.pth"));              // torch.save(m.state_dict())
//   net->load_state_dict(io::load_pth("ckpt.pth", {.key = "model"}));  // {'model': sd, ...}
//   for (const io::PthTensorInfo& t : io::pth_catalogue("ckpt.pth").tensors) ...
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ember/nn/module.hpp"
#include "ember/tensor.hpp"

namespace ember::io {

/// How load_pth reads a file.
struct PthOptions {
  /// Where the tensors land (read on the host, then copied there when not the CPU).
  Device device = Device::cpu();
  /// Only the tensors under this dotted path of the saved object, the path and its dot taken
  /// off their names: {.key = "model"} for torch.save({'model': sd, 'epoch': 3}). "": all of
  /// them. A key that holds no tensor is an error naming the keys that do.
  std::string key{};
  /// Check each zip entry read against the CRC-32 its directory records.
  bool verify_crc = true;
};

/// One tensor of a .pth file as its pickle describes it.
struct PthTensorInfo {
  std::string name{};         // dotted path: "0.weight", "model.fc.bias", "state.0.exp_avg"
  DType dtype = DType::f32;   // the dtype it loads as (int8 and int16 widen to i32)
  std::string torch_dtype{};  // the file's: "float32", "int8", ...
  Shape shape{};
  std::vector<int64_t> stride{};  // in elements, as torch's
  int64_t storage_offset = 0;     // in elements
  std::string storage{};          // the storage's key (its data file is ARCHIVE/data/KEY)
  uint64_t storage_bytes = 0;
};

/// What a .pth file holds, read from its zip directory and pickle only (no tensor data).
struct PthCatalogue {
  std::string path{};
  std::string archive{};  // the zip's top folder ("archive", or the name the file was saved as)
  std::vector<PthTensorInfo> tensors{};  // in pickle order
  /// The other leaves, by dotted path: numbers, strings, booleans and nulls
  /// (values["epoch"] == 3; an optimizer's "optimizer.param_groups.0.lr").
  nn::json values = nn::json::object();
  uint64_t storage_count = 0, data_bytes = 0;  // distinct storages and their bytes
};

/// Names, dtypes, shapes, strides and storages of every tensor in `path`, and its other
/// values, without reading tensor data. Every check load_pth makes short of reading the data
/// (the zip directory, the pickle, each view inside its storage) is made here too.
///   io::PthCatalogue c = io::pth_catalogue("model.pth");   // c.tensors[0].name == "0.weight"
PthCatalogue pth_catalogue(const std::string& path);

/// The tensors of a torch.save file as a state dict, in pickle order, named by their dotted
/// path in the saved object (a state_dict's own names for torch.save(m.state_dict())). Each
/// storage is read once: names of one view share one Tensor (tied weights stay tied), other
/// views (transposed, narrowed, offset into a shared storage) are copied out contiguous.
/// Errors are ember::Error naming the file and what is wrong (a truncated or corrupt zip, an
/// opcode or global ember does not take, a view outside its storage, a CRC mismatch).
///   nn::StateDict sd = io::load_pth("resnet18.pth");
///   model->load_state_dict(sd);                             // strict: names and shapes match
nn::StateDict load_pth(const std::string& path, const PthOptions& options = {});

}  // namespace ember::io

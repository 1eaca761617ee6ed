// tools/ember.cpp — the `ember` command: train, eval, predict, inspect, generate, info.
//
//   ember train --dataset fashion-mnist --model mlp --epochs 5 --output mlp.safetensors
//   ember train --model gpt2 --config small.json --text book.txt -o book-gpt2/   (train_text.cpp)
//   ember train --model resnet18 --images photos/ --epochs 10        (train_images.cpp)
//   ember eval mlp.safetensors --dataset fashion-mnist
//   ember predict mlp.safetensors --input rows.csv --output preds.csv
//   ember inspect mlp.safetensors [--json] [--no-verify]
//   ember generate gpt2/ --prompt "Once upon a time" --max-new-tokens 64 --top-p 0.9 --seed 7
//   ember info
//   ember train --plugin ./libmine.so --model mine.json ...   (custom module types)
//
// Every argument is checked before any work: a bad value, a missing input file or an
// output folder that does not exist stops the command before it loads data or trains,
// and nothing is written (Note [Argument checks]).
#include "ember/ember.hpp"

#include <dlfcn.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <charconv>
#include <cmath>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string_view>
#include <variant>

#include "cli_common.hpp"
#include "ember/data/dataloader.hpp"
#include "ember/data/fashion_mnist.hpp"
#include "ember/data/preprocess.hpp"
#include "ember/data/readers.hpp"
#include "ember/distributed.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/train/fit.hpp"
#include "ember/train/models.hpp"
#include "train_images.hpp"
#include "train_text.hpp"

using namespace ember;

namespace {

namespace fs = std::filesystem;
using namespace ember_cli;

constexpr const char* kCommands = "train, eval, predict, inspect, generate or info";
constexpr int64_t kDefaultBatchSize = 128;  // --batch-size of the classifiers (train, eval)

// ---- argument checks ----
//
// Note [Argument checks]
// CLI11's stock checks word their errors after the limits of the C++ type: `--epochs abc`
// printed "not in range 0 to" a 309-digit number and `--batch-size 0` "not in range 0 to
// ...". These validators run on the text before it is converted and say what the value is
// and what is allowed: "--epochs: 'abc' is not a whole number >= 1". Choices (optimizer,
// scheduler, progress) are checked the same way, while parsing; paths are checked by
// check_train() and friends before the command does anything else. The validators
// (whole_number, number, one_of) live in tools/cli_common.hpp, shared by every subcommand.

// ---- plugins ----
//
// Note [Plugins]
// `--plugin lib.so` (repeatable) dlopens a shared library before the command runs. Its
// static initialisers call nn::register_module_type, so the architecture in a model file (or
// a --model spec) can name its module types and the stock command trains and serves them
// (docs/modules.md). The library is never closed: the factories live in it. A library that
// adds no module type is refused, since a model would then fail later with a vaguer error.

// The registered module types. Workaround: nn has no public listing yet, but nn::build's
// error for an unknown type lists every known one ("known types: A, B; register ...").
std::set<std::string> known_module_types() {
  std::set<std::string> types;
  try {
    nn::build(nn::json{{"type", "\x01ember-probe"}});
  } catch (const Error& e) {
    const std::string m = e.what();
    const std::string open = "known types: ";
    const size_t begin = m.find(open);
    const size_t end = m.find("; register", begin);
    if (begin == std::string::npos || end == std::string::npos) return types;
    std::string_view list(m);
    list = list.substr(begin + open.size(), end - begin - open.size());
    while (!list.empty()) {
      const size_t comma = list.find(", ");
      types.emplace(list.substr(0, comma));
      list = comma == std::string_view::npos ? std::string_view() : list.substr(comma + 2);
    }
  }
  return types;
}

// Note [A plugin whose static initialiser throws]
// C++ calls std::terminate when a static initialiser exits by an exception, so a plugin whose
// initialiser throws would end the command inside dlopen with "terminate called ..." and
// SIGABRT. While dlopen runs, a terminate handler (and a catch, should the exception come out
// of dlopen instead) reads the exception, prints one error line naming the library and the
// message, and ends the process with status 1 by _exit: the dynamic loader's lock is still
// held then, so exit()'s destructors could hang. The previous handler comes back after dlopen.
// Ending the process is the command's decision; the library never does that.

const std::string* opening_plugin = nullptr;  // the --plugin value dlopen is loading

[[noreturn]] void report_plugin_that_threw() {
  std::string what = "an exception that is not a std::exception";
  if (const std::exception_ptr e = std::current_exception()) {
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      what = ex.what();
    } catch (...) {
    }
  } else {
    what = "no exception (std::terminate was called while it loaded)";
  }
  std::cerr << "error: ember: --plugin " << (opening_plugin ? *opening_plugin : "?")
            << ": its static initialiser threw: " << what << std::endl;
  ::_exit(1);
}

// dlopen with report_plugin_that_threw as the terminate handler for its duration.
void* open_plugin(const std::string& path, const std::string& full) {
  struct Handler {
    std::terminate_handler previous;
    explicit Handler(const std::string& p)
        : previous(std::set_terminate(report_plugin_that_threw)) {
      opening_plugin = &p;
    }
    ~Handler() {
      std::set_terminate(previous);
      opening_plugin = nullptr;
    }
  } handler(path);
  try {
    return dlopen(full.c_str(), RTLD_NOW | RTLD_GLOBAL);
  } catch (...) {
    report_plugin_that_threw();
  }
}

void load_plugins(const std::vector<std::string>& paths) {
  for (const std::string& path : paths) {
    std::error_code ec;
    EMBER_CHECK(fs::is_regular_file(path, ec), "ember: --plugin ", path,
                ": no such file (expected a shared library that registers module types)");
    const std::set<std::string> before = known_module_types();
    // An absolute path: dlopen would search the library path for a bare "libmine.so".
    const std::string full = fs::absolute(path).string();
    dlerror();
    if (open_plugin(path, full) == nullptr) {  // Note [A plugin whose static initialiser throws]
      const char* why = dlerror();
      detail::throw_error(detail::concat("ember: --plugin ", path, ": cannot load it (",
                                         why ? why : "unknown dlopen error",
                                         "; expected a shared library built against ember)"));
    }
    std::string added;
    for (const std::string& t : known_module_types())
      if (!before.count(t)) added += (added.empty() ? "" : ", ") + t;
    EMBER_CHECK(!added.empty(), "ember: --plugin ", path,
                " registered no new module type (expected a library whose static "
                "initialisers call nn::register_module_type; see docs/modules.md)");
  }
}

void add_plugin_option(CLI::App* c, std::vector<std::string>& plugins) {
  c->add_option("--plugin", plugins, "shared library registering custom module types (repeatable)")
      ->allow_extra_args(false)
      ->take_all();
}

// ---- preprocessing stored with the model ----
//
// Note [Stored preprocessing]
// `ember train` on a CSV saves what it learnt about the data in the model's metadata, and
// eval and predict apply it, so a served model sees inputs prepared as in training:
//   train.label_classes  JSON list: the text labels' class names, class i first
//   train.input_mean     JSON list (--standardize): the training inputs' column means
//   train.input_scale    JSON list (--standardize): their population standard deviations
constexpr const char* kClassesKey = "train.label_classes";
constexpr const char* kMeanKey = "train.input_mean";
constexpr const char* kScaleKey = "train.input_scale";

struct Preprocessing {
  std::vector<std::string> classes;
  std::optional<data::Standardizer> scaler;

  std::map<std::string, std::string> metadata() const {
    std::map<std::string, std::string> m;
    if (!classes.empty()) m[kClassesKey] = nn::json(classes).dump();
    if (scaler) {
      m[kMeanKey] = nn::json(scaler->mean).dump();
      m[kScaleKey] = nn::json(scaler->scale).dump();
    }
    return m;
  }

  // From a model file's metadata; throws naming the file and key when a value is malformed.
  static Preprocessing of_model(const std::string& path) {
    const std::map<std::string, std::string> m = io::inspect(path).metadata;
    Preprocessing p;
    auto read = [&](const char* key, auto& out) {
      const auto it = m.find(key);
      if (it == m.end()) return false;
      try {
        out = nn::json::parse(it->second).get<std::decay_t<decltype(out)>>();
      } catch (const nn::json::exception& e) {
        detail::throw_error(detail::concat("ember: ", path, ": metadata ", key, " is '",
                                           it->second.substr(0, 80),
                                           "' (expected a JSON list: ", e.what(), ")"));
      }
      return true;
    };
    read(kClassesKey, p.classes);
    data::Standardizer s;
    const bool has_mean = read(kMeanKey, s.mean), has_scale = read(kScaleKey, s.scale);
    EMBER_CHECK(has_mean == has_scale && s.mean.size() == s.scale.size(), "ember: ", path,
                ": metadata ", kMeanKey, " and ", kScaleKey, " do not match (got ", s.mean.size(),
                " means and ", s.scale.size(), " scales, expected as many)");
    if (has_mean) p.scaler = s;
    return p;
  }

  Tensor transform(const Tensor& x) const { return scaler ? scaler->transform(x) : x; }
};

struct DataArgs {
  std::string dataset = "fashion-mnist";
  std::string label;
  std::string data_dir;
  std::string test_csv;
  std::optional<int64_t> batch_size;       // default: kDefaultBatchSize (16 with --text)
  bool header = false, no_header = false;  // force the CSV header either way (default: detected)
  bool standardize = false;  // train: standardize CSV inputs (Note [Stored preprocessing])
};

bool is_csv(const DataArgs& a) { return a.dataset != "fashion-mnist"; }

// The label column: a whole number is an index (negative from the end), anything else a name.
std::variant<int64_t, std::string> label_column(const std::string& label) {
  int64_t index = 0;
  const auto [end, ec] = std::from_chars(label.data(), label.data() + label.size(), index);
  if (!label.empty() && ec == std::errc() && end == label.data() + label.size()) return index;
  return label;
}

data::CsvOptions csv_options(const DataArgs& a) {
  data::CsvOptions o;
  if (a.header) o.has_header = true;
  if (a.no_header) o.has_header = false;
  return o;
}

// The data arguments name readable inputs (before anything is loaded).
void check_data(const DataArgs& a) {
  if (!is_csv(a)) {
    EMBER_CHECK(a.test_csv.empty(),
                "ember: --test-csv goes with a CSV --dataset (got --dataset fashion-mnist)");
    if (!a.data_dir.empty()) {
      std::error_code ec;
      EMBER_CHECK(fs::is_directory(a.data_dir, ec), "ember: --data-dir ", a.data_dir,
                  ": no such folder");
    }
    return;
  }
  check_input_file("--dataset", a.dataset);
  EMBER_CHECK(!a.label.empty(),
              "ember: a CSV dataset needs --label COLUMN (the label column's name or index)");
  if (!a.test_csv.empty()) check_input_file("--test-csv", a.test_csv);
}

struct Splits {
  std::shared_ptr<data::Dataset> train, test;
  Preprocessing prep;  // learnt from the training CSV, or the model's (eval)
};

// Fashion-MNIST or a CSV file; images keep [N, 1, 28, 28] when the model wants them. A CSV
// is prepared with `saved` when given (eval: the model's), else with what the training file
// gives (Note [Stored preprocessing]).
Splits load_data(const DataArgs& a, bool images, bool need_train,
                 const Preprocessing* saved = nullptr) {
  Splits s;
  if (a.dataset == "fashion-mnist") {
    auto as_dataset = [&](const std::string& split) {
      data::FashionMnist fm = data::load_fashion_mnist(split, a.data_dir);
      return std::make_shared<data::TensorDataset>(images ? fm.images : fm.flat_images(),
                                                   fm.labels);
    };
    if (need_train) s.train = as_dataset("train");
    s.test = as_dataset("test");
    return s;
  }
  data::CsvOptions o = csv_options(a);
  o.label_column = label_column(a.label);
  if (saved) o.classes = saved->classes;
  data::CsvData d = data::read_csv(a.dataset, o);
  if (saved) {
    s.prep = *saved;
  } else {
    s.prep.classes = d.classes;
    if (a.standardize) s.prep.scaler = data::Standardizer::fit(d.inputs);
  }
  o.classes = s.prep.classes;  // a test file maps its labels as the training file did
  auto ds = std::make_shared<data::TensorDataset>(s.prep.transform(d.inputs), d.labels);
  s.train = ds;
  s.test = ds;
  if (!a.test_csv.empty()) {
    data::CsvData t = data::read_csv(a.test_csv, o);
    s.test = std::make_shared<data::TensorDataset>(s.prep.transform(t.inputs), t.labels);
  }
  return s;
}

// io::load_model, with a hint when the file names a module type no plugin registered.
nn::Module load_model_for_cli(const std::string& path, Device device) {
  try {
    return io::load_model(path, device);
  } catch (const Error& e) {
    if (std::string(e.what()).find("unknown module type") == std::string::npos) throw;
    detail::throw_error(detail::concat(
        e.what(), " (a custom module type: pass the library that registers it with --plugin)"));
  }
}

// A CSV field, quoted when it holds a comma, a quote or a line end.
std::string csv_field(const std::string& text) {
  if (text.find_first_of(",\"\r\n") == std::string::npos) return text;
  std::string q = "\"";
  for (const char c : text) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// A --model spec file's JSON (checked before any work; built by make_model).
nn::json read_model_spec(const std::string& spec) {
  std::ifstream f(spec);
  EMBER_CHECK(f.good(), "ember: --model '", spec,
              "' is neither mlp, cnn nor a readable JSON spec file");
  nn::json j;
  try {
    f >> j;
  } catch (const nn::json::exception& e) {
    detail::throw_error(detail::concat("ember: ", spec, ": not valid JSON (", e.what(), ")"));
  }
  EMBER_CHECK(j.is_object() && j.contains("type"), "ember: --model ", spec,
              ": not a module spec (expected a JSON object with a \"type\", as config() writes)");
  return j;
}

nn::Module make_model(const std::string& spec, const nn::json& spec_json, int64_t in_features,
                      int64_t classes) {
  if (spec == "mlp") return train::mlp(in_features, {256, 256}, classes);
  if (spec == "cnn") return train::fashion_cnn(classes);
  return nn::build(spec_json);
}

int64_t class_count(const data::Dataset& ds, const Preprocessing& prep) {
  if (!prep.classes.empty()) return static_cast<int64_t>(prep.classes.size());
  auto* td = dynamic_cast<const data::TensorDataset*>(&ds);
  if (!td || !td->targets().defined() || is_floating(td->targets().dtype())) return 1;
  return static_cast<int64_t>(td->targets().to(DType::f64).max().item<double>()) + 1;
}

int64_t feature_count(const data::Dataset& ds) {
  auto* td = dynamic_cast<const data::TensorDataset*>(&ds);
  return td ? td->inputs().numel() / std::max<int64_t>(td->inputs().size(0), 1) : 0;
}

train::LossFn loss_for(const data::Dataset& ds) {
  auto* td = dynamic_cast<const data::TensorDataset*>(&ds);
  if (td && td->targets().defined() && is_floating(td->targets().dtype()))
    return [](const Tensor& out, const Tensor& y) {
      return mse_loss(out.reshape({out.size(0), -1}), y.reshape({y.size(0), -1}));
    };
  return train::cross_entropy_loss();
}

void print_metrics(const char* what, const train::Metrics& m) {
  std::cout << what << ": loss " << m.loss;
  if (m.accuracy) std::cout << ", accuracy " << *m.accuracy * 100.0 << "%";
  std::cout << " (" << m.samples << " samples)\n";
}

// Everything cmd_train needs that can be checked without loading data (the numbers and
// choices were checked while parsing, Note [Argument checks]); returns a --model spec
// file's JSON (null for mlp and cnn).
nn::json check_train(const DataArgs& da, const TrainArgs& t) {
  check_train_args(t);
  check_data(da);
  if (da.standardize)
    EMBER_CHECK(is_csv(da), "ember: --standardize goes with a CSV --dataset (got --dataset ",
                da.dataset, ")");
  if (t.model == "cnn")
    EMBER_CHECK(!is_csv(da), "ember: --model cnn takes Fashion-MNIST images (got --dataset ",
                da.dataset, ")");
  EMBER_CHECK(t.model != "gpt2" && t.model != "llama", "ember: --model ", t.model,
              " is a language model (expected --text FILE and --config CONFIG.json with it)");
  EMBER_CHECK(!is_image_model(t.model), "ember: --model ", t.model,
              " is an image model (expected --images FOLDER with it)");
  const nn::json spec =
      t.model == "mlp" || t.model == "cnn" ? nn::json() : read_model_spec(t.model);
  check_output_path("--output", t.output);
  return spec;
}

int cmd_train(const DataArgs& da, TrainArgs t) {
  if (t.output.empty()) t.output = "model.safetensors";
  const nn::json spec = check_train(da, t);
  if (t.distributed) join_job();
  const bool lead = !t.distributed || distributed::rank() == 0;  // prints and writes files
  manual_seed(t.seed);
  const Device device = Device::parse(t.device);
  Splits data = load_data(da, t.model == "cnn", true);
  nn::Module model =
      make_model(t.model, spec, feature_count(*data.train), class_count(*data.train, data.prep));
  model->to(device);
  if (lead) std::cout << *model << "\n";
  data::DataLoader test_loader(data.test, {.batch_size = 1024});
  run_training(t, {.model = model,
                   .train = data.train,
                   .batch_size = da.batch_size.value_or(kDefaultBatchSize),
                   .epochs = t.epochs,
                   .val_loader = &test_loader,
                   .loss = loss_for(*data.train),
                   .lead = lead});
  train::Metrics m = train::evaluate(model, test_loader, loss_for(*data.train));
  if (lead) {
    print_metrics("test", m);
    io::save_model(model, t.output, {.metadata = data.prep.metadata()});
    std::cout << "saved " << t.output << " (" << std::filesystem::file_size(t.output)
              << " bytes)\n";
  }
  if (t.distributed) {
    distributed::barrier();  // the files are complete before any rank leaves
    distributed::finalize();
  }
  return 0;
}

// Under mpirun a failing rank must end the whole job rather than leave the others waiting
// in a collective: abort_job prints the message with the rank and ends every rank.
int fail(const std::string& what) {
  if (distributed::is_initialized() && distributed::world_size() > 1)
    distributed::abort_job("error: " + what);
  std::cerr << "error: " << what << "\n";
  return 1;
}

int cmd_eval(const std::string& path, const DataArgs& da, const std::string& device_name) {
  const Device device = check_device(device_name);
  check_input_file("model", path);
  check_data(da);
  nn::Module model = load_model_for_cli(path, device);
  const Preprocessing prep = Preprocessing::of_model(path);
  Splits data = load_data(da, train::expects_images(model), false, &prep);
  data::DataLoader loader(data.test, {.batch_size = da.batch_size.value_or(kDefaultBatchSize)});
  print_metrics("eval", train::evaluate(model, loader, loss_for(*data.test)));
  return 0;
}

int cmd_predict(const std::string& path, const std::string& input, const std::string& output,
                const std::string& label, const DataArgs& header, const std::string& device_name) {
  const Device device = check_device(device_name);
  check_input_file("model", path);
  check_input_file("--input", input);
  check_output_path("--output", output);
  nn::Module model = load_model_for_cli(path, device);
  const Preprocessing prep = Preprocessing::of_model(path);
  data::CsvOptions o = csv_options(header);
  if (label.empty())
    o.has_label = false;  // every column is a feature
  else
    o.label_column = label_column(label);
  Tensor x = data::read_csv(input, o).inputs;
  if (prep.scaler)
    EMBER_CHECK(x.size(1) == static_cast<int64_t>(prep.scaler->features()),
                "ember predict: ", input, " has ", x.size(1), " feature columns (expected ",
                prep.scaler->features(),
                ", as the model was trained on; pass --label to "
                "drop a label column)");
  x = prep.transform(x);
  if (train::expects_images(model)) x = x.reshape({x.size(0), 1, 28, 28});
  NoGradGuard g;
  Tensor out = model(x.to(device)).to(Device::cpu());
  std::ofstream f(output);
  EMBER_CHECK(f.good(), "ember predict: cannot write ", output);
  const bool classes = out.dim() == 2 && out.size(1) > 1;
  const bool named = classes && !prep.classes.empty();
  if (named)
    EMBER_CHECK(out.size(1) == static_cast<int64_t>(prep.classes.size()), "ember predict: ", path,
                " has ", out.size(1), " outputs but its metadata names ", prep.classes.size(),
                " classes (expected one output per class)");
  f << (classes ? "prediction" : "value");
  if (classes)
    for (int64_t c = 0; c < out.size(1); ++c)
      f << "," << (named ? csv_field("p_" + prep.classes[c]) : "p" + std::to_string(c));
  f << "\n";
  Tensor probs = classes ? softmax(out, 1) : out.reshape({out.size(0), -1});
  Tensor pred = classes ? argmax(out, 1) : Tensor();
  auto pv = probs.to_vector<float>();
  auto cls = classes ? pred.to_vector<int64_t>() : std::vector<int64_t>();
  const int64_t width = probs.size(1);
  for (int64_t i = 0; i < out.size(0); ++i) {
    if (named)
      f << csv_field(prep.classes[cls[i]]);
    else if (classes)
      f << cls[i];
    for (int64_t c = 0; c < width; ++c) f << (classes || c ? "," : "") << pv[i * width + c];
    f << "\n";
  }
  std::cout << "wrote " << out.size(0) << " predictions to " << output << "\n";
  return 0;
}

// The table (or JSON) of what `file` holds. The data checksum is verified unless
// no_verify: a corrupt file is an error here as it is for eval and predict.
int cmd_inspect(const std::string& file, bool as_json, bool no_verify) {
  io::Inspection r = io::inspect(file);
  if (!no_verify && r.checksum == "not checked") {
    try {
      r = io::inspect(file, /*verify_checksum=*/true);
    } catch (const Error& e) {
      detail::throw_error(
          detail::concat(e.what(), " (ember inspect --no-verify ", file, " shows it anyway)"));
    }
  }
  if (as_json)
    std::cout << r.to_json().dump(2) << "\n";
  else
    std::cout << r.to_string();
  return 0;
}

int cmd_info() {
  std::cout << "ember 0.1.0\n";
#if defined(EMBER_WITH_CUDA)
  std::cout << "  build: CUDA on\n";
#else
  std::cout << "  build: CPU only (built without CUDA)\n";
#endif
  std::cout << "  cpu threads: " << get_num_threads() << " (EMBER_NUM_THREADS to change)\n";
  std::cout << "  cuda devices: " << cuda_device_count() << "\n";
  for (int i = 0; i < cuda_device_count(); ++i)
    std::cout << "    cuda:" << i << ": " << cuda_device_description(i) << "\n";
  std::cout << "  default device: " << default_device().str() << "\n";
  std::cout << "  fashion-mnist: " << data::fashion_mnist_directory() << "\n";
  return 0;
}

// The first argument names a known subcommand (or asks for help). CLI11 says "A subcommand
// is required" for `ember frobnicate`; this names what was given and what exists.
void check_subcommand(int argc, char** argv) {
  if (argc < 2)
    throw CLI::RequiredError(
        detail::concat("ember: a subcommand is required (expected ", kCommands, ")"),
        CLI::ExitCodes::RequiredError);
  const std::string first = argv[1];
  if (first == "-h" || first == "--help" || first == "--help-all") return;
  for (const char* c : {"train", "eval", "predict", "inspect", "generate", "info"})
    if (first == c) return;
  throw CLI::ExtrasError(
      first.rfind('-', 0) == 0
          ? detail::concat("ember: the subcommand comes first (got '", first, "', expected ",
                           kCommands, ")")
          : detail::concat("ember: unknown subcommand '", first, "' (expected ", kCommands, ")"),
      CLI::ExitCodes::ExtrasError);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ember — train, evaluate and ship models without Python"};
  app.require_subcommand(1);
  DataArgs da;
  auto add_header_flags = [&](CLI::App* c) {
    auto* yes = c->add_flag("--header", da.header,
                            "the CSV's first line is a header, even if it is all numbers");
    auto* no = c->add_flag("--no-header", da.no_header,
                           "the CSV's first line is data (default: data when it is all numbers)");
    yes->excludes(no);
  };
  auto add_data = [&](CLI::App* c) {
    c->add_option("--dataset", da.dataset, "fashion-mnist or a CSV file")->capture_default_str();
    c->add_option("--label", da.label, "label column of a CSV dataset (name or index)");
    c->add_option("--data-dir", da.data_dir,
                  "Fashion-MNIST directory (default: the Debian package's)");
    c->add_option("--test-csv", da.test_csv, "CSV file to evaluate on (default: the training CSV)");
    c->add_option("--batch-size", da.batch_size,
                  "batch size (1 or more; default: 128, with --text 16, with --images 32)")
        ->check(whole_number<int64_t>(1));
    add_header_flags(c);
  };
  std::vector<std::string> plugins;

  auto* train = app.add_subcommand("train", "train a model and save it");
  add_data(train);
  add_plugin_option(train, plugins);
  train->add_flag("--standardize", da.standardize,
                  "standardize CSV inputs with the training mean and std (saved with the model, "
                  "applied by eval and predict)");
  TrainArgs ta;
  std::string device = "cpu";  // eval and predict
  train
      ->add_option(
          "--model", ta.model,
          "mlp, cnn, a JSON spec file; gpt2 or llama with --text; resnet18, resnet50, ..., "
          "mobilenet_v2 with --images")
      ->capture_default_str();
  train->add_option("--epochs", ta.epochs, "epochs (1 or more)")
      ->capture_default_str()
      ->check(whole_number<int64_t>(1));
  train->add_option("--lr", ta.lr, "learning rate (above 0)")
      ->capture_default_str()
      ->check(number(0.0, false));
  train->add_option("--optimizer", ta.optimizer, "adam, adamw or sgd")
      ->capture_default_str()
      ->check(one_of({"adam", "adamw", "sgd"}));
  train->add_option("--momentum", ta.momentum, "SGD momentum (0 or more)")
      ->capture_default_str()
      ->check(number(0.0, true));
  train->add_option("--weight-decay", ta.weight_decay, "weight decay (0 or more)")
      ->capture_default_str()
      ->check(number(0.0, true));
  train->add_option("--scheduler", ta.scheduler, "none, step, cosine, exponential or plateau")
      ->capture_default_str()
      ->check(one_of({"none", "step", "cosine", "exponential", "plateau"}));
  train->add_option("--seed", ta.seed, "random seed")
      ->capture_default_str()
      ->check(whole_number<uint64_t>(0));
  train->add_option("--device", ta.device, "cpu or cuda:N")->capture_default_str();
  train->add_option("--output,-o", ta.output,
                    "where to save the model (default: model.safetensors; its folder must "
                    "exist); with --text, the Hugging Face folder to write (required)");
  train
      ->add_option("--checkpoint-every", ta.checkpoint_every,
                   "save a checkpoint every N steps (0: never)")
      ->check(whole_number<int64_t>(0));
  train->add_option("--checkpoint", ta.checkpoint, "checkpoint path (default: OUTPUT.ckpt)");
  train->add_option("--resume", ta.resume, "resume training from a checkpoint");
  train->add_option("--progress", ta.progress, "auto, bar, lines or none")
      ->capture_default_str()
      ->check(one_of({"auto", "bar", "lines", "none"}));
  train->add_flag("--distributed", ta.distributed,
                  "data-parallel across the ranks of an mpirun job (rank 0 prints and writes)");
  train
      ->add_option("--clip-grad-norm", ta.clip_grad_norm,
                   "scale the gradients to this global norm at most (above 0; default: off)")
      ->check(number(0.0, false));
  train->add_flag("--capture", ta.capture, "run each step as one CUDA graph (--device cuda:N)");
  train->add_flag("--bf16", ta.bf16, "compute the forward in bfloat16 (--device cuda:N)");
  TextArgs tx;
  ember_cli::add_text_options(train, tx);
  ImageArgs ix;
  ember_cli::add_image_options(train, ix);

  auto* eval = app.add_subcommand("eval", "evaluate a saved model");
  std::string model_path;
  eval->add_option("model", model_path, "model file")->required();
  add_data(eval);
  add_plugin_option(eval, plugins);
  eval->add_option("--device", device, "cpu or cuda:N")->capture_default_str();

  auto* predict = app.add_subcommand("predict", "write predictions for CSV rows");
  std::string input, preds = "predictions.csv", label;
  predict->add_option("model", model_path, "model file")->required();
  predict->add_option("--input", input, "CSV file of feature rows (a header line is detected)")
      ->required();
  predict->add_option("--output", preds, "CSV file to write (its folder must exist)")
      ->capture_default_str();
  predict->add_option("--label", label,
                      "a label column to ignore, if the file has one (name or index)");
  predict->add_option("--device", device, "cpu or cuda:N")->capture_default_str();
  add_header_flags(predict);
  add_plugin_option(predict, plugins);

  auto* inspect = app.add_subcommand("inspect", "show what a model or checkpoint file holds");
  std::string file;
  bool as_json = false, no_verify = false;
  inspect->add_option("file", file, "safetensors file")->required();
  inspect->add_flag("--json", as_json, "print JSON");
  inspect->add_flag("--no-verify", no_verify,
                    "skip the data checksum (a quick look at a large or damaged file)");
  add_plugin_option(inspect, plugins);

  auto* generate = app.add_subcommand(
      "generate", "continue a prompt with a Hugging Face language model (GPT-2, Llama)");
  GenerateArgs ga;
  generate->add_option("model", ga.model, "model folder (config.json, model.safetensors)")
      ->required();
  generate->add_option("--prompt,-p", ga.prompt, "the text to continue")->required();
  generate->add_option("--tokenizer", ga.tokenizer, "tokenizer.json (default: the model folder's)");
  generate
      ->add_option("--max-new-tokens,-n", ga.max_new_tokens,
                   "tokens to add at most (default: 64, or as many as the context holds)")
      ->check(whole_number<int64_t>(1));
  auto* greedy =
      generate->add_flag("--greedy", ga.greedy, "take the most likely token (default: sample)");
  for (CLI::Option* o :
       {generate->add_option("--temperature", ga.temperature, "divide the logits by T (above 0)")
            ->capture_default_str()
            ->check(number(0.0, false)),
        generate->add_option("--top-k", ga.top_k, "sample among the K most likely (0: all)")
            ->capture_default_str()
            ->check(whole_number<int64_t>(0)),
        generate
            ->add_option("--top-p", ga.top_p,
                         "sample among the most likely tokens of mass P (0 < P <= 1)")
            ->capture_default_str()
            ->check(number(0.0, false))})
    o->excludes(greedy);
  generate->add_option("--seed", ga.seed, "random seed (default: a random one)")
      ->check(whole_number<uint64_t>(0));
  generate
      ->add_option("--repetition-penalty", ga.repetition_penalty,
                   "penalise tokens already seen (above 0; 1: none)")
      ->capture_default_str()
      ->check(number(0.0, false));
  generate->add_option("--device", ga.device, "cpu or cuda:N")->capture_default_str();
  generate->add_flag("--bf16", ga.bf16, "load the weights in bfloat16");

  auto* info = app.add_subcommand("info", "build options, threads and devices");

  try {
    check_subcommand(argc, argv);
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    load_plugins(plugins);  // Note [Plugins]
    if (*train && !tx.text.empty()) return cmd_train_text(ta, tx, da.batch_size);
    if (*train && !ix.images.empty()) return cmd_train_images(ta, ix, da.batch_size);
    if (*train) return cmd_train(da, ta);
    if (*eval) return cmd_eval(model_path, da, device);
    if (*predict) return cmd_predict(model_path, input, preds, label, da, device);
    if (*inspect) return cmd_inspect(file, as_json, no_verify);
    if (*generate) return cmd_generate(ga);
    if (*info) return cmd_info();
  } catch (const ember::Error& e) {
    return fail(e.what());
  } catch (const std::exception& e) {  // from a library underneath (filesystem, JSON, ...)
    return fail(e.what());
  }
  return 0;
}

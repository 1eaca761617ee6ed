// tools/ember.cpp — the `ember` command: train, eval, predict, inspect, info.
//
//   ember train --dataset fashion-mnist --model mlp --epochs 5 --output mlp.safetensors
//   ember eval mlp.safetensors --dataset fashion-mnist
//   ember predict mlp.safetensors --input rows.csv --output preds.csv
//   ember inspect mlp.safetensors [--json]
//   ember info
#include <CLI/CLI.hpp>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "ember/data/dataloader.hpp"
#include "ember/data/fashion_mnist.hpp"
#include "ember/data/readers.hpp"
#include "ember/ember.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/optim/adam.hpp"
#include "ember/optim/scheduler.hpp"
#include "ember/optim/sgd.hpp"
#include "ember/train/fit.hpp"
#include "ember/train/models.hpp"

using namespace ember;

namespace {

struct DataArgs {
  std::string dataset = "fashion-mnist";
  std::string label;
  std::string data_dir;
  std::string test_csv;
  int64_t batch_size = 128;
};

struct Splits {
  std::shared_ptr<data::Dataset> train, test;
};

// Fashion-MNIST or a CSV file; images keep [N, 1, 28, 28] when the model wants them.
Splits load_data(const DataArgs& a, bool images, bool need_train) {
  Splits s;
  if (a.dataset == "fashion-mnist") {
    auto as_dataset = [&](const std::string& split) {
      data::FashionMnist fm = data::load_fashion_mnist(split, a.data_dir);
      return std::make_shared<data::TensorDataset>(images ? fm.images : fm.flat_images(), fm.labels);
    };
    if (need_train) s.train = as_dataset("train");
    s.test = as_dataset("test");
    return s;
  }
  EMBER_CHECK(!a.label.empty(), "ember: a CSV dataset needs --label COLUMN (the label column's name or index)");
  data::CsvOptions o;
  if (!a.label.empty() && a.label.find_first_not_of("-0123456789") == std::string::npos)
    o.label_column = static_cast<int64_t>(std::stoll(a.label));
  else
    o.label_column = a.label;
  data::CsvData d = data::read_csv(a.dataset, o);
  auto ds = std::make_shared<data::TensorDataset>(d.inputs, d.labels);
  s.train = ds;
  s.test = ds;
  if (!a.test_csv.empty()) {
    data::CsvData t = data::read_csv(a.test_csv, o);
    s.test = std::make_shared<data::TensorDataset>(t.inputs, t.labels);
  }
  return s;
}

nn::Module make_model(const std::string& spec, int64_t in_features, int64_t classes) {
  if (spec == "mlp") return train::mlp(in_features, {256, 256}, classes);
  if (spec == "cnn") return train::fashion_cnn(classes);
  std::ifstream f(spec);
  EMBER_CHECK(f.good(), "ember: --model '", spec, "' is neither mlp, cnn nor a readable JSON spec file");
  nn::json j;
  try {
    f >> j;
  } catch (const nn::json::exception& e) {
    detail::throw_error(detail::concat("ember: ", spec, ": not valid JSON (", e.what(), ")"));
  }
  return nn::build(j);
}

int64_t class_count(const data::Dataset& ds) {
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
    return [](const Tensor& out, const Tensor& y) { return mse_loss(out.reshape({out.size(0), -1}), y.reshape({y.size(0), -1})); };
  return train::cross_entropy_loss();
}

void print_metrics(const char* what, const train::Metrics& m) {
  std::cout << what << ": loss " << m.loss;
  if (m.accuracy) std::cout << ", accuracy " << *m.accuracy * 100.0 << "%";
  std::cout << " (" << m.samples << " samples)\n";
}

int cmd_train(const DataArgs& da, const std::string& model_spec, int64_t epochs, double lr,
              const std::string& opt_name, double momentum, double weight_decay, const std::string& sched_name,
              uint64_t seed, const std::string& device_name, const std::string& output, int64_t ckpt_every,
              const std::string& ckpt_path, const std::string& resume_path, const std::string& progress) {
  manual_seed(seed);
  const Device device = Device::parse(device_name);
  const bool images = model_spec == "cnn";
  Splits data = load_data(da, images, true);
  nn::Module model = make_model(model_spec, feature_count(*data.train), class_count(*data.train));
  model->to(device);
  std::cout << *model << "\n";
  data::DataLoader train_loader(data.train, {.batch_size = da.batch_size, .shuffle = true, .seed = seed});
  data::DataLoader test_loader(data.test, {.batch_size = 1024});

  std::unique_ptr<optim::Optimizer> opt;
  if (opt_name == "adam") opt = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions{.lr = lr, .weight_decay = weight_decay});
  else if (opt_name == "adamw") opt = std::make_unique<optim::AdamW>(model->parameters(), optim::AdamWOptions{.lr = lr, .weight_decay = weight_decay});
  else if (opt_name == "sgd") opt = std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions{.lr = lr, .momentum = momentum, .weight_decay = weight_decay});
  else detail::throw_error("ember: unknown --optimizer '" + opt_name + "' (expected adam, adamw or sgd)");

  std::unique_ptr<optim::LRScheduler> sched;
  std::unique_ptr<optim::ReduceLROnPlateau> plateau;
  bool per_batch = false;
  const int64_t steps = epochs * train_loader.num_batches();
  if (sched_name == "cosine") {
    sched = std::make_unique<optim::CosineAnnealingLR>(*opt, steps);
    per_batch = true;
  } else if (sched_name == "step") {
    sched = std::make_unique<optim::StepLR>(*opt, std::max<int64_t>(epochs / 3, 1), 0.1);
  } else if (sched_name == "exponential") {
    sched = std::make_unique<optim::ExponentialLR>(*opt, 0.9);
  } else if (sched_name == "plateau") {
    plateau = std::make_unique<optim::ReduceLROnPlateau>(*opt, optim::ReduceLROnPlateauOptions{.patience = 1});
  } else if (sched_name != "none") {
    detail::throw_error("ember: unknown --scheduler '" + sched_name + "' (expected none, step, cosine, exponential or plateau)");
  }

  train::FitOptions fo;
  fo.epochs = epochs;
  fo.val_loader = &test_loader;
  fo.scheduler = sched.get();
  fo.scheduler_per_batch = per_batch;
  fo.plateau = plateau.get();
  fo.device = device;
  fo.checkpoint_every = ckpt_every;
  fo.checkpoint_path = ckpt_path.empty() && ckpt_every > 0 ? output + ".ckpt" : ckpt_path;
  fo.progress = progress == "bar" ? train::Progress::bar
                : progress == "lines" ? train::Progress::lines
                : progress == "none" ? train::Progress::none
                                     : train::Progress::automatic;
  if (!resume_path.empty()) {
    train::ResumePoint r = train::resume(resume_path, model, *opt, sched.get(), train_loader);
    fo.start_epoch = r.epoch;
    fo.start_step = r.step;
    std::cout << "resumed from " << resume_path << " at epoch " << r.epoch + 1 << ", step " << r.step << "\n";
  }
  train::fit(model, train_loader, *opt, loss_for(*data.train), fo);
  train::Metrics m = train::evaluate(model, test_loader, loss_for(*data.train), device);
  print_metrics("test", m);
  io::save_model(model, output);
  std::cout << "saved " << output << " (" << std::filesystem::file_size(output) << " bytes)\n";
  return 0;
}

int cmd_eval(const std::string& path, const DataArgs& da, const std::string& device_name) {
  const Device device = Device::parse(device_name);
  nn::Module model = io::load_model(path, device);
  Splits data = load_data(da, train::expects_images(model), false);
  data::DataLoader loader(data.test, {.batch_size = da.batch_size});
  print_metrics("eval", train::evaluate(model, loader, loss_for(*data.test), device));
  return 0;
}

int cmd_predict(const std::string& path, const std::string& input, const std::string& output, const std::string& label,
                const std::string& device_name) {
  const Device device = Device::parse(device_name);
  nn::Module model = io::load_model(path, device);
  data::CsvOptions o;
  if (label.empty()) o.has_label = false;  // every column is a feature
  else o.label_column = label;
  Tensor x = data::read_csv(input, o).inputs;
  if (train::expects_images(model)) x = x.reshape({x.size(0), 1, 28, 28});
  NoGradGuard g;
  Tensor out = model(x.to(device)).to(Device::cpu());
  std::ofstream f(output);
  EMBER_CHECK(f.good(), "ember predict: cannot write ", output);
  const bool classes = out.dim() == 2 && out.size(1) > 1;
  f << (classes ? "prediction" : "value");
  if (classes)
    for (int64_t c = 0; c < out.size(1); ++c) f << ",p" << c;
  f << "\n";
  Tensor probs = classes ? softmax(out, 1) : out.reshape({out.size(0), -1});
  Tensor pred = classes ? argmax(out, 1) : Tensor();
  auto pv = probs.to_vector<float>();
  auto cls = classes ? pred.to_vector<int64_t>() : std::vector<int64_t>();
  const int64_t width = probs.size(1);
  for (int64_t i = 0; i < out.size(0); ++i) {
    if (classes) f << cls[i];
    for (int64_t c = 0; c < width; ++c) f << (classes || c ? "," : "") << pv[i * width + c];
    f << "\n";
  }
  std::cout << "wrote " << out.size(0) << " predictions to " << output << "\n";
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

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ember — train, evaluate and ship models without Python"};
  app.require_subcommand(1);
  DataArgs da;
  auto add_data = [&](CLI::App* c) {
    c->add_option("--dataset", da.dataset, "fashion-mnist or a CSV file")->capture_default_str();
    c->add_option("--label", da.label, "label column of a CSV dataset (name or index)");
    c->add_option("--data-dir", da.data_dir, "Fashion-MNIST directory (default: the Debian package's)");
    c->add_option("--test-csv", da.test_csv, "CSV file to evaluate on (default: the training CSV)");
    c->add_option("--batch-size", da.batch_size, "batch size")->capture_default_str()->check(CLI::PositiveNumber);
  };

  auto* train = app.add_subcommand("train", "train a model and save it");
  add_data(train);
  std::string model = "mlp", optimizer = "adam", scheduler = "none", device = "cpu", output = "model.safetensors";
  std::string ckpt_path, resume, progress = "auto";
  int64_t epochs = 5, ckpt_every = 0;
  double lr = 1e-3, momentum = 0.9, weight_decay = 0.0;
  uint64_t seed = 42;
  train->add_option("--model", model, "mlp, cnn, or a JSON spec file")->capture_default_str();
  train->add_option("--epochs", epochs, "epochs")->capture_default_str()->check(CLI::NonNegativeNumber);
  train->add_option("--lr", lr, "learning rate")->capture_default_str();
  train->add_option("--optimizer", optimizer, "adam, adamw or sgd")->capture_default_str();
  train->add_option("--momentum", momentum, "SGD momentum")->capture_default_str();
  train->add_option("--weight-decay", weight_decay, "weight decay")->capture_default_str();
  train->add_option("--scheduler", scheduler, "none, step, cosine, exponential or plateau")->capture_default_str();
  train->add_option("--seed", seed, "random seed")->capture_default_str();
  train->add_option("--device", device, "cpu or cuda:N")->capture_default_str();
  train->add_option("--output,-o", output, "where to save the model")->capture_default_str();
  train->add_option("--checkpoint-every", ckpt_every, "save a checkpoint every N steps")->check(CLI::NonNegativeNumber);
  train->add_option("--checkpoint", ckpt_path, "checkpoint path (default: OUTPUT.ckpt)");
  train->add_option("--resume", resume, "resume training from a checkpoint");
  train->add_option("--progress", progress, "auto, bar, lines or none")->capture_default_str();

  auto* eval = app.add_subcommand("eval", "evaluate a saved model");
  std::string model_path;
  eval->add_option("model", model_path, "model file")->required();
  add_data(eval);
  eval->add_option("--device", device, "cpu or cuda:N")->capture_default_str();

  auto* predict = app.add_subcommand("predict", "write predictions for CSV rows");
  std::string input, preds = "predictions.csv", label;
  predict->add_option("model", model_path, "model file")->required();
  predict->add_option("--input", input, "CSV file of feature rows (with a header)")->required();
  predict->add_option("--output", preds, "CSV file to write")->capture_default_str();
  predict->add_option("--label", label, "a label column to ignore, if the file has one");
  predict->add_option("--device", device, "cpu or cuda:N")->capture_default_str();

  auto* inspect = app.add_subcommand("inspect", "show what a model or checkpoint file holds");
  std::string file;
  bool as_json = false;
  inspect->add_option("file", file, "safetensors file")->required();
  inspect->add_flag("--json", as_json, "print JSON");

  auto* info = app.add_subcommand("info", "build options, threads and devices");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    if (*train)
      return cmd_train(da, model, epochs, lr, optimizer, momentum, weight_decay, scheduler, seed, device, output,
                       ckpt_every, ckpt_path, resume, progress);
    if (*eval) return cmd_eval(model_path, da, device);
    if (*predict) return cmd_predict(model_path, input, preds, label, device);
    if (*inspect) {
      io::Inspection r = io::inspect(file);
      if (as_json) std::cout << r.to_json().dump(2) << "\n";
      else std::cout << r.to_string();
      return 0;
    }
    if (*info) return cmd_info();
  } catch (const ember::Error& e) {
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {  // from a library underneath (filesystem, JSON, ...)
    std::cerr << "error: " << e.what() << "\n";
    return 1;
  }
  return 0;
}

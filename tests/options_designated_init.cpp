// tests/options_designated_init.cpp — compiled (not run) with -Wall -Wextra -Werror
// -Werror=missing-field-initializers (tests/CMakeLists.txt, ember_options_warning_check): every
// public aggregate struct of include/ember — options, masks, states and results — must take
// designated initializers naming only some members, PyTorch-keyword style, with no warning.
// Each struct is built twice, naming its first member and then its last, so every member is
// left out once: a member without a default member initialiser breaks this build.
// Not here: Size2d/Size3d (constructors), Half/BFloat16 (numbers), OpInfo (the catalogue's rows,
// filled whole by the library) and internals (TensorImpl, private nested structs).
#include "ember/attention.hpp"
#include "ember/autograd.hpp"
#include "ember/catalogue.hpp"
#include "ember/data/dataloader.hpp"
#include "ember/data/dataset.hpp"
#include "ember/data/distributed_sampler.hpp"
#include "ember/data/fashion_mnist.hpp"
#include "ember/data/preprocess.hpp"
#include "ember/data/readers.hpp"
#include "ember/device.hpp"
#include "ember/distributed.hpp"
#include "ember/distributed/data_parallel.hpp"
#include "ember/io/checkpoint.hpp"
#include "ember/io/safetensors.hpp"
#include "ember/memory.hpp"
#include "ember/nn/activation.hpp"
#include "ember/nn/attention.hpp"
#include "ember/nn/conv.hpp"
#include "ember/nn/embedding.hpp"
#include "ember/nn/linear.hpp"
#include "ember/nn/loss.hpp"
#include "ember/nn/module.hpp"
#include "ember/nn/norm.hpp"
#include "ember/nn/rnn.hpp"
#include "ember/nn/transformer.hpp"
#include "ember/ops.hpp"
#include "ember/optim.hpp"
#include "ember/random.hpp"
#include "ember/tensor.hpp"
#include "ember/train/capture.hpp"
#include "ember/train/fit.hpp"

namespace ember_options_check {

using namespace ember;  // NOLINT: a compile check

template <typename T>
void both(const T& /*first_named*/, const T& /*last_named*/) {}

void core_structs() {
  both(TensorOptions{.dtype = DType::f64}, TensorOptions{.requires_grad = true});
  both(Device{.type = DeviceType::cpu}, Device{.index = 0});
  both(RngState{.seed = 1}, RngState{.offset = 2});
  both(MemoryStats{.persistent_bytes = 1}, MemoryStats{.captured_reserved = 1});
  both(GradcheckOptions{.eps = 1e-6}, GradcheckOptions{.rtol = 1e-3});
  both(GradcheckResult{.ok = false}, GradcheckResult{.message = "x"});
  both(SdpaOptions{.attn_mask = Tensor()}, SdpaOptions{.scale = 0.5});
  both(SdpaOptions{.is_causal = true}, SdpaOptions{.dropout_p = 0.1});
  both(ValuesIndices{.values = Tensor()}, ValuesIndices{.indices = Tensor()});
  both(QR{.Q = Tensor()}, QR{.R = Tensor()});
  both(SVD{.U = Tensor()}, SVD{.Vh = Tensor()});
  both(InterpolateOptions{.size = {4, 4}}, InterpolateOptions{.recompute_scale_factor = true});
  both(CrossEntropyOptions{.reduction = Reduction::sum}, CrossEntropyOptions{.weight = Tensor()});
  both(DTypeSet{.bits = 1}, DTypeSet{.bits = 2});
}

void data_and_io_structs() {
  both(data::DataLoaderOptions{.batch_size = 64}, data::DataLoaderOptions{.device = Device::cpu()});
  both(data::DataLoaderState{.epoch = 1}, data::DataLoaderState{.seed = 1});
  both(data::Example{.input = Tensor()}, data::Example{.extra_inputs = {}});
  both(data::DistributedSamplerOptions{.num_replicas = 2},
       data::DistributedSamplerOptions{.drop_last = true});
  both(data::FashionMnist{.images = Tensor()}, data::FashionMnist{.labels = Tensor()});
  both(data::Standardizer{.mean = {0.0}}, data::Standardizer{.scale = {1.0}});
  both(data::CsvOptions{.label_column = int64_t{0}}, data::CsvOptions{.classes = {"a"}});
  both(data::CsvData{.inputs = Tensor()}, data::CsvData{.classes = {"a"}});
  both(io::SaveOptions{.storage_dtype = DType::f16}, io::SaveOptions{.allow_unregistered = true});
  both(io::CheckpointInfo{.step = 1}, io::CheckpointInfo{.loader_position = 1});
  both(io::Inspection{.path = "x"}, io::Inspection{.checksum = "verified"});
  both(io::Inspection::Row{.name = "w"}, io::Inspection::Row{.bytes = 4});
  both(io::TensorEntry{.name = "w"}, io::TensorEntry{.end = 4});
  both(distributed::InitOptions{.rank = 0}, distributed::InitOptions{.timeout_seconds = 60});
  both(distributed::DistributedDataParallelOptions{.bucket_cap_mb = 25},
       distributed::DistributedDataParallelOptions{.reduce_in_world_of_one = true});
}

void module_structs() {
  both(nn::LoadReport{.applied = {}}, nn::LoadReport{.mismatched = {}});
  both(nn::LinearOptions{.in_features = 4}, nn::LinearOptions{.bias = false});
  both(nn::BilinearOptions{.in1_features = 4}, nn::BilinearOptions{.bias = false});
  both(nn::MultiheadAttentionOptions{.embed_dim = 64}, nn::MultiheadAttentionOptions{.vdim = 64});
  both(nn::AttentionOptions{.key_padding_mask = Tensor()},
       nn::AttentionOptions{.average_attn_weights = false});
  both(nn::AttentionOutput{.output = Tensor()}, nn::AttentionOutput{.weights = Tensor()});
  both(nn::Conv2dOptions{.in_channels = 1}, nn::Conv2dOptions{.padding_preset = std::nullopt});
  both(nn::Conv1dOptions{.in_channels = 1}, nn::Conv1dOptions{.padding_preset = std::nullopt});
  both(nn::Conv3dOptions{.in_channels = 1}, nn::Conv3dOptions{.padding_preset = std::nullopt});
  both(nn::ConvTranspose2dOptions{.in_channels = 1}, nn::ConvTranspose2dOptions{.dilation = 1});
  both(nn::ConvTranspose1dOptions{.in_channels = 1}, nn::ConvTranspose1dOptions{.dilation = 1});
  both(nn::MaxPool2dOptions{.kernel_size = 2}, nn::MaxPool2dOptions{.ceil_mode = true});
  both(nn::AvgPool2dOptions{.kernel_size = 2}, nn::AvgPool2dOptions{.count_include_pad = false});
  both(nn::MaxPool1dOptions{.kernel_size = 2}, nn::MaxPool1dOptions{.ceil_mode = true});
  both(nn::AvgPool1dOptions{.kernel_size = 2}, nn::AvgPool1dOptions{.count_include_pad = false});
  both(nn::AdaptivePoolOptions{.output_size = 2}, nn::AdaptivePoolOptions{.output_size = 3});
  both(nn::FoldOptions{.output_size = 4}, nn::FoldOptions{.stride = 2});
  both(nn::EmbeddingOptions{.num_embeddings = 10}, nn::EmbeddingOptions{.padding_idx = 0});
  both(nn::FlattenOptions{.start_dim = 0}, nn::FlattenOptions{.end_dim = 2});
  both(nn::DropoutOptions{.p = 0.1}, nn::DropoutOptions{.p = 0.2});
  both(nn::GELUOptions{.approximate = "tanh"}, nn::GELUOptions{.approximate = "none"});
  both(nn::DimOptions{.dim = 1}, nn::DimOptions{.dim = -1});
  both(nn::SoftplusOptions{.beta = 2.0}, nn::SoftplusOptions{.threshold = 10.0});
  both(nn::LeakyReLUOptions{.negative_slope = 0.2}, nn::LeakyReLUOptions{.negative_slope = 0.1});
  both(nn::ELUOptions{.alpha = 0.5}, nn::ELUOptions{.alpha = 2.0});
  both(nn::HardtanhOptions{.min_val = 0.0}, nn::HardtanhOptions{.max_val = 6.0});
  both(nn::PReLUOptions{.num_parameters = 3}, nn::PReLUOptions{.init = 0.1});
  both(nn::UnflattenOptions{.dim = 1}, nn::UnflattenOptions{.unflattened_size = {2, 5}});
  both(nn::PixelShuffleOptions{.upscale_factor = 2}, nn::PixelShuffleOptions{.upscale_factor = 3});
  both(nn::PixelUnshuffleOptions{.downscale_factor = 2},
       nn::PixelUnshuffleOptions{.downscale_factor = 3});
  both(nn::AdaptivePool1dOptions{.output_size = 2}, nn::AdaptivePool1dOptions{.output_size = 3});
  both(nn::L1LossOptions{.reduction = Reduction::sum},
       nn::L1LossOptions{.reduction = Reduction::none});
  both(nn::SmoothL1LossOptions{.reduction = Reduction::sum}, nn::SmoothL1LossOptions{.beta = 0.5});
  both(nn::HuberLossOptions{.reduction = Reduction::sum}, nn::HuberLossOptions{.delta = 0.5});
  both(nn::KLDivLossOptions{.reduction = Reduction::sum}, nn::KLDivLossOptions{.log_target = true});
  both(nn::BCELossOptions{.reduction = Reduction::sum}, nn::BCELossOptions{.weight = Tensor()});
  both(nn::MarginRankingLossOptions{.margin = 1.0},
       nn::MarginRankingLossOptions{.reduction = Reduction::sum});
  both(nn::TripletMarginLossOptions{.margin = 0.5},
       nn::TripletMarginLossOptions{.reduction = Reduction::sum});
  both(nn::CosineEmbeddingLossOptions{.margin = 0.5},
       nn::CosineEmbeddingLossOptions{.reduction = Reduction::sum});
  both(nn::PoissonNLLLossOptions{.log_input = false},
       nn::PoissonNLLLossOptions{.reduction = Reduction::sum});
  both(nn::CTCLossOptions{.blank = 1}, nn::CTCLossOptions{.zero_infinity = true});
  both(nn::BatchNormOptions{.num_features = 4}, nn::BatchNormOptions{.track_running_stats = false});
  both(nn::LayerNormOptions{.normalized_shape = {4}}, nn::LayerNormOptions{.bias = false});
  both(nn::GroupNormOptions{.num_groups = 2}, nn::GroupNormOptions{.affine = false});
  both(nn::InstanceNormOptions{.num_features = 4},
       nn::InstanceNormOptions{.track_running_stats = true});
  both(nn::RMSNormOptions{.normalized_shape = {4}},
       nn::RMSNormOptions{.elementwise_affine = false});
  both(nn::RNNOptions{.input_size = 8}, nn::RNNOptions{.proj_size = 4});
  both(nn::RNNCellOptions{.input_size = 8}, nn::RNNCellOptions{.nonlinearity = "relu"});
  both(nn::RNNState{.h = Tensor()}, nn::RNNState{.c = Tensor()});
  both(nn::RNNOutput{.output = Tensor()}, nn::RNNOutput{.c_n = Tensor()});
  both(nn::PackedSequence{.data = Tensor()}, nn::PackedSequence{.lengths = Tensor()});
  both(nn::TransformerEncoderLayerOptions{.d_model = 64},
       nn::TransformerEncoderLayerOptions{.bias = false});
  both(nn::EncoderMasks{.src_mask = Tensor()}, nn::EncoderMasks{.is_causal = true});
  both(nn::TransformerEncoderOptions{.layer = {.d_model = 64}},
       nn::TransformerDecoderOptions{.final_norm = true});
  both(nn::DecoderMasks{.tgt_mask = Tensor()}, nn::DecoderMasks{.memory_is_causal = true});
  both(nn::TransformerOptions{.d_model = 64}, nn::TransformerOptions{.bias = false});
  both(nn::TransformerMasks{.src_mask = Tensor()}, nn::TransformerMasks{.memory_is_causal = true});
}

void optim_structs() {
  both(optim::SGDOptions{.lr = 0.1}, optim::SGDOptions{.maximize = true});
  both(optim::AdamOptions{.lr = 1e-3}, optim::AdamOptions{.maximize = true});
  both(optim::AdamWOptions{.lr = 1e-3}, optim::AdamWOptions{.maximize = true});
  both(optim::RMSpropOptions{.lr = 1e-2}, optim::RMSpropOptions{.maximize = true});
  both(optim::AdagradOptions{.lr = 1e-2}, optim::AdagradOptions{.maximize = true});
  both(optim::AdadeltaOptions{.lr = 1.0}, optim::AdadeltaOptions{.maximize = true});
  both(optim::AdamaxOptions{.lr = 2e-3}, optim::AdamaxOptions{.maximize = true});
  both(optim::NAdamOptions{.lr = 2e-3}, optim::NAdamOptions{.momentum_decay = 4e-3});
  both(optim::RAdamOptions{.lr = 1e-3}, optim::RAdamOptions{.weight_decay = 0.1});
  both(optim::LBFGSOptions{.lr = 1.0},
       optim::LBFGSOptions{.line_search_fn = optim::LineSearch::strong_wolfe});
  both(optim::GradScalerOptions{.init_scale = 1024}, optim::GradScalerOptions{.enabled = false});
  both(optim::OneCycleLROptions{.max_lr = {0.1}}, optim::OneCycleLROptions{.three_phase = true});
  both(optim::CyclicLROptions{.base_lr = {1e-3}}, optim::CyclicLROptions{.max_momentum = {0.9}});
  both(optim::ReduceLROnPlateauOptions{.mode = optim::PlateauMode::max},
       optim::ReduceLROnPlateauOptions{.eps = 1e-8});
  both(optim::OptimizerState{.meta = nn::json::object()}, optim::OptimizerState{.tensors = {}});
  both(optim::ParamState{.step = 1}, optim::ParamState{.scalars = {}});
  both(optim::ParamGroup<optim::SGDOptions>{.params = {}},
       optim::ParamGroup<optim::SGDOptions>{.initial_lr = 0.1});
}

void train_structs() {
  both(train::FitOptions{.epochs = 2}, train::FitOptions{.grad_scaler = nullptr});
  both(train::FitOptions{.clip_grad_norm = 1.0}, train::FitOptions{.accumulate_grad_batches = 4});
  both(train::EarlyStoppingOptions{.monitor = "loss"},
       train::EarlyStoppingOptions{.restore_best = false});
  both(train::Metrics{.loss = 1.0}, train::Metrics{.samples = 1});
  both(train::BatchLog{.epoch = 1}, train::BatchLog{.batch_size = 32});
  both(train::EpochLog{.epoch = 1}, train::EpochLog{.lrs = {0.1}});
  both(train::History{.epochs = {}}, train::History{.best_epoch = 1});
  both(train::ResumePoint{.epoch = 1}, train::ResumePoint{.step = 1});
  both(train::CaptureOptions{.warmup = 2}, train::CaptureOptions{.device = Device::cuda(0)});
}

}  // namespace ember_options_check

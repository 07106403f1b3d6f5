#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

#include "models/model_graph.hpp"

// Convolutional networks as a graph of primitive ops over NCHW tensors (per image; the batch
// comes with BuildOptions::micro_batch). Families (ResNet, Inception, VGG, AmoebaNet) differ only
// in the graph their builder writes; one function turns any such graph into the op graph.
namespace dtsim::models {

enum class CnnOpKind { Conv, BatchNorm, Relu, MaxPool, AvgPool, GlobalAvgPool, Fc, Dropout, Add, Concat };
const char* to_string(CnnOpKind k);

struct CnnShape {
  std::int64_t c = 0, h = 1, w = 1;
  std::int64_t elems() const { return c * h * w; }
  bool operator==(const CnnShape&) const = default;
};

struct CnnOp {
  CnnOpKind kind = CnnOpKind::Relu;
  std::string name;
  std::vector<int> inputs;  // tensors: -1 is the input image, i >= 0 the output of op i
  // Conv: filters, r x s window, strides, padding, groups, bias. Pools: window, strides,
  // padding. Fc: `filters` outputs (its input flattened), bias. Dropout: rate.
  std::int64_t filters = 0, r = 1, s = 1, stride_h = 1, stride_w = 1, pad_h = 0, pad_w = 0, groups = 1;
  bool bias = false;
  double rate = 0;
  CnnShape in, out;  // per image; `in` is the first input's
  int layer = 0;     // the pipeline-splittable layer it belongs to
};

struct CnnSpec {
  std::string name;
  std::int64_t image_size = 224, channels = 3, classes = 1000;
  std::string structure;       // the generator that wrote `ops` ("resnet", ...), or "layers"
  std::vector<CnnOp> ops;      // in an order where every input comes first
  std::vector<std::string> layers;  // names of the layers ops belong to, in model order
};

// A graph that does not fit together (shapes, channels, groups), naming where it was declared.
struct CnnError : std::invalid_argument {
  CnnError(std::string where_, const std::string& why) : std::invalid_argument(why), where(std::move(where_)) {}
  std::string where;
};

// Writes a CnnSpec op by op, inferring and checking shapes as it goes. Each call returns the
// tensor it produced. `at` sets the location later errors name (a JSON pointer, a layer name).
class CnnBuilder {
 public:
  static constexpr int kImage = -1;
  CnnBuilder(std::string name, std::int64_t image_size, std::int64_t channels, std::int64_t classes);

  void layer(const std::string& name);  // following ops form a new pipeline-splittable layer
  void at(std::string where) { where_ = std::move(where); }
  int conv(int x, std::int64_t filters, std::int64_t r, std::int64_t s, std::int64_t stride_h, std::int64_t stride_w,
           std::int64_t pad_h, std::int64_t pad_w, std::int64_t groups = 1, bool bias = false, const std::string& name = "");
  // Square kernel, same stride and padding both ways.
  int conv(int x, std::int64_t filters, std::int64_t k, std::int64_t stride = 1, std::int64_t pad = 0, const std::string& name = "");
  int bn(int x, const std::string& name = "");
  int relu(int x, const std::string& name = "");
  int max_pool(int x, std::int64_t k, std::int64_t stride, std::int64_t pad = 0, const std::string& name = "");
  int avg_pool(int x, std::int64_t k, std::int64_t stride, std::int64_t pad = 0, const std::string& name = "");
  int global_avg_pool(int x, const std::string& name = "");
  int fc(int x, std::int64_t units, bool bias = true, const std::string& name = "");
  int dropout(int x, double rate, const std::string& name = "");
  int add(const std::vector<int>& xs, const std::string& name = "");
  int concat(const std::vector<int>& xs, const std::string& name = "");

  const CnnShape& shape(int t) const;
  std::int64_t image_size() const { return spec_.image_size; }
  // The graph, once its last tensor holds one score per class.
  CnnSpec finish(int output);

 private:
  int push(CnnOp op, const std::string& name);
  int pool(CnnOpKind kind, int x, std::int64_t k, std::int64_t stride, std::int64_t pad, const std::string& name);
  [[noreturn]] void fail(const std::string& why) const { throw CnnError(where_, why); }

  CnnSpec spec_;
  CnnShape image_;
  std::string where_;
};

// The op graph of one micro-batch. Per op, what PyTorch keeps for backward: a convolution or
// fully connected layer its input, batch norm its input and per-channel mean and inverse
// deviation (fp32), ReLU its output, max pooling its input and int64 indices, average pooling its
// input, dropout a one-byte mask; each tensor once, however many ops keep it. Convolutions and
// fully connected layers count as model FLOPs; backward skips the input gradient of ops whose
// input needs none (the image).
// Tensor parallelism t is AlexNet's channel split (Krizhevsky et al. 2012, section 3.2): each rank
// computes 1/t of every convolution's and fully connected layer's output channels (1/t of a
// grouped convolution's groups) and holds 1/t of their weights; batch norm, ReLU, pooling,
// dropout and adds work on the rank's own channels. An op that reads every channel of a split
// tensor all-gathers it first (once per layer) and keeps the gathered whole for backward, where
// its input gradient, partial over the rank's outputs, is reduce-scattered back to the channel
// shares (Layer::tensor_split.channel_gathers, channel_sums). The loss gathers the logits.
ModelGraph build_cnn(const CnnSpec& spec, const BuildOptions& options);

// Forward multiply-accumulates of one image in convolutions and fully connected layers: the
// "FLOPs" column of torchvision's and the papers' tables.
double cnn_forward_macs(const CnnSpec& spec);

// The families' block structures (models/cnn_structures.cpp).
// ResNet v1.5 as torchvision builds it (stride on the 3x3 convolution of a bottleneck):
// `stages` blocks per stage, bottleneck blocks, or basic blocks (ResNet-18/34) when false.
CnnSpec resnet(const std::string& name, std::int64_t image_size, std::int64_t classes, const std::vector<std::int64_t>& stages,
               bool bottleneck);
// Inception-v3 (Szegedy et al. 2016) as torchvision's inception_v3 builds it, with its
// auxiliary classifier when `aux_head` (used in training only).
CnnSpec inception_v3(const std::string& name, std::int64_t image_size, std::int64_t classes, bool aux_head);
// AmoebaNet-D (L, D) as GPipe (Huang et al. 2019) ran it: L normal cells in three groups of L/3,
// D filters (TensorFlow's reference implementation, tensorflow/tpu models/official/amoeba_net).
CnnSpec amoebanet_d(const std::string& name, std::int64_t image_size, std::int64_t classes, std::int64_t normal_cells,
                    std::int64_t filters);

}  // namespace dtsim::models

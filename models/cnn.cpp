#include "models/cnn.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace dtsim::models {

using I = std::int64_t;

const char* to_string(CnnOpKind k) {
  switch (k) {
    case CnnOpKind::Conv: return "conv";
    case CnnOpKind::BatchNorm: return "batch_norm";
    case CnnOpKind::Relu: return "relu";
    case CnnOpKind::MaxPool: return "max_pool";
    case CnnOpKind::AvgPool: return "avg_pool";
    case CnnOpKind::GlobalAvgPool: return "global_avg_pool";
    case CnnOpKind::Fc: return "fc";
    case CnnOpKind::Dropout: return "dropout";
    case CnnOpKind::Add: return "add";
    case CnnOpKind::Concat: return "concat";
  }
  return "?";
}

CnnBuilder::CnnBuilder(std::string name, I image_size, I channels, I classes) {
  spec_.name = std::move(name);
  spec_.image_size = image_size;
  spec_.channels = channels;
  spec_.classes = classes;
  image_ = {channels, image_size, image_size};
}

void CnnBuilder::layer(const std::string& name) { spec_.layers.push_back(name); }

const CnnShape& CnnBuilder::shape(int t) const {
  if (t == kImage) return image_;
  if (t < 0 || t >= static_cast<int>(spec_.ops.size())) throw CnnError(where_, fmt::format("no tensor {}", t));
  return spec_.ops[static_cast<std::size_t>(t)].out;
}

int CnnBuilder::push(CnnOp op, const std::string& name) {
  if (spec_.layers.empty()) layer("layer0");
  op.layer = static_cast<int>(spec_.layers.size()) - 1;
  op.name = name.empty() ? fmt::format("{}.{}{}", spec_.layers.back(), to_string(op.kind), spec_.ops.size()) : name;
  if (!op.inputs.empty()) op.in = shape(op.inputs.front());
  spec_.ops.push_back(std::move(op));
  return static_cast<int>(spec_.ops.size()) - 1;
}

int CnnBuilder::conv(int x, I filters, I r, I s, I stride_h, I stride_w, I pad_h, I pad_w, I groups, bool bias, const std::string& name) {
  const CnnShape in = shape(x);
  if (filters < 1 || r < 1 || s < 1 || stride_h < 1 || stride_w < 1 || pad_h < 0 || pad_w < 0 || groups < 1)
    fail("a convolution needs filters, kernel and stride of at least 1 and padding of at least 0");
  if (in.c % groups || filters % groups)
    fail(fmt::format("{} groups must divide the {} input channels and the {} filters", groups, in.c, filters));
  if (in.h + 2 * pad_h < r || in.w + 2 * pad_w < s)
    fail(fmt::format("a {}x{} kernel does not fit the {}x{} input (padding {}, {})", r, s, in.h, in.w, pad_h, pad_w));
  CnnOp op;
  op.kind = CnnOpKind::Conv;
  op.inputs = {x};
  op.filters = filters, op.r = r, op.s = s, op.stride_h = stride_h, op.stride_w = stride_w, op.pad_h = pad_h, op.pad_w = pad_w;
  op.groups = groups;
  op.bias = bias;
  op.out = {filters, (in.h + 2 * pad_h - r) / stride_h + 1, (in.w + 2 * pad_w - s) / stride_w + 1};
  return push(op, name);
}

int CnnBuilder::conv(int x, I filters, I k, I stride, I pad, const std::string& name) {
  return conv(x, filters, k, k, stride, stride, pad, pad, 1, false, name);
}

int CnnBuilder::bn(int x, const std::string& name) {
  CnnOp op;
  op.kind = CnnOpKind::BatchNorm;
  op.inputs = {x};
  op.out = shape(x);
  return push(op, name);
}

int CnnBuilder::relu(int x, const std::string& name) {
  CnnOp op;
  op.kind = CnnOpKind::Relu;
  op.inputs = {x};
  op.out = shape(x);
  return push(op, name);
}

int CnnBuilder::pool(CnnOpKind kind, int x, I k, I stride, I pad, const std::string& name) {
  const CnnShape in = shape(x);
  if (k < 1 || stride < 1 || pad < 0) fail("a pooling window and stride must be at least 1, padding at least 0");
  if (2 * pad > k) fail(fmt::format("padding {} is more than half the {}x{} window", pad, k, k));
  if (in.h + 2 * pad < k || in.w + 2 * pad < k)
    fail(fmt::format("a {}x{} window does not fit the {}x{} input", k, k, in.h, in.w));
  CnnOp op;
  op.kind = kind;
  op.inputs = {x};
  op.r = op.s = k;
  op.stride_h = op.stride_w = stride;
  op.pad_h = op.pad_w = pad;
  op.out = {in.c, (in.h + 2 * pad - k) / stride + 1, (in.w + 2 * pad - k) / stride + 1};
  return push(op, name);
}

int CnnBuilder::max_pool(int x, I k, I stride, I pad, const std::string& name) { return pool(CnnOpKind::MaxPool, x, k, stride, pad, name); }
int CnnBuilder::avg_pool(int x, I k, I stride, I pad, const std::string& name) { return pool(CnnOpKind::AvgPool, x, k, stride, pad, name); }

int CnnBuilder::global_avg_pool(int x, const std::string& name) {
  const CnnShape in = shape(x);
  CnnOp op;
  op.kind = CnnOpKind::GlobalAvgPool;
  op.inputs = {x};
  op.r = in.h, op.s = in.w;
  op.out = {in.c, 1, 1};
  return push(op, name);
}

int CnnBuilder::fc(int x, I units, bool bias, const std::string& name) {
  if (units < 1) fail("a fully connected layer needs at least 1 unit");
  CnnOp op;
  op.kind = CnnOpKind::Fc;
  op.inputs = {x};
  op.filters = units;
  op.bias = bias;
  op.out = {units, 1, 1};
  return push(op, name);
}

int CnnBuilder::dropout(int x, double rate, const std::string& name) {
  if (!(rate >= 0 && rate < 1)) fail("a dropout rate is at least 0 and below 1");
  CnnOp op;
  op.kind = CnnOpKind::Dropout;
  op.inputs = {x};
  op.rate = rate;
  op.out = shape(x);
  return push(op, name);
}

int CnnBuilder::add(const std::vector<int>& xs, const std::string& name) {
  if (xs.size() < 2) fail("add needs at least two inputs");
  for (int x : xs)
    if (!(shape(x) == shape(xs.front())))
      fail(fmt::format("add needs inputs of one shape: {}x{}x{} and {}x{}x{}", shape(xs.front()).c, shape(xs.front()).h,
                       shape(xs.front()).w, shape(x).c, shape(x).h, shape(x).w));
  CnnOp op;
  op.kind = CnnOpKind::Add;
  op.inputs = xs;
  op.out = shape(xs.front());
  return push(op, name);
}

int CnnBuilder::concat(const std::vector<int>& xs, const std::string& name) {
  if (xs.size() < 2) fail("concat needs at least two inputs");
  CnnShape out = shape(xs.front());
  out.c = 0;
  for (int x : xs) {
    if (shape(x).h != out.h || shape(x).w != out.w)
      fail(fmt::format("concat needs inputs of one spatial size: {}x{} and {}x{}", out.h, out.w, shape(x).h, shape(x).w));
    out.c += shape(x).c;
  }
  CnnOp op;
  op.kind = CnnOpKind::Concat;
  op.inputs = xs;
  op.out = out;
  return push(op, name);
}

CnnSpec CnnBuilder::finish(int output) {
  if (output != static_cast<int>(spec_.ops.size()) - 1) fail("the model's output must be its last op");
  if (shape(output).elems() != spec_.classes)
    fail(fmt::format("the last op gives {} values per image, but the model has {} classes", shape(output).elems(), spec_.classes));
  return spec_;
}

namespace {

Kernel memory(const std::string& name, double bytes, double flops) { return Kernel{name, KernelKind::Memory, 1, 0, 0, 0, flops, bytes}; }

Kernel gemm(const std::string& name, I m, I n, I k, double e) {
  Kernel g{name, KernelKind::Gemm, 1, m, n, k, 0, 0};
  const double M = static_cast<double>(m), N = static_cast<double>(n), K = static_cast<double>(k);
  g.flops = 2.0 * M * N * K;
  g.bytes = e * (M * K + K * N + M * N);
  return g;
}

}  // namespace

ModelGraph build_cnn(const CnnSpec& spec, const BuildOptions& o) {
  if (o.tensor != 1) throw std::invalid_argument("tensor parallelism does not split a CNN's layers");
  const double e = o.activation_bytes, n = static_cast<double>(o.micro_batch);
  const std::size_t ops = spec.ops.size();
  const CnnShape image{spec.channels, spec.image_size, spec.image_size};
  auto shape_of = [&](int t) -> const CnnShape& { return t < 0 ? image : spec.ops[static_cast<std::size_t>(t)].out; };
  auto bytes_of = [&](int t) { return n * static_cast<double>(shape_of(t).elems()) * e; };

  // Which tensors need a gradient (not the image, nor what only the image feeds), and how many
  // ops read each tensor: a tensor read twice has its two gradients summed in backward.
  std::vector<bool> grad(ops, false);
  std::vector<int> readers(ops, 0), last_layer_reading(ops, -1);
  int image_last_layer = -1;
  for (std::size_t i = 0; i < ops; ++i) {
    const auto& op = spec.ops[i];
    grad[i] = op.kind == CnnOpKind::Conv || op.kind == CnnOpKind::Fc || op.kind == CnnOpKind::BatchNorm;
    for (int t : op.inputs) {
      if (t < 0) {
        image_last_layer = std::max(image_last_layer, op.layer);
        continue;
      }
      grad[i] = grad[i] || grad[static_cast<std::size_t>(t)];
      ++readers[static_cast<std::size_t>(t)];
      last_layer_reading[static_cast<std::size_t>(t)] = std::max(last_layer_reading[static_cast<std::size_t>(t)], op.layer);
    }
  }
  auto needs_grad = [&](int t) { return t >= 0 && grad[static_cast<std::size_t>(t)]; };

  ModelGraph g{spec.name, o, {}, 0};
  for (const auto& name : spec.layers) g.layers.push_back(Layer{name, LayerKind::Block, {}, 0, 0, {false}});
  std::set<int> saved;  // tensors already kept for backward
  auto keep = [&](int t) {
    if (!saved.insert(t).second) return 0.0;
    return bytes_of(t);
  };
  for (std::size_t i = 0; i < ops; ++i) {
    const auto& c = spec.ops[i];
    const int x = c.inputs.front();
    const double in = n * static_cast<double>(c.in.elems()), out = n * static_cast<double>(c.out.elems());
    Op op;
    op.name = c.name;
    switch (c.kind) {
      case CnnOpKind::Conv: {
        ConvShape s{o.micro_batch, c.in.c, c.in.h, c.in.w, c.filters, c.r, c.s, c.stride_h, c.stride_w, c.pad_h, c.pad_w, c.groups};
        op.forward = {conv_kernel(c.name, s, ConvPass::Forward, e)};
        if (needs_grad(x)) op.backward.push_back(conv_kernel(c.name + ".dgrad", s, ConvPass::Dgrad, e));
        op.backward.push_back(conv_kernel(c.name + ".wgrad", s, ConvPass::Wgrad, e));
        op.params = static_cast<double>(c.filters) * static_cast<double>(c.in.c / c.groups * c.r * c.s) +
                    (c.bias ? static_cast<double>(c.filters) : 0.0);
        op.saved_bytes = keep(x);
        op.matmul = true;
        break;
      }
      case CnnOpKind::Fc: {
        const I features = c.in.elems();
        op.forward = {gemm(c.name, o.micro_batch, c.filters, features, e)};
        if (needs_grad(x)) op.backward.push_back(gemm(c.name + ".dgrad", o.micro_batch, features, c.filters, e));
        op.backward.push_back(gemm(c.name + ".wgrad", features, c.filters, o.micro_batch, e));
        op.params = static_cast<double>(features) * static_cast<double>(c.filters) + (c.bias ? static_cast<double>(c.filters) : 0.0);
        op.saved_bytes = keep(x);
        op.matmul = true;
        break;
      }
      case CnnOpKind::BatchNorm:
        // Training mode: one pass for the batch statistics and one to normalise; backward reduces
        // over the gradient and input, then writes the input gradient.
        op.forward = {memory(c.name, 3.0 * in * e, 8.0 * in)};
        op.backward = {memory(c.name + ".bwd", 5.0 * in * e, 12.0 * in)};
        op.params = 2.0 * static_cast<double>(c.in.c);
        op.saved_bytes = keep(x) + 2.0 * static_cast<double>(c.in.c) * 4.0;
        break;
      case CnnOpKind::Relu:
        op.forward = {memory(c.name, 2.0 * in * e, in)};
        if (needs_grad(x)) op.backward = {memory(c.name + ".bwd", 3.0 * in * e, in)};
        op.saved_bytes = keep(static_cast<int>(i));
        break;
      case CnnOpKind::MaxPool:
      case CnnOpKind::AvgPool:
      case CnnOpKind::GlobalAvgPool: {
        const bool indices = c.kind == CnnOpKind::MaxPool;  // int64 argmax per output
        const double window = static_cast<double>(c.r * c.s);
        op.forward = {memory(c.name, in * e + out * (e + (indices ? 8.0 : 0.0)), window * out)};
        if (needs_grad(x)) op.backward = {memory(c.name + ".bwd", in * e + out * (e + (indices ? 8.0 : 0.0)), window * out)};
        op.saved_bytes = keep(x) + (indices ? 8.0 * out : 0.0);
        break;
      }
      case CnnOpKind::Dropout:
        op.forward = {memory(c.name, in * (2.0 * e + 1.0), 2.0 * in)};
        op.backward = {memory(c.name + ".bwd", in * (2.0 * e + 1.0), in)};
        op.saved_bytes = in;
        break;
      case CnnOpKind::Add: {
        const double k = static_cast<double>(c.inputs.size());
        op.forward = {memory(c.name, (k + 1.0) * out * e, (k - 1.0) * out)};
        break;
      }
      case CnnOpKind::Concat:
        // Backward hands each input its slice of the gradient, copied out of the channel-strided
        // whole.
        op.forward = {memory(c.name, 2.0 * out * e, 0)};
        op.backward = {memory(c.name + ".bwd", 2.0 * out * e, 0)};
        break;
    }
    // Gradients from several readers of this op's output are summed before its own backward.
    if (readers[i] > 1 && grad[i])
      op.backward.insert(op.backward.begin(),
                         memory(c.name + ".grad_sum", 3.0 * (readers[i] - 1) * out * e, (readers[i] - 1) * out));
    op.saved_bytes_selective = op.saved_bytes;
    g.layers[static_cast<std::size_t>(c.layer)].ops.push_back(std::move(op));
  }

  // The tensors crossing the boundary after each layer: produced at or before it, read after it.
  for (std::size_t l = 0; l < g.layers.size(); ++l) {
    double crossing = 0;
    if (image_last_layer > static_cast<int>(l)) crossing += bytes_of(-1);
    for (std::size_t t = 0; t < ops; ++t)
      if (spec.ops[t].layer <= static_cast<int>(l) && last_layer_reading[t] > static_cast<int>(l)) crossing += bytes_of(static_cast<int>(t));
    g.layers[l].output_bytes = crossing;
    g.layers[l].input_bytes = l == 0 ? bytes_of(-1) : g.layers[l - 1].output_bytes;
  }

  // Softmax cross-entropy over the classes, in fp32: the probabilities are kept for backward.
  const double logits = n * static_cast<double>(spec.classes);
  Layer head{"loss", LayerKind::Head, {}, bytes_of(static_cast<int>(ops) - 1), 0, {false}};
  Op loss;
  loss.name = "cross_entropy";
  loss.forward = {memory("cross_entropy", logits * (e + 4.0), 5.0 * logits)};
  loss.backward = {memory("cross_entropy.bwd", logits * (4.0 + e), 2.0 * logits)};
  loss.saved_bytes = loss.saved_bytes_selective = 4.0 * logits;
  head.ops.push_back(loss);
  g.layers.push_back(std::move(head));
  return g;
}

double cnn_forward_macs(const CnnSpec& spec) {
  double macs = 0;
  for (const auto& c : spec.ops) {
    if (c.kind == CnnOpKind::Conv)
      macs += static_cast<double>(c.out.elems()) * static_cast<double>(c.in.c / c.groups * c.r * c.s);
    else if (c.kind == CnnOpKind::Fc)
      macs += static_cast<double>(c.in.elems()) * static_cast<double>(c.filters);
  }
  return macs;
}

}  // namespace dtsim::models

#include "sim/config/training_config.hpp"
#include "strategies/settings.hpp"

#include <fmt/format.h>

#include <cmath>
#include <string>
#include <utility>
#include <vector>

namespace dtsim::config {

namespace {

strategies::Precision parse_precision(const std::string& s) {
  if (s == "fp64") return strategies::Precision::Fp64;
  if (s == "fp32") return strategies::Precision::Fp32;
  if (s == "tf32") return strategies::Precision::Tf32;
  if (s == "fp16") return strategies::Precision::Fp16;
  if (s == "fp8") return strategies::Precision::Fp8;
  return strategies::Precision::Bf16;
}

// The one of `names` (a key and the aliases other tools use for it) the object gives, or "".
std::string given_as(Reader& r, const std::vector<std::string>& names) {
  std::string found;
  for (const auto& n : names) {
    const bool here = r.has(n);
    r.ignore(n);  // read below when given; known either way, so a misspelling is suggested one
    if (!here) continue;
    if (!found.empty()) r.fail(n, fmt::format("says what \"{}\" already says: give one of them", found));
    found = n;
  }
  return found;
}

}  // namespace

namespace {

// The global batch: as given (DeepSpeed's train_batch_size names it too), or from
// gradient_accumulation_steps; both given must agree. Returns the key it was given as.
std::string parse_batch(Reader& r, Scenario& s) {
  auto& t = s.training;
  const auto& p = s.parallelism;
  const std::int64_t per_step = static_cast<std::int64_t>(p.data) * p.micro_batch;
  const std::string batch_key = given_as(r, {"global_batch_size", "train_batch_size"});
  const bool accumulates = r.has("gradient_accumulation_steps");
  r.ignore("gradient_accumulation_steps");
  if (accumulates) {
    const std::int64_t gas = r.integer("gradient_accumulation_steps", 1, 1000000000);
    if (batch_key.empty()) {
      t.global_batch = gas * per_step;
    } else if (r.integer(batch_key, 1, 1000000000) != gas * per_step) {
      r.fail("gradient_accumulation_steps",
             fmt::format("data ({}) x micro_batch_size ({}) x gradient_accumulation_steps ({}) = {}, but {} is {}", p.data,
                         p.micro_batch, gas, gas * per_step, batch_key, r.integer(batch_key, 1, 1000000000)));
    }
  }
  if (!batch_key.empty()) t.global_batch = r.integer(batch_key, 1, 1000000000);
  else if (!accumulates)
    r.fail("global_batch_size", "required key is missing (or give gradient_accumulation_steps)");
  return batch_key;
}

// The run's length: steps (Megatron's train_iters, Hugging Face's max_steps), samples, or tokens;
// and what it may cost.
void parse_run_length(Reader& r, Scenario& s) {
  const std::string steps_key = given_as(r, {"steps", "train_iters", "max_steps", "train_samples", "tokens"});
  if (steps_key == "tokens") {
    const std::int64_t per_sample = s.model.tokens_per_sample();
    if (per_sample == 0) r.fail("tokens", fmt::format("a {} model's samples are not tokens: give steps or train_samples", s.model.kind()));
    s.tokens = r.number("tokens", Range{0.0, 1e18, true});
    const double per = static_cast<double>(s.training.global_batch) * static_cast<double>(per_sample);
    s.steps = static_cast<std::int64_t>(std::ceil(s.tokens / per));
    if (s.steps > (std::int64_t{1} << 40)) r.fail("tokens", "more than 2^40 steps");
  } else if (steps_key == "train_samples") {
    const std::int64_t samples = r.integer("train_samples", 1, std::int64_t{1} << 50);
    s.steps = (samples + s.training.global_batch - 1) / s.training.global_batch;
  } else if (!steps_key.empty()) {
    s.steps = r.integer(steps_key, 0, std::int64_t{1} << 40);
  }
  s.price_per_gpu_hour_usd = r.number("price_per_gpu_hour_usd", Range{0.0, 1e6, true}, 0.0);
  s.deadline_days = r.number("deadline_days", Range{0.0, 1e6, true}, 0.0);
  s.budget_usd = r.number("budget_usd", Range{0.0, 1e15, true}, 0.0);
  if ((s.deadline_days > 0 || s.budget_usd > 0) && s.steps == 0)
    r.fail(s.deadline_days > 0 ? "deadline_days" : "budget_usd", "needs the run's length: give steps, tokens or train_samples");
}

// Names DeepSpeed, Hugging Face and Megatron users write here for settings dtsim keeps elsewhere.
void refuse_names_kept_elsewhere(Reader& r) {
  static const std::vector<std::pair<std::string, std::string>> elsewhere{
      {"train_micro_batch_size_per_gpu", "is parallelism.micro_batch_size in dtsim"},
      {"per_device_train_batch_size", "is parallelism.micro_batch_size in dtsim"},
      {"micro_batch_size", "is parallelism.micro_batch_size in dtsim"},
      {"num_train_epochs", "dtsim has no dataset size: give tokens, steps or train_samples"},
      {"bf16", "is \"precision\": \"bf16\" in dtsim"},
      {"fp16", "is \"precision\": \"fp16\" in dtsim"},
      {"gradient_checkpointing", "is parallelism.recompute (\"full\" or \"selective\") in dtsim"},
      {"zero_optimization", "is parallelism.zero_stage in dtsim"},
  };
  for (const auto& [key, where] : elsewhere)
    if (r.has(key)) r.fail(key, where);
}

// The micro-batches a step makes, as the schedule and the simulation can take them.
void check_micro_batches(Reader& r, const Scenario& s, const std::string& batch_key) {
  const auto& p = s.parallelism;
  const std::int64_t per_step = static_cast<std::int64_t>(p.data) * p.micro_batch;
  if (s.training.global_batch % per_step != 0)
    r.fail(batch_key, fmt::format("{} is not a multiple of data ({}) x micro_batch_size ({}) = {}",
                                  s.training.global_batch, p.data, p.micro_batch, per_step));
  const std::int64_t micro_batches = strategies::micro_batches(s.training.global_batch, p.data, p.micro_batch);
  if (p.schedule->chunked && p.virtual_stages > 1 && micro_batches % p.pipeline != 0)
    r.fail("global_batch_size", fmt::format("interleaved 1F1B needs the {} micro-batches per step to be a multiple of "
                                            "pipeline ({})", micro_batches, p.pipeline));
  if (strategies::asynchronous(p.schedule) && micro_batches < p.pipeline)
    r.fail("global_batch_size", fmt::format("{} needs at least pipeline ({}) micro-batches per step, not {}",
                                            strategies::to_string(p.schedule), p.pipeline, micro_batches));
  if (micro_batches * p.pipeline * p.virtual_stages > 50000000)
    r.fail("global_batch_size", fmt::format("{} micro-batches through {} stages is too many passes to simulate",
                                            micro_batches, p.pipeline));
}

}  // namespace

void parse_training(Reader r, Scenario& s) {
  auto& t = s.training;
  const std::string batch_key = parse_batch(r, s);
  t.precision = parse_precision(r.choice("precision", {"fp64", "fp32", "tf32", "bf16", "fp16", "fp8"}, "bf16"));
  t.optimizer = r.choice("optimizer", {"adam", "sgd"}, "adam") == "sgd" ? models::OptimizerKind::Sgd
                                                                        : models::OptimizerKind::Adam;
  const std::string recipe = r.choice("fp8_recipe", {"delayed", "current", "blockwise", "mxfp8"}, "delayed");
  using models::Fp8Scaling;
  for (auto scaling : {Fp8Scaling::Delayed, Fp8Scaling::Current, Fp8Scaling::Blockwise, Fp8Scaling::Mx})
    if (recipe == strategies::to_string(scaling)) t.fp8_scaling = scaling;
  if (r.has("fp8_recipe") && t.precision != strategies::Precision::Fp8)
    r.fail("fp8_recipe", "needs \"precision\": \"fp8\"");
  t.attention = r.choice("attention", {"standard", "flash"}, "standard") == "flash" ? models::Attention::Flash
                                                                                   : models::Attention::Standard;
  parse_run_length(r, s);
  refuse_names_kept_elsewhere(r);
  s.parallelism.fused_grad_accumulation = r.choice("grad_accumulation", {"separate", "fused"}, "separate") == "fused";
  check_micro_batches(r, s, batch_key);
  if (!s.device.peak_flops.contains(compute_dtype(t.precision)))
    r.fail("precision", fmt::format("device {} has no {} peak", s.device.name, compute_dtype(t.precision)));
  if (t.precision == strategies::Precision::Fp8 && !s.device.peak_flops.contains("fp8"))
    r.fail("precision", fmt::format("device {} has no fp8 peak: FP8 training needs FP8 tensor cores (Hopper, Ada or "
                                    "Blackwell)", s.device.name));
  // Tensor cores that take block-scaled (MX) operands are the ones that also run FP4 (NVIDIA
  // Blackwell, AMD CDNA 4); Hopper's take one scale per tensor.
  if (t.fp8_scaling == models::Fp8Scaling::Mx && !s.device.peak_flops.contains("fp4"))
    r.fail("fp8_recipe", fmt::format("MXFP8 needs tensor cores that take block-scaled operands (Blackwell); device {} has none "
                                     "(no fp4 peak): did you mean \"blockwise\"?",
                                     s.device.name));
  r.finish();
}

}  // namespace dtsim::config

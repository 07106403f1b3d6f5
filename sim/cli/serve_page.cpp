// The explorer page `dtsim serve` answers at /: plain HTML, CSS and JavaScript in one string, so
// it works with no network beyond the loopback connection to dtsim.
#include "sim/cli/serve_page.hpp"

#include "sim/cli/serve.hpp"

namespace dtsim::cli {

namespace page {

// The lesson list, one lesson (its text, the guess, the comparison, what to try), the two panels,
// and the free explorer's controls, cloned for A and B.
const char* body() {
  return R"PAGE(<header><h1><a href="/">dtsim explorer</a></h1>
<nav><a href="/" id="to-lessons">lessons</a> &middot; <a href="/?explore=1" id="to-explore">explore freely</a></nav></header>
<section id="list" hidden><p>Each lesson follows a lecture: two set-ups, A and B, simulated by <code>dtsim run</code> on this
machine. Guess which does better before the figures are shown, then change the controls and watch the figure move.</p>
<ol class="lessons" id="lesson-list"></ol>
<p>Or <a href="/?explore=1">explore freely</a>: any model, GPU, cluster and strategy, side by side.</p></section>
<section id="explore" hidden><p>Pick a model, a cluster and a strategy for A and for B; each change runs <code>dtsim run</code>
on this machine (the analytical backend unless you pick SimGrid).</p></section>
<section id="lesson" hidden><h2 id="lesson-title"></h2><p class="lecture" id="lesson-lecture"></p>
<p id="lesson-text"></p><p>The figure to look at: <b id="lesson-figure"></b>.</p>
<div class="predict" id="predict"><p id="question"></p>
<div id="guess"><fieldset><legend id="which-legend">Which is better?</legend>
<label for="g-A"><input type="radio" name="which" id="g-A" value="A"> A</label>
<label for="g-same"><input type="radio" name="which" id="g-same" value="same"> about the same (within 5%)</label>
<label for="g-B"><input type="radio" name="which" id="g-B" value="B"> B</label></fieldset>
<fieldset><legend>By how much?</legend>
<label for="g-small"><input type="radio" name="much" id="g-small" value="small"> less than 1.5&times;</label>
<label for="g-mid"><input type="radio" name="much" id="g-mid" value="mid"> 1.5&times; to 3&times;</label>
<label for="g-big"><input type="radio" name="much" id="g-big" value="big"> more than 3&times;</label></fieldset>
<button type="button" id="reveal">Reveal the answer</button></div>
<p class="answer" id="answer"></p>
<p><input type="checkbox" id="predict-mode" checked> <label for="predict-mode">predict before the figures are shown</label></p></div>
</section>
<p class="hiddennote" id="hidden-note">The figures are hidden until you answer.</p>
<div class="compare" id="compare" hidden></div>
<div class="tries" id="tries" hidden><h3>Try this</h3><ol id="try-list"></ol></div>
<div class="cols" id="cols"></div>
<template id="panel"><div class="panel"><h2 class="ptitle"></h2><div class="controls"></div>
<div class="results"><hr><div class="big" name="step">&nbsp;</div><div name="facts"></div>
<h3>where the step goes</h3><div name="breakdown"></div><h3>memory of the fullest GPU</h3><div name="memory"></div>
<details class="tlbox"><summary>timeline of each GPU, as report.html draws it (A and B to one time scale)</summary>
<div class="row"><label>zoom</label><select name="zoom"><option value="1">1&times;</option><option value="2">2&times;</option><option value="4">4&times;</option><option value="8">8&times;</option></select></div>
<div class="tl" name="timeline"></div></details></div>
<div class="err" name="error"></div></div></template>
<template id="explore-controls"><div>
<div class="row"><label title="the network trained: its layers set the arithmetic, the parameters and the activations">model</label><select name="model"><option>gpt2</option><option>gpt2-xl</option><option selected>llama-3-8b</option><option>llama-3-70b</option><option>gpt3-175b</option><option>tiny-gpt</option><option>mixtral-8x7b</option><option>qwen3-30b-a3b</option><option>gpt-oss-120b</option><option>deepseek-v3</option></select></div>
<div class="row"><label title="the accelerator and the server it comes in: its peak, memory and links">device (nodes)</label><select name="device"><option value="a100-sxm-80gb|dgx-a100">A100 80GB, DGX nodes of 8</option><option value="h100-sxm-80gb|dgx-h100|8|fp8" selected>H100 80GB, DGX nodes of 8</option><option value="h200-sxm-141gb|dgx-h200|8|fp8">H200 141GB, DGX nodes of 8</option><option value="b200|dgx-b200|8|fp8">B200, DGX nodes of 8</option><option value="gb200|nvl72|72|fp8">GB200, NVL72 racks of 72</option></select></div>
<div class="row"><label title="servers, each with the device count the device row names">nodes</label><input type="number" name="nodes" min="1" value="4"></div>
<div class="row"><label title="tensor parallelism: each layer&#39;s matrices split over this many GPUs, which exchange activations inside every layer (best inside one node)">tensor</label><input type="number" name="tensor" min="1" value="8"></div>
<div class="row"><label title="pipeline parallelism: the layers cut into this many stages, each on its own GPUs, passing activations forward and gradients back">pipeline</label><input type="number" name="pipeline" min="1" value="2"></div>
<div class="row"><label title="context parallelism: each sequence split over this many GPUs, which pass keys and values around a ring while attention runs">context</label><input type="number" name="context" min="1" value="1"></div>
<div class="row"><label title="data parallelism: replicas of the model, each on its own share of the batch, summing their gradients every step">data (GPUs / tensor / pipeline / context)</label><output name="data"></output></div>
<div class="row"><label title="expert parallelism: a mixture-of-experts model&#39;s experts spread over this many GPUs, tokens sent to them by all-to-all">expert (divides data; MoE models)</label><input type="number" name="expert" min="1" value="1"></div>
<div class="row"><label title="samples one GPU runs through forward and backward at once; the batch is cut into micro-batches for gradient accumulation and pipelining">micro-batch size</label><input type="number" name="micro" min="1" value="1"></div>
<div class="row"><label title="samples per optimizer step, over all data-parallel replicas and micro-batches">global batch size</label><input type="number" name="gbs" min="1" value="64"></div>
<div class="row"><label title="the order in which stages run micro-batches forward and backward: it sets the pipeline bubble and how many micro-batches&#39; activations a stage holds">pipeline schedule</label><select name="schedule"><option>gpipe</option><option selected>1f1b</option><option>interleaved-1f1b</option><option>pipedream</option><option>pipedream-2bw</option><option>zero-bubble-h1</option></select></div>
<div class="row"><label title="number format of the matrix multiplications; fp8 needs FP8 tensor cores">precision</label><select name="precision"><option selected>bf16</option><option>fp16</option><option value="fp8">fp8 (H100, H200, B200, GB200)</option><option>fp32</option></select></div>
<div class="row"><label title="the training software whose sharding and overlap rules are modelled">framework</label><select name="framework"><option>megatron-lm</option><option>deepspeed</option><option>fsdp</option></select></div>
<div class="row"><label title="ZeRO shards state over the data-parallel GPUs: 1 the optimizer state, 2 also gradients, 3 also the weights (gathered before each layer)">ZeRO stage</label><select name="zero"><option>0</option><option>1</option><option>2</option><option>3</option></select></div>
<div class="row"><label title="activation recomputation: keep fewer activations and recompute them in backward (selective: attention scores; full: whole layers)">recompute</label><select name="recompute"><option>none</option><option selected>selective</option><option>full</option></select></div>
<div class="row"><label title="how the gradient sum travels: ring (bandwidth-optimal), tree (fewer steps), halving-doubling, hierarchical (inside nodes first), auto (NCCL-style choice)">all-reduce algorithm</label><select name="algorithm"><option>ring</option><option>tree</option><option>halving-doubling</option><option>hierarchical</option><option>auto</option></select></div>
<div class="row"><label title="spread of per-GPU speed: each GPU slowed by a lognormal factor with this sigma; synchronous steps wait for the slowest">stragglers (lognormal &sigma;)</label><input type="number" name="sigma" min="0" step="0.01" value="0"></div>
<div class="row"><label title="analytical: closed-form network (milliseconds); simgrid: a discrete-event network replay (seconds)">backend</label><select name="backend"><option>analytical</option><option>simgrid</option></select></div>
</div></template>
)PAGE";
}

}  // namespace page

const char* serve_page() {
  static const std::string html =
      std::string("<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>dtsim explorer</title>\n"
                  "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<link rel=\"icon\" href=\"data:,\">\n<style>") +
      page::style() + "</style></head><body>\n" + page::body() + "<script>\n\"use strict\";\n" + page::script_render() + page::script_run() +
      page::script_lessons() + page::script_explore() + page::script_boot() + "</script></body></html>\n";
  return html.c_str();
}

}  // namespace dtsim::cli

// The explorer page `dtsim serve` answers at /: plain HTML, CSS and JavaScript in one string, so
// it works with no network beyond the loopback connection to dtsim.
#include "sim/cli/serve.hpp"

namespace dtsim::cli {

const char* serve_page() {
  return R"PAGE(<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dtsim explorer</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<style>
body{font:14px system-ui,sans-serif;margin:1em;color:#222}
h1{font-size:1.3em;margin:0 0 .3em}
.cols{display:flex;gap:1.5em;flex-wrap:wrap}
.panel{flex:1;min-width:340px;border:1px solid #ccc;border-radius:6px;padding:.8em}
label{display:inline-block;width:11em}
.row{margin:.25em 0}
input[type=number]{width:6em}
.bar{height:16px;display:inline-block;vertical-align:middle}
.brow{margin:2px 0;white-space:nowrap}
.bname{display:inline-block;width:13.5em}
.err{white-space:pre-wrap;color:#a00;font-family:monospace}
.big{font-size:1.4em;font-weight:600}
.compute{background:#4c78a8}.exposed_communication{background:#f58518}.pipeline_bubble{background:#e45756}
.optimizer{background:#72b7b2}.straggler_wait{background:#eeca3b}.input_stall{background:#b279a2}
.stage_imbalance{background:#ff9da6}.checkpoint{background:#9d755d}.comm_interference{background:#bab0ac}
.params{background:#4c78a8}.gradients{background:#72b7b2}.optimizer_m{background:#54a24b}.activations{background:#f58518}.other{background:#999}
.cap{border-left:2px solid #000;height:20px;display:inline-block;vertical-align:middle}
</style></head><body>
<h1>dtsim explorer</h1>
<p>Pick a model, a cluster and a strategy; each change runs <code>dtsim run</code> on this machine (analytical backend unless you pick SimGrid). Two strategies side by side.</p>
<div class="cols" id="cols"></div>
<template id="panel"><div class="panel">
<div class="row"><label>model</label><select name="model"><option>gpt2</option><option>gpt2-xl</option><option selected>llama-3-8b</option><option>llama-3-70b</option><option>gpt3-175b</option><option>tiny-gpt</option><option>mixtral-8x7b</option><option>qwen3-30b-a3b</option><option>gpt-oss-120b</option><option>deepseek-v3</option></select></div>
<div class="row"><label>device (nodes)</label><select name="device"><option value="a100-sxm-80gb|dgx-a100">A100 80GB, DGX nodes of 8</option><option value="h100-sxm-80gb|dgx-h100|8|fp8" selected>H100 80GB, DGX nodes of 8</option><option value="h200-sxm-141gb|dgx-h200|8|fp8">H200 141GB, DGX nodes of 8</option><option value="b200|dgx-b200|8|fp8">B200, DGX nodes of 8</option><option value="gb200|nvl72|72|fp8">GB200, NVL72 racks of 72</option></select></div>
<div class="row"><label>nodes</label><input type="number" name="nodes" min="1" value="4"></div>
<div class="row"><label>tensor</label><input type="number" name="tensor" min="1" value="8"></div>
<div class="row"><label>pipeline</label><input type="number" name="pipeline" min="1" value="2"></div>
<div class="row"><label>context</label><input type="number" name="context" min="1" value="1"></div>
<div class="row"><label>data</label><span name="data"></span></div>
<div class="row"><label>expert (divides data; MoE models)</label><input type="number" name="expert" min="1" value="1"></div>
<div class="row"><label>micro-batch size</label><input type="number" name="micro" min="1" value="1"></div>
<div class="row"><label>global batch size</label><input type="number" name="gbs" min="1" value="64"></div>
<div class="row"><label>pipeline schedule</label><select name="schedule"><option>gpipe</option><option selected>1f1b</option><option>interleaved-1f1b</option><option>pipedream</option><option>pipedream-2bw</option><option>zero-bubble-h1</option></select></div>
<div class="row"><label>precision</label><select name="precision"><option selected>bf16</option><option>fp16</option><option value="fp8">fp8 (H100, H200, B200, GB200)</option><option>fp32</option></select></div>
<div class="row"><label>framework</label><select name="framework"><option>megatron-lm</option><option>deepspeed</option><option>fsdp</option></select></div>
<div class="row"><label>ZeRO stage</label><select name="zero"><option>0</option><option>1</option><option>2</option><option>3</option></select></div>
<div class="row"><label>recompute</label><select name="recompute"><option>none</option><option selected>selective</option><option>full</option></select></div>
<div class="row"><label>all-reduce algorithm</label><select name="algorithm"><option>ring</option><option>tree</option><option>halving-doubling</option><option>hierarchical</option><option>auto</option></select></div>
<div class="row"><label>stragglers (lognormal &sigma;)</label><input type="number" name="sigma" min="0" step="0.01" value="0"></div>
<div class="row"><label>backend</label><select name="backend"><option>analytical</option><option>simgrid</option></select></div>
<hr>
<div class="big" name="step">&nbsp;</div>
<div name="facts"></div>
<h3>where the step goes</h3><div name="breakdown"></div>
<h3>memory per GPU</h3><div name="memory"></div>
<div class="err" name="error"></div>
</div></template>
<script>
"use strict";
const parts=["compute","exposed_communication","pipeline_bubble","stage_imbalance","optimizer","straggler_wait",
  "input_stall","checkpoint","comm_interference"];
// Every part the result has (they sum to the step), in the order above, then any part this page does not know yet.
function stepParts(b){return parts.filter(n=>n in b).concat(Object.keys(b).filter(n=>n!=="worst_rank"&&!parts.includes(n)));}
const mems=["params","gradients","optimizer","activations","other"];
function field(p,n){return p.querySelector('[name="'+n+'"]');}
function scenario(p,id){
  const [device,cluster,per,fp8]=field(p,"device").value.split("|");
  field(p,"precision").querySelector('[value="fp8"]').disabled=fp8!=="fp8";  // the server would refuse it
  const nodes=+field(p,"nodes").value,t=+field(p,"tensor").value,pp=+field(p,"pipeline").value;
  const cp=+field(p,"context").value,ep=+field(p,"expert").value;
  const gpus=nodes*(+per||8),data=gpus/(t*pp*cp);
  field(p,"data").textContent=Number.isInteger(data)?data:"(not whole: "+gpus+" GPUs / tensor / pipeline / context)";
  const sched=field(p,"schedule").value;
  const par={data:Number.isInteger(data)?data:1,tensor:t,pipeline:pp,micro_batch_size:+field(p,"micro").value,
    pipeline_schedule:sched,zero_stage:+field(p,"zero").value,recompute:field(p,"recompute").value,
    all_reduce_algorithm:field(p,"algorithm").value,framework:field(p,"framework").value};
  if(cp>1)par.context=cp;
  if(ep>1)par.expert=ep;
  if(sched==="interleaved-1f1b")par.virtual_stages=2;
  if(t>1)par.sequence_parallel=true;
  const s={schema_version:1,name:"explorer-"+id,model:{preset:field(p,"model").value},hardware:{device:device},
    cluster:{preset:cluster,nodes:nodes},parallelism:par,
    training:{global_batch_size:+field(p,"gbs").value,precision:field(p,"precision").value,attention:"flash"},
    simulation:{backend:field(p,"backend").value}};
  const sigma=+field(p,"sigma").value;
  if(sigma>0){s.stragglers={jitter:{distribution:"lognormal",sigma:sigma}};s.simulation.steps=4;}
  return s;
}
function bars(parent,names,values,total,cls,cap){
  parent.innerHTML="";
  const scale=Math.max(total,cap||0)||1;
  names.forEach((n,i)=>{
    const v=values[i],d=document.createElement("div");d.className="brow";
    d.innerHTML='<span class="bname">'+n.replace(/_/g," ")+'</span><span class="bar '+cls(n)+'" style="width:'+(260*v/scale).toFixed(1)+'px"></span> '+
      (cap?(v/2**30).toFixed(2)+" GiB":v.toFixed(4)+" s ("+(100*v/total).toFixed(1)+"%)");
    parent.appendChild(d);
  });
  if(cap){const d=document.createElement("div");d.className="brow";
    d.innerHTML='<span class="bname">peak / capacity</span><span class="bar params" style="width:'+(260*total/scale).toFixed(1)+'px"></span><span class="cap" style="margin-left:'+(260*(cap-total)/scale).toFixed(1)+'px"></span> '+(total/2**30).toFixed(1)+" of "+(cap/2**30).toFixed(1)+" GiB";
    parent.appendChild(d);}
}
async function run(p,id){
  const s=scenario(p,id),seq=(p.seq=(p.seq||0)+1);
  field(p,"error").textContent="running...";
  let r;
  try{r=await fetch("/api/run",{method:"POST",headers:{"Content-Type":"application/json"},body:JSON.stringify(s)});}
  catch(e){field(p,"error").textContent=String(e);return;}
  const body=await r.text();
  if(seq!==p.seq)return;  // a newer change is on its way
  if(!r.ok){  // the command line's error text, and no stale result beside it
    field(p,"error").textContent=body;field(p,"step").textContent="no result";
    for(const n of ["facts","breakdown","memory"])field(p,n).textContent="";
    delete p.dataset.bubble;delete p.dataset.step;return;}
  const j=JSON.parse(body);
  field(p,"error").textContent=(j.warnings||[]).map(w=>"warning: "+w).join("\n");
  field(p,"step").textContent="step "+j.step_time_s.toFixed(4)+" s";
  const b=j.breakdown_s;
  p.dataset.bubble=b.pipeline_bubble;p.dataset.step=j.step_time_s;  // for scripts/serve_check.sh
  field(p,"facts").textContent="MFU "+(100*j.flops.mfu).toFixed(1)+"%, "+Math.round(j.throughput.tokens_per_s)+" tokens/s; pipeline bubble "+
    b.pipeline_bubble.toFixed(4)+" s"+(j.parallelism.expected_bubble_fraction!==undefined?" (the schedule's bubble with equal stages: "+(100*j.parallelism.expected_bubble_fraction).toFixed(1)+"% of the step)":"")+
    (j.parallelism.all_to_all_share!==undefined?"; expert all-to-all "+(100*j.parallelism.all_to_all_share).toFixed(1)+"% of the step":"");
  const shown=stepParts(b);
  bars(field(p,"breakdown"),shown,shown.map(n=>b[n]),j.step_time_s,n=>n);
  const m=j.memory;
  bars(field(p,"memory"),mems,mems.map(n=>m[n+"_bytes"]),m.peak_bytes,n=>n==="optimizer"?"optimizer_m":n,m.capacity_bytes);
}
// Controls may be set from the address: ?schedule=gpipe sets strategy A's, ?B.schedule=1f1b B's.
const query=new URLSearchParams(location.search);
function preset(p,id){for(const [k,v] of query){const [who,n]=k.includes(".")?k.split("."):["A",k];
  if(who===id&&field(p,n))field(p,n).value=v;}}
const cols=document.getElementById("cols");
["A","B"].forEach((id,i)=>{
  const p=document.getElementById("panel").content.firstElementChild.cloneNode(true);
  p.id="panel"+id;
  p.insertAdjacentHTML("afterbegin","<h2>strategy "+id+"</h2>");
  if(i===1)field(p,"schedule").value="gpipe";
  preset(p,id);
  cols.appendChild(p);
  p.addEventListener("change",()=>run(p,id));
  run(p,id);
});
</script></body></html>
)PAGE";
}

}  // namespace dtsim::cli

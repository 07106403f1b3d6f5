// The explorer's drawing: each side's step (its parts, which add up to it) and memory, A and B on
// one scale, and the difference between them in the figure a lesson names.
#include "sim/cli/serve_page.hpp"

namespace dtsim::cli::page {

const char* script_render() {
  return R"JS(
const parts=["compute","exposed_communication","pipeline_bubble","stage_imbalance","optimizer","straggler_wait",
  "input_stall","checkpoint","comm_interference"];
// Every part the result has (they sum to the step), in the order above, then any part this page does not know yet.
function stepParts(b){return parts.filter(n=>n in b).concat(Object.keys(b).filter(n=>n!=="worst_rank"&&!parts.includes(n)));}
const mems=["params","gradients","optimizer","activations","other"];
const glossary={compute:"time the GPU spends computing (forward, backward, recomputation)",
  exposed_communication:"communication that computation does not hide: the GPU waits for it",
  pipeline_bubble:"pipeline stages idle while the pipeline fills and drains, with equal stages",
  stage_imbalance:"idle time because pipeline stages cost unequal amounts",
  optimizer:"the optimizer's update of the weights",straggler_wait:"waiting for slower workers before synchronising",
  input_stall:"waiting for the data loader to deliver the next batch",checkpoint:"saving checkpoints",
  comm_interference:"compute slowed by communication sharing the GPU",params:"the weights this GPU holds",
  gradients:"the gradients this GPU holds",optimizer_m:"the optimizer's state (moments, master weights)",
  activations:"activations kept for backward",other:"workspace, buffers and the framework's reserve"};
const panels={};
function field(p,n){return p.querySelector('[name="'+n+'"]');}
function at(o,pointer){return pointer.split("/").slice(1).reduce((v,k)=>v==null?undefined:v[k.replace(/~1/g,"/").replace(/~0/g,"~")],o);}
function show(v,unit){
  if(typeof v!=="number")return "n/a";
  if(unit==="bytes")return (v/2**30).toFixed(1)+" GiB";
  if(unit==="fraction")return (100*v).toFixed(1)+"%";
  if(unit==="per_s")return Math.round(v).toLocaleString("en")+"/s";
  return v.toFixed(4)+" s";}
function term(name,key){const t=glossary[key];return t?'<abbr title="'+t+'">'+name+'</abbr>':name;}
// One row: name, bar on the shared scale (a share of the track), value.
function row(key,label,v,scale,cls,text){
  const d=document.createElement("div");d.className="brow";d.dataset.part=key;d.dataset.v=v;
  d.innerHTML='<span class="bname">'+label+'</span><span class="track"><span class="bar '+cls+'" style="width:'+
    (100*v/(scale||1)).toFixed(3)+'%"></span></span><span class="bval">'+text+'</span>';
  return d;}
function drawBreakdown(p,j,scale){
  const b=j.breakdown_s,shown=stepParts(b),box=field(p,"breakdown");box.innerHTML="";
  const track=document.createElement("div");track.className="stacktrack";
  track.innerHTML='<div class="stack" style="width:'+(100*j.step_time_s/scale).toFixed(3)+'%">'+shown.map(n=>
    '<span class="'+n+'" data-part="'+n+'" title="'+n.replace(/_/g," ")+': '+b[n].toFixed(4)+' s" style="width:'+
    (100*b[n]/(j.step_time_s||1)).toFixed(3)+'%"></span>').join("")+'</div>';
  box.appendChild(track);
  shown.forEach(n=>box.appendChild(row(n,term(n.replace(/_/g," "),n),b[n],scale,n+(figure().at==="/breakdown_s/"+n?" focus":""),b[n].toFixed(4)+" s ("+(100*b[n]/j.step_time_s).toFixed(1)+"%)")));}
function drawMemory(p,j,scale){
  const m=j.memory,box=field(p,"memory");box.innerHTML="";
  mems.forEach(n=>box.appendChild(row(n,term(n==="params"?"parameters":n,n==="optimizer"?"optimizer_m":n),m[n+"_bytes"],scale,"m-"+n,show(m[n+"_bytes"],"bytes"))));
  const peak=row("peak","peak / capacity",m.peak_bytes,scale,"m-peak",show(m.peak_bytes,"bytes")+" of "+show(m.capacity_bytes,"bytes")+(m.fits===false?" (does not fit)":""));
  peak.querySelector(".track").insertAdjacentHTML("beforeend",'<span class="cap" title="capacity" style="left:'+(100*m.capacity_bytes/scale).toFixed(3)+'%"></span>');
  box.appendChild(peak);}
function facts(j){
  const f=["MFU "+(100*j.flops.mfu).toFixed(1)+"%",Math.round(j.throughput.samples_per_s).toLocaleString("en")+" samples/s"];
  if(j.parallelism.expected_bubble_fraction!==undefined)f.push("the schedule's bubble with equal stages: "+(100*j.parallelism.expected_bubble_fraction).toFixed(1)+"% of the step");
  if(j.parallelism.all_to_all_share!==undefined)f.push("expert all-to-all "+(100*j.parallelism.all_to_all_share).toFixed(1)+"% of the step");
  if(j.async&&j.async.staleness_mean!==undefined)f.push("mean staleness "+j.async.staleness_mean.toFixed(1)+" updates");
  if(j.faults)f.push("goodput "+show(j.faults.goodput,"fraction")+" (best interval by Daly's formula: "+(j.faults.daly_interval_s/60).toFixed(0)+" min)");
  return f.join("; ");}
function renderPanel(p,scale,memScale){
  const j=p.result;if(!j)return;
  field(p,"error").textContent=(j.warnings||[]).map(w=>"warning: "+w).join("\n");
  field(p,"step").textContent="step "+j.step_time_s.toFixed(4)+" s";
  p.dataset.bubble=j.breakdown_s.pipeline_bubble;p.dataset.step=j.step_time_s;
  field(p,"facts").textContent=facts(j);
  drawBreakdown(p,j,scale);drawMemory(p,j,memScale);}
// A and B on one scale: the longer step fills the track, the shorter is drawn shorter.
function renderAll(){
  const rs=["A","B"].map(id=>panels[id]&&panels[id].result).filter(Boolean);
  const scale=Math.max(...rs.map(j=>j.step_time_s),1e-12);
  const memScale=Math.max(...rs.map(j=>Math.max(j.memory.peak_bytes,j.memory.capacity_bytes)),1);
  ["A","B"].forEach(id=>panels[id]&&renderPanel(panels[id],scale,memScale));
  renderCompare();zoomTimelines();}
)JS";
}

// The comparison of A and B in the figures that matter; asking the server for a side's result, then
// for its timeline when its box is open.
const char* script_run() {
  return R"JS(
function compareRows(box,fig,a,b){
  const max=Math.max(a,b)||1;
  box.appendChild(row("A","A: "+fig.label,a,max,"fig-A",show(a,fig.unit)));
  box.appendChild(row("B","B: "+fig.label,b,max,"fig-B",show(b,fig.unit)));
  const d=document.createElement("p");d.className="delta";
  const sign=b>=a?"+":"\u2212",rel=a?sign+Math.abs(100*(b-a)/a).toFixed(1)+"%":"n/a",r=Math.max(a,b)/Math.min(a,b);
  d.textContent=Math.abs(b-a)<=5e-5*Math.max(Math.abs(a),Math.abs(b))?"A and B: the same":"B \u2212 A: "+sign+show(Math.abs(b-a),fig.unit)+" ("+rel+
    (Math.min(a,b)>0?"; "+(a>b?"A":"B")+" is "+r.toFixed(2)+"\u00d7 "+(a>b?"B":"A"):"")+")";
  box.appendChild(d);}
function renderCompare(){
  const box=document.getElementById("compare"),A=panels.A&&panels.A.result,B=panels.B&&panels.B.result;
  if(!A||!B){box.hidden=true;return;}
  box.hidden=false;box.innerHTML="<h3>A and B on one scale</h3>";
  const figs=[figure()];
  if(figs[0].at!=="/step_time_s")figs.push({at:"/step_time_s",label:"step time",unit:"s"});
  if(figs[0].at!=="/memory/peak_bytes")figs.push({at:"/memory/peak_bytes",label:"peak memory",unit:"bytes"});
  figs.forEach((f,i)=>{const g=document.createElement("div");g.className="fig";g.dataset.at=f.at;
    const a=at(A,f.at),b=at(B,f.at);g.dataset.a=a;g.dataset.b=b;compareRows(g,f,a,b);box.appendChild(g);});}
// A POST to the server; while it runs its most simulations at once (503), asked again a little later.
async function post(url,s){
  for(let i=0;;i++){
    const r=await fetch(url,{method:"POST",headers:{"Content-Type":"application/json"},body:JSON.stringify(s)});
    if(r.status!==503||i>=40)return r;
    await new Promise(ok=>setTimeout(ok,100+50*i));}}
async function run(p){
  const s=p.build(),seq=(p.seq=(p.seq||0)+1);
  field(p,"error").textContent="running...";p.dataset.state="running";
  let r;
  try{r=await post("/api/run",s);}
  catch(e){field(p,"error").textContent=String(e);p.dataset.state="error";return;}
  const body=await r.text();
  if(seq!==p.seq)return;  // a newer change is on its way
  if(!r.ok){  // the command line's error text, and no stale result beside it
    p.result=null;field(p,"error").textContent=body;field(p,"step").textContent="no result";
    for(const n of ["facts","breakdown","memory"])field(p,n).textContent="";
    delete p.dataset.bubble;delete p.dataset.step;p.dataset.state="error";p.dataset.done=seq;renderAll();return;}
  p.result=JSON.parse(body);p.dataset.state="done";p.dataset.done=seq;
  renderAll();onResults();
  if(p.querySelector(".tlbox").open)loadTimeline(p);}
// report.html's timeline of the same set-up (POST /api/timeline), fetched when its box is open.
async function loadTimeline(p){
  const box=field(p,"timeline"),seq=p.seq;box.textContent="drawing\u2026";p.dataset.timeline="running";
  let r;
  try{r=await post("/api/timeline",p.build());}
  catch(e){box.textContent=String(e);p.dataset.timeline="error";return;}
  const body=await r.text();
  if(seq!==p.seq)return;
  if(!r.ok){box.textContent=body;p.dataset.timeline="error";return;}
  box.innerHTML=body;p.tlSeq=seq;p.dataset.timeline=seq;zoomTimelines();}
// The pictures scale with the box; A's and B's widths follow their step times, so a second spans as
// many pixels on both; zoom widens them inside a box that scrolls.
function zoomTimelines(){
  const steps=["A","B"].map(id=>panels[id]&&panels[id].result?panels[id].result.step_time_s:0),top=Math.max(...steps);
  ["A","B"].forEach((id,i)=>{const p=panels[id],svg=p&&p.querySelector('[name="timeline"] svg');if(!svg)return;
    if(!svg.getAttribute("viewBox")){svg.setAttribute("viewBox","0 0 "+svg.getAttribute("width")+" "+svg.getAttribute("height"));
      svg.removeAttribute("width");svg.removeAttribute("height");}
    svg.style.width=(100*(+field(p,"zoom").value)*(top&&steps[i]?steps[i]/top:1)).toFixed(3)+"%";});}
)JS";
}

}  // namespace dtsim::cli::page

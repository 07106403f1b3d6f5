// The free explorer: a transformer or MoE model on DGX nodes or NVL72 racks, every strategy knob,
// turned into the scenario POSTed to /api/run.
#include "sim/cli/serve_page.hpp"

namespace dtsim::cli::page {

const char* script_explore() {
  return R"JS(
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
// Two strategies side by side; B starts from GPipe so that the pair differs. The address may set any control.
function openExplore(){
  lesson=null;showSection("explore");
  ["A","B"].forEach(id=>{
    const p=makePanel(id,"strategy "+id);
    p.querySelector(".controls").appendChild(document.getElementById("explore-controls").content.firstElementChild.cloneNode(true));
    if(id==="B")field(p,"schedule").value="gpipe";
    fromQuery(p,id);tieLabels(p,id);
    p.build=()=>scenario(p,id);
  });
  syncURL();["A","B"].forEach(id=>run(panels[id]));
}
)JS";
}

}  // namespace dtsim::cli::page

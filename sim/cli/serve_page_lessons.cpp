// The explorer's lessons (GET /api/lessons, from reports/lessons/): the list, one lesson's two
// set-ups and controls, predict-then-reveal, what to try; and the address that carries it all.
#include "sim/cli/serve_page.hpp"

namespace dtsim::cli::page {

const char* script_lessons() {
  return R"JS(
let lessons=[],lesson=null,revealed=false,wantReveal=false;
function figure(){return lesson?lesson.figure:{at:"/step_time_s",label:"step time",unit:"s",better:"lower"};}
function clone(x){return JSON.parse(JSON.stringify(x));}
function optValue(o){return o!==null&&typeof o==="object"?o.value:o;}
function optLabel(o){return o!==null&&typeof o==="object"&&o.label?o.label:String(optValue(o));}
// RFC 7386, as the server's checks apply it: null removes a key, objects merge, the rest replaces.
function mergePatch(t,p){
  if(p===null||typeof p!=="object"||Array.isArray(p))return clone(p);
  if(t===null||typeof t!=="object"||Array.isArray(t))t={};
  for(const k in p){if(p[k]===null)delete t[k];else t[k]=mergePatch(t[k],p[k]);}
  return t;}
function setAt(o,pointer,v){const ks=pointer.split("/").slice(1);let c=o;
  ks.slice(0,-1).forEach(k=>{if(c[k]===null||typeof c[k]!=="object")c[k]={};c=c[k];});c[ks[ks.length-1]]=v;}
// The base, then each control's option: its value at "at", its "patch" merged (as side_scenario in C++).
function lessonScenario(p){let s=clone(lesson.base);
  lesson.controls.forEach(c=>{const v=field(p,c.id).value,o=c.options.find(o=>String(optValue(o))===v);if(!o)return;
    if(c.at)setAt(s,c.at,clone(optValue(o)));if(o.patch)s=mergePatch(s,o.patch);});
  return s;}
function showList(){lesson=null;showSection("list");const ol=document.getElementById("lesson-list");ol.innerHTML="";
  lessons.forEach(l=>{const li=document.createElement("li");
    const a=document.createElement("a");a.href="?lesson="+encodeURIComponent(l.name);a.textContent=l.title;
    li.append(a," ");li.insertAdjacentHTML("beforeend",'<span class="lecture"></span>');li.lastChild.textContent="("+l.lecture+")";ol.appendChild(li);});}
function lessonControls(p,id){const box=p.querySelector(".controls"),keys=lesson.tries.map(t=>t.control);
  lesson.controls.forEach(c=>{const r=document.createElement("div");r.className="row"+(keys.includes(c.id)?" key":"");
    r.innerHTML='<label></label><select name="'+c.id+'">'+c.options.map(o=>'<option value="'+String(optValue(o))+'">'+optLabel(o)+'</option>').join("")+'</select>';
    r.querySelector("label").textContent=c.label;box.appendChild(r);field(p,c.id).value=String(lesson[id].values[c.id]);});}
function openLesson(name){
  lesson=lessons.find(l=>l.name===name);if(!lesson){showList();return;}
  showSection("lesson");
  for(const k of ["title","lecture","text"])document.getElementById("lesson-"+k).textContent=lesson[k];
  document.getElementById("lesson-figure").textContent=lesson.figure.label+" ("+lesson.figure.better+" is better)";
  document.getElementById("question").textContent=lesson.question;
  document.getElementById("which-legend").textContent="Which has the "+lesson.figure.better+" "+lesson.figure.label+"?";
  ["A","B"].forEach(id=>{const p=makePanel(id,id+": "+lesson[id].label);lessonControls(p,id);fromQuery(p,id);tieLabels(p,id);
    p.build=()=>lessonScenario(p);});
  const ol=document.getElementById("try-list");ol.innerHTML="";document.getElementById("tries").hidden=false;
  lesson.tries.forEach((t,i)=>{const c=lesson.controls.find(c=>c.id===t.control),o=c.options.find(o=>String(optValue(o))===String(t.value));
    const li=document.createElement("li");li.innerHTML='<button type="button" id="try-'+i+'">try it</button> ';
    li.appendChild(document.createTextNode((t.side==="both"?"A and B":t.side)+": set \u201c"+c.label+"\u201d to "+optLabel(o)+". "+t.says));
    li.querySelector("button").onclick=()=>(t.side==="both"?["A","B"]:[t.side]).forEach(id=>{field(panels[id],c.id).value=String(t.value);
      field(panels[id],c.id).dispatchEvent(new Event("change",{bubbles:true}));});
    ol.appendChild(li);});
  const mode=document.getElementById("predict-mode");mode.checked=query.get("predict")!=="0";
  mode.onchange=()=>{revealed=!mode.checked;wantReveal=false;document.getElementById("answer").textContent="";guessing();syncURL();};
  document.getElementById("reveal").onclick=()=>{wantReveal=true;onResults();};
  revealed=!mode.checked;guessing();syncURL();["A","B"].forEach(id=>run(panels[id]));}
function guessing(){document.body.classList.toggle("guessing",!!lesson&&!revealed);}
// The answer from the simulated figures: the better side (or the same, within 5%) and by how much.
function answerOf(a,b){
  if(Math.abs(a-b)<=0.05*Math.max(Math.abs(a),Math.abs(b)))return {which:"same",ratio:1};
  const ratio=Math.max(a,b)/Math.max(Math.min(a,b),1e-300),aBetter=(lesson.figure.better==="lower")===(a<b);
  return {which:aBetter?"A":"B",ratio:ratio,much:ratio<1.5?"small":ratio<3?"mid":"big"};}
function onResults(){
  if(!lesson||!wantReveal)return;
  const A=panels.A.result,B=panels.B.result,out=document.getElementById("answer");
  const pick=n=>{const c=document.querySelector('input[name="'+n+'"]:checked');return c?c.value:"";};
  if(!pick("which")){out.className="answer";out.textContent="First pick A, B or about the same.";wantReveal=false;return;}
  if(!A||!B){out.textContent="Still simulating\u2026";return;}
  const f=lesson.figure,a=at(A,f.at),b=at(B,f.at),ans=answerOf(a,b);
  const right=pick("which")===ans.which&&(ans.which==="same"||pick("much")===ans.much);
  out.dataset.which=ans.which;out.dataset.much=ans.much||"";out.className="answer "+(right?"right":"wrong");
  const said=pick("which")==="same"?"about the same":pick("which")+(pick("much")?", "+document.querySelector('label[for="g-'+pick("much")+'"]').textContent.trim():"");
  out.textContent=(right?"Right. ":"Not quite (you said "+said+"). ")+(ans.which==="same"?"About the same: ":ans.which+"'s "+f.label+" is "+ans.ratio.toFixed(2)+
    "\u00d7 "+(f.better==="lower"?"lower":"higher")+" than "+(ans.which==="A"?"B":"A")+"'s: ")+"A "+show(a,f.unit)+", B "+show(b,f.unit)+".";
  revealed=true;wantReveal=false;guessing();}
)JS";
}

const char* script_boot() {
  return R"JS(
const query=new URLSearchParams(location.search);
function showSection(what){for(const s of ["list","lesson","explore"])document.getElementById(s).hidden=s!==what;
  document.getElementById("tries").hidden=true;document.getElementById("compare").hidden=true;
  document.getElementById("cols").innerHTML="";guessing();}
function makePanel(id,title){
  const p=document.getElementById("panel").content.firstElementChild.cloneNode(true);
  p.id="panel"+id;p.querySelector(".ptitle").textContent=title;panels[id]=p;
  document.getElementById("cols").appendChild(p);
  p.querySelector(".controls").addEventListener("change",()=>{syncURL();run(p);});
  const zoom=field(p,"zoom"),tl=p.querySelector(".tlbox");zoom.id=id+"-zoom";zoom.previousElementSibling.htmlFor=zoom.id;
  zoom.addEventListener("change",zoomTimelines);
  tl.addEventListener("toggle",()=>{if(tl.open&&p.tlSeq!==p.seq)loadTimeline(p);});
  return p;}
// Every control's label names it (<label for>), with ids unique to the side.
function tieLabels(p,id){p.querySelectorAll(".controls .row").forEach(r=>{const c=r.querySelector("[name]"),l=r.querySelector("label");
  if(c&&l){c.id=id+"-"+c.getAttribute("name");l.htmlFor=c.id;}});}
// Controls from the address: ?A.schedule=gpipe&B.schedule=1f1b (a plain ?schedule=gpipe is A's).
function fromQuery(p,id){for(const [k,v] of query){const [who,n]=k.includes(".")?k.split("."):["A",k];
  const c=who===id&&p.querySelector('.controls [name="'+n+'"]');
  if(c&&c.tagName!=="OUTPUT"&&(c.tagName!=="SELECT"||[...c.options].some(o=>o.value===v)))c.value=v;}}
// The address carries the whole set-up: the lesson (or the free explorer) and every control of A and B.
function syncURL(){const q=new URLSearchParams();
  if(lesson){q.set("lesson",lesson.name);if(!document.getElementById("predict-mode").checked)q.set("predict","0");}
  else q.set("explore","1");
  ["A","B"].forEach(id=>panels[id]&&panels[id].querySelectorAll(".controls [name]").forEach(c=>{if(c.tagName!=="OUTPUT")q.set(id+"."+c.name,c.value);}));
  history.replaceState(null,"","?"+q.toString());}
async function boot(){
  try{const r=await fetch("/api/lessons");lessons=await r.json();}catch(e){lessons=[];}
  if(query.has("lesson"))openLesson(query.get("lesson"));
  else if([...query.keys()].length)openExplore();
  else showList();}
boot();
)JS";
}

}  // namespace dtsim::cli::page

// The explorer page's style. Laid out in grids whose columns may shrink, so that the page fits a
// phone (412 px) without scrolling sideways; the causes' colours are report.html's.
#include <fmt/format.h>

#include "reports/palette.hpp"
#include "sim/cli/serve_page.hpp"

namespace dtsim::cli::page {

namespace {

const char* kStyle = R"CSS(
*{box-sizing:border-box}
body{font:14px system-ui,sans-serif;margin:0 auto;padding:.6em;color:#222;max-width:1300px}
header{display:flex;flex-wrap:wrap;align-items:baseline;gap:.3em 1.2em}
h1{font-size:1.3em;margin:0 0 .3em}h1 a{color:inherit;text-decoration:none}
h2{font-size:1.15em;margin:.2em 0}h3{font-size:1em;margin:.8em 0 .3em}
p{max-width:60em;line-height:1.4}
.lessons{padding-left:1.4em}.lessons li{margin:.45em 0}.lessons .lecture{color:#555}
.lecture{color:#555;margin:.1em 0}
.cols{display:flex;gap:1em;flex-wrap:wrap}
.panel{flex:1 1 22em;min-width:0;border:1px solid #ccc;border-radius:6px;padding:.7em}
.row{display:grid;grid-template-columns:minmax(0,13em) minmax(0,1fr);gap:.2em .6em;align-items:center;margin:.3em 0}
.row label{overflow-wrap:anywhere}
select,input,button{font:inherit;max-width:100%;min-width:0}
input[type=number]{width:7em}
.key{background:#fff6d5}
.brow{display:grid;grid-template-columns:minmax(0,10.5em) minmax(0,1fr) 9em;gap:.5em;align-items:center;margin:2px 0}
.bname,.bval{overflow-wrap:break-word;min-width:0}.bval{font-variant-numeric:tabular-nums}
.track{position:relative;height:16px;background:#f3f3f3}
.bar{position:absolute;left:0;top:0;height:16px}
.stack{display:flex;height:22px;margin:.3em 0;background:none}.stack span{height:100%}
.stacktrack{background:#f3f3f3;margin:.2em 0}
.cap{position:absolute;top:-3px;height:22px;border-left:2px solid #000}
.err{white-space:pre-wrap;color:#a00;font-family:monospace;overflow-wrap:anywhere}
.big{font-size:1.3em;font-weight:600}
.compare,.predict,.tries{border:1px solid #ccc;border-radius:6px;padding:.6em .8em;margin:.8em 0;background:#fafafa}
.compare .brow{grid-template-columns:minmax(0,9em) minmax(0,1fr) 9em}
@media (max-width:600px){.brow,.compare .brow{grid-template-columns:minmax(0,7.5em) minmax(0,1fr) 6.5em;gap:.3em}}
.brow:has(.focus) .bname{font-weight:700}.focus{outline:2px solid #000}
.delta{font-weight:600}
fieldset{border:1px solid #ddd;margin:.4em 0;padding:.3em .6em}
fieldset label{margin-right:1em;white-space:nowrap;display:inline-block}
.answer{font-weight:600}.right{color:#1a7f37}.wrong{color:#b3261e}
.guessing .results,.guessing #compare{display:none}
.hiddennote{display:none;color:#555;font-style:italic}.guessing .hiddennote{display:block}
.tries li{margin:.35em 0}
abbr,label[title]{text-decoration:underline dotted;cursor:help}
.tlbox{margin-top:.8em}.tlbox summary{cursor:pointer;font-weight:600}
.tl{overflow-x:auto;max-width:100%}.tl svg{display:block}.tl .legend,.tl .sampling{font-size:.9em;color:#444}
)CSS";

}  // namespace

std::string style() {
  std::string css = kStyle;
  for (const auto& p : reports::palette::kStep) css += fmt::format(".{}{{background:{}}}\n", p.key, p.colour);
  for (const auto& p : reports::palette::kMemory) css += fmt::format(".m-{}{{background:{}}}\n", p.key, p.colour);
  return css + ".m-peak{background:#555}.fig-A{background:#4c78a8}.fig-B{background:#f58518}\n";
}

}  // namespace dtsim::cli::page

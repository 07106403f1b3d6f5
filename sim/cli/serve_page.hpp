#pragma once
// The parts of the explorer page (serve_page() joins them): its style, its HTML and its script,
// each a plain string with no network reference.
#include <string>

namespace dtsim::cli::page {

std::string style();           // serve_page_style.cpp; the causes' colours from reports/palette.hpp
const char* body();            // serve_page.cpp: the lesson list, a lesson, the explorer's template
const char* script_render();   // serve_page_render.cpp: A and B drawn on one scale, their difference
const char* script_run();      // serve_page_render.cpp: the A-B comparison; /api/run, /api/timeline
const char* script_lessons();  // serve_page_lessons.cpp: lessons, predict-then-reveal
const char* script_explore();  // serve_page_explore.cpp: the free explorer's scenario
const char* script_boot();     // serve_page_lessons.cpp: the address <-> the controls, start

}  // namespace dtsim::cli::page

#pragma once
// What each registered stack (sim/cost/stack.cpp) keeps in GPU memory: its optimizer buffers,
// FP8 weight copies and allocator (strategies/stack_memory.hpp; docs/memory.md).
#include <string>

#include "strategies/stack_memory_kinds.hpp"

namespace dtsim::cost {

// The preset's memory; a name that is not a preset gets dtsim's behaviour before stacks.
strategies::StackMemory stack_memory(const std::string& preset);

}  // namespace dtsim::cost

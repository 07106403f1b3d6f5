#pragma once
// How the process's heap is backed (sim/core/heap.cpp).

namespace dtsim {

// Asks the kernel for 2 MiB pages under the first 64 MiB of the heap. Call once, first in main.
void back_heap_with_huge_pages();

}  // namespace dtsim

// The GPU part of `trainer devices`: what each GPU is, and whether this build can run on it.
#pragma once

#include <ostream>
#include <string>

namespace tandem {

// Prints every GPU (or why there is none) and returns normally in both cases.
void print_cuda_devices(std::ostream& out);
// True when GPU 0 can run this build; otherwise *reason says why.
bool cuda_usable(std::string* reason);
// The GPUs this process sees (CUDA_VISIBLE_DEVICES applied); 0 when none or no driver answers.
int cuda_device_count();

}  // namespace tandem

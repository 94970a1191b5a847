// allocateHost: zeroed, pre-faulted host memory (huge pages from 2 MB), as external ArrayBuffers (host_memory.cc).
#pragma once

#define NAPI_VERSION 8
#include <node_api.h>

namespace tsorch {

// allocateHost(nbytes) -> ArrayBuffer | null (contract in ../native.ts).
napi_value AllocateHost(napi_env env, napi_callback_info info);

}  // namespace tsorch

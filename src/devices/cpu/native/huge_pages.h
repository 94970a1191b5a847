// allocateHuge: zeroed host memory on transparent huge pages, as external ArrayBuffers (huge_pages.cc).
#pragma once

#define NAPI_VERSION 8
#include <node_api.h>

namespace tsorch {

// allocateHuge(nbytes) -> ArrayBuffer | null (contract in ../native.ts).
napi_value AllocateHuge(napi_env env, napi_callback_info info);

}  // namespace tsorch

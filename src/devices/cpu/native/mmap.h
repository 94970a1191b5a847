// mapRegions: memory-map a file and hand out byte ranges of it as external ArrayBuffers (mmap.cc).
#pragma once

#define NAPI_VERSION 8
#include <node_api.h>

namespace tsorch {

// mapRegions(path, offsets, lengths) -> ArrayBuffer[] (contract in ../native.ts).
napi_value MapRegions(napi_env env, napi_callback_info info);

}  // namespace tsorch

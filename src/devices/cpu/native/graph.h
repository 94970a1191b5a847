// Native graphs of the cpu device (graph.cc): recorded addon calls replayed in one JS->native call.
#pragma once

#define NAPI_VERSION 8
#include <node_api.h>

#include <cstddef>

namespace tsorch {

// Makes the exports in `props` (the addon's kernels) available as graph nodes, by name.
void register_graph_kernels(const napi_property_descriptor* props, size_t count);
// graphCreate(names, args, slotRefs) and graphRun(handle, slots): see graph.cc.
napi_value graph_create(napi_env env, napi_callback_info info);
napi_value graph_run(napi_env env, napi_callback_info info);

}  // namespace tsorch

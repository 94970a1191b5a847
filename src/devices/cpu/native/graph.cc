// Native graphs of the cpu device (see ../graph.ts): the addon calls a cpu graph records are
// handed over once (graphCreate), with every argument read into C++ values, and a replay
// (graphRun) runs them all in one JS->native call: each node calls its export's function with
// its recorded arguments (Args reads them through a ReplayScope), so the checks and kernels are
// exactly the eager ones, with no JS between kernels. Arguments that view a graph slot (an input
// or output whose storage changes per replay) are re-pointed into that replay's slot buffers.
#include "graph.h"

#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "napi_args.h"

namespace tsorch {

namespace {

std::unordered_map<std::string, napi_callback>& kernels() {
  static std::unordered_map<std::string, napi_callback> table;
  return table;
}

struct SlotRef {
  size_t node, arg, slot, start, bytes;
};

struct Node {
  napi_callback fn;
  std::vector<RecordedArg> args;
};

struct Graph {
  std::vector<Node> nodes;
  std::vector<SlotRef> slot_refs;
};

bool throw_error(napi_env env, const std::string& msg) {
  napi_throw_type_error(env, nullptr, ("tsorch_cpu." + msg).c_str());
  return false;
}

bool typed_bytes(napi_env env, napi_value v, void** data, size_t* bytes) {
  bool typed = false;
  napi_is_typedarray(env, v, &typed);
  if (!typed) return false;
  napi_typedarray_type type;
  size_t length = 0;
  napi_get_typedarray_info(env, v, &type, &length, data, nullptr, nullptr);
  size_t esize = 8;
  switch (type) {
    case napi_int8_array: case napi_uint8_array: case napi_uint8_clamped_array: esize = 1; break;
    case napi_int16_array: case napi_uint16_array: esize = 2; break;
    case napi_int32_array: case napi_uint32_array: case napi_float32_array: esize = 4; break;
    default: break;
  }
  *bytes = length * esize;
  return true;
}

// Reads JS value `v` (argument `j` of node `i`) into `out`.
bool read_arg(napi_env env, napi_value v, size_t i, size_t j, RecordedArg* out) {
  napi_valuetype t;
  napi_typeof(env, v, &t);
  if (t == napi_null || t == napi_undefined) return true;
  if (t == napi_number) {
    out->kind = RecordedArg::kNumber;
    napi_get_value_double(env, v, &out->number);
    return true;
  }
  if (typed_bytes(env, v, &out->buffer.data, &out->buffer.bytes)) {
    out->kind = RecordedArg::kBuffer;
    return true;
  }
  bool is_array = false;
  napi_is_array(env, v, &is_array);
  if (is_array) {
    out->kind = RecordedArg::kNumbers;
    uint32_t n = 0;
    napi_get_array_length(env, v, &n);
    for (uint32_t k = 0; k < n; ++k) {
      napi_value e;
      napi_get_element(env, v, k, &e);
      napi_valuetype et;
      napi_typeof(env, e, &et);
      double d = 0;
      if (et != napi_number || napi_get_value_double(env, e, &d) != napi_ok) break;
      out->numbers.push_back(d);
    }
    if (out->numbers.size() == n) return true;
  }
  return throw_error(env, "graphCreate: argument " + std::to_string(j) + " of node " +
                              std::to_string(i) +
                              " must be null, a number, a TypedArray or an array of numbers");
}

void finalize_graph(napi_env, void* data, void*) { delete static_cast<Graph*>(data); }

size_t index_at(napi_env env, napi_value array, uint32_t k) {
  napi_value e;
  napi_get_element(env, array, k, &e);
  double d = -1;
  napi_get_value_double(env, e, &d);
  return d < 0 ? SIZE_MAX : static_cast<size_t>(d);
}

// graphCreate(names: string[], args: unknown[][], slotRefs: number[][5]): a graph handle.
// slotRefs entries are [node, arg, slot, byteStart, byteLength]: that argument views those bytes
// of the slot passed to graphRun.
napi_value GraphCreate(napi_env env, napi_callback_info info) {
  size_t argc = 3;
  napi_value argv[3];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  if (argc != 3) return throw_error(env, "graphCreate: expects 3 arguments"), nullptr;
  auto graph = std::make_unique<Graph>();
  uint32_t n = 0, m = 0;
  napi_get_array_length(env, argv[0], &n);
  napi_get_array_length(env, argv[1], &m);
  if (n != m) return throw_error(env, "graphCreate: names and args differ in length"), nullptr;
  for (uint32_t i = 0; i < n; ++i) {
    napi_value name_v, args_v;
    napi_get_element(env, argv[0], i, &name_v);
    napi_get_element(env, argv[1], i, &args_v);
    char name[64];
    size_t len = 0;
    napi_get_value_string_utf8(env, name_v, name, sizeof(name), &len);
    auto it = kernels().find(std::string(name, len));
    if (it == kernels().end())
      return throw_error(env, std::string("graphCreate: no graph form for export '") + name + "'"), nullptr;
    Node node{it->second, {}};
    uint32_t k = 0;
    napi_get_array_length(env, args_v, &k);
    node.args.resize(k);
    for (uint32_t j = 0; j < k; ++j) {
      napi_value v;
      napi_get_element(env, args_v, j, &v);
      if (!read_arg(env, v, i, j, &node.args[j])) return nullptr;
    }
    graph->nodes.push_back(std::move(node));
  }
  uint32_t r = 0;
  napi_get_array_length(env, argv[2], &r);
  for (uint32_t q = 0; q < r; ++q) {
    napi_value ref;
    napi_get_element(env, argv[2], q, &ref);
    SlotRef s{index_at(env, ref, 0), index_at(env, ref, 1), index_at(env, ref, 2),
              index_at(env, ref, 3), index_at(env, ref, 4)};
    if (s.node >= graph->nodes.size() || s.arg >= graph->nodes[s.node].args.size() ||
        graph->nodes[s.node].args[s.arg].kind != RecordedArg::kBuffer)
      return throw_error(env, "graphCreate: slot reference " + std::to_string(q) +
                                  " does not name a buffer argument"), nullptr;
    graph->slot_refs.push_back(s);
  }
  napi_value handle;
  Graph* raw = graph.release();
  napi_create_external(env, raw, finalize_graph, nullptr, &handle);
  return handle;
}

// graphRun(handle, slots: Uint8Array[]): runs every node in order; the first failing node's
// error is thrown and the rest are skipped.
napi_value GraphRun(napi_env env, napi_callback_info info) {
  size_t argc = 2;
  napi_value argv[2];
  napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr);
  void* raw = nullptr;
  if (argc != 2 || napi_get_value_external(env, argv[0], &raw) != napi_ok || raw == nullptr)
    return throw_error(env, "graphRun: expects (graph handle, slots)"), nullptr;
  Graph* graph = static_cast<Graph*>(raw);
  uint32_t n_slots = 0;
  napi_get_array_length(env, argv[1], &n_slots);
  std::vector<Buffer> slots(n_slots);
  for (uint32_t k = 0; k < n_slots; ++k) {
    napi_value v;
    napi_get_element(env, argv[1], k, &v);
    if (!typed_bytes(env, v, &slots[k].data, &slots[k].bytes))
      return throw_error(env, "graphRun: slot " + std::to_string(k) + " must be a TypedArray"), nullptr;
  }
  for (const SlotRef& s : graph->slot_refs) {
    if (s.slot >= slots.size() || s.start + s.bytes > slots[s.slot].bytes)
      return throw_error(env, "graphRun: slot " + std::to_string(s.slot) +
                                  " is missing or smaller than the graph was built for"), nullptr;
    Buffer& b = graph->nodes[s.node].args[s.arg].buffer;
    b.data = static_cast<char*>(slots[s.slot].data) + s.start;
    b.bytes = s.bytes;
  }
  for (const Node& node : graph->nodes) {
    ReplayScope scope(&node.args);
    node.fn(env, nullptr);
    bool pending = false;
    napi_is_exception_pending(env, &pending);
    if (pending) return nullptr;
  }
  napi_value u;
  napi_get_undefined(env, &u);
  return u;
}

}  // namespace

void register_graph_kernels(const napi_property_descriptor* props, size_t count) {
  // Exports that are no kernels or read their arguments without Args cannot be graph nodes.
  static const char* const kNotKernels[] = {"numThreads", "cpuFeatures", "allocateHuge",
                                            "muteStderr", "restoreStderr", "mapRegions"};
  for (size_t i = 0; i < count; ++i) {
    bool kernel = props[i].utf8name != nullptr && props[i].method != nullptr;
    for (const char* name : kNotKernels) kernel = kernel && std::strcmp(name, props[i].utf8name) != 0;
    if (kernel)
      kernels()[props[i].utf8name] = props[i].method;
  }
}

napi_value graph_create(napi_env env, napi_callback_info info) { return GraphCreate(env, info); }
napi_value graph_run(napi_env env, napi_callback_info info) { return GraphRun(env, info); }

}  // namespace tsorch

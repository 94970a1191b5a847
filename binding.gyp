# The cpu device's native addon (src/devices/cpu/native), built by `npm install` (node-gyp) into
# build/Release/tsorch_cpu.node. On x86-64 the GEMM kernels are also compiled for AVX2 and
# AVX-512 in static libraries with their own -m flags; the addon picks one at load time
# (cpu.cc). Everything else is compiled for the baseline target, so the addon runs on any CPU.
# With TSORCH_SANITIZE=1 everything is compiled with AddressSanitizer + UndefinedBehaviorSanitizer
# (`npm run test:sanitize` does that in build-sanitize/, leaving build/ alone).
{
  "variables": {
    "x86_kernels%": "<!(node -p \"process.arch === 'x64' && process.platform !== 'win32' ? 1 : 0\")",
    "sanitize%": "<!(node -p \"process.env.TSORCH_SANITIZE === '1' ? 1 : 0\")",
  },
  "target_defaults": {
    "cflags!": ["-O2"],
    "cflags_cc!": ["-std=gnu++17"],
    "cflags": ["-O3"],
    "cflags_cc": ["-std=c++17", "-O3"],
    "xcode_settings": {
      "GCC_OPTIMIZATION_LEVEL": "3",
      "CLANG_CXX_LANGUAGE_STANDARD": "c++17",
      "MACOSX_DEPLOYMENT_TARGET": "10.15",
    },
    "conditions": [
      ["x86_kernels==1", {"defines": ["TSORCH_X86_KERNELS"]}],
      ["sanitize==1", {
        "cflags": ["-fsanitize=address,undefined", "-fno-sanitize-recover=undefined", "-fno-omit-frame-pointer", "-g"],
        "ldflags": ["-fsanitize=address,undefined"],
      }],
    ],
  },
  "targets": [
    {
      "target_name": "tsorch_cpu",
      "sources": [
        "src/devices/cpu/native/addon.cc",
        "src/devices/cpu/native/addon_spatial.cc",
        "src/devices/cpu/native/addon_fused.cc",
        "src/devices/cpu/native/linear_group.cc",
        "src/devices/cpu/native/decode_attention.cc",
        "src/devices/cpu/native/rotary_kv_write.cc",
        "src/devices/cpu/native/linear_argmax.cc",
        "src/devices/cpu/native/static_attention.cc",
        "src/devices/cpu/native/conv2d.cc",
        "src/devices/cpu/native/group_norm.cc",
        "src/devices/cpu/native/upsample.cc",
        "src/devices/cpu/native/attention.cc",
        "src/devices/cpu/native/causal_conv1d.cc",
        "src/devices/cpu/native/copy.cc",
        "src/devices/cpu/native/cpu.cc",
        "src/devices/cpu/native/elementwise.cc",
        "src/devices/cpu/native/embedding.cc",
        "src/devices/cpu/native/gated_delta.cc",
        "src/devices/cpu/native/gemm.cc",
        "src/devices/cpu/native/gather_linear.cc",
        "src/devices/cpu/native/moe_experts.cc",
        "src/devices/cpu/native/graph.cc",
        "src/devices/cpu/native/gemm_portable.cc",
        "src/devices/cpu/native/huge_pages.cc",
        "src/devices/cpu/native/linear.cc",
        "src/devices/cpu/native/matmul.cc",
        "src/devices/cpu/native/mxfp4.cc",
        "src/devices/cpu/native/membw.cc",
        "src/devices/cpu/native/host_stalls.cc",
        "src/devices/cpu/native/mmap.cc",
        "src/devices/cpu/native/napi_args.cc",
        "src/devices/cpu/native/norm.cc",
        "src/devices/cpu/native/paged_attention.cc",
        "src/devices/cpu/native/quant.cc",
        "src/devices/cpu/native/quant_hub.cc",
        "src/devices/cpu/native/quant_hub_portable.cc",
        "src/devices/cpu/native/quant_portable.cc",
        "src/devices/cpu/native/reduce.cc",
        "src/devices/cpu/native/rotary.cc",
        "src/devices/cpu/native/softmax.cc",
        "src/devices/cpu/native/sort.cc",
        "src/devices/cpu/native/thread_pool.cc",
      ],
      "conditions": [
        ["x86_kernels==1", {"dependencies": ["tsorch_gemm_avx2", "tsorch_gemm_avx512", "tsorch_quant_avxvnni", "tsorch_quant_avx512vnni", "tsorch_gemm_avx512bf16"]}],
      ],
    },
  ],
  "conditions": [
    ["x86_kernels==1", {
      "targets": [
        {
          "target_name": "tsorch_gemm_avx2",
          "type": "static_library",
          "sources": ["src/devices/cpu/native/gemm_avx2.cc", "src/devices/cpu/native/quant_avx2.cc",
                      "src/devices/cpu/native/quant_hub_avx2.cc"],
          "cflags_cc": ["-mavx2", "-mfma", "-mf16c"],
          "xcode_settings": {"OTHER_CPLUSPLUSFLAGS": ["-mavx2", "-mfma", "-mf16c"]},
        },
        {
          "target_name": "tsorch_gemm_avx512",
          "type": "static_library",
          "sources": ["src/devices/cpu/native/gemm_avx512.cc", "src/devices/cpu/native/quant_avx512.cc",
                      "src/devices/cpu/native/quant_hub_avx512.cc"],
          # GCC 12's AVX-512 headers trip -Wuninitialized on their own _mm512_undefined_*().
          "cflags_cc": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mfma", "-mf16c",
                        "-Wno-uninitialized", "-Wno-maybe-uninitialized"],
          "xcode_settings": {
            "OTHER_CPLUSPLUSFLAGS": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mfma", "-mf16c"],
          },
        },
        {
          "target_name": "tsorch_quant_avxvnni",
          "type": "static_library",
          "sources": ["src/devices/cpu/native/quant_avxvnni.cc"],
          "cflags_cc": ["-mavx2", "-mfma", "-mf16c", "-mavxvnni"],
          "xcode_settings": {"OTHER_CPLUSPLUSFLAGS": ["-mavx2", "-mfma", "-mf16c", "-mavxvnni"]},
        },
        {
          "target_name": "tsorch_gemm_avx512bf16",
          "type": "static_library",
          "sources": ["src/devices/cpu/native/gemm_avx512bf16.cc"],
          "cflags_cc": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512bf16", "-mfma",
                        "-Wno-uninitialized", "-Wno-maybe-uninitialized"],
          "xcode_settings": {"OTHER_CPLUSPLUSFLAGS": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512bf16", "-mfma"]},
        },
        {
          "target_name": "tsorch_quant_avx512vnni",
          "type": "static_library",
          "sources": ["src/devices/cpu/native/quant_avx512vnni.cc"],
          "cflags_cc": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni", "-mfma", "-mf16c",
                        "-Wno-uninitialized", "-Wno-maybe-uninitialized"],
          "xcode_settings": {
            "OTHER_CPLUSPLUSFLAGS": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512vnni", "-mfma", "-mf16c"],
          },
        },
      ],
    }],
  ],
}

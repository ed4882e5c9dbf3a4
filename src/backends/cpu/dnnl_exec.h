// What the CPU backend's oneDNN units share (dnnl_conv.cpp, dnnl_rnn.cpp): one primitive and its
// arguments made once and run many times (Exec), the backend's own blocks for oneDNN (Buffer),
// and oneDNN's failures as crossover::Error (check, guarded).
#pragma once

#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <vector>

#include "core/aligned.h"
#include "core/error.h"

namespace crossover::cpu {

inline void check(dnnl_status_t status, const char* what) {
  if (status != dnnl_success)
    throw Error("cpu", std::string("oneDNN ") + what + " failed (status " +
                           std::to_string(static_cast<int>(status)) + ")");
}

// A block of backend-owned memory for oneDNN (a reordered kernel, a scratchpad).
struct Buffer {
  std::unique_ptr<unsigned char[], AlignedFree> bytes;
  void* get() const { return bytes.get(); }
};

// One primitive and its arguments, made once. Memory objects that stand for the caller's buffers
// are made without memory and pointed at the buffers on each call (dnnl_memory_set_data_handle
// allocates nothing); those for the backend's own buffers keep theirs.
struct Exec {
  dnnl::primitive primitive;
  std::vector<dnnl::memory> memories;  // kept alive for `args`
  std::vector<dnnl_exec_arg_t> args;
  std::vector<Buffer> owned;

  dnnl::memory& add(int arg, const dnnl::memory::desc& md, const dnnl::engine& engine) {
    memories.emplace_back(md, engine, nullptr);
    args.push_back({arg, memories.back().get()});
    return memories.back();
  }
  // An argument in a buffer the backend owns (sized by md).
  void add_owned(int arg, const dnnl::memory::desc& md, const dnnl::engine& engine) {
    owned.push_back({make_aligned<unsigned char>(md.get_size())});
    add(arg, md, engine);
    point(memories.size() - 1, owned.back().get());
  }
  void point(std::size_t i, const void* p) {
    check(dnnl_memory_set_data_handle(memories[i].get(), const_cast<void*>(p)), "set_data_handle");
  }
  void run(dnnl::stream& stream) const {
    check(dnnl_primitive_execute(primitive.get(), stream.get(), static_cast<int>(args.size()),
                                 args.data()),
          "primitive execute");
  }
};

// oneDNN reports its failures as dnnl::error; the model sees crossover::Error.
template <class F>
auto guarded(const char* what, F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const dnnl::error& e) {
    throw Error("cpu", std::string("oneDNN ") + what + ": " + e.what());
  }
}

}  // namespace crossover::cpu

// The header of a NumPy .npy array, as found inside Keras's mnist.npz.
//
// Exposed on its own so it can be tested and fuzzed without a zip around it (fuzz/fuzz_npz.cpp).
// Format (numpy.lib.format): "\x93NUMPY", major and minor version bytes (1.0, 2.0 or 3.0), the
// header length (2 bytes little-endian in 1.0, 4 bytes in 2.0 and 3.0), then that many bytes of
// a Python dict literal such as
//   {'descr': '|u1', 'fortran_order': False, 'shape': (8000, 28, 28), }
// padded with spaces and ended by '\n'. The array's raw bytes follow.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "core/tensor.h"

namespace crossover::data {

struct NpyHeader {
  std::string descr;            // numpy dtype string, e.g. "|u1", "<i8"
  bool fortran_order = false;   // column-major data (refused by the readers)
  Shape shape;                  // () for a scalar
  std::size_t data_offset = 0;  // bytes from the start of the .npy to its first data byte
};

// Shortest prefix of a .npy that parse_npy_header needs: magic, version and length field.
inline constexpr std::size_t kNpyPreambleBytes = 12;

// Total header size (magic through the dict's '\n'), read from the first bytes of a .npy:
// `prefix` needs 10 bytes for version 1.0, 12 for 2.0/3.0. Throws Error(where, ...) if `prefix`
// is not a .npy preamble (bad magic, unknown version, too short).
std::size_t npy_header_size(std::span<const uint8_t> prefix, const std::string& where);

// Parses the header at the start of `bytes` (which may go on into the data). Checks the magic,
// version, length, and that the dict has exactly the keys 'descr' (a string), 'fortran_order'
// (True/False) and 'shape' (a tuple of non-negative integers). Does not judge the dtype or the
// shape: callers decide what they accept. Throws Error(where, ...) on anything malformed.
NpyHeader parse_npy_header(std::span<const uint8_t> bytes, const std::string& where = ".npy");

}  // namespace crossover::data

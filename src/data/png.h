// Reading a digit image for `crossover predict --image digit.png` (libpng).
#pragma once

#include <cstdint>
#include <span>
#include <string>

#include "core/tensor.h"

namespace crossover::data {

// Reads an 8-bit greyscale 28x28 PNG (MNIST's format: white digit on black) and returns its
// pixels / 255 as a (1, 28, 28) tensor, ready for Sequential::predict. 8-bit RGB, RGBA and
// grey+alpha images of 28x28 are accepted too and converted to grey (alpha is ignored).
// Anything else (another size, 16-bit or fewer than 8 bits per sample, a palette image) and any
// corrupt or truncated file throws Error(path, ...) naming the size, bit depth or colour type,
// or what libpng found wrong; never crashes.
Tensor read_png_gray28(const std::string& path);

// The same, from PNG bytes in memory (for tests and fuzzing); `where` names the source.
Tensor decode_png_gray28(std::span<const uint8_t> bytes, const std::string& where);

}  // namespace crossover::data

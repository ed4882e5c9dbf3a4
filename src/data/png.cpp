// PNG digits via libpng. libpng reports errors by longjmp, so the decoding runs in a function
// holding only plain C data (no C++ object with a destructor lives across the setjmp), and every
// failure comes back as a status that the C++ side turns into crossover::Error.
#include "data/png.h"

#include <fmt/format.h>
#include <png.h>

#include <csetjmp>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "core/error.h"

namespace crossover::data {
namespace {

constexpr int kSide = 28;
constexpr std::size_t kMaxFileBytes = 64u << 20;  // a 28x28 PNG is well under a kilobyte

struct PngSource {
  const uint8_t* data;
  std::size_t size;
  std::size_t pos;
  char message[256];
};

struct PngHeader {
  png_uint_32 width;
  png_uint_32 height;
  int bit_depth;
  int color_type;
};

enum class PngStatus { ok, no_memory, libpng_error, wrong_format };

extern "C" {
static void png_on_error(png_structp png, png_const_charp msg) {
  auto* src = static_cast<PngSource*>(png_get_error_ptr(png));
  std::snprintf(src->message, sizeof src->message, "%s", msg ? msg : "unknown error");
  png_longjmp(png, 1);
}
static void png_on_warning(png_structp, png_const_charp) {}
static void png_on_read(png_structp png, png_bytep out, png_size_t n) {
  auto* src = static_cast<PngSource*>(png_get_io_ptr(png));
  if (n > src->size - src->pos) png_error(png, "the file ends early (truncated)");
  std::memcpy(out, src->data + src->pos, n);
  src->pos += n;
}
}

// Plain C data only from here to the end of the function (see the note at the top).
PngStatus decode_c(PngSource* src, uint8_t* out, PngHeader* header) {
  png_structp png =
      png_create_read_struct(PNG_LIBPNG_VER_STRING, src, png_on_error, png_on_warning);
  if (!png) return PngStatus::no_memory;
  png_infop info = png_create_info_struct(png);
  if (!info) {
    png_destroy_read_struct(&png, nullptr, nullptr);
    return PngStatus::no_memory;
  }
  png_bytep rows[kSide];
  if (setjmp(png_jmpbuf(png))) {
    png_destroy_read_struct(&png, &info, nullptr);
    return PngStatus::libpng_error;
  }
  png_set_read_fn(png, src, png_on_read);
  png_set_chunk_malloc_max(png, 1u << 20);  // ancillary chunks (text, ICC profiles)
  png_set_user_limits(png, 1u << 16, 1u << 16);
  png_read_info(png, info);
  png_get_IHDR(png, info, &header->width, &header->height, &header->bit_depth, &header->color_type,
               nullptr, nullptr, nullptr);
  const int ct = header->color_type;
  const bool supported_type = ct == PNG_COLOR_TYPE_GRAY || ct == PNG_COLOR_TYPE_GRAY_ALPHA ||
                              ct == PNG_COLOR_TYPE_RGB || ct == PNG_COLOR_TYPE_RGB_ALPHA;
  if (header->width != kSide || header->height != kSide || header->bit_depth != 8 ||
      !supported_type) {
    png_destroy_read_struct(&png, &info, nullptr);
    return PngStatus::wrong_format;
  }
  if (ct & PNG_COLOR_MASK_ALPHA) png_set_strip_alpha(png);
  if (ct & PNG_COLOR_MASK_COLOR) png_set_rgb_to_gray_fixed(png, 1, -1, -1);
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  if (png_get_rowbytes(png, info) != kSide) {
    png_destroy_read_struct(&png, &info, nullptr);
    return PngStatus::wrong_format;
  }
  for (int r = 0; r < kSide; ++r) rows[r] = out + r * kSide;
  png_read_image(png, rows);
  png_read_end(png, nullptr);
  png_destroy_read_struct(&png, &info, nullptr);
  return PngStatus::ok;
}

const char* color_type_name(int ct) {
  switch (ct) {
    case PNG_COLOR_TYPE_GRAY:
      return "grey";
    case PNG_COLOR_TYPE_GRAY_ALPHA:
      return "grey+alpha";
    case PNG_COLOR_TYPE_RGB:
      return "RGB";
    case PNG_COLOR_TYPE_RGB_ALPHA:
      return "RGBA";
    case PNG_COLOR_TYPE_PALETTE:
      return "palette";
    default:
      return "unknown colour type";
  }
}

}  // namespace

Tensor decode_png_gray28(std::span<const uint8_t> bytes, const std::string& where) {
  if (bytes.size() < 8 || png_sig_cmp(bytes.data(), 0, 8) != 0)
    throw Error(where, "not a PNG file (its first bytes are not the PNG signature)");
  PngSource src{bytes.data(), bytes.size(), 0, {0}};
  PngHeader header{0, 0, 0, 0};
  uint8_t pixels[kSide * kSide] = {};
  switch (decode_c(&src, pixels, &header)) {
    case PngStatus::ok:
      break;
    case PngStatus::no_memory:
      throw Error(where, "libpng could not allocate its reader");
    case PngStatus::libpng_error:
      throw Error(where, std::string("corrupt PNG: ") + src.message);
    case PngStatus::wrong_format:
      throw Error(where, fmt::format("is a {}x{} {}-bit {} PNG: crossover reads 8-bit grey 28x28 "
                                     "images (MNIST's format; 8-bit RGB/RGBA are converted)",
                                     header.width, header.height, header.bit_depth,
                                     color_type_name(header.color_type)));
  }
  Tensor t({1, kSide, kSide});
  for (int i = 0; i < kSide * kSide; ++i) t[i] = static_cast<float>(pixels[i]) / 255.0f;
  return t;
}

Tensor read_png_gray28(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) throw Error(path, "is a folder, not a PNG file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Error(path, std::string("cannot open: ") + std::strerror(errno));
  std::vector<uint8_t> bytes;
  char buf[65536];
  while (in) {
    in.read(buf, sizeof buf);
    bytes.insert(bytes.end(), buf, buf + in.gcount());
    if (bytes.size() > kMaxFileBytes) throw Error(path, "is far too large for a 28x28 PNG");
  }
  if (in.bad()) throw Error(path, "read failed");
  return decode_png_gray28(bytes, path);
}

}  // namespace crossover::data

// Internal to src/data: helpers shared by the readers.
//
// Reading a compressed stream whose length only a header claims: a gzip stream or a zip entry does
// not say how much it inflates to until it has been inflated, and the header in front of the data
// (IDX dims, .npy shape) is whatever the file's author wrote. So a buffer is never sized from the
// claim alone: it starts at what the compressed bytes on disk could possibly inflate to, and grows
// only as real data arrives, never past claim + 1 (the one extra byte is how "the stream runs past
// its header" is detected).
#pragma once

#include <algorithm>
#include <cctype>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace crossover::data::detail {

// Deflate cannot expand input by more than about 1032:1 (RFC 1951 block limits); a little
// slack covers gzip/zip framing.
inline std::size_t deflate_output_bound(std::uintmax_t compressed_bytes) {
  constexpr std::uintmax_t kMaxRatio = 1032;
  constexpr std::uintmax_t kSlack = 64 * 1024;
  constexpr std::uintmax_t kMax = SIZE_MAX / 2;
  if (compressed_bytes > (kMax - kSlack) / kMaxRatio) return static_cast<std::size_t>(kMax);
  return static_cast<std::size_t>(compressed_bytes * kMaxRatio + kSlack);
}

// Reads from `read(dst, n)` (returns bytes read, 0 at the end; it throws on a stream error)
// until the end of the stream or until `promised + 1` bytes have arrived, whichever is first.
// `plausible` is how many bytes the input can really produce (e.g. deflate_output_bound of its
// compressed size): the buffer starts at min(plausible, promised) + 1, so a stream that is as
// long as promised is read without reallocating. The result's size tells the caller whether the
// stream was short (< promised), exact (== promised) or too long (== promised + 1).
template <class ReadFn>
std::vector<uint8_t> read_at_most(std::size_t promised, std::size_t plausible, ReadFn&& read) {
  constexpr std::size_t kChunk = std::size_t{1} << 20;
  const std::size_t cap = promised + 1;
  std::vector<uint8_t> out(std::min(plausible, promised) + 1);
  std::size_t have = 0;
  for (;;) {
    if (have == out.size()) {
      if (have == cap) break;
      // Grow geometrically so a stream that really is as long as promised costs O(n) copying.
      out.resize(std::min(cap, std::max(have * 2, have + kChunk)));
    }
    const std::size_t want = std::min(out.size() - have, kChunk);
    const std::size_t got = read(out.data() + have, want);
    if (got == 0) break;
    have += got;
  }
  out.resize(have);
  return out;
}

// DataSplits::name for a folder or file of the standard 60k/10k sets, which are laid out alike
// whichever they are: the path is all there is to tell them apart.
inline std::string dataset_name_for(const std::string& path) {
  std::string lower = path;
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower.find("fashion") != std::string::npos ? "fashion-mnist" : "mnist";
}

}  // namespace crossover::data::detail

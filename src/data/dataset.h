// Data sets as they come off disk, and how crossover finds them.
//
// Readers return raw bytes (uint8 images, uint8 labels) exactly as stored; the one conversion to
// float32 in [0, 1] is to_float_images(), done once at load (DESIGN.md). Every reader checks
// every header field against the file size before it allocates anything, and throws
// crossover::Error("<path>", "<what is wrong and why>") on bad input.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.h"

namespace crossover::data {

// One split: count items of item_shape (e.g. {28, 28}) uint8 pixels, and one uint8 label each.
struct ImageSet {
  std::vector<uint8_t> pixels;  // count * product(item_shape) bytes, row-major
  std::vector<uint8_t> labels;  // count bytes
  int64_t count = 0;
  Shape item_shape;
};

struct DataSplits {
  ImageSet train;
  ImageSet test;
  std::string name;  // "mnist", "fashion-mnist", "mnist-10k", or the folder/file name
  std::string path;  // where it was read from
  int num_classes = 10;
};

// Pixels as float32 / 255, shape (count, item_shape...).
Tensor to_float_images(const ImageSet& set);
// Labels as float32 class indices, shape (count,).
Tensor to_float_labels(const ImageSet& set);
// Labels one-hot, shape (count, num_classes): the targets of the non-sparse losses
// (categorical_crossentropy, binary_crossentropy, mean_squared_error).
Tensor to_one_hot_labels(const ImageSet& set, int num_classes);

// --- IDX (LeCun's format), gzip-compressed or raw; only unsigned-byte data (type 0x08). ---
// gzip: concatenated members (`cat a.gz b.gz`) are read as one stream, as gunzip does; any
// other byte after the last member is refused, saying how many follow.
// Reads an IDX file with `expected_rank` dimensions (3 for images, 1 for labels).
// Returns the dimensions in `dims` and the bytes. Refuses zero dimensions and data over 2^31
// bytes (the same cap applies to .npz arrays).
std::vector<uint8_t> read_idx(const std::string& path, int expected_rank, Shape& dims);
// An images file and a labels file of equal count; labels must be < num_classes.
ImageSet read_idx_pair(const std::string& images_path, const std::string& labels_path,
                       int num_classes = 10);
// A folder with train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz],
// t10k-images-idx3-ubyte[.gz], t10k-labels-idx1-ubyte[.gz] (MNIST and Fashion-MNIST naming).
// The two sets look alike on disk, so the name comes from the path: "fashion-mnist" if it
// contains "fashion" (any case), else "mnist". Same rule for read_npz.
DataSplits read_idx_folder(const std::string& folder);

// --- Keras's cache file mnist.npz: a zip of x_train, y_train, x_test, y_test .npy arrays. ---
// Images uint8 (N, H, W); labels uint8, int64 or int32 (N,), little-endian, C order. The .npy
// header parser is in data/npy.h.
DataSplits read_npz(const std::string& path);

// --- The 10,000 real digits shipped in the repo (data/mnist-10k): first 8,000 train, last
// 2,000 test. `folder` holds mnist-10k-images-idx3-ubyte.gz and mnist-10k-labels-idx1-ubyte.gz.
DataSplits read_mnist10k(const std::string& folder);

// --- Finding data. ---
// spec: "auto", "mnist-10k", a folder of the four IDX files, or an .npz file.
// "auto" looks, in order: $CROSSOVER_DATA, ~/.keras/datasets/mnist.npz, ./data/mnist/,
// /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist). `say` receives one line
// telling what was chosen and why (e.g. "data: real MNIST from /root/.keras/datasets/mnist.npz").
DataSplits load_data(const std::string& spec, const std::function<void(const std::string&)>& say);

// --- keras.datasets.{mnist,fashion_mnist}.load_data() without a download: the copy Keras caches,
// then crossover's own places. kind "mnist": $CROSSOVER_DATA, <keras datasets>/<file> (Keras's
// mnist.load_data(path="mnist.npz"); an absolute `file` is used as is), ./data/mnist/.
// kind "fashion-mnist" (`file` unused): $CROSSOVER_DATA, <keras datasets>/fashion-mnist/ (the four
// IDX .gz files Keras caches), /usr/share/datasets/fashion-mnist. <keras datasets> is
// $KERAS_HOME/datasets, else ~/.keras/datasets, as in Keras. $CROSSOVER_DATA is taken only when
// its name says the same kind (the "fashion" rule of read_idx_folder), so one never gets the
// other. Returns nullopt when no place exists, with every place listed in `looked`; a place that
// exists but does not read throws Error, as load_data does.
std::optional<DataSplits> find_keras_dataset(const std::string& kind, const std::string& file,
                                             std::vector<std::string>& looked);

// Where the repo's data/mnist-10k folder is (source tree, or the installed share folder).
std::string mnist10k_folder();

}  // namespace crossover::data

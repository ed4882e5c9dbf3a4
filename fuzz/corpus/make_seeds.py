#!/usr/bin/env python3
"""Writes the seed corpora for fuzz/fuzz_idx.cpp and fuzz/fuzz_npz.cpp (standard library only).

Seeds are small on purpose (a few valid files shrunk to a few items, and typical invalid ones):
they show the fuzzer each format's structure, and mutations of them reach the checks.
Run from anywhere: python3 fuzz/corpus/make_seeds.py
"""
import gzip
import io
import os
import struct
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    os.makedirs(os.path.join(HERE, target), exist_ok=True)
    with open(os.path.join(HERE, target, name), "wb") as f:
        f.write(data)


def idx(type_code, dims, payload):
    return bytes([0, 0, type_code, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) + payload


def gz(data):
    # mtime=0 keeps the seeds byte-identical from run to run.
    return gzip.compress(data, mtime=0)


def npy(descr, shape, data, fortran=False, major=1):
    shape_text = f"({shape[0]},)" if len(shape) == 1 else "(" + ", ".join(map(str, shape)) + ")"
    header = "{'descr': '%s', 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape_text)
    preamble = 10 if major == 1 else 12
    header += " " * ((64 - (preamble + len(header) + 1) % 64) % 64) + "\n"
    length = struct.pack("<H", len(header)) if major == 1 else struct.pack("<I", len(header))
    return b"\x93NUMPY" + bytes([major, 0]) + length + header.encode("latin1") + data


def npz(entries, compression=zipfile.ZIP_DEFLATED):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as z:
        for name, data in entries:
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = compression
            z.writestr(info, data)
    return buf.getvalue()


# ---- IDX --------------------------------------------------------------------------------------
images = bytes((i * 37) % 256 for i in range(2 * 4 * 4))
labels = bytes([3, 1, 4, 1, 5, 9])
write("idx", "images-2x4x4", idx(0x08, [2, 4, 4], images))
write("idx", "images-2x4x4.gz", gz(idx(0x08, [2, 4, 4], images)))
write("idx", "labels-6", idx(0x08, [6], labels))
write("idx", "labels-6.gz", gz(idx(0x08, [6], labels)))
write("idx", "float32-2", idx(0x0D, [2], struct.pack(">2f", 0.5, 1.5)))
write("idx", "truncated-images", idx(0x08, [2, 4, 4], images[:-3]))
write("idx", "trailing-labels", idx(0x08, [6], labels + b"\x00\x00"))
write("idx", "absurd-dims", idx(0x08, [0x80000000, 0x80000000, 1], b"\x01\x02\x03\x04"))

# ---- npz / npy --------------------------------------------------------------------------------
x_train = bytes((i * 11) % 256 for i in range(3 * 2 * 2))
x_test = bytes((i * 7) % 256 for i in range(2 * 2 * 2))
good = [
    ("x_train.npy", npy("|u1", [3, 2, 2], x_train)),
    ("y_train.npy", npy("|u1", [3], bytes([0, 5, 9]))),
    ("x_test.npy", npy("|u1", [2, 2, 2], x_test)),
    ("y_test.npy", npy("|u1", [2], bytes([1, 2]))),
]


def replace(entries, name, data):
    return [(n, data if n == name else d) for n, d in entries]


write("npz", "small-stored.npz", npz(good, zipfile.ZIP_STORED))
write("npz", "small-deflated.npz", npz(good))
write("npz", "int64-labels.npz",
      npz(replace(good, "y_train.npy", npy("<i8", [3], struct.pack("<3q", 0, 5, 9))), zipfile.ZIP_STORED))
write("npz", "float32-images.npz",
      npz(replace(good, "x_train.npy", npy("<f4", [3, 2, 2], bytes(48))), zipfile.ZIP_STORED))
write("npz", "fortran-order.npz",
      npz(replace(good, "x_test.npy", npy("|u1", [2, 2, 2], x_test, fortran=True)), zipfile.ZIP_STORED))
write("npz", "missing-y_test.npz", npz(good[:3], zipfile.ZIP_STORED))
write("npz", "x_train.npy", npy("|u1", [3, 2, 2], x_train))
write("npz", "y_train-v2.npy", npy("<i8", [3], struct.pack("<3q", 0, 5, 9), major=2))

#!/usr/bin/env python3
"""Fashion-MNIST's IDX files as image folders: OUT/train/ and OUT/test/, one folder per class,
named so that sorted order is label order (0_tshirt, 1_trouser, ... 9_ankle_boot), each sample a
greyscale 28x28 file named by its zero-padded index in its IDX file (000042.png).

    tools/fmnist_to_folders.py --out DIR [--idx DIR] [--format png|jpeg|both] [--limit N]

--idx: the folder with the four IDX .gz files (default /usr/share/datasets/fashion-mnist, Debian's
dataset-fashion-mnist). --format png (lossless, the default) writes DIR/train, DIR/test; jpeg
(quality 95) the same with .jpg files; both writes DIR/png/{train,test} and DIR/jpeg/{train,test}.
--limit N: only the first N samples of each split. Needs Pillow (apt-get install python3-pil).
"""
import argparse
import gzip
import os
import struct
import sys

try:
    from PIL import Image
except ImportError:
    sys.exit("fmnist_to_folders.py: needs Pillow (apt-get install python3-pil)")

CLASSES = ["0_tshirt", "1_trouser", "2_pullover", "3_dress", "4_coat", "5_sandal", "6_shirt", "7_sneaker",
           "8_bag", "9_ankle_boot"]
SPLITS = {"train": ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz"),
          "test": ("t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz")}
JPEG_QUALITY = 95


def read_idx(path):
    """(dims, bytes) of an unsigned-byte IDX file (gzip or raw)."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        data = f.read()
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        sys.exit("fmnist_to_folders.py: %s is not an unsigned-byte IDX file" % path)
    ndim = data[3]
    dims = struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim])
    body = data[4 + 4 * ndim:]
    want = 1
    for d in dims:
        want *= d
    if len(body) != want:
        sys.exit("fmnist_to_folders.py: %s holds %d bytes after its header, its dims %s need %d"
                 % (path, len(body), dims, want))
    return dims, body


def write_split(idx_dir, split, outs, limit):
    img_name, lab_name = SPLITS[split]
    dims, pixels = read_idx(os.path.join(idx_dir, img_name))
    ldims, labels = read_idx(os.path.join(idx_dir, lab_name))
    if len(dims) != 3 or len(ldims) != 1 or dims[0] != ldims[0]:
        sys.exit("fmnist_to_folders.py: %s and %s do not match (%s images, %s labels)"
                 % (img_name, lab_name, dims, ldims))
    n, h, w = dims
    if limit is not None:
        n = min(n, limit)
    for out, _ in outs:
        for c in CLASSES:
            os.makedirs(os.path.join(out, split, c), exist_ok=True)
    for i in range(n):
        label = labels[i]
        if label >= len(CLASSES):
            sys.exit("fmnist_to_folders.py: %s: sample %d has label %d (0-9 expected)" % (lab_name, i, label))
        img = Image.frombytes("L", (w, h), pixels[i * h * w:(i + 1) * h * w])
        for out, fmt in outs:
            if fmt == "png":
                img.save(os.path.join(out, split, CLASSES[label], "%06d.png" % i), "PNG")
            else:
                img.save(os.path.join(out, split, CLASSES[label], "%06d.jpg" % i), "JPEG", quality=JPEG_QUALITY)
    return n


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--idx", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--format", choices=["png", "jpeg", "both"], default="png")
    ap.add_argument("--limit", type=int, default=None, help="only the first N samples of each split")
    a = ap.parse_args()
    if a.limit is not None and a.limit < 1:
        sys.exit("fmnist_to_folders.py: --limit needs a positive number")
    if a.format == "both":
        outs = [(os.path.join(a.out, "png"), "png"), (os.path.join(a.out, "jpeg"), "jpeg")]
    else:
        outs = [(a.out, a.format)]
    for split in ("train", "test"):
        n = write_split(a.idx, split, outs, a.limit)
        print("%s: %d images in %d classes -> %s" % (split, n, len(CLASSES), ", ".join(o for o, _ in outs)))


if __name__ == "__main__":
    main()

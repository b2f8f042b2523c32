#!/usr/bin/env python3
"""tools/fmnist_to_folders.py and tools/make_image_sets.py on small real data, in seconds:

fmnist_to_folders: the first 50 samples of each split as PNG and JPEG class folders; every class
folder holds exactly the samples of its label (by the IDX labels), named by index; each PNG decodes
to the IDX pixels exactly, each JPEG (quality 95) to within a few levels; sorted class names are the
label order.
make_image_sets: photographs stand-ins made of Fashion-MNIST tiles (mate-backgrounds is not in CI)
under the ten names it reads; the imagenet and web sets get the asked counts per split and class,
the geometries, JPEG subsampling (4:4:4, 4:2:0) and qualities of their specs, and a second run with
the same seed writes the same bytes.

Exit 0 passed, 1 failed, 77 skipped (this Python has no Pillow, and --require is not given).
"""
import argparse
import filecmp
import gzip
import os
import struct
import subprocess
import sys
import tempfile

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL: " + what)


def read_idx(path):
    with gzip.open(path, "rb") as f:
        data = f.read()
    ndim = data[3]
    dims = struct.unpack(">%dI" % ndim, data[4:4 + 4 * ndim])
    return dims, data[4 + 4 * ndim:]


def test_fmnist(tools, fmnist, tmp, Image):
    out = os.path.join(tmp, "fm")
    subprocess.run([sys.executable, os.path.join(tools, "fmnist_to_folders.py"), "--out", out, "--idx", fmnist,
                    "--format", "both", "--limit", "50"], check=True, stdout=subprocess.DEVNULL)
    for split, prefix in (("train", "train"), ("test", "t10k")):
        (n, h, w), pixels = read_idx(os.path.join(fmnist, prefix + "-images-idx3-ubyte.gz"))
        _, labels = read_idx(os.path.join(fmnist, prefix + "-labels-idx1-ubyte.gz"))
        for fmt, ext in (("png", ".png"), ("jpeg", ".jpg")):
            root = os.path.join(out, fmt, split)
            classes = sorted(os.listdir(root))
            check(len(classes) == 10 and all(c.startswith("%d_" % i) for i, c in enumerate(classes)),
                  "%s/%s: ten classes in label order, got %s" % (fmt, split, classes))
            seen = 0
            worst = 0
            for label, c in enumerate(classes):
                names = sorted(os.listdir(os.path.join(root, c)))
                want = ["%06d%s" % (i, ext) for i in range(50) if labels[i] == label]
                check(names == want, "%s/%s/%s holds %s, its label's samples are %s" % (fmt, split, c, names, want))
                for name in names:
                    i = int(name[:6])
                    img = Image.open(os.path.join(root, c, name))
                    check(img.mode == "L" and img.size == (w, h), "%s: mode %s size %s" % (name, img.mode, img.size))
                    got = img.tobytes()
                    ref = pixels[i * h * w:(i + 1) * h * w]
                    if fmt == "png":
                        check(got == ref, "%s/%s/%s/%s: PNG pixels differ from the IDX file's" % (fmt, split, c, name))
                    else:
                        diff = sum(abs(a - b) for a, b in zip(got, ref)) / len(ref)
                        worst = max(worst, diff)
                    seen += 1
            check(seen == 50, "%s/%s: %d images, 50 asked" % (fmt, split, seen))
            if fmt == "jpeg":
                check(0 < worst < 4.0, "%s: JPEG quality 95's mean error per pixel is %.2f levels" % (split, worst))


def test_image_sets(tools, fmnist, tmp, Image):
    from PIL import JpegImagePlugin
    sys.path.insert(0, tools)
    import make_image_sets as mis
    # a stand-in photograph per class: Fashion-MNIST samples tiled 60 x 45 (1680x1260), in colour
    (n, h, w), pixels = read_idx(os.path.join(fmnist, "t10k-images-idx3-ubyte.gz"))
    src = os.path.join(tmp, "src")
    os.makedirs(src)
    for k, name in enumerate(mis.CLASSES):
        sheet = Image.new("RGB", (60 * w, 45 * h))
        for t in range(60 * 45):
            i = (k * 60 * 45 + t) % n
            tile = Image.frombytes("L", (w, h), pixels[i * h * w:(i + 1) * h * w])
            sheet.paste(Image.merge("RGB", (tile, tile.rotate(90), tile.transpose(Image.FLIP_LEFT_RIGHT))),
                        ((t % 60) * w, (t // 60) * h))
        sheet.save(os.path.join(src, name + ".jpg"), quality=95)
    outs = []
    for run in range(2):
        out = os.path.join(tmp, "sets%d" % run)
        subprocess.run([sys.executable, os.path.join(tools, "make_image_sets.py"), "--src", src, "--out", out,
                        "--sets", "imagenet,web", "--count", "20", "--test-fraction", "0.5", "--seed", "3"],
                       check=True, stdout=subprocess.DEVNULL)
        outs.append(out)
    for set_name in ("imagenet", "web"):
        spec = mis.SETS[set_name]
        for split, count in (("train", 20), ("test", 10)):
            root = os.path.join(outs[0], set_name, split)
            classes = sorted(os.listdir(root))
            check(classes == [mis.class_dir_name(i, c) for i, c in enumerate(mis.CLASSES)],
                  "%s/%s: classes %s" % (set_name, split, classes))
            total = 0
            for c in classes:
                names = sorted(os.listdir(os.path.join(root, c)))
                total += len(names)
                check(len(names) == count // 10, "%s/%s/%s: %d images" % (set_name, split, c, len(names)))
                for name in names:
                    path = os.path.join(root, c, name)
                    img = Image.open(path)
                    check(img.format == "JPEG" and img.mode == "RGB" and img.size in spec["sizes"],
                          "%s: %s %s %s" % (path, img.format, img.mode, img.size))
                    check(JpegImagePlugin.get_sampling(img) == spec["subsampling"],
                          "%s: subsampling %d, %d wanted" % (path, JpegImagePlugin.get_sampling(img),
                                                             spec["subsampling"]))
                    img.load()
                    other = os.path.join(outs[1], set_name, split, c, name)
                    check(os.path.exists(other) and filecmp.cmp(path, other, shallow=False),
                          "%s: a second run with the same seed wrote other bytes" % path)
            check(total == count, "%s/%s: %d images, %d asked" % (set_name, split, total, count))
    # quality: the luminance table's first entry at 96 (2) is below 90's (3), as libjpeg scales it
    q = {}
    for set_name in ("imagenet", "web"):
        root = os.path.join(outs[0], set_name, "train", mis.class_dir_name(0, mis.CLASSES[0]))
        q[set_name] = Image.open(os.path.join(root, sorted(os.listdir(root))[0])).quantization[0][0]
    check(q["imagenet"] < q["web"], "quantization: imagenet's %s not below web's %s" % (q["imagenet"], q["web"]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tools", required=True, help="the repository's tools/ folder")
    ap.add_argument("--fmnist", required=True, help="the Fashion-MNIST IDX folder")
    ap.add_argument("--require", action="store_true", help="fail, not skip, without Pillow")
    a = ap.parse_args()
    try:
        from PIL import Image
    except ImportError:
        print("skipped: this Python (%s) has no Pillow" % sys.executable)
        return 1 if a.require else 77
    with tempfile.TemporaryDirectory() as tmp:
        test_fmnist(a.tools, a.fmnist, tmp, Image)
        test_image_sets(a.tools, a.fmnist, tmp, Image)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

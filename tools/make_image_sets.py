#!/usr/bin/env python3
"""Benchmark image folders made from real photographs that Debian ships.

The photographs are the twelve of Debian's mate-backgrounds package (nature/, CC BY-SA / GPL per
its copyright file); ten of them are the ten classes. Get them with either
    apt-get install mate-backgrounds          (then the default --src works), or
    apt-get download mate-backgrounds && dpkg -x mate-backgrounds_*.deb DIR
                                              (then --src DIR/usr/share/backgrounds/mate/nature)
Needs Pillow (Debian: apt-get install python3-pil). Nothing is downloaded from anywhere else.

It writes three sets under --out, each as train/ and test/ class folders (0_aqua ... 9_yellowflower,
so that sorted order is label order), every image a crop of its class's photograph at a random
offset, scale and mirror, resized:
    imagenet  about 500x375 (some 500x333 and 375x500, as ImageNet's), JPEG quality 96, 4:4:4,
              aimed at 110-130 KB each (ImageNet's validation images average about 110 KB)
    web       crops drawn the same way with imagenet's grain, JPEG quality 90, 4:2:0 (as a web
              pipeline saves them)
    phone     2000x1500, JPEG quality 90, 4:2:0, aimed at about 1 MB
These wallpapers are clean, shallow-focus shots that compress far better than typical ImageNet
photographs, so each image gets Gaussian grain (as a camera sensor's) whose strength is calibrated
per class so that the set's files land at the aimed size: the decoder then does the work a real
photograph of that size costs. The output is deterministic for a given --seed and Pillow version.

    tools/make_image_sets.py --out imgsets [--count 2000] [--phone-count 300] [--seed 1]
                             [--sets imagenet,web,phone] [--src DIR]
"""
import argparse
import io
import json
import os
import random
import statistics
import sys

from statistics import NormalDist

try:
    from PIL import Image, ImageChops
except ImportError:
    sys.exit("make_image_sets.py: needs Pillow (apt-get install python3-pil)")

DEFAULT_SRC = "/usr/share/backgrounds/mate/nature"
CLASSES = ["Aqua", "Blinds", "Dune", "FreshFlower", "Garden", "GreenMeadow", "LadyBird", "RainDrops",
           "TwoWings", "YellowFlower"]

# name: geometries (w, h) drawn from, JPEG quality, subsampling (0: 4:4:4, 2: 4:2:0), aimed bytes
SETS = {
    "imagenet": dict(sizes=[(500, 375)] * 8 + [(500, 333), (375, 500)], quality=96, subsampling=0,
                     target=120_000),
    "web": dict(sizes=[(500, 375)] * 8 + [(500, 333), (375, 500)], quality=90, subsampling=2, target=None),
    "phone": dict(sizes=[(2000, 1500)], quality=90, subsampling=2, target=1_000_000),
}
MAX_SIGMA = 40.0
PROBES = 4            # crops per class the grain is calibrated on
CALIBRATION_STEPS = 7


def class_dir_name(label, photo):
    return "%d_%s" % (label, photo.lower())


def grain_table(sigma):
    """A uniform byte -> 128 + sigma * N(0, 1) at that quantile, for Image.point."""
    nd = NormalDist()
    return [max(0, min(255, round(128 + sigma * nd.inv_cdf((u + 0.5) / 256)))) for u in range(256)]


class Grain:
    """Three uniform-byte tiles from the seeded generator; a crop of each, mapped through the
    sigma's table, is one image's per-channel grain (as fast as Pillow is, and deterministic)."""

    def __init__(self, rng, w, h):
        self.w, self.h = w * 2, h * 2
        self.tiles = [Image.frombytes("L", (self.w, self.h), rng.randbytes(self.w * self.h)) for _ in range(3)]
        self.tables = {}

    def apply(self, img, sigma, rng):
        if sigma <= 0:
            return img
        key = round(sigma, 2)
        if key not in self.tables:
            self.tables[key] = grain_table(key)
        w, h = img.size
        chans = []
        for tile in self.tiles:
            x, y = rng.randrange(self.w - w + 1), rng.randrange(self.h - h + 1)
            chans.append(tile.crop((x, y, x + w, y + h)).point(self.tables[key]))
        return ImageChops.add(img, Image.merge("RGB", chans), 1.0, -128)


def random_crop(photo, size, rng, min_scale):
    """A crop of the photograph with size's aspect, at a random scale (>= min_scale times size
    where the photograph allows) and offset, mirrored half of the time, resized to size."""
    W, H = photo.size
    w, h = size
    fit = min(W / w, H / h)
    lo = min(min_scale, fit)
    scale = rng.uniform(lo, fit)
    cw, ch = min(W, round(w * scale)), min(H, round(h * scale))
    x, y = rng.randrange(W - cw + 1), rng.randrange(H - ch + 1)
    img = photo.crop((x, y, x + cw, y + ch)).resize(size, Image.LANCZOS, reducing_gap=3.0)
    if rng.random() < 0.5:
        img = img.transpose(Image.FLIP_LEFT_RIGHT)
    return img


def encode(img, spec):
    buf = io.BytesIO()
    img.save(buf, "JPEG", quality=spec["quality"], subsampling=spec["subsampling"], optimize=False)
    return buf.getvalue()


def calibrate(photo, spec, grain, seed, min_scale):
    """The grain sigma at which PROBES crops of the photograph encode at the set's aimed size on
    median (bisection; 0 when already large enough, MAX_SIGMA when never)."""
    rng = random.Random(seed)
    probes = [random_crop(photo, rng.choice(spec["sizes"]), rng, min_scale) for _ in range(PROBES)]

    def median_bytes(sigma):
        r = random.Random(seed + 1)
        return statistics.median(len(encode(grain.apply(p, sigma, r), spec)) for p in probes)

    if median_bytes(0) >= spec["target"]:
        return 0.0
    lo, hi = 0.0, MAX_SIGMA
    for _ in range(CALIBRATION_STEPS):
        mid = (lo + hi) / 2
        if median_bytes(mid) < spec["target"]:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def make_set(name, spec, photos, out, count, test_count, seed, sigmas_from=None):
    rng = random.Random("%s-%d" % (name, seed))
    maxw = max(w for w, _ in spec["sizes"])
    maxh = max(h for _, h in spec["sizes"])
    grain = Grain(random.Random("grain-%s-%d" % (name, seed)), max(maxw, maxh), max(maxw, maxh))
    min_scale = 1.5 if maxw <= 1000 else 1.0
    if sigmas_from is not None:
        sigmas = sigmas_from
    else:
        sigmas = [calibrate(p, spec, grain, seed * 1000 + i, min_scale) for i, p in enumerate(photos)]
    sizes = []
    for split, n in (("train", count), ("test", test_count)):
        for label in range(len(photos)):
            os.makedirs(os.path.join(out, name, split, class_dir_name(label, CLASSES[label])), exist_ok=True)
        for i in range(n):
            label = i % len(photos)
            img = random_crop(photos[label], rng.choice(spec["sizes"]), rng, min_scale)
            img = grain.apply(img, sigmas[label], rng)
            data = encode(img, spec)
            path = os.path.join(out, name, split, class_dir_name(label, CLASSES[label]), "%06d.jpg" % i)
            with open(path, "wb") as f:
                f.write(data)
            sizes.append(len(data))
    summary = {
        "set": name, "images": len(sizes), "train": count, "test": test_count, "classes": len(photos),
        "quality": spec["quality"], "subsampling": {0: "4:4:4", 2: "4:2:0"}[spec["subsampling"]],
        "geometries": sorted(set("%dx%d" % s for s in spec["sizes"])),
        "kb_mean": round(statistics.mean(sizes) / 1000, 1), "kb_median": round(statistics.median(sizes) / 1000, 1),
        "kb_min": round(min(sizes) / 1000, 1), "kb_max": round(max(sizes) / 1000, 1),
        "mb_total": round(sum(sizes) / 1e6, 1), "grain_sigma": [round(s, 2) for s in sigmas],
        "seed": seed,
    }
    with open(os.path.join(out, name, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    return summary, sigmas


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", required=True, help="folder to write the sets in (made if missing)")
    ap.add_argument("--src", default=DEFAULT_SRC, help="mate-backgrounds' nature/ folder (default %(default)s)")
    ap.add_argument("--count", type=int, default=2000, help="training images per imagenet/web set (default 2000)")
    ap.add_argument("--phone-count", type=int, default=300, help="training images in the phone set (default 300)")
    ap.add_argument("--test-fraction", type=float, default=0.1, help="test images as a share of training's")
    ap.add_argument("--sets", default="imagenet,web,phone", help="which sets (comma-separated)")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    names = [s for s in a.sets.split(",") if s]
    for s in names:
        if s not in SETS:
            sys.exit("make_image_sets.py: unknown set '%s' (imagenet, web, phone)" % s)
    photos = []
    for c in CLASSES:
        path = os.path.join(a.src, c + ".jpg")
        if not os.path.exists(path):
            sys.exit("make_image_sets.py: %s not found: install mate-backgrounds or give --src (see --help)" % path)
        photos.append(Image.open(path).convert("RGB"))
    imagenet_sigmas = None
    for name in names:
        spec = SETS[name]
        count = a.phone_count if name == "phone" else a.count
        test_count = max(len(photos), round(count * a.test_fraction))
        # web is imagenet's crops and grain saved as a web pipeline would: same content, other encoding
        reuse = None
        if name == "web":
            reuse = imagenet_sigmas if imagenet_sigmas is not None else \
                [calibrate(p, SETS["imagenet"], Grain(random.Random("grain-imagenet-%d" % a.seed), 500, 500),
                           a.seed * 1000 + i, 1.5) for i, p in enumerate(photos)]
        summary, sigmas = make_set(name, spec, photos, a.out, count, test_count, a.seed, reuse)
        if name == "imagenet":
            imagenet_sigmas = sigmas
        print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    main()

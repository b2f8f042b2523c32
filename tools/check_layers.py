#!/usr/bin/env python3
"""Layers that only look down: every #include "..." from one source folder into another must go to a
folder below its own, in the order LAYERS gives. Also: the public header is implemented in engine/api/
alone, and CUTRAIN_HAVE_CUDA is tested only by the backend registry (engine/backend.c) and below it in
the CUDA backend and its kernels. Exits 1 naming each breach as FILE:LINE and the rule it breaks.

Usage: tools/check_layers.py [SOURCE_ROOT]   (python3, standard library only; a ctest test, label unit)
"""
import os
import re
import sys

# The order, lowest first. A file may include the headers of its own folder and of any folder listed
# before its own; folders on one line are siblings and never include each other. A new folder has
# to be placed here before anything can include it.
LAYERS = [
    ["engine/cutrain.h"],   # the public header: types and declarations only, so every layer may use
                            # its types; api/ alone implements its functions (checked below)
    ["engine/base/"],       # status, tensors, devmem, the clock: nothing of ours
    ["data/"],              # datasets and the input pipeline: base/ only. config/ fills its settings
                            # struct (data/settings.h) and the device interface takes its channel bound
    ["engine/config/"],     # the config reader
    ["engine/"],            # the files in engine/ itself: the device-side interfaces (device.h,
                            # backend.h, comm.h), the step cache behind run_step, and the backend
                            # registry (registry.h, backend.c), which opens the backends by the
                            # rows they bring, so that nothing above them names one
    ["engine/graph/"],      # the network: layer records, shapes, binding, the memory plan
    ["kernels/"],           # CUDA kernels, plain C declarations (kernels.h): the CUDA backend's
    ["engine/cpu/", "engine/cuda/"],   # the backends
    ["engine/train/"],      # the run: replicas, communicators, the trainer, the batch search
    ["engine/checkpoint/"], # the checkpoint format and a run's state in it
    ["engine/export/"],     # ONNX and safetensors from a built graph and a checkpoint
    ["engine/api/"],        # the public API (cutrain.h) over a run
    ["tools/"],             # the command: cutrain.h only (see ONLY)
]

# Folders narrower than their place in the order: what they may include besides their own files.
ONLY = {
    "kernels/": ["engine/cutrain.h", "engine/base/", "data/", "engine/config/"],
    "tools/": ["engine/cutrain.h"],
}
# Folders that only some of those above them may include: above the backends, code reaches them
# through the interfaces in engine/ and the registry's rows, never by their own headers.
INCLUDED_BY = {
    "kernels/": ["engine/cuda/"],
    "engine/cpu/": [],
    "engine/cuda/": [],
}

# Includes that break the order and stay, each with its reason: (file, include as written).
EXCEPTIONS = {
    # The layer sections' keys live in each type's record (graph/layers/<type>.c), so that a layer
    # type is one file and one row of CT_LAYER_TYPES; the config reader reads them from the records.
    ("engine/config/layer_keys.c", "graph/layer.h"),
}

SOURCE_DIRS = ["engine", "kernels", "data", "tools"]
SOURCE_EXT = (".c", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')
CUDA_TEST = re.compile(r"^\s*#\s*(if|ifdef|ifndef|elif)\b.*\bCUTRAIN_HAVE_CUDA\b")
CUDA_ALLOWED = ["engine/backend.c", "engine/cuda/", "kernels/"]


def folder_of(path):
    """The entry of LAYERS that holds path (the most specific), or None."""
    best = None
    for layer in LAYERS:
        for f in layer:
            if f.endswith("/"):
                inside = path.startswith(f) and (f != "engine/" or path.count("/") == 1)
            else:
                inside = path == f
            if inside and (best is None or len(f) > len(best)):
                best = f
    return best


def rank_of(folder):
    return next(i for i, layer in enumerate(LAYERS) if folder in layer)


def sources(root):
    for top in SOURCE_DIRS:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if name.endswith(SOURCE_EXT):
                    yield os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")


def resolve(root, path, inc):
    """The file an include names, searched as the build does (CMakeLists.txt): the includer's own
    folder, engine/, the root; None for a header outside the sources."""
    for base in [os.path.dirname(path), "engine", ""]:
        cand = os.path.normpath(os.path.join(base, inc)).replace(os.sep, "/")
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def include_breach(src, dst):
    """Why src's folder may not include dst's, or None."""
    a, b = folder_of(src), folder_of(dst)
    if a == b:
        return None
    if a in ONLY and b not in ONLY[a]:
        return "%s includes only %s and its own files" % (a, ", ".join(ONLY[a]))
    if b in INCLUDED_BY and a not in INCLUDED_BY[b]:
        return "%s is included only by %s" % (b, ", ".join(INCLUDED_BY[b]) or "its own files")
    ra, rb = rank_of(a), rank_of(b)
    if ra == rb:
        return "%s and %s are siblings and never include each other" % (a, b)
    if rb > ra:
        return "%s sits above %s: a layer only looks down" % (b, a)
    return None


def public_functions(root):
    text = open(os.path.join(root, "engine/cutrain.h"), errors="replace").read()
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return set(re.findall(r"(?<!\(\*)\b(ct_\w+)\s*\(", text))


def definitions(text, names):
    """(line, name) of every function of `names` defined in text: a line from column 0 naming it,
    whose parameter list is followed by a body."""
    for m in re.finditer(r"^[A-Za-z_][\w \t*]*?\b(ct_\w+)\s*\(", text, flags=re.M):
        if m.group(1) in names:
            rest = text[m.end():]
            body, decl = rest.find("{"), rest.find(";")
            if body >= 0 and (decl < 0 or body < decl):
                yield text.count("\n", 0, m.start()) + 1, m.group(1)


def check(root):
    problems = []
    public = public_functions(root)
    for path in sources(root):
        if folder_of(path) is None:
            problems.append("%s: its folder is not in tools/check_layers.py's LAYERS: place it there" % path)
            continue
        text = open(os.path.join(root, path), errors="replace").read()
        for n, line in enumerate(text.splitlines(), 1):
            m = INCLUDE.match(line)
            if m:
                dst = resolve(root, path, m.group(1))
                if dst is None or folder_of(dst) is None:
                    continue   # a header of a library, or the build's own
                why = include_breach(path, dst)
                if why and (path, m.group(1)) not in EXCEPTIONS:
                    problems.append('%s:%d: #include "%s": %s' % (path, n, m.group(1), why))
            if CUDA_TEST.match(line) and not any(path.startswith(p) for p in CUDA_ALLOWED):
                problems.append("%s:%d: CUTRAIN_HAVE_CUDA is tested only by the registry (engine/backend.c) "
                                "and below it (engine/cuda/, kernels/)" % (path, n))
        if path.endswith(".c") and not path.startswith("engine/api/"):
            for n, name in definitions(text, public):
                problems.append("%s:%d: %s is cutrain.h's, which engine/api/ alone implements" % (path, n, name))
    return problems


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    problems = check(root)
    for p in problems:
        print(p)
    if problems:
        print("check_layers: %d breach%s of the layer order (tools/check_layers.py)" %
              (len(problems), "" if len(problems) == 1 else "es"))
        return 1
    print("check_layers: every include between folders looks down")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Compares the Python binding's ctypes Structures with the C layouts.

    layout_check.py LAYOUT HEADER...    (LAYOUT: the output of tests/python/layout)
    layout_check.py --sizes             (the library refuses unknown sizes)

The first form prints one line per difference and exits 1 when there is
one: a public struct of the headers that the binding lacks, or a field
whose name, order, offset or size differs between the headers (as parsed
here), the compiler (LAYOUT) and the binding's _fields_.
"""

import ctypes
import re
import sys

import dptrain

# The binding's copy of each public struct that has a body in the headers.
BINDING = {
    "dpt_init_opts": dptrain._InitOpts,
    "dpt_ckpt_opts": dptrain._CkptOpts,
    "dpt_ckpt_tensor": dptrain._CkptTensor,
    "dpt_ckpt_meta": dptrain._CkptMeta,
    "dpt_ckpt_entry": dptrain._CkptEntry,
    "dpt_ckpt_contents": dptrain._CkptContents,
    "dpt_ckpt_info": dptrain._CkptInfo,
    "dpt_ckpt_stats": dptrain._CkptStats,
}

# Public structs that the binding does not use, and why.
NOT_BOUND = {
    "dpt_sampler_state": "dptrain.torch.ElasticSampler keeps its state in Python",
}


def header_fields(paths):
    """{struct name: [field names in order]} of the struct definitions."""
    out = {}
    for path in paths:
        with open(path) as f:
            text = f.read()
        text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
        text = re.sub(r"//[^\n]*", " ", text)
        for name, body in re.findall(r"struct\s+(dpt_\w+)\s*\{(.*?)\}\s*;", text, re.S):
            fields = []
            for decl in body.split(";"):
                for part in decl.split(",") if decl.strip() else []:
                    m = re.search(r"(\w+)\s*(\[[^\]]*\])?\s*$", part)
                    fields.append(m.group(1))
            out[name] = fields
    return out


def c_layout(path):
    sizes, fields = {}, {}
    with open(path) as f:
        for line in f:
            w = line.split()
            if w[0] == "struct":
                sizes[w[1]] = int(w[2])
                fields[w[1]] = []
            else:
                fields[w[1]].append((w[2], int(w[3]), int(w[4])))
    return sizes, fields


def compare(layout, headers):
    problems = []
    sizes, cfields = c_layout(layout)
    hfields = header_fields(headers)
    for name in sorted(set(hfields) | set(sizes) | set(BINDING)):
        if name in NOT_BOUND:
            continue
        where = [w for w, d in (("the headers", hfields), ("tests/python/layout.c", sizes),
                                ("the binding", BINDING)) if name not in d]
        if where:
            problems.append("struct %s: missing from %s" % (name, " and ".join(where)))
            continue
        py = BINDING[name]
        pyfields = [(f, getattr(py, f).offset, getattr(py, f).size)
                    for f, *_ in py._fields_]
        if [f for f, *_ in cfields[name]] != hfields[name]:
            problems.append("struct %s: tests/python/layout.c lists %s, the header has %s"
                            % (name, [f for f, *_ in cfields[name]], hfields[name]))
        if ctypes.sizeof(py) != sizes[name]:
            problems.append("struct %s: sizeof %d in C, %d in the binding (%s)"
                            % (name, sizes[name], ctypes.sizeof(py), py.__name__))
        names = [f for f, *_ in pyfields]
        if names != hfields[name]:
            problems.append("struct %s: fields %s in the header, %s in the binding (%s)"
                            % (name, hfields[name], names, py.__name__))
        pyd = {f: (o, s) for f, o, s in pyfields}
        for f, off, size in cfields[name]:
            if f in pyd and pyd[f] != (off, size):
                problems.append("struct %s: field %s at offset %d, %d bytes in C; "
                                "offset %d, %d bytes in the binding"
                                % (name, f, off, size, pyd[f][0], pyd[f][1]))
    return problems


def sizes():
    """The *_sized functions refuse a struct larger than the library's or
    smaller than its first version, and accept the binding's."""
    lib, problems = dptrain._lib, []
    einval = -1  # DPT_EINVAL
    for fn, struct in (("dpt_init_opts_default_sized", dptrain._InitOpts),
                       ("dpt_ckpt_opts_default_sized", dptrain._CkptOpts)):
        buf = ctypes.create_string_buffer(ctypes.sizeof(struct) + 8)
        p = ctypes.cast(buf, ctypes.POINTER(struct))
        n = ctypes.sizeof(struct)
        for size, want in ((n, 0), (n + 8, einval), (n // 2, einval), (0, einval)):
            rc = getattr(lib, fn)(p, size)
            if rc != want:
                problems.append("%s(%d): %d, want %d" % (fn, size, rc, want))
    ck = ctypes.c_void_p()
    opts = dptrain._CkptOpts(uri=b"file:///nonexistent/dptrain-layout")
    rc = lib.dpt_ckpt_new_sized(ctypes.byref(ck), None, ctypes.byref(opts),
                                ctypes.sizeof(opts) + 16)
    if rc != einval or ck:
        problems.append("dpt_ckpt_new_sized with a larger struct: %d, want %d" % (rc, einval))
    ctx = ctypes.c_void_p()
    io = dptrain._InitOpts()
    rc = lib.dpt_init_sized(ctypes.byref(ctx), ctypes.byref(io), ctypes.sizeof(io) + 8)
    if rc != einval or ctx:
        problems.append("dpt_init_sized with a larger struct: %d, want %d" % (rc, einval))
    return problems


def main(argv):
    problems = sizes() if argv[1:] == ["--sizes"] else compare(argv[1], argv[2:])
    for p in problems:
        print(p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

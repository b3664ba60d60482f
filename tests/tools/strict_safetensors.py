#!/usr/bin/python3
"""A strict .safetensors reader, independent of tandem's: the checks of the safetensors library's
own loader (header length and start, UTF-8 JSON, dtypes, shapes against byte sizes, offsets that
tile the data section), plus what its JSON parser refuses (duplicate keys, control characters,
lone surrogates, NaN literals). Usage: strict_safetensors.py FILE... Exit 0 when every file
passes; else 1, with the reason for the first that fails on stderr."""
import json
import struct
import sys

DTYPE_BYTES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E5M2": 1, "F8_E4M3": 1, "I16": 2, "U16": 2,
               "F16": 2, "BF16": 2, "I32": 4, "U32": 4, "F32": 4, "F64": 8, "I64": 8, "U64": 8}
MAX_HEADER = 100_000_000


class Invalid(Exception):
    pass


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(keys) != len(set(keys)):
        raise Invalid("a key appears twice in one object")
    return dict(pairs)


def refuse_constant(name):
    raise Invalid("the JSON literal %s" % name)


def check_text(value):
    """Every string must encode back to UTF-8: a lone surrogate escape does not."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            raise Invalid("a string that is not Unicode text (%s)" % e.reason)
    elif isinstance(value, dict):
        for k, v in value.items():
            check_text(k)
            check_text(v)
    elif isinstance(value, list):
        for v in value:
            check_text(v)


def check(path):
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise Invalid("fewer than 8 bytes")
    (n,) = struct.unpack("<Q", data[:8])
    if n > MAX_HEADER:
        raise Invalid("a header of %d bytes" % n)
    if 8 + n > len(data):
        raise Invalid("a header longer than the file")
    raw = data[8:8 + n]
    try:
        text = raw.decode("utf-8", errors="strict")
    except UnicodeDecodeError as e:
        raise Invalid("a header that is not UTF-8: %s" % e)
    if not text.startswith("{"):
        raise Invalid("a header that does not start with '{'")
    try:
        header = json.loads(text, object_pairs_hook=no_duplicates,
                            parse_constant=refuse_constant)
    except json.JSONDecodeError as e:
        raise Invalid("a header that is not JSON: %s" % e)
    if not isinstance(header, dict):
        raise Invalid("a header that is not an object")
    check_text(header)
    buffer_size = len(data) - 8 - n
    tensors = []
    for name, info in header.items():
        if name == "__metadata__":
            if not isinstance(info, dict) or not all(isinstance(v, str) for v in info.values()):
                raise Invalid("__metadata__ that is not an object of strings")
            continue
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise Invalid("tensor %r without exactly dtype, shape and data_offsets" % name)
        dtype, shape, offsets = info["dtype"], info["shape"], info["data_offsets"]
        if dtype not in DTYPE_BYTES:
            raise Invalid("tensor %r of unknown dtype %r" % (name, dtype))
        if (not isinstance(shape, list) or
                not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                        for d in shape)):
            raise Invalid("tensor %r with a malformed shape" % name)
        if (not isinstance(offsets, list) or len(offsets) != 2 or
                not all(isinstance(o, int) and not isinstance(o, bool) and 0 <= o < 2**64
                        for o in offsets)):
            raise Invalid("tensor %r with malformed data_offsets" % name)
        count = 1
        for d in shape:
            count *= d
        if count * DTYPE_BYTES[dtype] >= 2**64:
            raise Invalid("tensor %r whose size overflows" % name)
        tensors.append((offsets[0], offsets[1], name, count * DTYPE_BYTES[dtype]))
    start = 0
    for begin, end, name, nbytes in sorted(tensors):
        if begin != start or end < begin:
            raise Invalid("tensor %r at [%d, %d) where %d was expected" % (name, begin, end, start))
        if end - begin != nbytes:
            raise Invalid("tensor %r holds %d bytes for a shape of %d" % (name, end - begin, nbytes))
        start = end
    if start != buffer_size:
        raise Invalid("tensors cover %d bytes of a data section of %d" % (start, buffer_size))


def main():
    for path in sys.argv[1:]:
        try:
            check(path)
        except Invalid as e:
            print("%s: invalid: %s" % (path, e), file=sys.stderr)
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

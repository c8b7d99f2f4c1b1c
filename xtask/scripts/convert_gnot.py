"""Converts a GNOT multi-input-output (MIO) pickle to an .npz that ono-data reads without Python.

Usage (normally through `cargo xtask data convert-gnot <input.pkl> <output.npz>`):

    python xtask/scripts/convert_gnot.py <input.pkl> <output.npz>

Input: the MIODataset format of the GNOT README (HaoZhongkai/GNOT), a list of samples

    [X (N, N_in), Y (N, N_out), theta (N_theta,), (f_1 (N_1, c_1), ..., f_k (N_k, c_k)) or None]

where N varies between samples, theta has one length for all samples, and every sample has the
same number k of input functions with the same widths c_j (their point counts N_j vary). The README
also allows the functions to be written `(None,)`, which means "none". A theta of None in every
sample (which GNOT itself cannot load) is taken as "no global parameters".

Output: the samples concatenated along the point axis, with offsets:

    x          (sum N_i, N_in)     X of every sample, sample i in rows offsets[i]:offsets[i+1]
    y          (sum N_i, N_out)
    offsets    (S + 1,) int64
    theta      (S, N_theta)        absent when theta is None
    f{j}       (sum_i N_ij, c_j)   input function j, j = 0..k-1
    f{j}_offsets (S + 1,) int64
    meta       uint8               UTF-8 JSON: format name and version, counts, source file name

Float32/float64 arrays keep their type (concatenation promotes to the wider one); integer and
boolean arrays become float64 (GNOT casts everything to float32 anyway). Everything is written
little-endian and uncompressed, to a temporary file in the output directory that is renamed over
the output only when complete.

The unpickler only accepts what an MIO list can contain (numpy arrays and dtypes, lists, tuples,
None, numbers): a pickle that names any other class or function is refused before anything of it
runs, since unpickling can otherwise execute arbitrary code.

Exit status: 0 on success, 2 with a one-line `error: ...` on stderr when the input is refused.
"""
import json
import os
import pickle
import sys

FORMAT = "ono-gnot-mio"
VERSION = 1

try:
    import numpy as np
except ImportError:  # the message is the point: this runs in whatever Python xtask found
    sys.stderr.write(
        "error: numpy is not installed in this Python (%s); the converter needs it\n" % sys.executable
    )
    sys.exit(2)


class Refused(Exception):
    """The input is not an MIO dataset; the message says why."""


class Unreadable(Refused):
    """The input cannot be read or unpickled at all."""


# What numpy's own pickling of ndarrays and dtypes references (numpy 1.x and 2.x module paths).
_ALLOWED = {
    ("numpy.core.multiarray", "_reconstruct"),
    ("numpy._core.multiarray", "_reconstruct"),
    ("numpy.core.multiarray", "scalar"),
    ("numpy._core.multiarray", "scalar"),
    ("numpy.core.numeric", "_frombuffer"),
    ("numpy._core.numeric", "_frombuffer"),
    ("numpy", "ndarray"),
    ("numpy", "dtype"),
    ("builtins", "tuple"),
    ("builtins", "list"),
    ("builtins", "bytearray"),
    ("_codecs", "encode"),
}


class _MioUnpickler(pickle.Unpickler):
    def find_class(self, module, name):
        if (module, name) in _ALLOWED:
            return super().find_class(module, name)
        raise Refused(
            "the pickle references %s.%s; an MIO dataset holds only numpy arrays, lists, tuples "
            "and None, so it is not unpickled" % (module, name)
        )


def _load(path):
    try:
        with open(path, "rb") as f:
            return _MioUnpickler(f).load()
    except Refused:
        raise
    except OSError as e:
        raise Unreadable("cannot read it: %s" % (e.strerror or e))
    except Exception as e:  # truncated or not a pickle at all: any of a dozen exception types
        raise Unreadable("not a readable pickle (%s: %s)" % (type(e).__name__, e))


def _array(a, what, ndim):
    """`a` as a numeric numpy array of rank `ndim`, or Refused naming `what`."""
    if not isinstance(a, np.ndarray):
        raise Refused("%s must be a numpy array, got %s" % (what, type(a).__name__))
    if a.dtype.kind not in "fiub":
        raise Refused("%s must be numeric, got dtype %s" % (what, a.dtype))
    if a.ndim != ndim:
        want = "(N, C)" if ndim == 2 else "(N_theta,)"
        raise Refused("%s must have shape %s, got %s" % (what, want, a.shape))
    return a


def _functions(f, i):
    """The input functions of sample i as a list (empty for None or (None, ...))."""
    if f is None:
        return []
    if not isinstance(f, (list, tuple)):
        raise Refused(
            "sample %d: the input functions must be a tuple of arrays or None, got %s"
            % (i, type(f).__name__)
        )
    if all(g is None for g in f):
        return []
    out = []
    for j, g in enumerate(f):
        if g is None:
            raise Refused("sample %d: input function %d is None but others are not" % (i, j))
        out.append(_array(g, "sample %d: input function %d" % (i, j), 2))
    return out


def check(data):
    """Validates the MIO layout; returns (xs, ys, thetas or None, funcs[j][i])."""
    if not isinstance(data, (list, tuple)):
        raise Refused(
            "the pickle holds a %s, not the list of samples [X, Y, theta, funcs] of an MIO dataset"
            % type(data).__name__
        )
    if len(data) == 0:
        raise Refused("the pickle holds an empty list: no samples")
    xs, ys, thetas, funcs = [], [], [], []
    for i, s in enumerate(data):
        if not isinstance(s, (list, tuple)) or len(s) != 4:
            what = "%d items" % len(s) if isinstance(s, (list, tuple)) else type(s).__name__
            if isinstance(s, (list, tuple)) and s and isinstance(s[0], (list, tuple)):
                what += " that are lists themselves (samples nested one level too deep?)"
            raise Refused("sample %d must be [X, Y, theta, funcs] (4 items), got %s" % (i, what))
        x = _array(s[0], "sample %d: X" % i, 2)
        y = _array(s[1], "sample %d: Y" % i, 2)
        if x.shape[0] == 0:
            raise Refused("sample %d: X has no points" % i)
        if x.shape[0] != y.shape[0]:
            raise Refused(
                "sample %d: X has %d points but Y has %d" % (i, x.shape[0], y.shape[0])
            )
        if xs and x.shape[1] != xs[0].shape[1]:
            raise Refused(
                "sample %d: X has %d columns, sample 0 has %d" % (i, x.shape[1], xs[0].shape[1])
            )
        if ys and y.shape[1] != ys[0].shape[1]:
            raise Refused(
                "sample %d: Y has %d columns, sample 0 has %d" % (i, y.shape[1], ys[0].shape[1])
            )
        theta = None if s[2] is None else _array(s[2], "sample %d: theta" % i, 1)
        if i > 0 and (theta is None) != (thetas[0] is None):
            raise Refused("sample %d: theta is None in some samples but not in others" % i)
        if theta is not None and thetas and theta.shape != thetas[0].shape:
            raise Refused(
                "sample %d: theta has length %d, sample 0 has %d"
                % (i, theta.shape[0], thetas[0].shape[0])
            )
        fs = _functions(s[3], i)
        if funcs and len(fs) != len(funcs[0]):
            raise Refused(
                "sample %d has %d input functions, sample 0 has %d" % (i, len(fs), len(funcs[0]))
            )
        for j, g in enumerate(fs):
            if funcs and g.shape[1] != funcs[0][j].shape[1]:
                raise Refused(
                    "sample %d: input function %d has %d columns, in sample 0 it has %d"
                    % (i, j, g.shape[1], funcs[0][j].shape[1])
                )
        xs.append(x)
        ys.append(y)
        thetas.append(theta)
        funcs.append(fs)
    if thetas[0] is None:
        thetas = None
    by_function = [[fs[j] for fs in funcs] for j in range(len(funcs[0]))]
    return xs, ys, thetas, by_function


def _dtype(arrays):
    """The stored type of a concatenation: float32/float64 kept, anything else float64."""
    t = np.result_type(*arrays)
    if t.kind == "f" and t.itemsize == 2:
        t = np.dtype(np.float32)
    elif t.kind != "f" or t.itemsize != 4:
        t = np.dtype(np.float64)
    return t.newbyteorder("<")


def _concat(arrays):
    t = _dtype(arrays)
    return np.ascontiguousarray(np.concatenate([a.astype(t, copy=False) for a in arrays], axis=0))


def _offsets(arrays):
    return np.concatenate([[0], np.cumsum([a.shape[0] for a in arrays])]).astype("<i8")


def convert(data, source_name):
    """The named arrays of the .npz for a loaded MIO list."""
    xs, ys, thetas, funcs = check(data)
    out = {"x": _concat(xs), "y": _concat(ys), "offsets": _offsets(xs)}
    if thetas is not None:
        t = _dtype(thetas)
        out["theta"] = np.ascontiguousarray(np.stack([a.astype(t, copy=False) for a in thetas]))
    for j, fj in enumerate(funcs):
        out["f%d" % j] = _concat(fj)
        out["f%d_offsets" % j] = _offsets(fj)
    meta = {
        "format": FORMAT,
        "version": VERSION,
        "source": source_name,
        "samples": len(xs),
        "input_functions": len(funcs),
        "theta": thetas is not None,
    }
    out["meta"] = np.frombuffer(json.dumps(meta, sort_keys=True).encode(), dtype=np.uint8)
    return out


def write_atomic(path, arrays):
    """np.savez to a temporary sibling, renamed over `path` only when complete."""
    d = os.path.dirname(os.path.abspath(path))
    tmp = os.path.join(d, ".%s.tmp-%d" % (os.path.basename(path), os.getpid()))
    try:
        with open(tmp, "wb") as f:  # a file object: savez would append .npz to a name
            np.savez(f, **arrays)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def main(argv):
    if len(argv) != 3:
        sys.stderr.write("usage: %s <input.pkl> <output.npz>\n" % argv[0])
        return 2
    src, dst = argv[1], argv[2]
    try:
        arrays = convert(_load(src), os.path.basename(src))
    except Unreadable as e:
        sys.stderr.write("error: %s: %s\n" % (src, e))
        return 2
    except Refused as e:
        sys.stderr.write("error: %s: not an MIO dataset: %s\n" % (src, e))
        return 2
    try:
        write_atomic(dst, arrays)
    except OSError as e:
        sys.stderr.write("error: cannot write %s: %s\n" % (dst, e.strerror or e))
        return 2
    s = arrays["offsets"].shape[0] - 1
    k = sum(1 for n in arrays if n.endswith("_offsets"))
    print(
        "%s: %d samples, %d points, theta %s, %d input functions -> %s"
        % (
            src,
            s,
            arrays["x"].shape[0],
            arrays["theta"].shape[1] if "theta" in arrays else "none",
            k,
            dst,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

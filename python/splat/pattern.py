"""splat.pattern — :class:`Pattern`, a mask of which keys each query row may see.

A pattern comes from a spec in splat's pattern language (docs/patterns.md), e.g.
``Pattern("window(256) | global(64)", 4096)``, or from an explicit boolean matrix
(``Pattern.from_mask``), or from two patterns (``a | b``, ``a & b``). It owns a C
``splat_pattern``; ``report()`` runs the analysis and returns it as a dict.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import re
import sys
import threading
import time
import weakref
from collections import OrderedDict
from functools import lru_cache
from typing import Any, Dict, List, Optional, Tuple, Union

import numpy as np

from . import _lib
from .errors import c_integer, flag, integer, invalid, positive_int


# Patterns without spec text (explicit masks and masks read from files), by token, while
# any of them is alive: equal masks share a token, and one may die while another lives.
_live: "Dict[str, List[weakref.ref]]" = {}


def _register(pat: "Pattern") -> None:
    refs = [r for r in _live.get(pat.token, []) if r() is not None]
    _live[pat.token] = refs + [weakref.ref(pat)]


def _alive(token: str) -> "Optional[Pattern]":
    for r in _live.get(token, []):
        pat = r()
        if pat is not None:
            return pat
    _live.pop(token, None)
    return None


def pattern_for_token(token: str, seq_q: int, seq_k: int) -> "Pattern":
    """The pattern a token names: a live mask pattern ("#..."), or spec text parsed
    for (seq_q, seq_k) (parses are cached)."""
    if token.startswith("#"):
        pat = _alive(token)
        if pat is None:
            raise invalid(
                f"pattern {token} is not alive in this process (keep the splat.Pattern built "
                "with Pattern.from_mask or from a mask file referenced while it is used)"
            )
        return pat
    if _reads_files(token):
        return _from_files(token, seq_q, seq_k)
    return _parsed(token, seq_q, seq_k)


def _reads_files(spec: str) -> bool:
    """Whether spec text names a file (``mask("...")``, spaces allowed before the
    parenthesis), whose contents may change: such a pattern is known by its content, not
    its text."""
    return re.search(r"\bmask\s*\(", spec) is not None


@lru_cache(maxsize=256)
def _parsed(spec: str, seq_q: int, seq_k: int) -> "Pattern":
    return Pattern(spec, seq_q, seq_k)


# mask("path") with the parser's quoting: '...' or "...", \ and the quote escaped.
_MASK_PATH = re.compile(r"""\bmask\s*\(\s*(["'])((?:\\.|(?!\1).)*)\1""", re.S)

# A file modified this recently is read again at every use: a rewrite within the file
# system's timestamp granularity could keep its size and mtime.
_RACY_NS = 2_000_000_000


def _unquote(body: str, quote: str) -> str:
    """A mask path's text as the C parser reads it: only \\<quote> and \\\\ are escapes."""
    out, i = [], 0
    while i < len(body):
        c = body[i]
        i += 1
        if c == "\\" and i < len(body) and body[i] in (quote, "\\"):
            c = body[i]
            i += 1
        out.append(c)
    return "".join(out)


def _file_stamps(spec: str) -> "Optional[Tuple[Tuple[int, ...], ...]]":
    """(device, inode, size, mtime, ctime) of each file spec names, or None where one
    cannot be stat'ed or was modified within the last two seconds (not cached)."""
    now = time.time_ns()
    stamps = []
    for m in _MASK_PATH.finditer(spec):
        path = _unquote(m.group(2), m.group(1))
        try:
            st = os.stat(path)
        except (OSError, ValueError):  # ValueError: a NUL in the path; the parser says so
            return None
        if now - max(st.st_mtime_ns, st.st_ctime_ns) < _RACY_NS:
            return None
        stamps.append((st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
    return tuple(stamps)


# Patterns of spec text naming files, by (spec, seq_q, seq_k): with the files' stamps
# when they were read, so a string spec does not read and hash its file at every call.
_file_patterns: "OrderedDict[Tuple[str, int, int], Tuple[Any, Pattern]]" = OrderedDict()
_file_patterns_lock = threading.Lock()
_FILE_PATTERNS_MAX = 8


def _from_files(spec: str, seq_q: int, seq_k: int) -> "Pattern":
    """The pattern of spec text naming files, as the files are now: from the cache while
    every file's stamps are those it was read with, else read again."""
    key = (spec, seq_q, seq_k)
    before = _file_stamps(spec)
    with _file_patterns_lock:
        hit = _file_patterns.get(key)
        if before is not None and hit is not None and hit[0] == before:
            _file_patterns.move_to_end(key)
            return hit[1]
    pat = Pattern(spec, seq_q, seq_k)
    with _file_patterns_lock:
        if before is not None and _file_stamps(spec) == before:  # unchanged while read
            _file_patterns[key] = (before, pat)
            _file_patterns.move_to_end(key)
            while len(_file_patterns) > _FILE_PATTERNS_MAX:
                _file_patterns.popitem(last=False)
        else:
            _file_patterns.pop(key, None)
    return pat


def _mask_array(mask: Any) -> np.ndarray:
    """A mask as a numpy array, its numeric dtypes that numpy lacks widened to float32
    (exact for all of them: bfloat16, float8, int4)."""
    torch = sys.modules.get("torch")  # only a program that imported torch can pass a tensor
    try:
        if torch is not None and isinstance(mask, torch.Tensor):
            # Tensor.numpy() takes no tensor that requires grad or lives off the CPU, and
            # no bfloat16 or float8
            mask = mask.detach().cpu()
            if mask.is_floating_point() and mask.element_size() < 4:
                mask = mask.float()
        arr = np.asarray(mask)
    except (TypeError, ValueError, RuntimeError, NotImplementedError) as exc:
        raise invalid(f"mask ({type(mask).__name__}) cannot be read as an array: {exc}") from None
    if arr.dtype.type.__module__ == "ml_dtypes":  # numpy's and jax's bfloat16, float8, int4
        arr = arr.astype(np.float32)
    return arr


class Pattern:
    """A static attention mask for ``seq_q`` query rows and ``seq_k`` key columns.

    Attributes:
        spec: the canonical spec text (explicit masks print as ``mask(<q>x<k>)``).
        seq_q, seq_k: the mask's shape.
        key: a hashable identity of the mask's content; equal keys mean equal masks
            (used to cache plans).
    """

    _handle: Optional[int] = None

    def __init__(self, spec: str, seq: int, seq_k: Optional[int] = None) -> None:
        if not isinstance(spec, str):
            raise invalid(f"spec={spec!r} must be a string")
        if "\0" in spec:  # C would read the text up to it
            raise invalid(f"spec={spec!r} contains a NUL character at {spec.index(chr(0))}")
        seq = positive_int(seq, "seq")
        seq_k = seq if seq_k is None else positive_int(seq_k, "seq_k")
        out = ctypes.c_void_p()
        _lib.check(_lib.lib().splat_pattern_parse(spec.encode(), seq, seq_k, ctypes.byref(out)))
        if not _reads_files(spec):
            self._adopt(out.value, source=spec, digest=None)
            return
        # A mask read from a file: identified by the rows read, like Pattern.from_mask (a
        # key from the text would serve a cached plan of the file's earlier contents).
        self._handle = out.value
        self._adopt(out.value, source=None, digest=self._rows_digest(seq, seq_k))

    def _rows_digest(self, seq_q: int, seq_k: int) -> str:
        """sha256 of the rows of the pattern in self._handle: the identity of masks read
        from files."""
        digest = hashlib.sha256(b"file rows" + np.array([seq_q, seq_k], dtype=np.int64).tobytes())
        for i in range(seq_q):
            cols = self._row(i)
            digest.update(np.int64(cols.size).tobytes() + cols.tobytes())
        return digest.hexdigest()

    # -- construction helpers

    def _adopt(self, handle: Optional[int], source: Optional[str], digest: Optional[str]) -> None:
        self._handle = handle
        L = _lib.lib()
        self.seq_q = int(L.splat_pattern_seq_q(handle))
        self.seq_k = int(L.splat_pattern_seq_k(handle))
        self.spec = L.splat_pattern_spec(handle).decode()
        # `_source` is spec text that parses back to this mask (None for masks);
        # `_digest` identifies masks by content.
        self._source = source
        self._digest = digest
        self._row_width: Optional[int] = None
        # Spec patterns are keyed by the library's canonical text, so spellings of one
        # pattern ("window(3)", "window(3,3)", "window( 3 )") are equal and share plans.
        self.key: Tuple[Any, ...] = (
            ("spec", self.spec, self.seq_q, self.seq_k)
            if source is not None
            else ("mask", digest, self.seq_q, self.seq_k)
        )
        # What the JAX and torch ops carry as an attribute: the spec text, or
        # "#<content key>" of a live pattern (see pattern_for_token).
        self.token = source if source is not None else f"#{digest}-{self.seq_q}x{self.seq_k}"
        if source is None:
            _register(self)

    @classmethod
    def _wrap(cls, handle: Optional[int], source: Optional[str], digest: Optional[str]) -> "Pattern":
        obj = cls.__new__(cls)
        obj._adopt(handle, source, digest)
        return obj

    @classmethod
    def from_mask(cls, mask: Any) -> "Pattern":
        """An explicit mask from a 2-d boolean (or 0/1) array: numpy, a torch tensor (on
        any device; one that requires grad is read detached), a jax array, or anything
        ``numpy.asarray`` accepts. Element [i, j] nonzero means query row i sees key
        column j. Numeric dtypes numpy lacks (bfloat16, float8, int4) are read as float32,
        exactly. The bits are copied."""
        arr = _mask_array(mask)
        if arr.ndim != 2:
            raise invalid(f"mask must be 2-d [seq_q, seq_k], got shape {tuple(arr.shape)}")
        if arr.dtype.kind not in "biuf":
            raise invalid(f"mask.dtype={arr.dtype} must be bool, integer or floating-point")
        if arr.dtype.kind == "f" and np.isnan(arr).any():
            at = tuple(int(x) for x in np.argwhere(np.isnan(arr))[0])
            raise invalid(f"mask[{at[0]}, {at[1]}] is NaN: neither visible nor hidden")
        if arr.shape[0] < 1 or arr.shape[1] < 1:
            raise invalid(f"mask shape {tuple(arr.shape)} must be at least 1x1")
        bits = np.ascontiguousarray(arr != 0, dtype=np.uint8)
        digest = hashlib.sha256(
            b"mask bits" + np.array(bits.shape, dtype=np.int64).tobytes() + np.packbits(bits).tobytes()
        ).hexdigest()
        out = ctypes.c_void_p()
        _lib.check(
            _lib.lib().splat_pattern_from_mask(
                bits.ctypes.data, bits.shape[0], bits.shape[1], ctypes.byref(out)
            )
        )
        return cls._wrap(out.value, source=None, digest=digest)

    @classmethod
    def from_npy(cls, path: Union[str, bytes, "os.PathLike[Any]"]) -> "Pattern":
        """An explicit mask from a 2-d ``.npy`` file of dtype bool, uint8 or int8 (its
        shape is the mask's: no seq to give). Read once; known by its rows, like the spec
        ``mask("path")``."""
        try:
            name = os.fsencode(path)
        except TypeError:
            raise invalid(f"path={path!r} must be a file name (str, bytes or os.PathLike)") from None
        if b"\0" in name:
            raise invalid(f"path={path!r} contains a NUL character")
        out = ctypes.c_void_p()
        _lib.check(_lib.lib().splat_pattern_from_npy(name, ctypes.byref(out)))
        obj = cls.__new__(cls)
        obj._handle = out.value
        L = _lib.lib()
        digest = obj._rows_digest(int(L.splat_pattern_seq_q(out.value)), int(L.splat_pattern_seq_k(out.value)))
        obj._adopt(out.value, source=None, digest=digest)
        return obj

    def _combine(self, other: "Pattern", op: str) -> "Pattern":
        if not isinstance(other, Pattern):
            return NotImplemented
        fn = _lib.lib().splat_pattern_union if op == "|" else _lib.lib().splat_pattern_intersect
        out = ctypes.c_void_p()
        _lib.check(fn(self._handle, other._handle, ctypes.byref(out)))
        if self._source is not None and other._source is not None:
            return Pattern._wrap(out.value, f"({self._source}) {op} ({other._source})", None)
        digest = hashlib.sha256(repr((op, self.key, other.key)).encode()).hexdigest()
        return Pattern._wrap(out.value, None, digest)

    def __or__(self, other: "Pattern") -> "Pattern":
        return self._combine(other, "|")

    def __and__(self, other: "Pattern") -> "Pattern":
        return self._combine(other, "&")

    def __del__(self) -> None:
        handle, self._handle = self._handle, None
        if handle and _lib is not None and _lib._lib is not None:
            _lib._lib.splat_pattern_destroy(handle)

    # -- queries

    @property
    def handle(self) -> int:
        """The C ``splat_pattern *`` (valid while this object lives)."""
        assert self._handle is not None
        return self._handle

    def row(self, i: int) -> np.ndarray:
        """The key columns query row ``i`` sees, increasing, as int64."""
        i = integer(i, "row")
        if not 0 <= i < self.seq_q:
            raise invalid(f"row={i} must be in 0..{self.seq_q - 1}")
        return self._row(i)

    def _row(self, i: int) -> np.ndarray:
        L = _lib.lib()
        count = ctypes.c_int64()
        _lib.check(L.splat_pattern_row(self._handle, i, None, 0, ctypes.byref(count)))
        cols = np.empty(count.value, dtype=np.int64)
        ptr = cols.ctypes.data_as(ctypes.POINTER(ctypes.c_int64))
        _lib.check(L.splat_pattern_row(self._handle, i, ptr, count.value, ctypes.byref(count)))
        return cols

    def to_dense(self) -> np.ndarray:
        """The mask as a [seq_q, seq_k] bool array (one library call per row)."""
        dense = np.zeros((self.seq_q, self.seq_k), dtype=bool)
        for i in range(self.seq_q):
            dense[i, self.row(i)] = True
        return dense

    def _analyze(self, tile_q: int, tile_k: int, max_segments: int) -> _lib.SplatReport:
        # C ints: ctypes would wrap 2**32 to 0 (the default) without a word.
        tile_q = c_integer(tile_q, "tile_q", 32)
        tile_k = c_integer(tile_k, "tile_k", 32)
        max_segments = c_integer(max_segments, "max_segments", 32)
        rep = _lib.SplatReport()
        _lib.check(
            _lib.lib().splat_analyze(self._handle, tile_q, tile_k, max_segments, ctypes.byref(rep))
        )
        return rep

    def report(self, tile_q: int = 0, tile_k: int = 0, max_segments: int = 0) -> Dict[str, Any]:
        """The analysis (ACSR segments, tile plan, metadata sizes) as a dict; the
        fields are those of ``splat_report`` (docs/format.md). 0 = the defaults."""
        out = self._analyze(tile_q, tile_k, max_segments).to_dict()
        out["spec"] = self.spec
        return out

    def report_text(
        self, tile_q: int = 0, tile_k: int = 0, max_segments: int = 0, as_json: bool = False
    ) -> str:
        """The analysis formatted by the library (what ``splat analyze`` prints)."""
        as_json = flag(as_json, "as_json")
        rep = self._analyze(tile_q, tile_k, max_segments)
        L = _lib.lib()
        need = ctypes.c_size_t()
        _lib.check(L.splat_report_format(ctypes.byref(rep), int(as_json), None, 0, ctypes.byref(need)))
        buf = ctypes.create_string_buffer(need.value + 1)
        _lib.check(L.splat_report_format(ctypes.byref(rep), int(as_json), buf, len(buf), None))
        return buf.value.decode("utf-8", "replace")

    @property
    def nnz(self) -> int:
        """Mask elements."""
        return int(self._analyze(0, 0, 0).nnz)

    @property
    def row_width(self) -> int:
        """W, the last dimension of ACSR values (``sddmm``'s output): the largest row
        nnz (at least 1), from 128 on rounded up to a multiple of 16: rows on 32-byte
        sectors (docs/format.md "Row width")."""
        if self._row_width is None:
            self._row_width = int(self._analyze(0, 0, 0).row_width)
        return self._row_width

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Pattern) and other.key == self.key

    def __hash__(self) -> int:
        return hash(self.key)

    def __repr__(self) -> str:
        shape = f"{self.seq_q}" if self.seq_q == self.seq_k else f"{self.seq_q}, seq_k={self.seq_k}"
        return f"splat.Pattern({self.spec!r}, {shape})"

"""dptrain for Python: ranks, collectives and sharded checkpoints.

A ctypes binding of libdptrain (include/dptrain/dptrain.h and ckpt.h, which
document every call) for programs started with ``srun --dp-train``::

    import torch, dptrain

    with dptrain.init() as ctx:                 # joins the step's coordinator
        ck = dptrain.Checkpoint(ctx)            # --dp-ckpt / --dp-train=RUN
        ck.register("model", params)            # replicated: every rank has it
        ck.register("adam.m", m, shape=[n], offset=[lo])   # this rank's slice
        info = ck.load()                        # newest committed step, or None
        for step in range(info.step + 1 if info else 0, steps):
            ...
            ctx.allreduce(grad, op="avg")       # in place
            if step % 100 == 0:
                ck.save(step)                   # returns after the snapshot
        ck.wait()

Tensors are ``torch.Tensor`` (CPU, or CUDA with the NCCL backend and for
device checkpoints) and ``numpy.ndarray``; they must be contiguous. The
library is the one at ``$DPTRAIN_LIBRARY`` (a path) when it is set, else
``libdptrain.so.0`` as the dynamic loader finds it (installed, or on
``LD_LIBRARY_PATH``). ``pip install`` of this package (worker/python)
installs these modules only, not the library.

Errors raise ``DptrainError``, whose ``name`` is the C code
(``"DPT_EPEERLOST"``) and ``restartable`` says whether ``Context.rejoin()``
and a repeat of the step can continue the job.
"""

import ctypes
import glob
import os
import sys
import weakref

__all__ = ["Checkpoint", "Contents", "Context", "DptrainError", "LoadInfo", "init",
           "permutation"]

# Element types and reduction operations: the values of include/dptrain/
# dptrain.h (part of the wire and file formats, never renumbered).
_DTYPES = {
    "float32": 0,
    "float64": 1,
    "bfloat16": 2,
    "float16": 3,
    "int32": 4,
    "int64": 5,
    "uint8": 6,
    "bool": 7,
    "int8": 8,
    "int16": 9,
    "uint16": 10,
    "uint32": 11,
    "uint64": 12,
    "complex64": 13,
    "complex128": 14,
}
_OPS = {"sum": 0, "avg": 1}
_LATEST = 2**64 - 1  # DPT_CKPT_LATEST
_ENOENT = -7  # DPT_ENOENT (include/dptrain/error.h)
_EMISMATCH = -25  # DPT_EMISMATCH
_ENOTSUP = -19  # DPT_ENOTSUP
_MAX_DIMS = 8  # DPT_CKPT_MAX_DIMS
_DUE_SAVE, _DUE_STOP = 0x1, 0x2  # DPT_CKPT_DUE_SAVE, DPT_CKPT_DUE_STOP


# The public structs, as ctypes Structures: each passes its size to the
# library's *_sized functions, which refuse a size they do not know.
# tests/python/layout.sh checks every field's offset and size against the
# C headers: a field added there must be added here, at the same place.
class _InitOpts(ctypes.Structure):
    _fields_ = [
        ("coordinator", ctypes.c_char_p),
        ("secret", ctypes.c_char_p),
        ("backend", ctypes.c_char_p),
        ("node", ctypes.c_int),
        ("local_rank", ctypes.c_int),
        ("task_id", ctypes.c_int),
        ("data_host", ctypes.c_char_p),
        ("connect_timeout_ms", ctypes.c_int),
        ("timeout_ms", ctypes.c_int),
        ("comm_timeout_ms", ctypes.c_int),
    ]


class _CkptOpts(ctypes.Structure):
    _fields_ = [
        ("uri", ctypes.c_char_p),
        ("run", ctypes.c_char_p),
        ("keep_last", ctypes.c_int),
        ("keep_every", ctypes.c_uint64),
        ("busy", ctypes.c_int),
        ("block_size", ctypes.c_size_t),
        ("part_size", ctypes.c_size_t),
        ("max_inflight", ctypes.c_int),
        ("buffered_io", ctypes.c_int),
        ("cuda_stream", ctypes.c_void_p),
    ]


class _CkptTensor(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("kind", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_uint64)),
        ("offset", ctypes.POINTER(ctypes.c_uint64)),
        ("count", ctypes.POINTER(ctypes.c_uint64)),
        ("data", ctypes.c_void_p),
        ("memory", ctypes.c_int),
    ]


class _CkptMeta(ctypes.Structure):
    _fields_ = [
        ("step", ctypes.c_uint64),
        ("sample_cursor", ctypes.c_uint64),
        ("rng", ctypes.c_void_p),
        ("rng_len", ctypes.c_size_t),
        ("user", ctypes.c_void_p),
        ("user_len", ctypes.c_size_t),
    ]


class _CkptInfo(ctypes.Structure):
    _fields_ = [
        ("step", ctypes.c_uint64),
        ("sample_cursor", ctypes.c_uint64),
        ("world_size", ctypes.c_uint32),
        ("rng", ctypes.c_void_p),
        ("rng_len", ctypes.c_size_t),
        ("user", ctypes.c_void_p),
        ("user_len", ctypes.c_size_t),
    ]


class _CkptEntry(ctypes.Structure):
    _fields_ = [
        ("name", ctypes.c_char_p),
        ("dtype", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("shape", ctypes.POINTER(ctypes.c_uint64)),
    ]


class _CkptContents(ctypes.Structure):
    _fields_ = [
        ("step", ctypes.c_uint64),
        ("sample_cursor", ctypes.c_uint64),
        ("world_size", ctypes.c_uint32),
        ("ntensors", ctypes.c_size_t),
        ("tensors", ctypes.POINTER(_CkptEntry)),
        ("rng", ctypes.c_void_p),
        ("rng_len", ctypes.c_size_t),
        ("user", ctypes.c_void_p),
        ("user_len", ctypes.c_size_t),
        ("stored_bytes", ctypes.c_uint64),
    ]


class _CkptStats(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_uint64)
        for name in (
            "saves",
            "loads",
            "bytes_written",
            "stall_ns",
            "bytes_needed",
            "bytes_read",
        )
    ]


# The library's soname: its major version is the ABI that the structures
# below describe (worker/local.mk, -version-info).
_SONAME = "libdptrain.so.0"


# The libraries that torch's nvidia wheels hold and libdptrain's CUDA
# build links: (the name in /proc/self/maps, the file names looked for
# under site-packages/nvidia/*/lib). The CUDA runtime first: NCCL needs it.
_WHEEL_LIBS = (
    ("/libcudart.so", ("libcudart.so.13", "libcudart.so.12")),
    ("/libnccl.so", ("libnccl.so.2",)),
)


def _torch_wheel_libs():
    """The CUDA runtime and NCCL of torch's nvidia wheels
    (site-packages/nvidia/*/lib: nvidia/cu13/lib, nvidia/nccl/lib, ...),
    each loaded globally when no library of its name is loaded yet, so
    that libdptrain's libcudart and libnccl are those. Loaded first by
    their sonames, the system's (libdptrain's RUNPATH, /usr/local/cuda)
    would be followed by torch's own, opened by their paths: two NCCLs,
    or two CUDA runtimes, in one process, each with its own globals.
    Returns the paths loaded."""
    try:
        with open("/proc/self/maps") as f:
            maps = f.read()
    except OSError:
        maps = ""
    loaded = []
    for mark, names in _WHEEL_LIBS:
        if mark in maps:
            continue  # torch or the program loaded one: that one it is
        found = None
        for d in sys.path:
            for lib in sorted(glob.glob(os.path.join(d or ".", "nvidia", "*", "lib", "*"))):
                if os.path.basename(lib) in names and os.path.isfile(lib):
                    found = lib
                    break
            if found:
                break
        if not found:
            continue
        try:
            ctypes.CDLL(found, mode=ctypes.RTLD_GLOBAL)
        except OSError:
            continue  # the dynamic loader then finds what it finds
        loaded.append(found)
    return loaded


def _load_library():
    path = os.environ.get("DPTRAIN_LIBRARY")
    _torch_wheel_libs()
    try:
        lib = ctypes.CDLL(path or _SONAME)
    except OSError as e:
        if path:
            how = ("fix or unset DPTRAIN_LIBRARY (then %s is looked for by "
                   "the dynamic loader)" % _SONAME)
        else:
            how = ("install libdptrain where the dynamic loader finds it "
                   "(ldconfig, or a directory on LD_LIBRARY_PATH), or set "
                   "DPTRAIN_LIBRARY to the path of %s" % _SONAME)
        raise ImportError("dptrain: cannot load %s (%s): %s"
                          % (path or _SONAME, e, how)) from None
    vp, ip, i, u64 = ctypes.c_void_p, ctypes.POINTER(ctypes.c_void_p), ctypes.c_int, ctypes.c_uint64
    sz, cs = ctypes.c_size_t, ctypes.c_char_p
    for name, res, args in (
        ("dpt_version", cs, []),
        ("dpt_strerror", cs, [i]),
        ("dpt_err_name", cs, [i]),
        ("dpt_last_error", cs, []),
        ("dpt_last_error_clear", None, []),
        ("dpt_init_opts_default_sized", i, [ctypes.POINTER(_InitOpts), sz]),
        ("dpt_init_sized", i, [ip, ctypes.POINTER(_InitOpts), sz]),
        ("dpt_rank", i, [vp]),
        ("dpt_world_size", i, [vp]),
        ("dpt_local_rank", i, [vp]),
        ("dpt_generation", ctypes.c_uint32, [vp]),
        ("dpt_backend", cs, [vp]),
        ("dpt_barrier", i, [vp]),
        ("dpt_should_stop", i, [vp, ctypes.POINTER(i)]),
        ("dpt_request_stop", None, [vp]),
        ("dpt_allreduce", i, [vp, vp, vp, sz, i, i]),
        ("dpt_broadcast", i, [vp, vp, sz, i, i]),
        ("dpt_allgather", i, [vp, vp, vp, sz, i]),
        ("dpt_rejoin", i, [vp]),
        ("dpt_finalize", i, [ip]),
        ("dpt_ckpt_opts_default_sized", i, [ctypes.POINTER(_CkptOpts), sz]),
        ("dpt_ckpt_new_sized", i, [ip, vp, ctypes.POINTER(_CkptOpts), sz]),
        ("dpt_ckpt_destroy", None, [ip]),
        ("dpt_ckpt_register_sized", i, [vp, ctypes.POINTER(_CkptTensor), sz]),
        ("dpt_ckpt_clear", i, [vp]),
        ("dpt_ckpt_prepare", i, [vp]),
        ("dpt_ckpt_save_sized", i, [vp, ctypes.POINTER(_CkptMeta), sz]),
        ("dpt_ckpt_wait", i, [vp]),
        ("dpt_ckpt_step_sized", i, [vp, ctypes.POINTER(_CkptMeta), sz,
                                    ctypes.POINTER(i), ctypes.POINTER(i)]),
        ("dpt_ckpt_load_sized", i, [vp, u64, ctypes.POINTER(_CkptInfo), sz]),
        ("dpt_ckpt_poll", i, [vp, u64, ctypes.POINTER(ctypes.c_uint)]),
        ("dpt_ckpt_inspect_sized", i, [vp, u64, ctypes.POINTER(_CkptContents), sz]),
        ("dpt_ckpt_stats_sized", i, [vp, ctypes.POINTER(_CkptStats), sz]),
        ("dpt_sampler_permutation", i, [u64, u64, u64, i, vp]),
    ):
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args
    # Added in libdptrain 0.2 (-version-info 2:0:2): an older library of
    # the same soname loads, and only these calls say it is too old.
    for name, res, args in (
        ("dpt_log", i, [vp, u64, sz, ctypes.POINTER(cs),
                        ctypes.POINTER(ctypes.c_double)]),
        ("dpt_set_total_steps", i, [vp, u64]),
        ("dpt_set_cuda_stream", i, [vp, vp]),
        ("dpt_ckpt_set_cuda_stream", i, [vp, vp]),
        # libdptrain 0.3 (-version-info 3:0:3):
        ("dpt_ckpt_step_error", i, [vp, ctypes.c_uint, i]),
        # libdptrain 0.4 (-version-info 4:0:4):
        ("dpt_set_global_batch", i, [vp, u64]),
    ):
        f = getattr(lib, name, None)
        if f is not None:
            f.restype = res
            f.argtypes = args
    return lib


_lib = _load_library()
__version__ = _lib.dpt_version().decode()


class DptrainError(RuntimeError):
    """A libdptrain call failed; ``code`` is the (negative) dpt_error and
    ``cause`` what the library logged about it (dpt_last_error(): "cannot
    create directory '/ckpt/run': Permission denied"), "" when nothing;
    the message ends with the cause."""

    def __init__(self, code, what, cause=None):
        self.code = code
        self.name = _lib.dpt_err_name(code).decode()
        self.restartable = self.name in ("DPT_EPEERLOST", "DPT_EGENERATION")
        if cause is None:  # the failed call's own message, used once
            cause = _lib.dpt_last_error().decode(errors="replace")
            _lib.dpt_last_error_clear()
        self.cause = cause
        super().__init__(
            "%s: %s (%s)%s" % (what, _lib.dpt_strerror(code).decode(), self.name,
                               ": " + cause if cause else "")
        )


def _size(struct):
    """The size of a ctypes copy of a public struct: the library checks it
    against its own (<dptrain/dptrain.h>, "the ABI"; tests/python/layout.sh
    compares the layouts field by field)."""
    return ctypes.sizeof(struct)


def _optional(name):
    f = getattr(_lib, name, None)
    if f is None:
        raise DptrainError(_ENOTSUP, name,
                           "this libdptrain %s predates %s: install the "
                           "library of this binding" % (__version__, name))
    return f


def _check(rc, what):
    if rc != 0:
        raise DptrainError(rc, what)
    # A call that succeeded may have logged errors it recovered from (a
    # damaged step before an older one loaded): they are not the cause
    # of a later failure.
    _lib.dpt_last_error_clear()


def permutation(seed, epoch, n, shuffle=True):
    """The sampler's order of the indices 0..N-1 in EPOCH for SEED, a list
    (dpt_sampler_permutation; doc/sampler.md defines it)."""
    out = (ctypes.c_uint64 * max(n, 1))()
    _check(_lib.dpt_sampler_permutation(seed, epoch, n, int(bool(shuffle)), out),
           "dptrain.permutation")
    return out[:n]


def _buffer(obj, what, writable=True):
    """(address, elements, dtype code, on a CUDA device) of a contiguous
    torch tensor or numpy array."""
    mod = type(obj).__module__.split(".")[0]
    if mod == "torch":
        # Only host and CUDA memory can be handed to the library: a meta,
        # XLA or MPS tensor's address, or a DTensor's, is not host memory.
        if obj.device.type not in ("cpu", "cuda"):
            raise TypeError("%s: the tensor is on device %r: only CPU and CUDA tensors "
                            "(move it with .to(\"cpu\"))" % (what, str(obj.device)))
        if type(obj).__torch_dispatch__ is not sys.modules["torch"].Tensor.__torch_dispatch__:
            raise TypeError("%s: a %s is not a tensor in this process's memory%s" % (
                what, type(obj).__name__, ": register its to_local() shard, with its global "
                "shape and offset" if type(obj).__name__ == "DTensor" else ""))
        if not obj.is_contiguous():
            raise ValueError("%s: the tensor is not contiguous (use .contiguous())" % what)
        name = str(obj.dtype).replace("torch.", "")
        ptr, n, cuda = obj.data_ptr(), obj.numel(), obj.is_cuda
    elif mod == "numpy":
        if not obj.flags["C_CONTIGUOUS"]:
            raise ValueError("%s: the array is not C-contiguous (use numpy.ascontiguousarray)" % what)
        if writable and not obj.flags["WRITEABLE"]:
            raise ValueError("%s: the array is read-only" % what)
        name = obj.dtype.name
        ptr, n, cuda = obj.ctypes.data, obj.size, False
    else:
        raise TypeError("%s: expected a torch.Tensor or numpy.ndarray, got %s" % (what, type(obj).__name__))
    if name not in _DTYPES:
        raise TypeError(
            "%s: dtype %s is not supported (%s)" % (what, name, ", ".join(_DTYPES))
        )
    return ptr, n, _DTYPES[name], cuda


def _shape(obj):
    return [int(d) for d in obj.shape]


def _follow_stream(owner, device, setter):
    """Hands torch's current CUDA stream of DEVICE (a cudaStream_t; torch's
    default stream is the legacy default stream, libdptrain's NULL) to
    libdptrain's SETTER for OWNER (a Context or a Checkpoint, whose
    _stream is the stream it was last given) when it changed."""
    stream = sys.modules["torch"].cuda.current_stream(device).cuda_stream or None
    if stream != owner._stream:
        _check(_optional(setter)(owner._handle(), stream), setter)
        owner._stream = stream


_getenv = ctypes.CDLL(None).getenv  # the C environment, not os.environ
_getenv.restype, _getenv.argtypes = ctypes.c_char_p, [ctypes.c_char_p]


def _drop_taken_secret():
    """dpt_init unsets the variable it took the step secret from
    (DPTRAIN_SECRET, or DPTRAIN_SECRET_FD whose descriptor it closed) in the
    C environment; os.environ is Python's own copy, made at start-up, which
    Python code reads (a forked DataLoader worker's too) and passes on as
    env=dict(os.environ, ...): drop it there too (doc/protocol.md, "The
    secret in the tasks")."""
    for name in ("DPTRAIN_SECRET", "DPTRAIN_SECRET_FD"):
        if name in os.environ and _getenv(name.encode()) is None:
            del os.environ[name]


_live = weakref.WeakSet()  # the contexts of this process not finalized


def _live_context():
    """A context of this process that is joined and not finalized, or None."""
    return next(iter(_live), None)


class Context:
    """A worker's membership in the job (dpt_init). The keyword arguments
    are those of struct dpt_init_opts; left out, they come from the
    environment that ``srun --dp-train`` sets up."""

    def __init__(self, coordinator=None, secret=None, backend=None, node=-1,
                 local_rank=-1, task_id=-1, data_host=None,
                 connect_timeout_ms=0, timeout_ms=0, comm_timeout_ms=0):
        opts = _InitOpts()
        _check(_lib.dpt_init_opts_default_sized(ctypes.byref(opts), _size(opts)),
               "dptrain.init")
        for field, value in (("coordinator", coordinator), ("secret", secret),
                             ("backend", backend), ("data_host", data_host)):
            if value is not None:
                setattr(opts, field, value.encode())
        opts.node, opts.local_rank, opts.task_id = node, local_rank, task_id
        opts.connect_timeout_ms = connect_timeout_ms
        opts.timeout_ms = timeout_ms
        opts.comm_timeout_ms = comm_timeout_ms
        self._ctx = ctypes.c_void_p()
        self._stream = None  # the stream libdptrain orders collectives after
        try:
            _check(_lib.dpt_init_sized(ctypes.byref(self._ctx), ctypes.byref(opts),
                                       _size(opts)),
                   "dptrain.init")
        finally:
            _drop_taken_secret()
        _live.add(self)

    def _follow_stream(self, *tensors):
        """Before a collective of CUDA TENSORS: NCCL starts it after the work
        queued on torch's current stream of their device (the step that
        computed them), whichever stream that is (dpt_set_cuda_stream)."""
        cuda = next((t for t in tensors if getattr(t, "is_cuda", False)), None)
        if cuda is not None:
            _follow_stream(self, cuda.device, "dpt_set_cuda_stream")

    def _handle(self):
        if not self._ctx:
            raise DptrainError(-1, "dptrain: the context is finalized", cause="")
        return self._ctx

    @property
    def rank(self):
        return _lib.dpt_rank(self._handle())

    @property
    def world_size(self):
        return _lib.dpt_world_size(self._handle())

    @property
    def local_rank(self):
        return _lib.dpt_local_rank(self._handle())

    @property
    def generation(self):
        return _lib.dpt_generation(self._handle())

    @property
    def backend(self):
        return _lib.dpt_backend(self._handle()).decode()

    def barrier(self):
        _check(_lib.dpt_barrier(self._handle()), "dptrain.barrier")

    def should_stop(self):
        """Collective: True on every rank once the job's end time is within
        the grace (srun --dp-grace): save a checkpoint, wait for it,
        finalize and exit 0; the job is requeued and resumes from it."""
        stop = ctypes.c_int(0)
        _check(_lib.dpt_should_stop(self._handle(), ctypes.byref(stop)),
               "dptrain.should_stop")
        return bool(stop.value)

    def request_stop(self):
        """Ask for the agreed stop (dpt_request_stop): this rank's next
        should_stop() or checkpoint step carries it, and every rank then
        stops at that same step, as at the walltime. Safe in a signal
        handler."""
        _lib.dpt_request_stop(self._handle())

    def allreduce(self, send, recv=None, op="sum"):
        """RECV (default: SEND, in place) = the sum or mean ("avg") of every
        rank's SEND. Returns RECV."""
        if op not in _OPS:
            raise ValueError("allreduce: op must be 'sum' or 'avg', not %r" % op)
        recv = send if recv is None else recv
        s, n, dt, _ = _buffer(send, "allreduce send", writable=False)
        r, m, dt2, _ = _buffer(recv, "allreduce recv")
        if (m, dt2) != (n, dt):
            raise ValueError("allreduce: send and recv differ in size or dtype")
        self._follow_stream(send, recv)
        _check(_lib.dpt_allreduce(self._handle(), s, r, n, dt, _OPS[op]),
               "dptrain.allreduce")
        return recv

    def broadcast(self, buf, root=0):
        """Copy ROOT's BUF into BUF on every rank. Returns BUF."""
        p, n, dt, _ = _buffer(buf, "broadcast")
        self._follow_stream(buf)
        _check(_lib.dpt_broadcast(self._handle(), p, n, dt, root),
               "dptrain.broadcast")
        return buf

    def allgather(self, send, recv):
        """RECV (world_size times SEND's elements) receives every rank's
        SEND at rank * SEND's elements. Returns RECV."""
        s, n, dt, _ = _buffer(send, "allgather send", writable=False)
        r, m, dt2, _ = _buffer(recv, "allgather recv")
        if dt2 != dt or m != n * self.world_size:
            raise ValueError(
                "allgather: recv must hold world_size (%d) x %d elements of "
                "the send dtype" % (self.world_size, n))
        self._follow_stream(send, recv)
        _check(_lib.dpt_allgather(self._handle(), s, r, n, dt),
               "dptrain.allgather")
        return recv

    def log(self, step, **scalars):
        """Record SCALARS (name=number: loss, samples_per_s, ...) of global
        STEP in the run's events, where ``dptrain plot`` and ``dptrain
        status`` read them (dpt_log). Rank 0's values are recorded, other
        ranks' are checked and ignored. Buffered: no round trip per call.
        A tensor must hold one element (``float()`` of it syncs a GPU)."""
        f = _optional("dpt_log")
        if not scalars:
            raise ValueError("log: name at least one value: log(step, loss=x)")
        if int(step) < 0:
            raise ValueError("log: the step is a global step, 0 or more, not %r" % step)
        names = (ctypes.c_char_p * len(scalars))(
            *(k.encode() for k in scalars))
        values = (ctypes.c_double * len(scalars))(
            *(float(v) for v in scalars.values()))
        _check(f(self._handle(), int(step), len(scalars), names, values),
               "dptrain.log(%s)" % ", ".join(scalars))

    def set_total_steps(self, total):
        """Declare that the run ends at global step TOTAL: ``dptrain
        status`` shows its progress (dpt_set_total_steps). Rank 0's call
        costs one round trip, once; a repeated value sends nothing."""
        _check(_optional("dpt_set_total_steps")(self._handle(), int(total)),
               "dptrain.set_total_steps")

    def set_global_batch(self, batch):
        """Declare that a global step takes BATCH samples in all: a job
        that changes size (srun --dp-shapes) never gets a world size that
        does not divide it (dpt_set_global_batch). Sent as
        set_total_steps is."""
        _check(_optional("dpt_set_global_batch")(self._handle(), int(batch)),
               "dptrain.set_global_batch")

    def rejoin(self):
        """After a restartable error: join the next generation (rank and
        world size may change)."""
        _check(_lib.dpt_rejoin(self._handle()), "dptrain.rejoin")

    def finalize(self):
        """Leave the job cleanly. Idempotent."""
        if self._ctx:
            _live.discard(self)
            rc = _lib.dpt_finalize(ctypes.byref(self._ctx))
            self._ctx = ctypes.c_void_p()
            _check(rc, "dptrain.finalize")

    close = finalize

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.finalize()

    def __del__(self):
        if getattr(self, "_ctx", None):
            _lib.dpt_finalize(ctypes.byref(self._ctx))


def init(**opts):
    """Join the job: ``Context(**opts)``."""
    return Context(**opts)


class LoadInfo:
    """What Checkpoint.load() found: the step, the global sample cursor,
    the world size it was written with, and the rng and user bytes."""

    def __init__(self, info):
        self.step = info.step
        self.sample_cursor = info.sample_cursor
        self.world_size = info.world_size
        self.rng = ctypes.string_at(info.rng, info.rng_len) if info.rng else b""
        self.user = ctypes.string_at(info.user, info.user_len) if info.user else b""

    def __repr__(self):
        return "LoadInfo(step=%d, sample_cursor=%d, world_size=%d)" % (
            self.step, self.sample_cursor, self.world_size)


class Contents:
    """What a committed step holds (Checkpoint.inspect): step,
    sample_cursor, world_size, rng and user bytes, ``tensors``: a dict of
    name -> (dtype name, shape list), in the manifest's order, and
    ``stored_bytes``: the bytes of the step's shard files as the storage
    reports them, which bound what the tensors can hold (the manifest may
    be another user's: allocate no more than this from its shapes)."""

    def __init__(self, c):
        names = {v: k for k, v in _DTYPES.items()}
        self.step = c.step
        self.sample_cursor = c.sample_cursor
        self.world_size = c.world_size
        self.tensors = {}
        for i in range(c.ntensors):
            e = c.tensors[i]
            self.tensors[e.name.decode()] = (
                names.get(e.dtype, "dtype %d" % e.dtype),
                [int(e.shape[d]) for d in range(e.ndim)])
        self.rng = ctypes.string_at(c.rng, c.rng_len) if c.rng else b""
        self.user = ctypes.string_at(c.user, c.user_len) if c.user else b""
        self.stored_bytes = c.stored_bytes

    def __repr__(self):
        return "Contents(step=%d, world_size=%d, %d tensors)" % (
            self.step, self.world_size, len(self.tensors))


class Checkpoint:
    """Sharded checkpoints of registered tensors (dpt_ckpt_*). Keyword
    arguments are those of struct dpt_ckpt_opts (uri and run default to
    the --dp-ckpt and --dp-train=RUN of srun); busy is "wait" or
    "refuse"; cuda_stream is an int (torch.cuda.current_stream().cuda_stream)
    that every save and load then uses; without it, the saves and loads of
    CUDA tensors follow torch's current stream of their device at each
    call (set_cuda_stream)."""

    def __init__(self, ctx=None, uri=None, run=None, keep_last=0,
                 keep_every=0, busy="wait", block_size=0, part_size=0,
                 max_inflight=0, buffered_io=None, cuda_stream=None):
        opts = _CkptOpts()
        _check(_lib.dpt_ckpt_opts_default_sized(ctypes.byref(opts), _size(opts)),
               "dptrain.Checkpoint")
        if uri is not None:
            opts.uri = uri.encode()
        if run is not None:
            opts.run = run.encode()
        if busy not in ("wait", "refuse"):
            raise ValueError("Checkpoint: busy must be 'wait' or 'refuse'")
        opts.busy = 0 if busy == "wait" else 1
        opts.keep_last, opts.keep_every = keep_last, keep_every
        opts.block_size, opts.part_size = block_size, part_size
        opts.max_inflight = max_inflight
        if buffered_io is not None:
            opts.buffered_io = int(bool(buffered_io))
        if cuda_stream is not None:
            opts.cuda_stream = cuda_stream
        self._fixed_stream = cuda_stream is not None
        self._stream = cuda_stream or None
        self._cuda = None  # the device of the registered CUDA tensors
        self._tensors = {}  # keeps the registered memory alive
        self.last_saved = None  # the step of the last save started
        self._ck = ctypes.c_void_p()
        _check(_lib.dpt_ckpt_new_sized(ctypes.byref(self._ck),
                                       ctx._handle() if ctx else None,
                                       ctypes.byref(opts), _size(opts)),
               "dptrain.Checkpoint")

    def _handle(self):
        if not self._ck:
            raise DptrainError(-1, "dptrain: the checkpoint is closed", cause="")
        return self._ck

    def register(self, name, tensor, shape=None, offset=None):
        """Register TENSOR under NAME. Without SHAPE it is replicated (every
        rank holds all of it). With SHAPE (the global shape) and OFFSET (where
        TENSOR's box starts in it; its extents are TENSOR's shape) it is
        sharded: each rank holds a disjoint box. CUDA tensors are
        registered as device memory."""
        ptr, _, dt, cuda = _buffer(tensor, "register %r" % name)
        local = _shape(tensor)
        t = _CkptTensor(name=name.encode(), dtype=dt, data=ptr, memory=int(cuda))
        arrays = []
        if shape is None:
            if offset is not None:
                raise ValueError("register %r: offset needs the global shape" % name)
            glob = local
        else:
            glob = [int(d) for d in shape]
            offset = [0] * len(glob) if offset is None else [int(o) for o in offset]
            if not (len(glob) == len(offset) == len(local)):
                raise ValueError("register %r: shape, offset and the tensor "
                                 "need the same number of dimensions" % name)
            t.kind = 1
            for field, values in (("offset", offset), ("count", local)):
                arr = (ctypes.c_uint64 * len(values))(*values)
                arrays.append(arr)
                setattr(t, field, arr)
        if len(glob) > _MAX_DIMS:
            raise ValueError("register %r: at most %d dimensions" % (name, _MAX_DIMS))
        shp = (ctypes.c_uint64 * max(len(glob), 1))(*glob)
        t.ndim, t.shape = len(glob), shp
        _check(_lib.dpt_ckpt_register_sized(self._handle(), ctypes.byref(t), _size(t)),
               "register %r" % name)
        self._tensors[name] = tensor
        if cuda and self._cuda is None:
            self._cuda = tensor.device

    def set_cuda_stream(self, stream):
        """The CUDA stream (a torch.cuda.Stream or a cudaStream_t as an int;
        None: the legacy default stream) of the training that writes the
        registered CUDA tensors: saves copy them on it after its queued
        work, loads copy into them after it (dpt_ckpt_set_cuda_stream).
        From then on the checkpoint no longer follows torch's current
        stream by itself."""
        stream = getattr(stream, "cuda_stream", stream) or None
        _check(_optional("dpt_ckpt_set_cuda_stream")(self._handle(), stream),
               "dptrain.Checkpoint.set_cuda_stream")
        self._stream, self._fixed_stream = stream, True

    def _follow_stream(self):
        """Before a save or a load of CUDA tensors: torch's current stream
        of their device, unless a stream was named."""
        if self._cuda is not None and not self._fixed_stream:
            _follow_stream(self, self._cuda, "dpt_ckpt_set_cuda_stream")

    def clear(self):
        _check(_lib.dpt_ckpt_clear(self._handle()), "dptrain.Checkpoint.clear")
        self._tensors.clear()
        self._cuda = None

    def prepare(self):
        """Allocate (and map) the snapshot buffers now, not in the first save."""
        _check(_lib.dpt_ckpt_prepare(self._handle()), "dptrain.Checkpoint.prepare")

    @staticmethod
    def _meta(step, sample_cursor, rng, user):
        # The bytes objects must outlive the call: the caller keeps META,
        # whose _keep holds them.
        rng, user = bytes(rng), bytes(user)
        meta = _CkptMeta(step=step, sample_cursor=sample_cursor,
                         rng=ctypes.cast(ctypes.c_char_p(rng), ctypes.c_void_p),
                         rng_len=len(rng),
                         user=ctypes.cast(ctypes.c_char_p(user), ctypes.c_void_p),
                         user_len=len(user))
        meta._keep = (rng, user)
        return meta

    def save(self, step, sample_cursor=0, rng=b"", user=b""):
        """Snapshot the registered tensors as STEP and write them in the
        background; returns once the tensors may change again."""
        meta = self._meta(step, sample_cursor, rng, user)
        self._follow_stream()
        _check(_lib.dpt_ckpt_save_sized(self._handle(), ctypes.byref(meta), _size(meta)),
               "save of step %d" % step)
        self.last_saved = step

    def step(self, step, sample_cursor=0, rng=b"", user=b""):
        """The end of training step STEP, on every rank: saves it when a
        checkpoint is due (srun --dp-ckpt-every) or the job's end is near,
        and returns True when the program must stop (the step is then
        committed: close, finalize and exit; the job is requeued).
        last_saved is then STEP if it saved."""
        meta = self._meta(step, sample_cursor, rng, user)
        stop, saved = ctypes.c_int(0), ctypes.c_int(0)
        self._follow_stream()
        _check(_lib.dpt_ckpt_step_sized(self._handle(), ctypes.byref(meta), _size(meta),
                                        ctypes.byref(stop), ctypes.byref(saved)),
               "checkpoint step %d" % step)
        if saved.value:
            self.last_saved = step
        return bool(stop.value)

    def poll(self, step):
        """The decision half of step() (dpt_ckpt_poll): one vote, the
        commit of the save in flight, then (save, stop): whether STEP must
        be saved now and whether the program stops after waiting for it.
        A failed commit raises after the decision is known: the
        exception's ``due`` holds it."""
        due = ctypes.c_uint(0)
        rc = _lib.dpt_ckpt_poll(self._handle(), step, ctypes.byref(due))
        decision = (bool(due.value & _DUE_SAVE), bool(due.value & _DUE_STOP))
        if rc:
            err = DptrainError(rc, "checkpoint step %d" % step)
            err.due = decision
            raise err
        return decision

    def step_error(self, err, stop):
        """What step() makes of ERR, the DptrainError of a save that poll()
        said is due (STOP: poll's stop), for callers that save between
        poll() and save() themselves: the library's rule
        (dpt_ckpt_step_error). None when the failed save stays pending as
        failed (a periodic save whose snapshot failed: every rank gives it
        up at the next commit, rank 0 warns, training goes on); else ERR,
        the step's error (the save of a stop, a save that never started)."""
        due = _DUE_SAVE | (_DUE_STOP if stop else 0)
        rc = _optional("dpt_ckpt_step_error")(self._handle(), due, err.code)
        return err if rc else None

    def inspect(self, step=None):
        """What the newest committed step (at or below STEP) holds, from its
        manifest: a Contents, or None when the run has no committed step."""
        c = _CkptContents()
        rc = _lib.dpt_ckpt_inspect_sized(self._handle(), _LATEST if step is None else step,
                                         ctypes.byref(c), _size(c))
        if rc == _ENOENT:
            return None
        _check(rc, "inspect of %s" % ("the newest step" if step is None else "step %d" % step))
        return Contents(c)

    def wait(self):
        """Wait until the save in flight is committed (or failed)."""
        _check(_lib.dpt_ckpt_wait(self._handle()), "dptrain.Checkpoint.wait")

    def load(self, step=None):
        """Load STEP (default: the newest committed step) into the
        registered tensors, resharded for this world size; a damaged step
        falls back to the one before. Returns a LoadInfo, or None when the
        run has no committed step yet."""
        info = _CkptInfo()
        self._follow_stream()
        rc = _lib.dpt_ckpt_load_sized(self._handle(), _LATEST if step is None else step,
                                      ctypes.byref(info), _size(info))
        if rc == _ENOENT and step is None:  # nothing saved yet
            return None
        _check(rc, "load of %s" % ("the newest step" if step is None else "step %d" % step))
        return LoadInfo(info)

    def stats(self):
        s = _CkptStats()
        _check(_lib.dpt_ckpt_stats_sized(self._handle(), ctypes.byref(s), _size(s)),
               "dptrain.Checkpoint.stats")
        return {name: getattr(s, name) for name, _ in _CkptStats._fields_}

    def close(self):
        if self._ck:
            _lib.dpt_ckpt_destroy(ctypes.byref(self._ck))
            self._ck = ctypes.c_void_p()
            self._tensors.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        if getattr(self, "_ck", None):
            _lib.dpt_ckpt_destroy(ctypes.byref(self._ck))

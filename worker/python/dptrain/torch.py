"""dptrain for PyTorch: state-dict checkpoints, an elastic sampler,
preemption (doc/python.md has the whole API with an example)::

    import dptrain.torch as dpt

    sampler = dpt.ElasticSampler(dataset, global_batch_size=48, seed=7)
    loader = torch.utils.data.DataLoader(dataset, batch_sampler=sampler)
    ck = dpt.Checkpoint()
    state = {"model": model, "optim": optimizer, "sampler": sampler}
    step = ck.load(state) or 0
    ...
            if ck.step(step, state):
                break
    ck.finish(step, state)

Tensors of the state go into the sharded checkpoint format under their
dotted path; everything else into the manifest as JSON (never pickled).
"""

import base64
import ctypes
import json
import math
import os
import random
import signal
import struct
import sys
import threading
import types
import warnings
import weakref

try:
    import torch
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError(
        "dptrain.torch needs PyTorch (import torch failed: %s): install "
        "torch into this Python environment (pip install torch), or use "
        "the python3 of Debian's python3-torch" % e) from None

import dptrain
from dptrain import DptrainError
from dptrain._settings import ENV as _ENV

__all__ = ["Checkpoint", "CheckpointMismatch", "ElasticSampler", "init_process_group"]

_lib = dptrain._lib
_ECORRUPT = -16  # DPT_ECORRUPT (include/dptrain/error.h)
_DTYPE_NAMES = {
    torch.float32: "float32", torch.float64: "float64",
    torch.bfloat16: "bfloat16", torch.float16: "float16",
    torch.int32: "int32", torch.int64: "int64", torch.uint8: "uint8",
    torch.bool: "bool", torch.int8: "int8", torch.int16: "int16",
    torch.complex64: "complex64", torch.complex128: "complex128",
}
for _name in ("uint16", "uint32", "uint64"):  # torch >= 2.3
    if hasattr(torch, _name):
        _DTYPE_NAMES[getattr(torch, _name)] = _name
_TORCH_DTYPES = {v: k for k, v in _DTYPE_NAMES.items()}
# One-byte dtypes that libdptrain has no code for (torch >= 2.1): saved
# bit for bit as uint8, their name in the skeleton ({"r": [name, dtype]}).
_RAW_DTYPES = {getattr(torch, n): n for n in (
    "float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz",
    "float8_e8m0fnu", "float4_e2m1fn_x2") if hasattr(torch, n)}
_FORMAT = "dptrain.torch"
# Version 2 adds the skeleton's "r" entries; a step without them is
# written as version 1, which every dptrain.torch reads.
_FORMAT_VERSION = 2
_OMIT = object()  # a value of a state_dict that is rebuilt, not saved


class CheckpointMismatch(ValueError):
    """The committed step does not hold what the state holds; ``differences``
    lists one line per tensor."""

    def __init__(self, message, differences):
        super().__init__(message)
        self.differences = differences


def _where(path):
    return "state" + "".join("[%r]" % p for p in path)


def _dtype_name(dtype):
    return str(dtype).replace("torch.", "")


def _tensor_refusal(t):
    """Why T cannot be checkpointed, or None. Only memory on the host or a
    CUDA device can be handed to libdptrain: anything else (the meta
    device, XLA, MPS, a DTensor's shards) would be read as host memory."""
    if type(t).__torch_dispatch__ is not torch.Tensor.__torch_dispatch__:
        if type(t).__name__ == "DTensor":
            return ("a DTensor cannot be checkpointed by dptrain.torch: save its "
                    "full_tensor(), or its to_local() shard under a name of its own")
        return "a %s (a tensor subclass of its own dispatch) cannot be checkpointed" % (
            type(t).__name__)
    if t.device.type not in ("cpu", "cuda"):
        return ("a tensor on device %r cannot be checkpointed: only CPU and CUDA "
                "tensors (move it with .to(\"cpu\"))" % str(t.device))
    if t.layout != torch.strided:
        return "a %s tensor cannot be checkpointed (save .to_dense())" % (
            str(t.layout).replace("torch.", ""))
    if t.dtype not in _DTYPE_NAMES and t.dtype not in _RAW_DTYPES:
        return "dtype %s cannot be checkpointed" % _dtype_name(t.dtype)
    return None


def _uncompiled(obj):
    """The module that torch.compile wrapped in OBJ, else OBJ: its
    state_dict's names lack "_orig_mod.", so that a compiled and an
    uncompiled model save the same names and load each other's steps."""
    orig = getattr(obj, "_orig_mod", None)
    if isinstance(obj, torch.nn.Module) and isinstance(orig, torch.nn.Module) \
            and type(obj).__name__ == "OptimizedModule":
        return orig
    return obj


def _rebuilt(obj):
    """Whether OBJ, a value in an object's state_dict(), is code that the
    object rebuilds from its constructor's arguments, not state: the
    bound methods and weak references of torch 1.x's OneCycleLR and
    CyclicLR, a custom scale_fn. Left out of the checkpoint, the object's
    own stays when it loads."""
    return isinstance(obj, (types.FunctionType, types.MethodType, types.BuiltinFunctionType,
                            weakref.ref)) or (callable(obj) and type(obj).__module__ == "functools")


def _stateful(obj):
    return (not isinstance(obj, (dict, type)) and callable(getattr(obj, "state_dict", None))
            and callable(getattr(obj, "load_state_dict", None)))


class _Flat:
    """A state flattened: its tensors by dotted name, and its structure as
    JSON (the skeleton) with every tensor replaced by its name."""

    def __init__(self, state, step=None):
        if not isinstance(state, dict):
            raise TypeError("the state must be a dict, not %s" % type(state).__name__)
        self.tensors = {}
        self.raw = {}  # name -> the _RAW_DTYPES name of a tensor saved as uint8
        self.paths = {}
        self.modules = []  # dotted paths of nn.Module objects
        self.samplers = []
        self.roots = [str(k) for k in state]
        self.step = step
        self.skeleton = self._walk(state, [])

    def _tensor(self, obj, path):
        name = ".".join(str(p) for p in path)
        if name in self.tensors:
            raise ValueError("%s and %s have the same checkpoint name %r: "
                             "rename one of the keys" % (
                                 _where(self.paths[name]), _where(path), name))
        why = _tensor_refusal(obj)
        if why:
            raise TypeError("%s: %s" % (_where(path), why))
        if not obj.is_contiguous():
            raise ValueError("%s: the tensor is not contiguous (save "
                             ".contiguous() in its place)" % _where(path))
        self.paths[name] = list(path)
        if obj.dtype in _RAW_DTYPES:
            self.raw[name] = _RAW_DTYPES[obj.dtype]
            self.tensors[name] = obj.view(torch.uint8)
            return {"r": [name, self.raw[name]]}
        self.tensors[name] = obj
        return {"t": name}

    def _walk(self, obj, path, owned=False):
        """OBJ's skeleton; OWNED: OBJ is in an object's state_dict()."""
        if isinstance(obj, torch.Tensor):
            return self._tensor(obj, path)
        if _stateful(obj):
            obj = _uncompiled(obj)
            if isinstance(obj, torch.nn.Module):
                self.modules.append(".".join(str(p) for p in path))
            if isinstance(obj, ElasticSampler):
                self.samplers.append(obj)
                sd = obj.state_at(self.step) if self.step is not None else obj.state_dict()
            else:
                sd = obj.state_dict()
            return {"s": self._walk(sd, path, True)}
        if owned and _rebuilt(obj):
            return _OMIT
        if isinstance(obj, dict):
            items = []
            for k, v in obj.items():
                if isinstance(k, bool) or not isinstance(k, (str, int)):
                    raise TypeError("%s: key %r: only str and int keys can be "
                                    "checkpointed" % (_where(path), k))
                v = self._walk(v, path + [k], owned)
                if v is not _OMIT:
                    items.append([k, v])
            return {"d": items}
        if isinstance(obj, (list, tuple)):
            tag = "l" if isinstance(obj, list) else "u"
            return {tag: [self._walk(v, path + [i]) for i, v in enumerate(obj)]}
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return {"v": obj}
        if isinstance(obj, (bytes, bytearray)):
            return {"b": base64.b64encode(bytes(obj)).decode()}
        if type(obj).__module__ == "numpy":
            import numpy
            if isinstance(obj, numpy.ndarray):
                a = numpy.ascontiguousarray(obj)
                return {"n": [a.dtype.str, list(a.shape), base64.b64encode(a.tobytes()).decode()]}
            if isinstance(obj, numpy.generic):
                return {"v": obj.item()}
        if isinstance(obj, torch.dtype):
            return {"y": str(obj).replace("torch.", "")}
        raise TypeError("%s: a %s cannot be checkpointed: use tensors, numbers, "
                        "strings, bytes, lists, dicts, or an object with "
                        "state_dict()/load_state_dict()" % (_where(path), type(obj).__name__))


def _dtype_named(name):
    """torch's dtype NAME ("float32"), or ValueError: a checkpoint's
    skeleton names dtypes, and nothing else of torch may be reached from
    it."""
    dtype = getattr(torch, name, None) if isinstance(name, str) else None
    if not isinstance(dtype, torch.dtype):
        raise ValueError("the checkpoint names %r as a dtype: no torch dtype has that name "
                         "(a damaged manifest, or a newer torch's dtype)" % (name,))
    return dtype


def _build(sk, tensors):
    """The value that skeleton SK describes, with TENSORS (name -> tensor)."""
    (tag, val), = sk.items()
    if tag == "t":
        return tensors[val]
    if tag == "r":
        return tensors[val[0]].view(_dtype_named(val[1]))
    if tag == "s":
        return _build(val, tensors)
    if tag == "d":
        return {k: _build(v, tensors) for k, v in val}
    if tag == "l":
        return [_build(v, tensors) for v in val]
    if tag == "u":
        return tuple(_build(v, tensors) for v in val)
    if tag == "v":
        return val
    if tag == "b":
        return base64.b64decode(val)
    if tag == "n":
        import numpy
        dt, shape, data = val
        return numpy.frombuffer(base64.b64decode(data), dtype=numpy.dtype(dt)).reshape(shape).copy()
    if tag == "y":
        return _dtype_named(val)
    raise ValueError("unknown skeleton entry %r: a checkpoint of a newer dptrain?" % tag)


def _prune(sk, tensors):
    """Skeleton SK without the dict entries and list items whose tensors
    are not in TENSORS (a load that is not strict), or None if nothing is
    left of it."""
    (tag, val), = sk.items()
    if tag in ("t", "r"):
        return sk if (val if tag == "t" else val[0]) in tensors else None
    if tag == "s":
        inner = _prune(val, tensors)
        return None if inner is None else {"s": inner}
    if tag == "d":
        kept = [[k, p] for k, p in ((k, _prune(v, tensors)) for k, v in val) if p is not None]
        return {"d": kept}
    if tag in ("l", "u"):
        kept = [_prune(v, tensors) for v in val]
        return None if any(k is None for k in kept) else {tag: kept}
    return sk


def _restore(live, sk, tensors, path):
    """LIVE (a value of the user's state) updated from skeleton SK: objects
    with load_state_dict() load their state, dicts and lists are updated in
    place, tensors were filled in place. Returns the value to store."""
    (tag, val), = sk.items()
    if tag == "s":
        if not _stateful(live):
            raise TypeError("%s: the checkpoint holds an object's state_dict, the "
                            "state a %s" % (_where(path), type(live).__name__))
        _uncompiled(live).load_state_dict(_build(val, tensors))
        return live
    if tag == "d" and isinstance(live, dict):
        for k, v in val:
            live[k] = _restore(live.get(k), v, tensors, path + [k]) if k in live else _build(v, tensors)
        return live
    if tag == "l" and isinstance(live, list) and len(live) == len(val):
        for i, v in enumerate(val):
            live[i] = _restore(live[i], v, tensors, path + [i])
        return live
    if tag in ("t", "r") and isinstance(live, torch.Tensor):
        loaded = _build(sk, tensors)  # loaded in place: the same memory
        if loaded.data_ptr() != live.data_ptr() or loaded.device != live.device:
            live.copy_(loaded)
        return live
    return _build(sk, tensors)


def _raw_names(doc):
    """{tensor name: dtype} of the "r" entries of DOC's skeleton."""
    found = {}

    def walk(sk):
        (tag, val), = sk.items()
        if tag == "r":
            found[val[0]] = val[1]
        elif tag == "s":
            walk(val)
        elif tag == "d":
            for _, v in val:
                walk(v)
        elif tag in ("l", "u"):
            for v in val:
                walk(v)
    if doc:
        walk(doc["state"])
    return found


def _rng_states():
    states = {"python": _pyrandom_state(), "torch": torch.get_rng_state().numpy().tobytes(),
              "torch_version": torch.__version__}
    np = sys.modules.get("numpy")
    if np is not None:
        name, keys, pos, has_gauss, gauss = np.random.get_state()
        states["numpy"] = [name, keys.tobytes(), int(keys.dtype.itemsize), pos, has_gauss, gauss]
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = [s.numpy().tobytes() for s in torch.cuda.get_rng_state_all()]
    return _Flat({"rng": states}).skeleton


def _pyrandom_state():
    version, internal, gauss = random.getstate()
    return [version, struct.pack("<%dQ" % len(internal), *internal), gauss]


def _set_generators(what, setter, states, saved_by):
    """SETTER(STATES), torch's generators' byte states. A state that this
    torch refuses (another version's layout: the CUDA generators' changed
    across releases) is a warning, not an error: the training goes on from
    the checkpoint with fresh random numbers there, which is what a resume
    without the RNG in the checkpoint would do."""
    try:
        setter(states)
    except (RuntimeError, ValueError, TypeError) as e:
        warnings.warn("dptrain: the checkpoint's %s random state (torch %s) cannot be "
                      "restored by torch %s (%s): that generator goes on from "
                      "its present state" % (what, saved_by, torch.__version__,
                                             str(e).splitlines()[0] if str(e) else type(e).__name__),
                      RuntimeWarning, stacklevel=4)


def _byte_tensor(b):
    return torch.frombuffer(bytearray(b), dtype=torch.uint8) if b else torch.empty(0, dtype=torch.uint8)


def _set_rng_states(sk):
    states = _build(sk, {})["rng"]
    version, internal, gauss = states["python"]
    random.setstate((version, struct.unpack("<%dQ" % (len(internal) // 8), internal), gauss))
    saved_by = states.get("torch_version", "version not recorded")
    _set_generators("CPU", torch.set_rng_state, _byte_tensor(states["torch"]), saved_by)
    np = sys.modules.get("numpy")
    if np is not None and "numpy" in states:
        name, keys, itemsize, pos, has_gauss, gauss = states["numpy"]
        np.random.set_state((name, np.frombuffer(keys, dtype="u%d" % itemsize), pos, has_gauss, gauss))
    if "cuda" in states and torch.cuda.is_available():
        saved = states["cuda"]
        if len(saved) == torch.cuda.device_count():
            _set_generators("CUDA", _set_cuda_rng, [_byte_tensor(s) for s in saved], saved_by)


def _set_cuda_rng(states):
    # Checked here: torch defers set_rng_state until CUDA is initialised,
    # where a state of another layout would fail in the user's code.
    for i, s in enumerate(states):
        have = torch.cuda.get_rng_state(i).numel()
        if s.numel() != have:
            raise ValueError("device %d: a state of %d bytes, this torch's has %d" % (
                i, s.numel(), have))
    torch.cuda.set_rng_state_all(states)


def _shape_text(shape):
    return "[%s]" % ", ".join(str(d) for d in shape)


_early = None  # the context joined before torch's rendezvous, for a Checkpoint


def _check_tasks():
    """Before torch's rendezvous, which every task of the step must reach
    (doc/python.md, "A task lost before the start"): this process's
    context, joined now (with the CPU backend, as a Checkpoint joins)
    unless it holds one, and RuntimeError where tasks of the step exited
    before they joined. The next Checkpoint made without a context takes
    the one joined here."""
    global _early
    ctx = dptrain._live_context()
    if ctx is None:
        ctx = _early = dptrain.init(backend="cpu")
    tasks = int(os.environ.get("WORLD_SIZE", ctx.world_size))
    if ctx.world_size < tasks:
        raise RuntimeError(
            "dptrain: %d of the step's %d tasks joined: the others exited before they "
            "joined (the coordinator's warnings say which, and their exit status); "
            "torch's rendezvous needs every task" % (ctx.world_size, tasks))
    return ctx


def init_process_group(backend=None, **kwargs):
    """torch.distributed.init_process_group(BACKEND, init_method="env://",
    **KWARGS), after joining the step's coordinator: RuntimeError at once
    where tasks of the step exited before they joined, where torch would
    wait for them until its timeout. The next Checkpoint made without a
    context takes the one joined."""
    _check_tasks()
    torch.distributed.init_process_group(backend, init_method="env://", **kwargs)


def _own_context():
    """The context a Checkpoint made without one owns: the one joined
    before torch's rendezvous, else a new one."""
    global _early
    ctx, _early = _early, None
    if ctx is not None and ctx._ctx:
        return ctx
    return dptrain.init(backend="cpu")


class Checkpoint:
    """Checkpoints of a training state (doc/python.md): ``save``, ``step``,
    ``load``, ``wait``, ``close``; every call collective. Without CTX it
    takes the context joined before torch's rendezvous (init_process_group,
    DptrainEnvironment), else joins the step's coordinator with the CPU
    backend, next to torch.distributed's process group; it closes that
    context. The other keywords are those of dptrain.Checkpoint. SIGNALS ask for the agreed stop (preemption,
    ``scancel --signal``); RNG saves rank 0's random states and restores
    them on every rank."""

    def __init__(self, ctx=None, uri=None, run=None, *,
                 signals=(signal.SIGUSR1, signal.SIGTERM), rng=True, **opts):
        self._own_ctx = ctx is None
        self._ctx = _own_context() if ctx is None else ctx
        self._rng = rng
        self._layout = None  # what is registered: (name, address, shape, dtype, device)
        self._staging = {}  # name -> pinned host copy of a CUDA tensor
        self._device_ok = True  # registering device memory works in this build
        self._loaded = None  # the committed step load() restored
        self._signals = {}
        self._stopped = False
        self.stop_signal = None
        self._total_steps = None
        self._global_batch = None
        root = uri or os.environ.get(_ENV["CKPT_URI"], "")
        name = os.environ.get(_ENV["RUN"], "") if run is None else run
        self._where = "'%s'" % "/".join(p for p in (root.rstrip("/"), name) if p)
        try:
            self._ck = dptrain.Checkpoint(self._ctx, uri=uri, run=run, **opts)
        except BaseException:
            if self._own_ctx:
                self._ctx.finalize()
            raise
        if signals and threading.current_thread() is threading.main_thread():
            for sig in signals:
                self._signals[sig] = signal.signal(sig, self._on_signal)

    @property
    def rank(self):
        return self._ctx.rank

    @property
    def world_size(self):
        return self._ctx.world_size

    @property
    def last_saved(self):
        """The step of the last save started, else the committed step that
        load() restored (the state is that step's), else None."""
        if self._ck.last_saved is not None:
            return self._ck.last_saved
        return self._loaded

    def log(self, step, **scalars):
        """Record SCALARS of global STEP in the run's events (doc/python.md,
        "Logging and progress"): ``ck.log(step, loss=loss,
        samples_per_s=n)``. Numbers, or tensors of one element. Every rank
        may call it; rank 0's values are recorded. Buffered in the library:
        no round trip per call."""
        self._ctx.log(step, **scalars)

    @property
    def total_steps(self):
        """The run's total steps as declared here (None: not declared):
        ``ck.total_steps = N`` lets ``dptrain status`` show the progress."""
        return self._total_steps

    @total_steps.setter
    def total_steps(self, n):
        self._ctx.set_total_steps(n)
        self._total_steps = int(n)

    @property
    def global_batch(self):
        """The samples of one global step as declared here (None: not
        declared): a job that changes size (srun --dp-shapes) never gets
        a world size that does not divide it. load() declares an
        ElasticSampler's of its state by itself."""
        return self._global_batch

    @global_batch.setter
    def global_batch(self, n):
        self._ctx.set_global_batch(n)
        self._global_batch = int(n)

    @property
    def restart_count(self):
        """Slurm's restart count of the job: 0 on its first run."""
        return int(os.environ.get("SLURM_RESTART_COUNT") or 0)

    def _on_signal(self, signo, frame):
        # Runs in the main thread between two bytecodes: the C call only
        # sets a flag, which this rank's next vote carries.
        self.stop_signal = signal.Signals(signo).name
        if self._stopped or not self._ctx._ctx:
            return
        self._ctx.request_stop()
        os.write(2, ("dptrain: rank %d: %s: stopping at the next step with a "
                     "checkpoint\n" % (self.rank, self.stop_signal)).encode())

    # -------------------------------------------------------------- save

    def _register_all(self, tensors):
        """Register the (name, tensor) pairs afresh, after the save in
        flight (which reads the registered memory). False when a libdptrain
        without CUDA refused a device tensor: device tensors go through host
        copies from then on, and the caller starts over."""
        self._ck.wait()
        self._ck.clear()
        self._layout = None
        for name, t in tensors:
            try:
                self._ck.register(name, t)
            except DptrainError as e:
                if not (t.is_cuda and e.name == "DPT_ENOTSUP"):
                    raise
                self._device_ok = False
                self._ck.clear()
                return False
        return True

    def _register(self, flat):
        """Registers FLAT's tensors when they are not what is registered;
        CUDA tensors are copied into their staging buffers first."""
        layout, regs = [], []
        for name, t in flat.tensors.items():
            device = t.is_cuda and self._device_ok
            if t.is_cuda and not device:
                host = self._staging.get(name)
                if host is None or host.shape != t.shape or host.dtype != t.dtype:
                    host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                    self._staging[name] = host
                host.copy_(t)
                t = host
            regs.append((name, t))
            layout.append((name, t.data_ptr(), tuple(t.shape), t.dtype, t.device))
        layout = tuple(layout)
        if layout == self._layout:
            return
        if not self._register_all(regs):
            return self._register(flat)
        self._layout = layout

    def _meta(self, flat):
        cursor = 0
        if flat.samplers:
            cursor = flat.samplers[0].state_at(flat.step)["sample_cursor"]
        if self.rank != 0:  # only rank 0's blob is kept
            return cursor, b""
        doc = {"format": _FORMAT, "version": 2 if flat.raw else 1, "state": flat.skeleton}
        if self._rng:
            doc["rng"] = _rng_states()
        return cursor, json.dumps(doc, separators=(",", ":")).encode()

    def save(self, step, state):
        """Snapshots STATE as STEP (the tensors are copied before it returns)
        and writes it in the background; commits the save before it. The
        step load() restored, with no save since, is committed already:
        nothing to do (a run resumed at its last step saves nothing)."""
        if self._ck.last_saved is None and step == self._loaded:
            return
        flat = _Flat(state, step)
        self._register(flat)
        cursor, user = self._meta(flat)
        self._ck.save(step, sample_cursor=cursor, user=user)

    def step(self, step, state):
        """The end of global step STEP, on every rank: saves STATE when a
        save is due (--dp-ckpt-every, the walltime, a stop request) and
        returns True at the stop, once the save is committed. A periodic
        save that fails (a full disk) is given up by every rank with a
        warning from rank 0, and training goes on: the next due save
        tries again. A save at the stop that fails raises."""
        try:
            save, stop = self._ck.poll(step)
            err = None
        except DptrainError as e:
            if not hasattr(e, "due"):
                raise
            (save, stop), err = e.due, e
        if save:
            try:
                self.save(step, state)
            except DptrainError as e:
                # The library's rule, dpt_ckpt_step's: a periodic save
                # whose snapshot failed stays pending as failed, and every
                # rank gives it up at the next commit, which says so;
                # training goes on. The save of a stop must succeed.
                err = err or self._ck.step_error(e, stop)
        if stop:
            self._stopped = True
            try:
                self._ck.wait()
            except DptrainError as e:
                err = err or e
        if err:
            raise err
        return stop

    def wait(self):
        """Waits until the save in flight is committed."""
        self._ck.wait()

    def finish(self, step, state):
        """The end of the run, on every rank: saves STATE as STEP unless
        that step is saved already or is the one load() restored
        (last_saved), and waits until it is committed."""
        if self.last_saved != step:
            self.save(step, state)
        self._ck.wait()

    # -------------------------------------------------------------- load

    def inspect(self, step=None):
        """What the newest committed step (at or below STEP) holds, from its
        manifest (dptrain.Contents: step, world_size, tensors by name with
        their dtype and shape), or None when the run has none."""
        return self._ck.inspect(step)

    def _differences(self, contents, live, strict, raw):
        """The lines of what differs, and the stored tensors left out (not
        strict: those the state neither holds nor can create). RAW: the
        stored dtypes of the tensors saved as uint8 (_RAW_DTYPES)."""
        diffs, skipped = [], set()
        for name, t in live.tensors.items():
            if name not in contents.tensors:
                if strict:
                    diffs.append("  %s: in the state, not in the checkpoint" % name)
                continue
            dt, shape = contents.tensors[name]
            dt = raw.get(name, dt)
            want_dt, want = live.raw.get(name) or _DTYPE_NAMES[t.dtype], list(t.shape)
            if dt != want_dt:
                diffs.append("  %s: stored dtype %s, expected %s" % (name, dt, want_dt))
            if shape != want:
                diffs.append("  %s: stored shape %s, expected %s" % (
                    name, _shape_text(shape), _shape_text(want)))
        for name in contents.tensors:
            if name in live.tensors:
                continue
            # Only objects that build their state lazily (an optimizer's
            # per-parameter state) may lack what the checkpoint holds; a
            # module's tensors are fixed by its structure.
            dt = raw.get(name, contents.tensors[name][0])
            if dt not in _TORCH_DTYPES and not hasattr(torch, dt):
                why = "stored as %s, which torch %s lacks" % (dt, torch.__version__)
            elif name.split(".")[0] not in live.roots or any(
                    name.startswith(m + ".") for m in live.modules):
                why = "in the checkpoint, not in the state"
            else:
                continue
            if strict:
                diffs.append("  %s: %s" % (name, why))
            else:
                skipped.add(name)
        return diffs, skipped

    def load(self, state, step=None, strict=True):
        """Loads the newest committed step (at or below STEP) into STATE in
        place, resharded for this world size. Returns the step, or None
        when the run has none. An ElasticSampler in STATE declares its
        global batch (global_batch), unless one is declared already. Raises CheckpointMismatch when the step
        does not hold what STATE holds; not STRICT, tensors on one side only
        are left alone (as torch's load_state_dict(strict=False)), a dtype
        or shape that differs is still an error."""
        live = _Flat(state)
        if live.samplers and self._global_batch is None:
            self.global_batch = live.samplers[0].global_batch_size
        contents = self.inspect(step)
        if contents is None:
            return None
        doc = self._document(contents.user, contents.step)  # refuses a newer format
        diffs, skipped = self._differences(contents, live, strict, _raw_names(doc))
        if diffs:
            raise CheckpointMismatch(
                "dptrain: step %d of %s does not match the state (%d difference%s; "
                "was the run name used for another model?):\n%s" % (
                    contents.step, self._where, len(diffs), "" if len(diffs) == 1 else "s",
                    "\n".join(diffs)), diffs)
        # Where each stored tensor is loaded: the state's own tensor, in
        # place (a module's state_dict() shares its parameters' memory), or
        # a new one for state created lazily.
        self._check_stored(contents, [(name, dt, shape) for name, (dt, shape)
                                      in contents.tensors.items()
                                      if name not in skipped and name not in live.tensors])
        dest, copy_back = {}, []
        for name, (dt, shape) in contents.tensors.items():
            if name in skipped:
                continue
            t = live.tensors.get(name)
            if t is None:
                t = torch.empty(shape, dtype=_TORCH_DTYPES[dt])
            elif t.is_cuda and not self._device_ok:
                host = torch.empty(t.shape, dtype=t.dtype, pin_memory=True)
                copy_back.append((t, host))
                t = host
            dest[name] = t
        if not self._register_all(dest.items()):
            return self.load(state, step, strict)
        info = self._ck.load(contents.step)
        for t, host in copy_back:
            t.copy_(host)
        for name, t in list(dest.items()):
            src = live.tensors.get(name)
            if src is not None and src.is_cuda and not t.is_cuda:
                dest[name] = src
        self._ck.clear()  # the next save registers the state's tensors
        # The structure of the step loaded: an older one than inspected
        # when the newest turned out damaged.
        doc = self._document(info.user, info.step)
        skeleton = _prune(doc["state"], dest) if doc else live.skeleton
        _restore(state, skeleton, dest, [])
        if doc and self._rng and "rng" in doc:
            _set_rng_states(doc["rng"])
        for s in _Flat(state).samplers:
            if doc is None:  # written by a C program: the manifest's cursor
                s._total = info.sample_cursor
            s._anchor = (info.step, s._total)
        self._loaded = info.step
        return info.step

    def _check_stored(self, contents, new):
        """Raises DptrainError (DPT_ECORRUPT) unless the tensors NEW (name,
        dtype name, shape) that load() creates fit in the bytes that the
        step's shard files hold as the storage reports their sizes. Their
        shapes come from a manifest that another user may have written (a
        shared checkpoint root): an absurd one must not decide what this
        process allocates. Twice the stored bytes and 64 MiB more are
        allowed: a step that lost a shard or some of its bytes still goes to
        the C load, which falls back to the step before and quarantines it."""
        need, largest = 0, None
        for name, dt, shape in new:
            n = math.prod(shape) * torch.empty(0, dtype=_TORCH_DTYPES[dt]).element_size()
            need += n
            if largest is None or n > largest[0]:
                largest = (n, name, dt, shape)
        if need <= 2 * contents.stored_bytes + (64 << 20):
            return
        raise DptrainError(
            _ECORRUPT, "load of step %d of %s" % (contents.step, self._where),
            "its manifest describes %d bytes of tensors to create (the largest '%s', "
            "%s %s), far more than the %d bytes its shard files hold: the manifest is "
            "damaged or not dptrain's, and nothing was allocated for it; load(state, "
            "step=%d) loads the step before" % (
                need, largest[1], largest[2], _shape_text(largest[3]),
                contents.stored_bytes, contents.step - 1))

    def _document(self, user, step):
        """The JSON that save() put in the manifest, or None for a step
        written by another program (C: tensors only)."""
        try:
            doc = json.loads(user) if user[:1] == b"{" else None
        except ValueError:
            doc = None
        if not isinstance(doc, dict) or doc.get("format") != _FORMAT:
            return None
        if doc.get("version", 0) > _FORMAT_VERSION:
            raise ValueError("step %d of %s was written by a newer dptrain.torch "
                             "(format version %s): upgrade dptrain" % (
                                 step, self._where, doc["version"]))
        return doc

    # -------------------------------------------------------------- end

    def close(self):
        """Waits for the save in flight, leaves the coordinator if this
        object joined it, puts the signal handlers back. Idempotent."""
        # After a stop the process is on its way out, and the same signal
        # may still reach it (Slurm signals the nodes one by one): the
        # handlers stay, so that a late copy does not kill it mid-exit.
        if not self._stopped:
            for sig, prev in self._signals.items():
                signal.signal(sig, prev)
            self._signals = {}
        try:
            if self._ck._ck:
                self._ck.wait()
        finally:
            self._ck.close()
            if self._own_ctx:
                self._ctx.finalize()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class ElasticSampler:
    """A batch sampler whose global batches do not depend on the world size
    (doc/python.md, doc/sampler.md): one seeded permutation per epoch
    (the C sampler's, bit for bit); global step S takes its S-th block of
    GLOBAL_BATCH_SIZE indices, rank r of W the r-th contiguous share; the
    last incomplete global batch of an epoch is dropped."""

    def __init__(self, dataset_or_len, global_batch_size, seed=0, shuffle=True,
                 rank=None, world_size=None):
        n = dataset_or_len if isinstance(dataset_or_len, int) else len(dataset_or_len)
        if isinstance(global_batch_size, bool) or not isinstance(global_batch_size, int) \
                or global_batch_size < 1:
            raise ValueError("ElasticSampler: global_batch_size must be a positive "
                             "int, not %r" % (global_batch_size,))
        if n < global_batch_size:
            raise ValueError("ElasticSampler: the dataset has %d samples, fewer than "
                             "one global batch of %d" % (n, global_batch_size))
        if not isinstance(seed, int) or not 0 <= seed < 2**64:
            raise ValueError("ElasticSampler: seed must be an int in [0, 2**64)")
        self.dataset_len = n
        self.global_batch_size = global_batch_size
        self.seed = seed
        self.shuffle = bool(shuffle)
        self._rank, self._world = rank, world_size
        self._total = 0  # global samples consumed since epoch 0
        # Global batches a checkpoint step takes (gradient accumulation);
        # __len__ of the whole epoch rather than of what is left of it
        # (Lightning counts the batches of the epoch it resumes).
        self.batches_per_step = 1
        self.full_epoch_len = False
        self._anchor = (0, 0)  # (step, _total): the position at that step
        self._perm = (None, None)

    @property
    def steps_per_epoch(self):
        return self.dataset_len // self.global_batch_size

    def _per_epoch(self):
        return self.steps_per_epoch * self.global_batch_size

    @property
    def epoch(self):
        return self._total // self._per_epoch()

    def set_world(self, rank, world_size):
        """This rank's place (after a change of world size)."""
        self._rank, self._world = rank, world_size

    def set_epoch(self, epoch):
        """The current epoch changes nothing; another starts at its beginning."""
        if epoch != self.epoch:
            self._total = epoch * self._per_epoch()

    def _place(self):
        rank, world = self._rank, self._world
        if rank is None or world is None:
            dist = torch.distributed
            if dist.is_available() and dist.is_initialized():
                rank, world = dist.get_rank(), dist.get_world_size()
            else:
                rank = int(os.environ.get("RANK", 0))
                world = int(os.environ.get("WORLD_SIZE", 1))
        if self.global_batch_size % world:
            raise ValueError("ElasticSampler: the world size %d does not divide the "
                             "global batch size %d: choose a global batch that every "
                             "world size the job may run on divides" % (
                                 world, self.global_batch_size))
        return rank, world

    def permutation(self, epoch):
        """The epoch's order of the dataset's indices (a LongTensor)."""
        if self._perm[0] != epoch:
            out = torch.empty(self.dataset_len, dtype=torch.int64)
            rc = _lib.dpt_sampler_permutation(self.seed, epoch, self.dataset_len,
                                              int(self.shuffle), out.data_ptr())
            dptrain._check(rc, "dpt_sampler_permutation")
            self._perm = (epoch, out)
        return self._perm[1]

    def __len__(self):
        if self.full_epoch_len:
            return self.steps_per_epoch
        return self.steps_per_epoch - (self._total % self._per_epoch()) // self.global_batch_size

    def __iter__(self):
        # Each iterator keeps its own position: seek_step() places the next
        # one without moving an iterator still in use.
        rank, world = self._place()
        share = self.global_batch_size // world
        pos, per = self._total, self._per_epoch()
        epoch = pos // per
        perm = self.permutation(epoch)
        while pos // per == epoch:
            lo = pos % per + rank * share
            pos += self.global_batch_size
            self._total = pos
            yield perm[lo:lo + share].tolist()

    def seek_step(self, step):
        """The next iteration starts after global step STEP, counted from
        the step loaded (a DataLoader remade after batches were fetched
        ahead, and thrown away, must not skip them)."""
        self._total = self.state_at(step)["sample_cursor"]

    def _state(self, total):
        return {"seed": self.seed, "epoch": total // self._per_epoch(),
                "cursor": total % self._per_epoch(),
                "global_batch_size": self.global_batch_size,
                "dataset_len": self.dataset_len, "sample_cursor": total}

    def state_dict(self):
        """(seed, epoch, cursor) of the next batch iteration yields."""
        return self._state(self._total)

    def state_at(self, step):
        """The state after global step STEP, counted from the step it was
        loaded at (one global batch a step): what Checkpoint saves, right
        also when a DataLoader asked for batches ahead."""
        a_step, a_total = self._anchor
        taken = (step - a_step) * self.global_batch_size * self.batches_per_step
        return dict(self._state(a_total + taken), step=step)

    def load_state_dict(self, sd):
        for key, mine in (("global_batch_size", self.global_batch_size),
                          ("dataset_len", self.dataset_len)):
            if key in sd and sd[key] != mine:
                raise ValueError("ElasticSampler: the checkpoint's sampler has %s=%d, "
                                 "this one %d: the sample order cannot continue" % (
                                     key, sd[key], mine))
        self.seed = sd["seed"]
        self._total = sd["epoch"] * self._per_epoch() + sd["cursor"]
        if "step" in sd:
            self._anchor = (sd["step"], self._total)

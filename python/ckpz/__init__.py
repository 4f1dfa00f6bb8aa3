"""ckpz: compression of deep-learning checkpoints, from Python.

A drop-in for torch.save / torch.load; the swap is two lines::

    import ckpz
    ckpz.save(state, "ckpt.pt.ckpz")        # instead of torch.save(state, "ckpt.pt")
    ...
    state = ckpz.load("ckpt.pt.ckpz")       # instead of torch.load("ckpt.pt")

``ckpz.save`` takes torch.save's arguments and writes torch.save's archive, compressed
by libckpz, straight from the tensors' memory (no uncompressed copy is ever made);
``ckpz -d ckpt.pt.ckpz`` gives back ``ckpt.pt``, the bytes ``torch.save(state,
"ckpt.pt")`` writes on the running torch release, byte for byte (torch 2.x's layout
with its .data/serialization_id on torch 2.x, torch 1.13's on 1.13). ``background=True``
returns once the tensors are copied and writes while training goes on.

``ckpz.load`` takes torch.load's arguments (torch 2.x's: ``weights_only``, ``mmap``,
``map_location``, ``pickle_module``, ``**pickle_load_args``) and reads .ckpz files and
plain torch.save files. It decodes each tensor straight into its final memory, and it
is safe by default on every release, as ``torch.load(weights_only=True)`` is: the pickle
inside may only build tensors, containers, numbers, strings and what optimizer,
scheduler and RNG state is made of, plus what you allowed torch with
``torch.serialization.add_safe_globals``; anything else raises
``ckpz.UnsafeGlobalError`` naming it (``weights_only=False`` or ``trusted=True`` for files
you trust, ``safe_globals=[...]`` for one name). See doc/python.md.

Also here: ``compress_file`` / ``decompress_file`` (any file, like the CLI),
``save_arrays`` / ``load_arrays`` (NumPy arrays, as a compressed .npz), ``list`` and
``info`` (the tensor index of a .ckpz file), ``base_info`` (what a delta file needs),
``wait_saves`` (background saves in flight), and ``Error`` (what libckpz reports).
Submodules, imported on their own: ``ckpz.distributed`` (checkpoints sharded over
torch.distributed ranks; broadcast, verify, delta sync, send/recv) and ``ckpz.dcp``
(a storage plug-in for torch's distributed checkpoint); doc/distributed.md.
``ckpz.ddp``: a DDP communication hook sending gradients quantised to 8 or 4 bits, with
error feedback saved in the checkpoint (experimental); doc/gradients.md.
``ckpz.safetensors``: save_file / load_file / save / load as the safetensors package's,
for .safetensors.ckpz files (``ckpz -d`` restores the package's bytes); doc/python.md.

Delta checkpoints: ``save``, ``compress_file`` take ``base=`` (the previous checkpoint,
original or .ckpz) and write a file coded against it, like ``ckpz --base PREV``;
``load`` and ``decompress_file`` take the same base, or find it by the file name the
delta file recorded, in its directory (as ``ckpz -d`` does)::

    ckpz.save(state, "step200.pt.ckpz", base="step100.pt.ckpz")
    state = ckpz.load("step200.pt.ckpz")     # reads step100.pt.ckpz beside it

The package is pure Python over libckpz through ctypes. It looks for the library at,
in order: the path in the environment variable ``CKPZ_LIBRARY``; ``libckpz.so.1`` or
``libckpz.so`` in the package's own directory; the path recorded by ``make install``
(``ckpz/_install.py``); ``<prefix>/lib/libckpz.so.1`` for a package installed in
``<prefix>/lib/python3/dist-packages``; the repository's ``build/libckpz.so`` when run
from a checkout (``python/ckpz/../../build``); then the system's search path. A library
of another release, or none, is an ImportError saying which paths were tried.

Files are written to a temporary name in the destination's directory by the library
itself and renamed into place once complete and counted; on any error (Ctrl-C
included: long calls run on a helper thread, and Ctrl-C stops them cleanly and raises
KeyboardInterrupt) the temporary file is removed and an existing destination is left
untouched. An interrupt that comes too late to stop a save (its file already in place)
raises a KeyboardInterrupt saying so. What a killed process leaves
(.NAME.ckpz-PID-HOST-RANDOM.tmp, the library's pattern for every front end) the next save
to NAME removes. Files are read by name only when they are regular files
(a FIFO or a device is a ckpz.Error naming it), except that ``load`` reads a FIFO as a
stream.
"""

import pickle

from . import _archive, _bytes, _lib, _load, _numpy, _save, _stream, _torchzip
from ._archive import BaseInfo, Entry, Info, Lossy
from ._background import SaveHandle, wait_saves
from ._lib import Error
from ._unpickle import UnsafeGlobalError

__all__ = [
    "save",
    "load",
    "compress_file",
    "decompress_file",
    "compress",
    "decompress",
    "save_arrays",
    "load_arrays",
    "list",
    "info",
    "Lossy",
    "base_info",
    "Entry",
    "Info",
    "BaseInfo",
    "Error",
    "UnsafeGlobalError",
    "SaveHandle",
    "wait_saves",
    "library_version",
    "LEVEL_DEFAULT",
    "LEVEL_STORE",
]

__version__ = _lib.PACKAGE_VERSION
LEVEL_DEFAULT = _lib.LEVEL_DEFAULT
LEVEL_STORE = _lib.LEVEL_STORE


def library_version():
    """The loaded libckpz's version string, e.g. "0.4.0"."""
    return _lib.decode(_lib.version_string())


# ---- PyTorch ---------------------------------------------------------------------------


def save(obj, f, pickle_module=pickle, pickle_protocol=_torchzip.DEFAULT_PROTOCOL, _use_new_zipfile_serialization=True,
         _disable_byteorder_record=False, *, level=LEVEL_DEFAULT, threads=0, base=None, policy=None, max_mae=None,
         background=False, max_pending=1, target_bw=None, lossy=None):
    """Saves obj like ``torch.save(obj, f)``, compressed.

    The arguments before ``*`` are torch.save's: obj is anything torch.save accepts
    (state dicts with tensors of any dtype in nested containers, shared storages and
    views, step counters, RNG and scheduler state); f a path (written to a temporary
    name and renamed when complete) or a binary file object; pickle_module and
    pickle_protocol are used as torch.save uses them. _use_new_zipfile_serialization=False
    (torch's format from before 1.6) is refused; _disable_byteorder_record is used as
    torch.save of the running release uses it (torch 2.13's writer then puts the
    byteorder record after version; 1.13 has no such record or argument).

    What the file holds: torch.save's zip archive, compressed. ``ckpz -d`` restores it
    to the .pt that ``torch.save(obj, "NAME.pt")`` writes on the running torch release,
    byte for byte, where NAME.pt is the path without ".ckpz" (for a file object, the
    archive's folder is "archive", as torch.save to a buffer names it). On torch 2.x:
    data.pkl, .format_version, .storage_alignment, byteorder, the storages in the order
    the pickle first names them, version and .data/serialization_id, laid out with
    torch's storage_alignment and CRC-32 settings (torch.utils.serialization.config,
    torch.serialization.set_crc32_options) as they are when save is called; the id is a
    function of the record names and contents, not of the moment, so the restored file
    is torch.save's including it. On torch 1.13: data.pkl, the storages in sorted key
    order, version. Which records a release writes is learnt from its own torch.save
    (a probe of a few milliseconds, once per process); a release whose layout ckpz
    cannot reproduce gets 1.13's, which it reads, with a RuntimeWarning saying so. CUDA
    tensors are saved from CPU copies and keep their device tag: ``load`` puts them back
    on the GPU unless map_location says otherwise.

    Options: level 1..9 (default 3) or LEVEL_STORE (0: stored); threads (0 = all
    cores). Tensors are read where they lie, and chunks of many tensors are compressed in
    parallel while the file is written.

    background=True: returns a ckpz.SaveHandle as soon as the tensors have been copied
    to host memory (the snapshot: the only time the caller waits); compression and
    writing go on on a thread. ``handle.wait()`` returns or raises the save's error;
    ``handle.snapshot_bytes`` is the memory the copy holds. At most max_pending saves
    are in flight: a further save first waits for the oldest. Snapshot memory is reused
    by the next background save. The interpreter waits for a save in flight before it
    exits; a crash mid-save leaves the previous file intact (``ckpz.wait_saves()`` waits
    for all). Background saves need a path.

    base: the previous checkpoint file (what an earlier ``save`` wrote, or a torch.save
    ``.pt``), to write a delta file against it: tensors unchanged since then cost a few
    bytes, changed ones are coded against their previous values. A path or a bytes-like
    object with the previous checkpoint's original bytes (see compress_file). ``load``
    (and ``ckpz -d``) then need that base: they find it by its recorded file name in the
    same directory, or take it as base=.

    policy, max_mae, lossy: lossy coding (see compress_file); ``load`` then returns the
    restored approximations. With lossy="auto", the beta2 of each Adam optimizer state
    dict in obj (its param_groups' betas) is stated to auto: exp_avg_sq is rounded to
    nearest where beta2 <= 0.99, without bias otherwise (doc/lossy.md "auto"); the
    library reads the same from the pickle, so ``ckpz --lossy=auto`` on torch.save's file
    of obj codes it alike. Without base=, where the optimizers' param groups state one
    learning rate lr (a number or a one-element tensor), each weight is coded within one
    optimizer step of it (abs lr; K steps at "auto:K"), else within 1/128 of its value:
    the lr is stated to auto too ("* auto lr L"), as beta2 is.

    target_bw: the rate in MB/s of the link f goes through (a network file system, a
    pipe to another node): the levels (one per kind of tensor: Adam's moments,
    gradients, the rest) and the threads are chosen for it as the CLI's --target-bw
    chooses them, by measuring the levels on samples of the tensors (a tenth of a second
    or two; nothing for a save the link moves in under half a second). The choice
    replaces level; threads (when not 0) caps the threads it may take; a policy is kept
    (one level for the file then).

    Raises ckpz.Error (the library), OSError (files: "No space left on device", ...),
    pickling errors as torch.save would, KeyboardInterrupt when interrupted; in every
    case an existing file at f is left as it was. Except one: an interrupt that lands
    once the new file is in place (the save completed) still raises KeyboardInterrupt,
    whose message then says so ("ckpz: interrupted after the save completed: F was
    written"). A plain KeyboardInterrupt means f is untouched. The temporary file of a
    save killed outright (.NAME.ckpz-PID-HOST-RANDOM.tmp beside f) is removed by the next
    save to f, once its process is gone.
    """
    policy = _lib.lossy_policy(lossy, policy, obj)
    return _save.save(obj, f, pickle_module, pickle_protocol, _use_new_zipfile_serialization, level, threads, base,
                       policy, max_mae, background, max_pending, target_bw, no_byteorder=_disable_byteorder_record)


def load(f, map_location=None, pickle_module=None, *, weights_only=None, mmap=None, trusted=False,
         safe_globals=None, threads=0, base=None, **pickle_load_args):
    """Loads what ``save`` wrote (or a plain torch.save file), like ``torch.load(f, map_location)``.

    The arguments before ``*`` and weights_only, mmap and **pickle_load_args are
    torch.load's (torch 2.x); the rest are ckpz's. f: a path (a regular file, or a FIFO:
    read whole into memory first, waiting for its writer; anything else is a ckpz.Error
    naming it) or a binary file object. map_location as torch.load's (None: where each
    tensor was saved; a device, a string, a dict or a function). Every chunk's checksums
    are verified before its bytes are used; each tensor's storage is allocated once and
    decoded into in parallel (peak memory: the state itself plus a few chunks per
    thread).

    Safe by default, on every torch release, as ``torch.load(weights_only=True)`` (torch
    2.6's default) is: the pickle may only build tensors and storages, dicts, lists,
    tuples, sets, numbers, strings, bytes, None, OrderedDict, Counter, defaultdict,
    torch.Size, dtypes, devices, NumPy arrays and scalars, argparse.Namespace and the
    like: what model, optimizer, LR-scheduler, AMP and RNG state is made of, and what
    you allowed torch.load with ``torch.serialization.add_safe_globals`` or
    ``safe_globals(...)`` (torch >= 2.4). Anything else raises ckpz.UnsafeGlobalError
    naming the global, and nothing in the file runs. safe_globals=[...] allows more
    ("module.name" strings or the objects themselves); weights_only=False (or
    trusted=True) unpickles everything, as torch.load(weights_only=False) does: only for
    files you trust. weights_only=None and True are the safe default; the environment's
    TORCH_FORCE_WEIGHTS_ONLY_LOAD=1 makes every load safe, weights_only=False and
    trusted=True included, as it does torch.load's; TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD
    does not lift the default. pickle_module (torch.load's) needs weights_only=False
    (torch.load infers that from it; ckpz asks you to say so, else ValueError).
    pickle_load_args (encoding=..., "utf-8" unless given, as torch.load) go to the
    unpickler. Files in torch's format from before 1.6 load only with
    weights_only=False, through torch.load.

    mmap=True, as torch.load's: a plain torch.save file (f a path) is mapped, not read,
    and its tensors view the map (copy-on-write unless
    torch.serialization.set_default_mmap_options says MAP_SHARED); a .ckpz file's tensors
    are compressed, so mmap=True on one is a ValueError (as on a file object, a FIFO or
    torch's older format). mmap=None follows torch's default
    (torch.utils.serialization.config.load.mmap), where it applies.

    A delta file (``save(..., base=...)``) needs its base: base= names it (a path to the
    previous checkpoint, original or .ckpz, or its original bytes), or with base=None
    and f a path it is found by its recorded name beside the file, as decompress_file
    does. A missing or wrong base raises ckpz.Error (ERR_BASE) naming the size and
    CRC-32C of the base needed.

    A file from an untrusted source cannot hurt the process either: tensors are built
    only inside their storages, the pickle's state setting (BUILD) works only on plain
    instances it made, the objects it builds are capped at max(128 MiB, the pickle's
    size), nesting is bounded (doc/python.md, "The safe loader"). Every refusal is a
    ckpz.Error naming the file that is also a pickle.UnpicklingError.

    Raises ckpz.Error if the file is corrupt (naming the chunk and tensor) or refused,
    OSError if it cannot be read, KeyboardInterrupt when interrupted.
    """
    return _load.load(f, map_location, pickle_module, weights_only, mmap, trusted, safe_globals, threads, base,
                       pickle_load_args)


# ---- files -----------------------------------------------------------------------------


def compress_file(src, dst, level=LEVEL_DEFAULT, threads=0, base=None, policy=None, max_mae=None, lossy=None):
    """Compresses the file src into the .ckpz file dst, like ``ckpz -o dst src``.

    src and dst are paths (or binary file objects). The format (safetensors, .npy,
    torch.save archive, ...) is detected from the content; anything else is compressed
    as opaque bytes. level is 1..9 (default 3) or LEVEL_STORE (0: stored); threads
    counts the calling thread, 0 = all cores. Returns the number of bytes written. Raises ckpz.Error on failure and
    OSError for file errors; dst is written to a temporary name and renamed when done.
    KeyboardInterrupt when interrupted: dst is then as it was, unless the message says
    "interrupted after compress_file completed: DST was written" (too late to stop).

    base: the previous checkpoint, to write a delta file like ``ckpz --base PREV``:
    tensors unchanged since it cost almost nothing, changed ones are coded against it.
    Either a path (str or os.PathLike) to the original checkpoint or to its .ckpz, or a
    bytes-like object holding the previous checkpoint's original bytes (bytes is taken
    as content, never as a file name). A .ckpz base is restored in memory first; when it
    is itself a delta file, its own base is found as the CLI finds it: by the name it
    recorded, in the same directory (that name, or the name + ".ckpz"), and so on down
    the chain. The delta file records the base's file name (without directories; none
    for a bytes-like base), size and CRC-32C: restoring it needs the same bytes, and
    ``decompress_file`` / ``ckpz -d`` find it by that name beside the file. dst must not
    be the base file itself (ValueError: the file would depend on itself).

    policy: lossy coding, as ``ckpz --policy``: rules "PATTERN MODE [OPTIONS]", one per
    line, first match wins, e.g. ``"*.exp_avg_sq pointwise-rel 0.1\n* abs 1e-4"``
    (modes lossless, abs E, rel R, pointwise-rel R, int8, bits 8|16; options sym, asym,
    block N, per-channel, pct P, prune RATE, max-mae X; doc/lossy.md). Norms, biases,
    tensors of fewer than two dimensions and integer tensors stay lossless. The file
    then restores values within the stated errors, not the original bytes (``list``
    shows each tensor's errors). With base=, lossy tensors are coded around the base's
    values: pass the previous lossy file as the base (closed loop). max_mae: default
    for rules without their own max-mae.

    lossy="auto" (or "auto:K", K = "tight", "default", "aggressive" or a number, 1 =
    default; as ``ckpz --lossy=auto:K``): each tensor's bound from its role, found from
    its name, dtype and shape: weights, Adam's exp_avg and exp_avg_sq lossy, the rest
    exact (doc/lossy.md "auto"); K moves every bound together. With policy= too, the
    policy's rules come first and auto takes the tensors they leave. On a torch.save
    file, Adam's beta2 of each optimizer state tensor is read from its param group in
    the file's pickle, as ckpz.save reads it from the object (a rule's beta2 wins), and
    without base= the weights are coded within one step of the lr the groups state (a
    rule's "lr L" wins; safetensors and DCP files state none: give it so).
    """
    policy = _lib.lossy_policy(lossy, policy)
    return _stream.compress_file(src, dst, level, threads, base, policy, max_mae)


def decompress_file(src, dst, threads=0, base=None):
    """Restores the original of the .ckpz file src into dst, like ``ckpz -d``.

    Every chunk checksum and the whole content's checksum are verified. Returns the
    number of bytes written. Raises ckpz.Error (corrupt, truncated, not a ckpz file, ...)
    or OSError; dst is written to a temporary name and only renamed into place once
    everything has been verified. KeyboardInterrupt when interrupted: dst is then as it
    was, unless the message says "interrupted after decompress_file completed: DST was
    written" (too late to stop). src may be a FIFO (read as a stream; a delta file's
    base is then not looked for beside it: pass base=).

    A delta file (written with base=, or ``ckpz --base``) needs its base: pass it as
    base= (a path to the original checkpoint or to its .ckpz, itself possibly a delta
    file, or a bytes-like object with the base's original bytes; see compress_file), or,
    when src is a path, leave base=None and it is found like ``ckpz -d`` finds it: by the
    name recorded in src, in src's directory (that name or the name + ".ckpz"), a delta
    base restored through its own recorded base in turn. The base is checked by size and
    CRC-32C before use: a wrong or missing one raises ckpz.Error (code ERR_BASE, 15)
    whose message names the size and CRC-32C of the base the file needs.
    """
    return _stream.decompress_file(src, dst, threads, base)


# ---- NumPy -----------------------------------------------------------------------------


def compress(data, level=LEVEL_DEFAULT, threads=0, policy=None, max_mae=None, lossy=None):
    """The .ckpz file of the file held in data (bytes-like: a safetensors file,
    torch.save's bytes, ...), in memory: what ``compress_file`` writes for it, with the same
    options (no base=). Returns a bytes-like object (a ctypes array over the library's
    buffer, freed with it: no copy; ``bytes(...)`` copies it). Raises ckpz.Error."""
    return _bytes.compress(data, level, threads, _lib.lossy_policy(lossy, policy), max_mae)


def decompress(data, threads=0):
    """The original of the .ckpz file held in data (bytes-like), every checksum
    verified, as a bytes-like object (an anonymous mapping, ``bytes(...)`` copies it).
    A delta file needs its base: use decompress_file with base=. Raises ckpz.Error."""
    return _bytes.decompress(data, threads)


def save_arrays(path, *args, level=LEVEL_DEFAULT, threads=0, **arrays):
    """Saves NumPy arrays like ``numpy.savez(path, *args, **arrays)``, compressed.

    The file holds an uncompressed .npz (``ckpz -d`` restores it; numpy.load reads that);
    its arrays go through libckpz's tensor path. Positional arrays are named arr_0,
    arr_1, ... as numpy.savez names them. The keywords level and threads are options,
    not array names (pass such arrays as ``save_arrays(path, **{...})`` under other
    names, or positionally).
    """
    _numpy.save_arrays(path, args, level, threads, arrays)


def load_arrays(path, allow_pickle=False, threads=0):
    """Loads what ``save_arrays`` wrote: a dict of name -> numpy.ndarray (in memory, not
    lazy). A plain .npz file (not compressed by ckpz) is read too. allow_pickle is
    numpy.load's (object arrays); off by default."""
    return _numpy.load_arrays(path, allow_pickle, threads)


# ---- index -----------------------------------------------------------------------------


def info(path):
    """Summary of the .ckpz file at path (an Info). Checks the header, trailer and index."""
    return _archive.info(path)


def base_info(path):
    """A BaseInfo for the delta .ckpz file at path, or None for a stand-alone file.
    Checks the header, trailer and index; the base itself is not needed."""
    return _archive.base_info(path)


def list(path):  # noqa: A001 - the name matches `ckpz -l`
    """The index of the .ckpz file at path: a list of Entry, in file order (tensors with
    name, dtype such as "f32" or "bf16", shape; opaque runs with name "" and dtype
    "bytes"). Only the header, trailer and index are read."""
    return _archive.entries(path)

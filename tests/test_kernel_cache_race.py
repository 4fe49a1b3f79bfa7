"""Two processes saving numba cache entries of one function at once (two configurations of a spec
compiling its invariants for their own structured states, into one cache).

numba saves an entry in three steps: read the function's index, write it back with the new
entry, write the entry's compiled code under a file name the index gives. Two processes that
both read the index before either wrote it both take the file name ``.1.nbc``: the index left
names one process's signature and the file holds the other's code. A run then loaded code
compiled for another structured state and numba refused the call ("Cannot cast Record..."): exit 2,
the spec blamed for the cache's state. Each test builds that state, or that interleaving, here.
"""

from __future__ import annotations

import fcntl
import importlib.util
import os
import sys
import threading

import numba
import numpy as np
import pytest

from kraftcheck.checker import numba_cache
numba_cache.tolerate_damage()  # as importing kraftcheck's engine does

SPEC = "from numba import njit\n\n\n@njit(cache=True)\ndef reading_ok(s):\n    return s.reading == 0\n"
# two structured states: the field read at another offset, as two broker counts of the Kafka model
STATE = np.dtype([("reading", np.int32)])
WIDER = np.dtype([("log", np.int32, (3,)), ("reading", np.int32)])


def _import(directory) -> object:
    """The spec module, imported anew (a process of its own, as far as numba's cache is concerned)."""
    name = "kraftcheck_race_spec"
    sys.modules.pop(name, None)
    spec = importlib.util.spec_from_file_location(name, directory / "race_spec.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _key(dispatcher, dtype) -> tuple:
    """numba's index key of ``dispatcher``'s entry for a state of ``dtype``."""
    return dispatcher._cache._index_key((numba.from_dtype(dtype),), dispatcher.targetctx.codegen())


@pytest.fixture
def spec_dir(tmp_path):
    (tmp_path / "race_spec.py").write_text(SPEC)
    yield tmp_path
    sys.modules.pop("kraftcheck_race_spec", None)


def test_compiled_code_of_another_signature_under_an_index_entry_is_compiled_again(spec_dir, capsys):
    first = _import(spec_dir)
    assert first.reading_ok(np.zeros(1, STATE)[0])  # compiled and saved: index {STATE: .1.nbc}
    cache_file = first.reading_ok._cache._cache_file
    (code,) = cache_file._load_index().values()
    # the other process's index write, last: its entry names the file this one's code went to
    cache_file._save_index({_key(first.reading_ok, WIDER): code})

    second = _import(spec_dir)

    @numba.njit
    def kernel(states):  # as a generated invariants kernel calls the spec's invariant
        return second.reading_ok(states[0]), second.reading_ok(states[1])

    states = np.zeros(2, WIDER)
    states[1]["reading"] = 5
    states["log"] = 7
    assert kernel(states) == (True, False)
    assert f"kernel cache: {os.path.join(cache_file._cache_path, code)} was compiled for another signature" \
        in capsys.readouterr().err
    third = _import(spec_dir)  # what was compiled again is taken as it is, for either state
    assert third.reading_ok(np.zeros(1, WIDER)[0]) and third.reading_ok(np.zeros(1, STATE)[0])
    assert "kernel cache" not in capsys.readouterr().err


def test_an_entry_is_saved_while_no_other_process_reads_or_writes_the_index(spec_dir):
    module = _import(spec_dir)
    assert module.reading_ok(np.zeros(1, STATE)[0])
    cache_file = module.reading_ok._cache._cache_file
    data = cache_file.load(_key(module.reading_ok, STATE))
    wider = _key(module.reading_ok, WIDER)

    fd = os.open(os.path.join(cache_file._cache_path, numba_cache.LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)  # another process between reading the index and its code
        saving = threading.Thread(target=cache_file.save, args=(wider, data), daemon=True)
        saving.start()
        saving.join(0.3)
        assert saving.is_alive() and wider not in cache_file._load_index(), "the save waits for the reader"
    finally:
        os.close(fd)
    saving.join(10)
    assert not saving.is_alive() and wider in cache_file._load_index()


def test_compiled_code_an_older_kraftcheck_wrote_is_compiled_again_in_silence(spec_dir, capsys):
    """A file whose digest matches but that holds no entry of its own may be the race's: compiled
    again, as numba compiles a stale entry, without a word (every such file is, once, after an upgrade)."""
    module = _import(spec_dir)
    assert module.reading_ok(np.zeros(1, STATE)[0])
    cache_file = module.reading_ok._cache._cache_file
    (code,) = cache_file._load_index().values()
    path = os.path.join(cache_file._cache_path, code)
    with open(path, "rb") as f:
        written = f.read()
    body = written[:-numba_cache._TRAILER_SIZE - numba_cache._ENTRY_SIZE]
    with open(path, "wb") as f:
        f.write(body + numba_cache._MARK + numba_cache._digest(cache_file, path, body))
    again = _import(spec_dir)
    assert again.reading_ok(np.zeros(1, STATE)[0]) and "kernel cache" not in capsys.readouterr().err
    assert numba_cache._entry_of(path) == numba_cache._entry_block(_key(again.reading_ok, STATE)), "written anew"


def test_a_wait_for_the_cache_folder_past_a_save_s_time_is_said(spec_dir, capsys, monkeypatch):
    """Another process holding the folder's lock (stopped with Ctrl-Z while saving, say) kept a run
    waiting without a word: past LOCK_PATIENCE_S the wait is said on stderr, and it goes on."""
    module = _import(spec_dir)
    assert module.reading_ok(np.zeros(1, STATE)[0])
    cache_file = module.reading_ok._cache._cache_file
    key = _key(module.reading_ok, STATE)
    monkeypatch.setattr(numba_cache, "LOCK_PATIENCE_S", 0.05)
    fd = os.open(os.path.join(cache_file._cache_path, numba_cache.LOCK_FILE), os.O_RDWR | os.O_CREAT, 0o644)
    loaded = []
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another process saving, stopped
        loading = threading.Thread(target=lambda: loaded.append(cache_file.load(key)), daemon=True)
        loading.start()
        loading.join(0.5)
        assert loading.is_alive() and not loaded, "the load waits for the save"
    finally:
        os.close(fd)
    loading.join(10)
    assert not loading.is_alive() and loaded and loaded[0] is not None
    said = capsys.readouterr().err
    assert said.count("kernel cache: waiting for another process that holds") == 1, said
    assert numba_cache.LOCK_FILE in said

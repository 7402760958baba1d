"""The float32 graph made from a dynamically quantized model (``synth/backends/dequant.py``):
checked on a model that onnxruntime's own ``quantize_dynamic`` quantizes (MatMul, Conv with and
without bias, a bidirectional LSTM), then on the packaged Kokoro."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from synth.backends.dequant import QUANTIZED_OPS, cached_float_model, dequantize_model  # noqa: E402

INTEGER_OPS = QUANTIZED_OPS | {"DynamicQuantizeLinear"}


def _weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"c1": rng.normal(0, 0.3, (24, 16, 3)), "b1": rng.normal(0, 0.1, 24), "c2": rng.normal(0, 0.3, (24, 24, 1)),
            "m": rng.normal(0, 0.3, (24, 20)), "W": rng.normal(0, 0.3, (2, 32, 20)),
            "R": rng.normal(0, 0.3, (2, 32, 8)), "B": rng.normal(0, 0.1, (2, 64))}


def _rounded_weights(q: "onnx.ModelProto") -> dict[str, np.ndarray]:
    """The float weights as the quantized model stores them: ``(q - zero_point) * scale``."""
    init = {t.name: numpy_helper.to_array(t) for t in q.graph.initializer}
    out = {}
    for name, w in _weights().items():
        qn = f"{name}_quantized"
        if name in ("b1", "B"):  # biases stay float (the conv bias is requantized at run time)
            out[name] = w
            continue
        base = qn[: -len("_quantized")]
        v = (init[qn].astype(np.float64) - init[base + "_zero_point"].astype(np.float64).reshape(-1, *[1] * (init[qn].ndim - 1))
             ) * init[base + "_scale"].astype(np.float64).reshape(-1, *[1] * (init[qn].ndim - 1))
        out[name] = v.transpose(0, 2, 1) if name in ("W", "R") else v  # DynamicQuantizeLSTM stores [dirs, in, 4H]
        assert out[name].shape == w.shape
    return out


def _float_model(w: dict[str, np.ndarray] | None = None) -> "onnx.ModelProto":
    """x [1, 16, T] -> Conv(bias) -> Relu -> Conv(no bias) -> Transpose -> MatMul -> LSTM -> y."""
    w = w or _weights()
    inits = [numpy_helper.from_array(v.astype(np.float32), k) for k, v in w.items()]
    nodes = [
        helper.make_node("Conv", ["x", "c1", "b1"], ["h1"], pads=[1, 1], kernel_shape=[3]),
        helper.make_node("Relu", ["h1"], ["h2"]),
        helper.make_node("Conv", ["h2", "c2"], ["h3"], kernel_shape=[1]),
        helper.make_node("Transpose", ["h3"], ["h4"], perm=[2, 0, 1]),  # [T, 1, 24]
        helper.make_node("MatMul", ["h4", "m"], ["h5"]),
        helper.make_node("LSTM", ["h5", "W", "R", "B"], ["y", "yh"], hidden_size=8, direction="bidirectional"),
    ]
    graph = helper.make_graph(nodes, "small", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, None])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                               helper.make_tensor_value_info("h5", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _quantized(tmp: Path) -> "onnx.ModelProto":
    from onnxruntime.quantization import QuantType, quantize_dynamic

    onnx.save(_float_model(), tmp / "f.onnx")
    quantize_dynamic(str(tmp / "f.onnx"), str(tmp / "q.onnx"), weight_type=QuantType.QUInt8,
                     op_types_to_quantize=["Conv", "MatMul", "LSTM"], per_channel=False)
    return onnx.load(str(tmp / "q.onnx"))


def _run(model_or_path, x: np.ndarray) -> list[np.ndarray]:
    src = model_or_path.SerializeToString() if hasattr(model_or_path, "SerializeToString") else model_or_path
    s = ort.InferenceSession(src, providers=["CPUExecutionProvider"])
    return s.run(None, {"x": x})


def test_dequantized_graph_has_no_integer_ops_and_matches_the_float_model(tmp_path):
    q = _quantized(tmp_path)
    ops = {n.op_type for n in q.graph.node}
    assert {"ConvInteger", "MatMulInteger", "DynamicQuantizeLSTM"} <= ops  # the patterns under test are there
    x = np.random.default_rng(1).normal(0, 1, (1, 16, 50)).astype(np.float32)
    ref = _run(_float_model(), x)
    int8 = _run(q, x)
    same_weights = _run(_float_model(_rounded_weights(q)), x)
    deq = dequantize_model(q)  # in place
    assert not INTEGER_OPS & {n.op_type for n in deq.graph.node}
    assert [o.name for o in deq.graph.output] == ["y", "h5"]
    onnx.checker.check_model(deq)
    got = _run(deq, x)
    for r, i, g, s in zip(ref, int8, got, same_weights):
        # the float graph computes exactly the float model with the stored (rounded) weights ...
        np.testing.assert_allclose(g, s, atol=2e-5 * np.abs(s).max())
        # ... so only weight rounding is left: nearer the float model than the int8 graph is
        assert np.abs(g - r).mean() < np.abs(i - r).mean()


def test_a_graph_it_cannot_rewrite_is_refused_whole(tmp_path):
    q = _quantized(tmp_path)
    conv = next(n for n in q.graph.node if n.op_type == "ConvInteger")
    conv.input[0] = "x"  # no longer fed by DynamicQuantizeLinear
    with pytest.raises(ValueError, match="does not come from DynamicQuantizeLinear"):
        dequantize_model(q)


def test_the_float_graph_is_made_once_checked_by_hash_and_remade_when_damaged(tmp_path):
    x = np.random.default_rng(2).normal(0, 1, (1, 16, 30)).astype(np.float32)
    path, digest = cached_float_model(_quantized(tmp_path), "src", tmp_path / "cache")
    folder = Path(path).parent
    assert sorted(p.name for p in folder.iterdir()) == ["model.onnx", "model.weights", "sha256"]
    first = _run(path, x)
    mtime = (folder / "model.weights").stat().st_mtime_ns
    again, digest2 = cached_float_model(_quantized(tmp_path), "src", tmp_path / "cache")
    assert (again, digest2) == (path, digest) and (folder / "model.weights").stat().st_mtime_ns == mtime
    with open(folder / "model.weights", "r+b") as f:  # flip bytes in the weights
        f.seek(100)
        f.write(b"\xff\xff\xff\xff")
    remade, digest3 = cached_float_model(_quantized(tmp_path), "src", tmp_path / "cache")
    assert digest3 == digest
    for a, b in zip(first, _run(remade, x)):
        assert np.array_equal(a, b)


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_an_unwritable_cache_converts_in_memory(tmp_path):
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    graph, digest = cached_float_model(_quantized(tmp_path), "src", ro / "cache")
    assert isinstance(graph, bytes) and len(digest) == 64 and not (ro / "cache").exists()


def test_unwritable_cache_folder_falls_back_to_bytes(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    graph, digest = cached_float_model(_quantized(tmp_path), "src", blocker / "cache")
    assert isinstance(graph, bytes) and len(digest) == 64
    assert not INTEGER_OPS & {n.op_type for n in onnx.load_from_string(graph).graph.node}

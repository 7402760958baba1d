"""A float32 graph made from a dynamically quantized ONNX model (``onnxruntime.quantization.
quantize_dynamic`` output, as the int8 Kokoro on PyPI is).

Why: without VNNI (AVX2-only CPUs such as AMD EPYC Rome/Milan), onnxruntime's integer GEMMs
widen bytes to 16 bits before they multiply, and quantizing every activation at run time
(``DynamicQuantizeLinear``) costs as much again, so the int8 model runs 4-6x slower than on a
VNNI CPU. The float graph spends the same weights (``(q - zero_point) * scale``, exactly the
values the int8 graph multiplies by) in float GEMMs, which AVX2 runs at full speed.

What is rewritten, each pattern exactly as ``quantize_dynamic`` writes it:

- ``DynamicQuantizeLinear(x) -> MatMulInteger(xq, Wq, xz, Wz) -> Cast -> Mul(·, x_scale*W_scale)``
  becomes ``MatMul(x, W)``;
- ``ConvInteger(xq, Wq, xz, Wz) [-> Add(·, quantized bias)] -> Cast -> Mul(·, x_scale*W_scale)``
  becomes ``Conv(x, W[, bias])`` with the same attributes, the bias the float initializer that the
  quantized bias was computed from;
- ``DynamicQuantizeLSTM(X, Wq, Rq, B, ..., W_scale, W_zp, R_scale, R_zp)`` becomes ``LSTM`` with
  ``W``/``R`` dequantized per direction and transposed to ONNX's ``[dirs, 4*hidden, input]``.

Every output tensor keeps its name, so outputs added by name (Kokoro's durations) still resolve.
Nodes left without consumers (the quantizers, the scale products) are dropped, then unused
initializers. A graph with an integer op that matches none of these is refused (``ValueError``),
never half converted.
"""

from __future__ import annotations

import hashlib
import os
from collections import defaultdict
from pathlib import Path

import numpy as np

from ..io.files import file_sha256, write_text_atomic

QUANTIZED_OPS = {"MatMulInteger", "ConvInteger", "DynamicQuantizeLSTM"}
FORMAT = 1  # bump when the rewrite changes: it is part of the cached file's name


def dequantize_model(model):
    """The float32 form of a ``quantize_dynamic`` model (an ``onnx.ModelProto``, changed in place
    and returned). Raises ``ValueError`` naming the first node it cannot rewrite."""
    from onnx import numpy_helper

    g = model.graph
    init = {t.name: t for t in g.initializer}
    producer = {o: n for n in g.node for o in n.output}
    consumers = defaultdict(list)
    for n in g.node:
        for i in n.input:
            consumers[i].append(n)

    def array(name: str) -> np.ndarray:
        if name not in init:
            raise ValueError(f"{name!r} is not a constant")
        return numpy_helper.to_array(init[name])

    def only_consumer(name: str, op: str):
        c = consumers[name]
        if len(c) != 1 or c[0].op_type != op:
            raise ValueError(f"{name!r}: expected one {op} consumer, found {[x.op_type for x in c]}")
        return c[0]

    def float_input(qname: str) -> str:
        q = producer.get(qname)
        if q is None or q.op_type != "DynamicQuantizeLinear":
            raise ValueError(f"{qname!r} does not come from DynamicQuantizeLinear")
        return q.input[0]

    def weight(node) -> tuple[np.ndarray, np.ndarray]:
        """The quantized weight and its zero point(s), as float32."""
        wq = array(node.input[1]).astype(np.float32)
        wz = array(node.input[3]).astype(np.float32) if len(node.input) > 3 and node.input[3] else np.float32(0)
        return wq, wz

    new_nodes: dict[int, list] = {}  # index of the replaced node -> the nodes that replace it
    dropped: set[int] = set()  # ids of the Cast/Add/Mul nodes whose work the float node does
    added_inits = []

    def scale_of(mul) -> np.ndarray:
        """The weight scale inside ``Mul(cast, Mul(x_scale, W_scale))``."""
        other = [i for i in mul.input if producer.get(i) is None or producer[i].op_type != "Cast"]
        if len(other) != 1 or other[0] not in producer or producer[other[0]].op_type != "Mul":
            raise ValueError(f"{mul.name!r}: the scale is not x_scale * W_scale")
        consts = [i for i in producer[other[0]].input if i in init]
        if len(consts) != 1:
            raise ValueError(f"{mul.name!r}: no constant weight scale")
        return array(consts[0]).astype(np.float32)

    made: dict[str, str] = {}  # a quantized weight shared by several nodes is dequantized once

    def add_init(name: str, value) -> str:
        """A float initializer ``name`` (``value`` is an array, or a function making it)."""
        if name not in made:
            value = value() if callable(value) else value
            added_inits.append(numpy_helper.from_array(np.ascontiguousarray(value, np.float32), name))
            made[name] = name
        return name

    from onnx import helper

    for idx, n in enumerate(g.node):
        if n.op_type == "MatMulInteger":
            cast = only_consumer(n.output[0], "Cast")
            mul = only_consumer(cast.output[0], "Mul")
            s = scale_of(mul)

            def w(n=n, s=s):
                wq, wz = weight(n)
                return (wq - wz) * s  # per-column zero points and scales broadcast on N

            wname = add_init(f"{n.input[1]}_float_{_tag(s)}", w)
            dropped.update((id(cast), id(mul)))
            new_nodes[idx] = [helper.make_node("MatMul", [float_input(n.input[0]), wname], [mul.output[0]],
                                               name=f"{n.name or n.op_type + str(idx)}_float")]
        elif n.op_type == "ConvInteger":
            nxt = consumers[n.output[0]]
            bias = None
            if len(nxt) == 1 and nxt[0].op_type == "Add":
                add = nxt[0]
                bias = _conv_bias(add, n.output[0], producer, init, array)
                cast = only_consumer(add.output[0], "Cast")
            else:
                cast = only_consumer(n.output[0], "Cast")
            mul = only_consumer(cast.output[0], "Mul")
            s = scale_of(mul)

            def w(n=n, s=s):
                wq, wz = weight(n)
                per_out = (-1, *[1] * (wq.ndim - 1))  # per-output-channel values sit on axis 0 of [O, I, k]
                return (wq - (wz.reshape(per_out) if wz.ndim else wz)) * (s.reshape(per_out) if s.ndim else s)

            inputs = [float_input(n.input[0]), add_init(f"{n.input[1]}_float_{_tag(s)}", w)]
            if bias is not None:
                inputs.append(add_init(n.name + "_bias_float", bias))
            conv = helper.make_node("Conv", inputs, [mul.output[0]], name=f"{n.name or n.op_type + str(idx)}_float")
            conv.attribute.extend(n.attribute)
            dropped.update(id(x) for x in (*nxt, cast, mul))
            new_nodes[idx] = [conv]
        elif n.op_type == "DynamicQuantizeLSTM":
            new_nodes[idx] = [_float_lstm(n, idx, array, add_init)]
        elif n.op_type in ("QLinearMatMul", "QLinearConv", "MatMulIntegerToFloat", "DynamicQuantizeMatMul",
                           "QAttention", "QuantizeLinear"):
            raise ValueError(f"node {n.name!r}: {n.op_type} is not a quantize_dynamic pattern this rewrite knows")

    nodes = []
    for idx, n in enumerate(g.node):
        if id(n) not in dropped:
            nodes.extend(new_nodes.get(idx, [n]))
    g.initializer.extend(added_inits)
    _prune(g, nodes)
    return model


def _tag(scale: np.ndarray) -> str:
    """A short name for a weight scale: one quantized weight read with two scales is two weights."""
    return hashlib.sha256(np.ascontiguousarray(scale, np.float32).tobytes()).hexdigest()[:8]


def _conv_bias(add, conv_out: str, producer, init, array) -> np.ndarray:
    """The float bias behind ``Reshape(Cast(Floor(Div(bias, x_scale*W_scale))))``."""
    (qbias,) = [i for i in add.input if i != conv_out]
    n = producer.get(qbias)
    seen = []
    while n is not None and n.op_type in ("Reshape", "Cast", "Floor", "Round", "Div"):
        seen.append(n.op_type)
        if n.op_type == "Div":
            return array(n.input[0]).astype(np.float32)
        n = producer.get(n.input[0])
    raise ValueError(f"{add.name!r}: the bias is not a quantized constant ({' <- '.join(seen)})")


def _float_lstm(n, idx: int, array, add_init):
    from onnx import helper

    def deq(qi: int, si: int, zi: int) -> np.ndarray:
        q, s = array(n.input[qi]).astype(np.float32), array(n.input[si]).astype(np.float32)
        z = array(n.input[zi]).astype(np.float32) if n.input[zi] else np.zeros_like(s)
        if s.size != q.shape[0]:
            raise ValueError(f"node {n.name!r}: per-channel LSTM scales are not supported")
        return ((q - z.reshape(-1, 1, 1)) * s.reshape(-1, 1, 1)).transpose(0, 2, 1)  # [dirs, 4H, in]

    w = add_init(n.input[1] + "_float", deq(1, 8, 9))
    r = add_init(n.input[2] + "_float", deq(2, 10, 11))
    inputs = [n.input[0], w, r, *n.input[3:8]]
    while inputs and not inputs[-1]:
        inputs.pop()
    lstm = helper.make_node("LSTM", inputs, list(n.output), name=f"{n.name or n.op_type + str(idx)}_float")
    lstm.attribute.extend(n.attribute)
    return lstm


def _prune(g, nodes) -> None:
    """Keep the nodes that the graph outputs need, then the initializers those nodes read."""
    needed = {o.name for o in g.output}
    producer = {o: n for n in nodes for o in n.output}
    keep, stack = set(), list(needed)
    while stack:
        name = stack.pop()
        n = producer.get(name)
        if n is None or id(n) in keep:
            continue
        keep.add(id(n))
        stack.extend(i for i in n.input if i)
        for a in n.attribute:  # names read inside subgraphs
            if a.g is not None:
                stack.extend(i for sub in a.g.node for i in sub.input if i)
    kept = [n for n in nodes if id(n) in keep]
    del g.node[:]
    g.node.extend(kept)
    used = {i for n in kept for i in n.input}
    inits = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(inits)
    vi = [v for v in g.value_info if v.name in producer and id(producer[v.name]) in keep]
    del g.value_info[:]
    g.value_info.extend(vi)


def cached_float_model(model, source_digest: str, folder: Path | None) -> tuple[str | bytes, str]:
    """The float32 graph of ``model`` (an int8 ``onnx.ModelProto``, consumed) and its digest.

    Made once per source model into ``FOLDER/<source sha256>-float32-v<FORMAT>/``: ``model.onnx``
    with its weights in ``model.weights`` (ONNX external data, which onnxruntime memory-maps, so
    worker processes share one copy in the page cache instead of each holding 325 MB), and
    ``sha256`` listing both files' hashes. A folder whose files no longer match is made again.
    Returns the path of ``model.onnx``, or the model bytes when ``folder`` is ``None`` or cannot be
    written (then nothing is kept)."""
    if (found := cached_float_file(source_digest, folder)) is not None:
        return found
    model = dequantize_model(model)
    if folder is not None:
        try:
            target = _target(folder, source_digest)
            _write_folder(model, target)
            model.Clear()  # 325 MB of float weights: onnxruntime reads them from the file
            if (digest := _verified(target)) is not None:
                return str(target / "model.onnx"), digest
        except OSError:
            pass  # a read-only cache: convert in memory on every load
    blob = model.SerializeToString()
    return blob, hashlib.sha256(blob).hexdigest()


def cached_float_file(source_digest: str, folder: Path | None) -> tuple[str, str] | None:
    """``(path of model.onnx, digest)`` of the float32 graph already made from the model whose
    sha256 is ``source_digest``, when its folder is intact; else ``None``. A caller that finds
    one need not parse the int8 model at all (~100 MB of protobuf held by the process)."""
    if folder is None:
        return None
    target = _target(folder, source_digest)
    if (digest := _verified(target)) is not None:
        return str(target / "model.onnx"), digest
    return None


def _target(folder: Path, source_digest: str) -> Path:
    return folder / f"{source_digest}-float32-v{FORMAT}"


FILES = ("model.onnx", "model.weights")


def _verified(target: Path) -> str | None:
    """The folder's digest when ``sha256`` matches both files, else ``None``."""
    try:
        want = dict(line.split() for line in (target / "sha256").read_text(encoding="ascii").splitlines())
        have = {name: file_sha256(target / name) for name in FILES}
    except (OSError, ValueError):
        return None
    if want != have:
        return None
    return hashlib.sha256(" ".join(have[n] for n in FILES).encode()).hexdigest()


def _write_folder(model, target: Path) -> None:
    """Write into a temporary folder beside ``target`` and rename it into place; when another
    process got there first, its (verified) folder stays and ours is dropped."""
    import shutil
    import tempfile

    import onnx

    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    tmp.chmod(0o755)
    try:
        onnx.save_model(model, str(tmp / "model.onnx"), save_as_external_data=True, location="model.weights",
                        size_threshold=4096)
        write_text_atomic(tmp / "sha256", "".join(f"{n} {file_sha256(tmp / n)}\n" for n in FILES))
        if target.exists() and _verified(target) is None:
            shutil.rmtree(target, ignore_errors=True)
        try:
            os.replace(tmp, target)
        except OSError:
            if _verified(target) is None:
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
def default_folder() -> Path:
    """``$XDG_CACHE_HOME/duplexsynth/onnx-float`` (``~/.cache/...`` when unset)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "duplexsynth" / "onnx-float"

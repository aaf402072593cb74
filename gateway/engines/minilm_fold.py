"""Derive the MiniLM embedding model that keeps its int8 weights int8 in memory (model store
steps `minilm-gather-int8` and `minilm-int8`).

The packaged int8 `model.onnx` keeps every weight as int8 + a float scale and computes with
`Cast -> Mul(scale) -> MatMul / Gather`. onnxruntime's constant folding (part of every graph
optimisation level, even BASIC) turns all of them into float32 at load: the 30522 x 384 word
embedding alone becomes a 47 MB float table, of which an embedding reads a few rows. With
optimisation off the weights stay int8, but then the whole table is dequantized at every call
(~80 ms instead of ~6).

`gather_first` rewrites the two embedding lookups (word and position) as
`Gather(int8 rows) -> Cast -> Mul(Gather(row scales))`: elementwise the same float32 products of
the same rows, so the vectors are bit for bit those of the packaged model, while the tables stay
int8 (+59 instead of +93 MB resident; the MatMul weights are still folded to float).

`int8_model` also rewrites every `MatMul` by a dequantized weight (per-column scales, symmetric)
as onnxruntime's `MatMulNBits` (com.microsoft, 8 bits, blocks of 32 along K) on the same int8
weights (u = q + 128, zero point 128): the weights stay one byte each in memory and the products
run on the prepacked int8 kernels, which quantize each 32-value block of the activations to int8:
the vectors move by ~1e-3 in cosine (tests/engines/test_minilm_gather.py). Only the model store
calls these, once; they need `onnx`.
"""

from __future__ import annotations

from pathlib import Path

from gateway.errors import ModelError


def gather_first(src: Path) -> tuple[bytes, str]:
    """The model with int8 embedding lookups as ONNX bytes, and a one-line summary."""
    import onnx

    model = onnx.load(str(src))
    summary = _gather_int8(model, src)
    onnx.checker.check_model(model)
    return model.SerializeToString(), summary


def int8_model(src: Path) -> tuple[bytes, str]:
    """The model with int8 embedding lookups and int8 products as ONNX bytes, and a summary."""
    import onnx

    model = onnx.load(str(src))
    summary = f"{_gather_int8(model, src)}, {_matmul_nbits(model, src)}"
    onnx.checker.check_model(model)
    return model.SerializeToString(), summary


BITS, BLOCK, ACCURACY_LEVEL = 8, 32, 4  # accuracy level 4: int8 activations, the prepacked kernels


def _matmul_nbits(model, src: Path) -> str:  # noqa: ANN001 (onnx.ModelProto)
    """MatMul(x, Cast(q int8 [K, N]) * scale [1, N]) -> MatMulNBits(x, q + 128, scale, 128)."""
    import numpy as np
    from onnx import helper, numpy_helper

    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    inits = {init.name: init for init in graph.initializer}
    users: dict[str, int] = {}
    for node in graph.node:
        for name in node.input:
            users[name] = users.get(name, 0) + 1
    nodes, dropped, new_inits, gone = [], set(), [], set()
    for node in graph.node:
        mul = producer.get(node.input[1]) if node.op_type == "MatMul" else None
        cast = producer.get(mul.input[0]) if mul is not None and mul.op_type == "Mul" else None
        if cast is None or cast.op_type != "Cast" or cast.input[0] not in inits or mul.input[1] not in inits \
                or users[mul.output[0]] != 1 or users[cast.output[0]] != 1:
            nodes.append(node)
            continue
        q = numpy_helper.to_array(inits[cast.input[0]])
        scale = numpy_helper.to_array(inits[mul.input[1]]).astype(np.float32)
        if q.dtype != np.int8 or q.ndim != 2 or scale.size != q.shape[1]:
            nodes.append(node)
            continue
        k, n = q.shape
        blocks = -(-k // BLOCK)
        packed = np.full((n, blocks * BLOCK), 128, np.uint8)  # padding dequantizes to 0
        packed[:, :k] = (q.T.astype(np.int16) + 128).astype(np.uint8)
        name = cast.input[0]
        new_inits += [numpy_helper.from_array(packed.reshape(n, blocks, BLOCK), f"{name}/u8"),
                      numpy_helper.from_array(np.repeat(scale.reshape(n), blocks), f"{name}/scale"),
                      numpy_helper.from_array(np.full(n * blocks, 128, np.uint8), f"{name}/zp")]
        nodes.append(helper.make_node("MatMulNBits", [node.input[0], f"{name}/u8", f"{name}/scale", f"{name}/zp"],
                                      list(node.output), name=node.name, domain="com.microsoft",
                                      K=k, N=n, bits=BITS, block_size=BLOCK, accuracy_level=ACCURACY_LEVEL))
        dropped |= {id(mul), id(cast)}
        gone |= {cast.input[0], mul.input[1]}
    if not new_inits:
        raise ModelError(f"{src}: no product by a dequantized int8 weight found (a different MiniLM export?)")
    kept = [n for n in nodes if id(n) not in dropped]
    still_used = {i for n in kept for i in n.input}
    del graph.node[:]
    graph.node.extend(kept)
    rest = [t for t in graph.initializer if t.name not in gone or t.name in still_used]
    del graph.initializer[:]
    graph.initializer.extend([*rest, *new_inits])
    model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return f"{len(new_inits) // 3} products on int8 weights"


def _gather_int8(model, src: Path) -> str:  # noqa: ANN001 (onnx.ModelProto)
    from onnx import TensorProto, helper

    graph = model.graph
    producer = {out: node for node in graph.node for out in node.output}
    weights = {init.name for init in graph.initializer}
    nodes, dropped, tables = [], set(), []
    for node in graph.node:
        mul = producer.get(node.input[0]) if node.op_type == "Gather" and node.input else None
        cast = producer.get(mul.input[0]) if mul is not None and mul.op_type == "Mul" else None
        if (cast is None or cast.op_type != "Cast" or cast.input[0] not in weights
                or mul.input[1] not in weights or any(a.name == "axis" and a.i != 0 for a in node.attribute)):
            nodes.append(node)
            continue
        rows, scales, ids, out = cast.input[0], mul.input[1], node.input[1], node.output[0]
        nodes += [helper.make_node("Gather", [rows, ids], [f"{out}/int8"], name=f"{node.name}/int8", axis=0),
                  helper.make_node("Cast", [f"{out}/int8"], [f"{out}/float"], name=f"{node.name}/cast",
                                   to=TensorProto.FLOAT),
                  helper.make_node("Gather", [scales, ids], [f"{out}/scale"], name=f"{node.name}/scale", axis=0),
                  helper.make_node("Mul", [f"{out}/float", f"{out}/scale"], [out], name=f"{node.name}/dequant")]
        dropped |= {id(mul), id(cast)}
        tables.append(rows)
    if not tables:
        raise ModelError(f"{src}: no dequantized embedding lookup found (a different MiniLM export?)")
    kept = [n for n in nodes if id(n) not in dropped]
    if {out for n in graph.node if id(n) in dropped for out in n.output} & {i for n in kept for i in n.input}:
        raise ModelError(f"{src}: a dequantized embedding table has other users; not rewritten")
    del graph.node[:]
    graph.node.extend(kept)
    return f"{len(tables)} embedding tables looked up as int8"

"""Derive the MiniLM embedding model that looks rows up before dequantizing them
(model store step `minilm-gather-int8`).

The packaged int8 `model.onnx` keeps every weight as int8 + a float scale and computes with
`Cast -> Mul(scale) -> MatMul / Gather`. onnxruntime's constant folding (part of every graph
optimisation level, even BASIC) turns all of them into float32 at load: the 30522 x 384 word
embedding alone becomes a 47 MB float table, of which an embedding reads a few rows. With
optimisation off the weights stay int8, but then the whole table is dequantized at every call
(~80 ms instead of ~6). This step rewrites the two embedding lookups (word and position)
as `Gather(int8 rows) -> Cast -> Mul(Gather(row scales))`: elementwise the same float32
products of the same rows, so the vectors are bit for bit those of the packaged model, while
the tables stay int8 in memory (+59 instead of +93 MB resident; the MatMul weights are still
folded to float, which is what keeps an embedding at ~6 ms). Only the model store calls it,
once; it needs `onnx`.
"""

from __future__ import annotations

from pathlib import Path

from gateway.errors import ModelError


def gather_first(src: Path) -> tuple[bytes, str]:
    """The rewritten model as ONNX bytes, and a one-line summary."""
    import onnx
    from onnx import TensorProto, helper

    model = onnx.load(str(src))
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
    onnx.checker.check_model(model)
    return model.SerializeToString(), f"{len(tables)} embedding tables looked up as int8"

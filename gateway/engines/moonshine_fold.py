"""Derive Moonshine's decoder with weights dequantized once (model store `moonshine-float-decoder`).

The packaged `decoder_model_merged.ort` keeps its 81 weight tensors as uint8 and turns them back
into float32 (Cast, Mul by the scale, Add the zero point) at EVERY decoding step, and transposes
the 54 MB token embedding for the output projection at every step too: ~220 MB of scratch
memory and most of the time of each step. This step does that arithmetic once, offline, and
writes a plain ONNX decoder holding the float32 weights and the transposed embedding (one copy,
shared by both branches of the cache `If`). The arithmetic is numpy's float32 Mul then Add, the
same IEEE operations onnxruntime ran, so the logits (and the words) are bit for bit the same.

Needs `onnx` and onnxruntime (which reads the ORT format and writes it back as ONNX); only the
model store calls it, once.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from gateway.errors import ModelError

EMBEDDING_T = "model.decoder.embed_tokens.weight_T"


def _as_onnx(src: Path, dest: Path) -> None:
    import onnxruntime

    opts = onnxruntime.SessionOptions()
    opts.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.optimized_model_filepath = str(dest)
    opts.log_severity_level = 3
    onnxruntime.InferenceSession(str(src), sess_options=opts, providers=["CPUExecutionProvider"])


def _name_subgraphs(graph, prefix: str) -> None:  # noqa: ANN001 (onnx.GraphProto)
    """ORT writes the If branches without names, which ONNX requires."""
    import onnx

    graph.name = graph.name or prefix
    for node in graph.node:
        for attr in node.attribute:
            if attr.type == onnx.AttributeProto.GRAPH:
                _name_subgraphs(attr.g, f"{prefix}/{node.name}/{attr.name}")


def load_decoder(src: Path):  # noqa: ANN201 (onnx.ModelProto; onnx is imported only when deriving)
    """The ORT-format decoder `src` as an ONNX model whose subgraphs' nodes all have unique names
    (the derived decoders, float here and int8 in moonshine_nbits.py, start from it)."""
    import onnx

    with tempfile.TemporaryDirectory() as tmp:
        _as_onnx(src, Path(tmp) / "decoder.onnx")
        model = onnx.load(str(Path(tmp) / "decoder.onnx"))
    _name_subgraphs(model.graph, "main")
    return model


def float_decoder(src: Path) -> tuple[bytes, str]:
    """The bytes of the dequantized decoder ONNX for the ORT-format `src`, and a summary line."""
    try:
        import numpy as np
        import onnx
        from onnx import numpy_helper
    except ImportError as exc:
        raise ModelError(f"the onnx package is needed to prepare the Moonshine decoder: {exc}") from None
    model = load_decoder(src)
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    producer = {n.output[0]: n for n in graph.node}
    folded, kept = [], []
    for node in graph.node:
        if node.op_type in ("Cast", "Mul") and node.name.endswith(("_cast_node", "_mul_node")):
            continue
        if node.op_type != "Add" or not node.name.endswith("_add_node"):
            kept.append(node)
            continue
        mul = producer[node.input[0]]
        cast = producer[mul.input[0]]
        q = numpy_helper.to_array(inits[cast.input[0]])
        scale = numpy_helper.to_array(inits[mul.input[1]])
        zero = numpy_helper.to_array(inits[node.input[1]])
        weight = (q.astype(np.float32) * scale).astype(np.float32) + zero
        folded.append(numpy_helper.from_array(weight.astype(np.float32), node.output[0]))
    if not folded or len(kept) != 1 or kept[0].op_type != "If":
        raise ModelError(f"{src} is not the quantized merged Moonshine decoder this step expects")
    embedding = next((t for t in folded if t.name.startswith("model.decoder.embed_tokens.")), None)
    if embedding is None:
        raise ModelError(f"{src} has no token embedding")
    quantized = {name for n in graph.node if n.op_type in ("Cast", "Mul", "Add") for name in n.input}
    rest = [t for t in graph.initializer if t.name not in quantized]
    table = np.ascontiguousarray(numpy_helper.to_array(embedding).T)
    transposed = numpy_helper.from_array(table, EMBEDDING_T)
    _share_embedding(kept[0], embedding.name)
    del graph.node[:]
    graph.node.extend(kept)
    del graph.initializer[:]
    graph.initializer.extend([*rest, *[t for t in folded if t is not embedding], transposed])
    return model.SerializeToString(), f"{len(folded)} weights dequantized"


def _share_embedding(if_node, embedding: str) -> None:  # noqa: ANN001 (onnx.NodeProto)
    """In both branches: project with the one transposed copy; look tokens up in it (axis 1)."""
    import onnx

    for attr in if_node.attribute:
        nodes = list(attr.g.node)
        out = []
        for node in nodes:
            if embedding not in node.input:
                out.append(node)
            elif node.op_type == "Transpose":
                out.append(onnx.helper.make_node("Identity", [EMBEDDING_T], list(node.output),
                                                 name=node.name))
            elif node.op_type == "Gather" and all(a.i == 0 for a in node.attribute if a.name == "axis"):
                picked = f"{node.output[0]}/transposed"
                out.append(onnx.helper.make_node("Gather", [EMBEDDING_T, node.input[1]], [picked],
                                                 name=node.name, axis=1))
                out.append(onnx.helper.make_node("Transpose", [picked], list(node.output),
                                                 name=f"{node.name}/back", perm=[1, 2, 0]))
            else:
                raise ModelError(f"unexpected use of the token embedding by {node.op_type} {node.name}")
        del attr.g.node[:]
        attr.g.node.extend(out)

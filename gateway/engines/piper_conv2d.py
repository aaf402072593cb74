"""Derive a Piper voice whose 1-D convolutions run as 2-D ones (model store step `piper-conv2d`).

onnxruntime's CPU provider runs 1-D `Conv` nodes with im2col + GEMM; only 2-D ones are taken by
its NCHWc layout optimiser (blocked direct convolution), at graph optimisation level "all" (the
default). A VITS voice is 1-D convolutions throughout, ~80% of its CPU. Measured on x86-64 only
(models/README.md, "Piper's own cost"), not yet on an arm64 Pi. This rewrite:

- runs the HiFi-GAN decoder (`/dec/*`, the part that works at the audio rate) on [N, C, 1, T]
  tensors: one `Unsqueeze` where it starts, one `Squeeze` after its final `Tanh`, every `Conv`
  and `ConvTranspose` in it with a (1, k) kernel; its other nodes (LeakyRelu, Add, Div by a
  scalar, Tanh) are element-wise and take the 4-D tensors as they are;
- wraps every other 1-D `Conv` of the voice (text encoder, flow, duration predictor) in
  `Unsqueeze` -> 2-D `Conv` -> `Squeeze`.

The same weights and arithmetic (float32, another summation order): the audio differs from the
packaged voice's by ~-90 dB. Offline, deterministic, needs the `onnx` package; only the model
store calls it, once.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from gateway.errors import ModelError

_DECODER = "/dec/"


def _conv2d_attributes(node: Any, kernel: int) -> dict[str, Any]:
    from onnx import helper

    a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
    pads = a.get("pads", [0, 0])
    new = {"kernel_shape": [1, a.get("kernel_shape", [kernel])[0]], "strides": [1, a.get("strides", [1])[0]],
           "dilations": [1, a.get("dilations", [1])[0]], "group": a.get("group", 1),
           "pads": [0, pads[0], 0, pads[1]]}
    if "output_padding" in a:
        new["output_padding"] = [0, a["output_padding"][0]]
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
        raise ModelError(f"{node.name}: auto_pad is not supported by the conv2d rewrite")
    return new


def rewrite_conv2d(model: Any) -> tuple[int, int]:
    """Rewrite `model` (an onnx ModelProto) in place; returns (decoder convs, wrapped convs)."""
    import numpy as np
    from onnx import helper, numpy_helper

    g = model.graph
    weights = {t.name: t for t in g.initializer}
    constants = {n.output[0]: n.attribute[0].t for n in g.node if n.op_type == "Constant" and n.attribute}
    axes = numpy_helper.from_array(np.array([2], np.int64), "conv2d.h_axis")
    g.initializer.append(axes)

    def weight_2d(node: Any) -> tuple[str, int]:
        w = numpy_helper.to_array(weights[node.input[1]])
        w4 = numpy_helper.from_array(np.ascontiguousarray(w[:, :, None, :]), node.input[1] + ".2d")
        g.initializer.append(w4)
        return w4.name, int(w.shape[2])

    dec = [n for n in g.node if n.name.startswith(_DECODER)]
    inside = {o for n in dec for o in n.output}
    entry = {i for n in dec for i in n.input if i and i not in inside and i not in weights and i not in constants}
    tanh = [n for n in dec if n.op_type == "Tanh"]
    if len(entry) != 1 or not tanh:
        raise ModelError(f"not a Piper (VITS) voice: decoder inputs {sorted(entry)}, {len(tanh)} Tanh")
    (x_in,) = entry
    x4, last = f"{x_in}.2d", tanh[-1]
    y = last.output[0]

    nodes: list[Any] = []
    in_dec = wrapped = 0
    for node in g.node:
        if node.name.startswith(_DECODER):
            if node is dec[0]:
                nodes.append(helper.make_node("Unsqueeze", [x_in, axes.name], [x4], name="/dec/conv2d_in"))
            inputs = [x4 if i == x_in else i for i in node.input]
            if node.op_type in ("Conv", "ConvTranspose"):
                if node.input[1] not in weights or len(weights[node.input[1]].dims) != 3:
                    raise ModelError(f"{node.name}: a decoder convolution without a 1-D weight")
                inputs[1], k = weight_2d(node)
                node = helper.make_node(node.op_type, inputs, list(node.output), name=node.name,
                                        **_conv2d_attributes(node, k))
                in_dec += 1
            else:
                for i in node.input:  # element-wise ops: only scalars may be broadcast against 4-D
                    c = weights.get(i, constants.get(i))
                    if c is not None and int(np.prod(c.dims)) > 1:
                        raise ModelError(f"{node.name}: non-scalar constant {i} {list(c.dims)} in the decoder")
                del node.input[:]
                node.input.extend(inputs)
            if node is last:
                node.output[0] = f"{y}.2d"
                nodes += [node, helper.make_node("Squeeze", [f"{y}.2d", axes.name], [y], name="/dec/conv2d_out")]
            else:
                nodes.append(node)
            continue
        w = weights.get(node.input[1]) if node.op_type == "Conv" and len(node.input) > 1 else None
        if w is not None and len(w.dims) == 3:
            w4, k = weight_2d(node)
            a4, b4 = f"{node.output[0]}.in2d", f"{node.output[0]}.out2d"
            nodes += [helper.make_node("Unsqueeze", [node.input[0], axes.name], [a4], name=f"{node.name}/conv2d_in"),
                      helper.make_node("Conv", [a4, w4, *node.input[2:]], [b4], name=node.name,
                                       **_conv2d_attributes(node, k)),
                      helper.make_node("Squeeze", [b4, axes.name], [node.output[0]], name=f"{node.name}/conv2d_out")]
            wrapped += 1
            continue
        nodes.append(node)
    del g.node[:]
    g.node.extend(nodes)
    stale = inside  # the decoder's value_info shapes were 3-D
    kept_info = [v for v in g.value_info if v.name not in stale]
    del g.value_info[:]
    g.value_info.extend(kept_info)
    used = {i for n in g.node for i in n.input}
    kept = [t for t in g.initializer if t.name in used]
    del g.initializer[:]
    g.initializer.extend(kept)
    return in_dec, wrapped


def conv2d_voice(src: Path) -> tuple[bytes, str]:
    """The bytes of the voice `src` with its convolutions in 2-D, and a summary line."""
    try:
        import onnx
    except ImportError as exc:
        raise ModelError(f"the onnx package is needed to prepare the conv2d Piper voice: {exc}") from None
    model = onnx.load(str(src))
    in_dec, wrapped = rewrite_conv2d(model)
    return model.SerializeToString(), f"{in_dec} decoder convolutions in 2-D, {wrapped} others wrapped"

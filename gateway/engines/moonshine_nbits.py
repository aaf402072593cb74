"""Derive Moonshine's decoder that multiplies by its int8 weights as they are (model store step
`moonshine-int8-decoder`).

The packaged `decoder_model_merged.ort` stores each of its 81 weight tensors as int8 `q` with one
float scale `s` and one float offset `z` per tensor (w = q * s + z, and z is a whole multiple of s)
and dequantizes all of them at every decoding step. The float decoder (moonshine_fold.py) does
that once, offline, and holds ~165 MB of float32 weights. This step keeps the weights at one byte
each and lets onnxruntime's `MatMulNBits` (com.microsoft, 8 bits, blocks of 32 along K) multiply
by them directly: w = (u - zp) * s with u = q + 128 and zp = 128 - z / s, the same weights.
At accuracy level 4 onnxruntime quantizes each 32-value block of the activations to int8 for
the dot products (prepacked int8 kernels): that is the one difference from the float decoder,
measured as WER by `gateway bench-asr` (docs/CONFIG.md). The token embedding, used for the
lookup and for the output projection, is kept once as int8 for each: the lookup dequantizes
only the rows it reads.

`products="qgemm"` (model store step `moonshine-int8-qgemm-decoder`) writes the same weights for
CPUs that lack the dot-product instructions those kernels need (a Raspberry Pi 4's Cortex-A72,
gateway/engines/cpu_features.py): onnxruntime's `DynamicQuantizeMatMul` (com.microsoft) with the
weights as uint8 [K, N] (u = q + 128, one scale and zero point 128 - z / s per tensor) runs on
MLAS's 8-bit integer GEMM, which has plain ARMv8.0 NEON kernels (UMULL/UADALP) as well as x86
ones; there each product quantizes its whole activation tensor to uint8 (one scale per call), the
difference from the float decoder `gateway bench-asr` measures (docs/CONFIG.md). Both operands
unsigned: exact int32 sums on every CPU (x86's u8 x s8 kernels may saturate in 16 bits).

Needs `onnx` and onnxruntime; only the model store calls it, once.
"""

from __future__ import annotations

from pathlib import Path

from gateway.errors import ModelError

BITS = 8
BLOCK = 32
ACCURACY_LEVEL = 4  # int8 activations per block: the prepacked integer kernels


def _quantized(graph) -> dict:  # noqa: ANN001 (onnx.GraphProto)
    """{dequantized tensor name: (q int8 array, scale, offset)} for the Cast -> Mul -> Add chains."""
    import numpy as np
    from onnx import numpy_helper

    inits = {t.name: t for t in graph.initializer}
    producer = {n.output[0]: n for n in graph.node}
    found = {}
    for node in graph.node:
        if node.op_type != "Add" or not node.name.endswith("_add_node"):
            continue
        mul = producer[node.input[0]]
        cast = producer[mul.input[0]]
        q = numpy_helper.to_array(inits[cast.input[0]])
        scale = numpy_helper.to_array(inits[mul.input[1]]).reshape(-1)
        zero = numpy_helper.to_array(inits[node.input[1]]).reshape(-1)
        if q.dtype != np.int8 or q.ndim != 2 or scale.size != 1 or zero.size != 1:
            raise ModelError(f"weight {node.output[0]} is not per-tensor int8 ({q.dtype}, {q.shape})")
        found[node.output[0]] = (q, np.float32(scale[0]), np.float32(zero[0]))
    return found


def _zero_point(name: str, scale, zero) -> int:  # noqa: ANN001
    """The uint8 zero point of u = q + 128 for w = q * scale + zero (zero a whole number of steps)."""
    shift = float(zero / scale)
    if abs(shift - round(shift)) > 1e-3 or not 0 <= 128 - round(shift) <= 255:
        raise ModelError(f"weight {name}: its offset is not a whole number of steps ({shift})")
    return 128 - round(shift)


def _nbits_inputs(name: str, rows, scale, zero) -> list:  # noqa: ANN001
    """MatMulNBits' B [N, blocks, 32] uint8, scales [N * blocks] and uint8 zero points for the
    weight whose N output rows of K values are `rows` (int8)."""
    import numpy as np
    from onnx import numpy_helper

    n, k = rows.shape
    blocks = -(-k // BLOCK)
    zp = np.uint8(_zero_point(name, scale, zero))
    packed = np.full((n, blocks * BLOCK), zp, np.uint8)  # padding dequantizes to 0
    packed[:, :k] = (rows.astype(np.int16) + 128).astype(np.uint8)
    return [numpy_helper.from_array(packed.reshape(n, blocks, BLOCK), f"{name}/u8"),
            numpy_helper.from_array(np.full(n * blocks, scale, np.float32), f"{name}/scale"),
            numpy_helper.from_array(np.full(n * blocks, zp, np.uint8), f"{name}/zp")]


def _qgemm_inputs(name: str, rows, scale, zero) -> list:  # noqa: ANN001
    """DynamicQuantizeMatMul's B [K, N] uint8, its scale and its uint8 zero point (per tensor) for
    the weight whose N output rows of K values are `rows` (int8)."""
    import numpy as np
    from onnx import numpy_helper

    u8 = (rows.T.astype(np.int16) + 128).astype(np.uint8)
    return [numpy_helper.from_array(np.ascontiguousarray(u8), f"{name}/u8"),
            numpy_helper.from_array(np.array(scale, np.float32), f"{name}/scale"),
            numpy_helper.from_array(np.array(_zero_point(name, scale, zero), np.uint8), f"{name}/zp")]


def _matmul_nbits(node, name: str, k: int, n: int):  # noqa: ANN001
    from onnx import helper

    return helper.make_node("MatMulNBits", [node.input[0], f"{name}/u8", f"{name}/scale", f"{name}/zp"],
                            list(node.output), name=node.name, domain="com.microsoft",
                            K=k, N=n, bits=BITS, block_size=BLOCK, accuracy_level=ACCURACY_LEVEL)


def _matmul_qgemm(node, name: str, k: int, n: int):  # noqa: ANN001, ARG001 (K and N are B's shape)
    from onnx import helper

    return helper.make_node("DynamicQuantizeMatMul", [node.input[0], f"{name}/u8", f"{name}/scale", f"{name}/zp"],
                            list(node.output), name=node.name, domain="com.microsoft")


_PRODUCTS = {"nbits": (_nbits_inputs, _matmul_nbits), "qgemm": (_qgemm_inputs, _matmul_qgemm)}


def int8_decoder(src: Path, products: str = "nbits") -> tuple[bytes, str]:
    """The bytes of the int8-weight decoder ONNX for the ORT-format `src`, and a summary line.
    `products`: "nbits" (MatMulNBits, int8 dot-product kernels) or "qgemm" (DynamicQuantizeMatMul,
    8-bit integer GEMM on any CPU)."""
    weight_inputs, matmul = _PRODUCTS[products]
    try:
        import numpy as np
        import onnx
        from onnx import helper, numpy_helper
    except ImportError as exc:
        raise ModelError(f"the onnx package is needed to prepare the Moonshine decoder: {exc}") from None
    from gateway.engines.moonshine_fold import load_decoder

    model = load_decoder(src)
    graph = model.graph
    weights = _quantized(graph)
    branch = [n for n in graph.node if n.op_type == "If"]
    embedding = next((w for w in weights if w.startswith("model.decoder.embed_tokens.")), None)
    if len(branch) != 1 or embedding is None or len(graph.node) != 3 * len(weights) + 1:
        raise ModelError(f"{src} is not the quantized merged Moonshine decoder this step expects")
    new_inits = []
    for name, (q, scale, zero) in weights.items():
        rows = q if name == embedding else q.T  # MatMulNBits wants N rows of K
        new_inits += weight_inputs(name, np.ascontiguousarray(rows), scale, zero)
    eq, es, ez = weights[embedding]
    new_inits += [numpy_helper.from_array(eq, f"{embedding}/int8"),
                  numpy_helper.from_array(np.array(es, np.float32), f"{embedding}/s"),
                  numpy_helper.from_array(np.array(ez, np.float32), f"{embedding}/z")]
    replaced = 0
    for attr in branch[0].attribute:
        nodes, out = list(attr.g.node), []
        transposed = {n.output[0] for n in nodes if n.op_type == "Transpose" and n.input[0] == embedding}
        for node in nodes:
            if node.op_type == "Transpose" and node.input[0] == embedding:
                continue
            if node.op_type == "MatMul" and node.input[1] in transposed:
                out.append(matmul(node, embedding, eq.shape[1], eq.shape[0]))
            elif node.op_type == "MatMul" and node.input[1] in weights:
                k, n = weights[node.input[1]][0].shape
                out.append(matmul(node, node.input[1], k, n))
            elif node.op_type == "Gather" and node.input[0] == embedding:
                y = node.output[0]
                out += [helper.make_node("Gather", [f"{embedding}/int8", node.input[1]], [f"{y}/int8"],
                                         name=node.name, axis=0),
                        helper.make_node("Cast", [f"{y}/int8"], [f"{y}/float"], name=f"{node.name}/cast",
                                         to=onnx.TensorProto.FLOAT),
                        helper.make_node("Mul", [f"{y}/float", f"{embedding}/s"], [f"{y}/scaled"],
                                         name=f"{node.name}/scale"),
                        helper.make_node("Add", [f"{y}/scaled", f"{embedding}/z"], [y], name=f"{node.name}/offset")]
            elif any(i in weights for i in node.input):
                raise ModelError(f"unexpected use of a decoder weight by {node.op_type} {node.name}")
            else:
                out.append(node)
                continue
            replaced += 1
        del attr.g.node[:]
        attr.g.node.extend(out)
    used = {i for n in graph.node if n.op_type in ("Cast", "Mul", "Add") for i in n.input}
    rest = [t for t in graph.initializer if t.name not in used]
    del graph.node[:]
    graph.node.extend(branch)
    del graph.initializer[:]
    graph.initializer.extend([*rest, *new_inits])
    if not any(o.domain == "com.microsoft" for o in model.opset_import):
        model.opset_import.append(helper.make_opsetid("com.microsoft", 1))
    return model.SerializeToString(), (f"{len(weights)} weights kept int8 ({replaced} products ({products}) and "
                                       f"lookups rewritten)")

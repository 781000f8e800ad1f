"""Operator classes for ``onnx.reference.ReferenceEvaluator(model,
new_ops=ndgather.onnx.reference_ops)``: GatherND and Gather of ``ai.onnx``
and GatherND and GatherBlockQuantized of ``com.microsoft`` run through
ndgather, with the version the model's opset import selects."""

from __future__ import annotations

from typing import Any

from ndgather import onnx as ops


def make_reference_ops() -> list[type[Any]]:
    from onnx.reference.op_run import OpRun

    def opset(node: Any, domain: str) -> int:
        return int(node.run_params["opsets"].get(domain, 1))

    class GatherND(OpRun):  # type: ignore[misc,unused-ignore]
        op_domain = ""

        def _run(self, data: Any, indices: Any, batch_dims: int | None = None) -> tuple[Any]:
            return (ops.gather_nd(data, indices, batch_dims or 0, opset=opset(self, "")),)

    class Gather(OpRun):  # type: ignore[misc,unused-ignore]
        op_domain = ""

        def _run(self, data: Any, indices: Any, axis: int | None = None) -> tuple[Any]:
            version = opset(self, "")
            if version >= 13:
                return (ops.gather_13(data, indices, axis or 0),)
            if version >= 11:
                return (ops.gather_11(data, indices, axis or 0),)
            return (ops.gather_1(data, indices, axis or 0),)

    class MsGatherND(OpRun):  # type: ignore[misc,unused-ignore]
        op_domain = "com.microsoft"

        def _run(self, data: Any, indices: Any, batch_dims: int | None = None) -> tuple[Any]:
            if batch_dims:
                raise ValueError(
                    f"com.microsoft GatherND-1: has no attribute batch_dims, got {batch_dims}"
                )
            return (ops.ms_gather_nd_1(data, indices),)

    class GatherBlockQuantized(OpRun):  # type: ignore[misc,unused-ignore]
        op_domain = "com.microsoft"

        def _run(
            self,
            data: Any,
            indices: Any,
            scales: Any,
            zero_points: Any = None,
            gather_axis: int | None = None,
            quantize_axis: int | None = None,
            block_size: int | None = None,
            bits: int | None = None,
        ) -> tuple[Any]:
            # An attribute the node leaves out takes the schema's default.
            return (
                ops.ms_gather_block_quantized_1(
                    data,
                    indices,
                    scales,
                    zero_points,
                    gather_axis=0 if gather_axis is None else gather_axis,
                    quantize_axis=1 if quantize_axis is None else quantize_axis,
                    block_size=128 if block_size is None else block_size,
                    bits=4 if bits is None else bits,
                ),
            )

    # The evaluator matches classes by name and domain.
    MsGatherND.__name__ = MsGatherND.__qualname__ = "GatherND"
    return [GatherND, Gather, MsGatherND, GatherBlockQuantized]

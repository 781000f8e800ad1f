"""Quantised embeddings: com.microsoft GatherBlockQuantized, ndgather against onnxruntime.

Case ``llm_vocab``: 1,024 random token ids (int64, fixed seed) from a (151936, 4096) table of
4-bit codes (a current LLM vocabulary), stored as onnxruntime's uint8 packing, two codes per
byte: a (151936, 2048) uint8 array, 297 MiB; block_size 32, float32 scales (151936, 128),
default zero point (8). The result is (1024, 4096) float32, 16 MiB.

Candidates, each checked bit-identical to onnxruntime before timing, then timed in interleaved
rounds (``timing.py``), the same ids every call:

* ``ndgather``: ``ndgather.onnx.ms_gather_block_quantized_1(data, ids, scales, block_size=32)``;
* ``onnxruntime``: an ``InferenceSession`` (CPU provider, default options: all physical cores)
  of the one-node model, ``data`` and ``scales`` fed as inputs with the ids (NumPy arrays,
  which onnxruntime reads in place) and the result returned as a NumPy array;
* ``numpy``: the idiom without a runtime: ``data[ids]``, the nibbles split, then
  ``(codes - 8).astype(float32) * np.repeat(scales[ids], 32, axis=1)``.

    python -m benches quantized                     # 9 rounds
    python -m benches quantized --quick             # a small table, 2 rounds (CI: runs, agrees)
    python -m benches quantized --json bench-results/quantized.json --doc docs/performance.md
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import ndgather.onnx as nx
import numpy as np

from .report import fmt_ratio, fmt_seconds, markdown_table, provenance, text_table
from .runner import Run
from .timing import Call, run_interleaved

SEED = 19
ROUNDS = (9, 2)
MIN_SAMPLE_S = (0.1, 0.001)
TABLE = "quantized table"
PEERS = ("onnxruntime",)


@dataclass(frozen=True)
class Case:
    name: str
    description: str
    vocab: int
    hidden: int  # codes per row (4-bit: hidden // 2 bytes)
    ids: int
    block_size: int = 32

    def shrunk(self) -> Case:
        return replace(self, vocab=self.vocab // 64, hidden=self.hidden // 8, ids=self.ids // 8)


CASES = (
    Case(
        "llm_vocab",
        "1,024 ids from a (151936, 4096) 4-bit table (uint8-packed), block 32, float32 scales",
        151_936,
        4096,
        1024,
    ),
)


def build(case: Case) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(SEED)
    data = rng.integers(0, 256, (case.vocab, case.hidden // 2), dtype=np.uint8)
    scales = (rng.standard_normal((case.vocab, case.hidden // case.block_size)) * 0.01).astype(
        np.float32
    )
    ids = rng.integers(0, case.vocab, case.ids, dtype=np.int64)
    return data, scales, ids


def ort_session(block_size: int) -> Any:
    import onnxruntime as ort
    from onnx import TensorProto, helper

    node = helper.make_node(
        "GatherBlockQuantized",
        ["data", "indices", "scales"],
        ["output"],
        domain="com.microsoft",
        gather_axis=0,
        quantize_axis=1,
        block_size=block_size,
        bits=4,
    )
    graph = helper.make_graph(
        [node],
        "gbq",
        [
            helper.make_tensor_value_info("data", TensorProto.UINT8, None),
            helper.make_tensor_value_info("indices", TensorProto.INT64, None),
            helper.make_tensor_value_info("scales", TensorProto.FLOAT, None),
        ],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)],
    )
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])


def numpy_idiom(data: np.ndarray, ids: np.ndarray, scales: np.ndarray, block: int) -> np.ndarray:
    rows = data[ids]
    codes = np.empty((len(ids), rows.shape[1] * 2), np.int32)
    codes[:, 0::2] = rows & 0x0F
    codes[:, 1::2] = rows >> 4
    return (codes - 8).astype(np.float32) * np.repeat(scales[ids], block, axis=1)


def candidates(
    case: Case, data: np.ndarray, scales: np.ndarray, ids: np.ndarray
) -> dict[str, Call]:
    bs = case.block_size
    calls = {
        "ndgather": Call(nx.ms_gather_block_quantized_1, (data, ids, scales), {"block_size": bs}),
        "numpy": Call(numpy_idiom, (data, ids, scales, bs)),
    }
    try:
        session = ort_session(bs)
    except ImportError:
        return calls
    feeds = {"data": data, "indices": ids, "scales": scales}
    calls["onnxruntime"] = Call(session.run, (["output"], feeds))
    return calls


def as_array(out: Any) -> np.ndarray:
    return np.asarray(out[0] if isinstance(out, list) else out)


def measure(run: Run) -> list[dict[str, Any]]:
    return run.each(run.cases, lambda case: measure_case(run, case))


def measure_case(run: Run, case: Case) -> dict[str, Any]:
    data, scales, ids = build(case)
    calls = candidates(case, data, scales, ids)
    reference_name = "onnxruntime" if "onnxruntime" in calls else "numpy"
    reference = as_array(calls[reference_name]())
    for name, call in calls.items():
        got = as_array(call())
        if got.shape != reference.shape or not np.array_equal(
            got.view(np.uint32), reference.view(np.uint32)
        ):
            raise SystemExit(f"{case.name}: {name} is not bit-identical to {reference_name}")
    timings = run_interleaved(calls, run.rounds, run.min_sample_s)
    medians = {name: t.median for name, t in timings.items()}
    return {
        "name": case.name,
        "description": case.description,
        "data_shape": list(data.shape),
        "codes_shape": [case.vocab, case.hidden],
        "block_size": case.block_size,
        "ids": case.ids,
        "output_bytes": int(reference.nbytes),
        "bit_identical_to": reference_name,
        "candidates": {name: t.record() for name, t in timings.items()},
        "ratio_onnxruntime": (
            medians["ndgather"] / medians["onnxruntime"] if "onnxruntime" in medians else None
        ),
        "ratio_numpy": medians["ndgather"] / medians["numpy"],
    }


def _median(candidates: dict[str, Any], name: str) -> str:
    return fmt_seconds(candidates[name]["median_s"]) if name in candidates else "-"


def rows(records: Sequence[dict[str, Any]]) -> tuple[list[str], list[list[str]]]:
    header = ["case", "ndgather", "onnxruntime", "numpy", "ndgather / onnxruntime"]
    header.append("ndgather / numpy")
    table = []
    for r in records:
        c = r["candidates"]
        ratio_ort = r["ratio_onnxruntime"]
        table.append(
            [
                r["name"],
                _median(c, "ndgather"),
                _median(c, "onnxruntime"),
                _median(c, "numpy"),
                fmt_ratio(ratio_ort) if ratio_ort is not None else "-",
                fmt_ratio(r["ratio_numpy"]),
            ]
        )
    return header, table


def text(results: dict[str, Any]) -> str:
    return text_table(*rows(results["cases"]))


def markdown(results: dict[str, Any]) -> str:
    cases = "; ".join(f"`{r['name']}`: {r['description']}" for r in results["cases"])
    return "\n\n".join(
        [
            markdown_table(*rows(results["cases"])),
            f"Median per call over {results['rounds']} interleaved rounds, every result "
            f"bit-identical to onnxruntime's; {cases}; " + provenance(results),
        ]
    )

"""Python stand-in for TransformerEngine's compiled PyTorch extension ``transformer_engine_torch``.

STAND-IN, NOT TRANSFORMER ENGINE. It mirrors the names that the pure-Python ``transformer_engine``
wheels 1.13.0 and 2.1.0 - 2.20.2 use from the extension (``tex.<name>``, ``from
transformer_engine_torch import ...``; collected by grepping those releases' ``transformer_engine/pytorch``
sources), so that TE's real Python code imports and runs its FP8 bookkeeping on a CPU-only machine.

What is real here and what is not:

* Enums (``DType``, ``FP8FwdTensors``, ``FP8BwdTensors``): Python ``IntEnum`` s with the values of
  ``transformer_engine/common/include/transformer_engine/transformer_engine.h`` / ``pybind.h``.
  ``DType`` has the members of the TE version installed (TE 2.x asserts that its Python ``DType``
  matches the extension's member set at import).
* ``FP8TensorMeta``: a plain holder of ``scale``, ``scale_inv``, ``amax_history`` (the pybind
  class of TE 1.x has exactly these three read/write tensors).
* ``fused_amax_and_scale_update_after_reduction``: a CPU re-implementation (torch ops) of the
  delayed-scaling update kernel (``common/recipe/delayed_scaling.cu``): amax = max (or most
  recent) of the history, history rolled by one, scale = fp8_max / amax / 2**margin (unchanged
  where amax is 0 or not finite). Only its effect on the bookkeeping matters for the tests
  (scales change from one step to the next, so a stale stash is visible).
* Every other kernel name raises ``NotImplementedError`` when called: tests never run a GEMM,
  a cast or attention; they drive TE's own bookkeeping (``FP8GlobalStateManager``,
  ``transformer_engine.pytorch.distributed``) directly.
* Info queries answer as a CPU box would (no multicast, no MPI userbuffers, no expert-parallel
  zero copy, cuBLASLt version 0), except ``get_cudnn_version`` (9.12.0, which TE 2.20's loader
  requires).
* ``cpu_platform``: not a name of TE's extension. The CPU answers to the CUDA queries TE's Python
  code makes around a module's FP8 bookkeeping (the RNG state ``te.checkpoint`` saves, the compute
  capability of TE's FP8-support check, "no stream is being captured", CUDA while a TE module is
  constructed, a CUDA input to ``prepare_forward``). ``torchfix_fp8_recompute.reproduction`` (the
  fixes' shipped reproductions, which the tests run) asks TE's extension for it where no CUDA GPU is
  there, and runs its cases on the CPU with it; elsewhere it reports that it cannot run.

Loaded by the compiled shim ``shim.c`` (``install.py`` builds it as
``transformer_engine_torch.<abi>.so`` into the test environment's site-packages), so TE's own
loader (``load_framework_extension`` / ``_load_library``) runs unchanged.
"""

from __future__ import annotations

import contextlib
import enum
import types
from importlib import metadata
from typing import Any, Iterator, Sequence

import torch

__all__: list[str] = []  # filled below: TE 1.x/2.x do ``from transformer_engine_torch import *``


def _te_version() -> tuple[int, ...]:
    try:
        return tuple(int(p) for p in metadata.version("transformer_engine").split(".")[:2])
    except Exception:  # noqa: BLE001 - unknown: newest layout
        return (99, 0)


_DTYPE_MEMBERS = {
    "kByte": 0,
    "kInt16": 1,
    "kInt32": 2,
    "kInt64": 3,
    "kFloat32": 4,
    "kFloat16": 5,
    "kBFloat16": 6,
    "kFloat8E4M3": 7,
    "kFloat8E5M2": 8,
    "kFloat8E8M0": 9,
    "kFloat4E2M1": 10,
}


def _dtype_enum() -> type[enum.IntEnum]:
    """``DType`` as the installed TE release's extension exports it (pybind.h ``py::enum_<DType>``)."""
    names = ["kByte", "kInt32", "kFloat32", "kFloat16", "kBFloat16", "kFloat8E4M3", "kFloat8E5M2"]
    if _te_version() >= (2, 0):
        names.append("kFloat4E2M1") if _te_version() >= (2, 8) else None
    members = {n: _DTYPE_MEMBERS[n] for n in names}
    return enum.IntEnum("DType", members, module=__name__)  # type: ignore[return-value]


DType = _dtype_enum()
FP8FwdTensors = enum.IntEnum(  # type: ignore[misc]
    "FP8FwdTensors",
    {
        n: i
        for i, n in enumerate(
            [
                "GEMM1_INPUT",
                "GEMM1_WEIGHT",
                "GEMM1_OUTPUT",
                "GEMM2_INPUT",
                "GEMM2_WEIGHT",
                "GEMM2_OUTPUT",
                "GEMM3_INPUT",
                "GEMM3_WEIGHT",
                "GEMM3_OUTPUT",
            ]
        )
    },
    module=__name__,
)
FP8BwdTensors = enum.IntEnum(  # type: ignore[misc]
    "FP8BwdTensors",
    {
        n: i
        for i, n in enumerate(
            ["GRAD_OUTPUT1", "GRAD_INPUT1", "GRAD_OUTPUT2", "GRAD_INPUT2", "GRAD_OUTPUT3", "GRAD_INPUT3"]
        )
    },
    module=__name__,
)


def _enum(name: str, members: Sequence[str]) -> type[enum.IntEnum]:
    return enum.IntEnum(name, {m: i for i, m in enumerate(members)}, module=__name__)  # type: ignore[return-value]


_BACKENDS = {"NVTE_No_Backend": -1, "NVTE_F16_max512_seqlen": 0, "NVTE_F16_arbitrary_seqlen": 1, "NVTE_FP8": 2}
if _te_version() >= (2, 19):  # the max512 backend left the C++ enum; TE 2.19 asserts the member set
    del _BACKENDS["NVTE_F16_max512_seqlen"]
NVTE_Fused_Attn_Backend = enum.IntEnum("NVTE_Fused_Attn_Backend", _BACKENDS, module=__name__)  # type: ignore[misc]
NVTE_Bias_Type = _enum("NVTE_Bias_Type", ["NVTE_NO_BIAS", "NVTE_PRE_SCALE_BIAS", "NVTE_POST_SCALE_BIAS", "NVTE_ALIBI"])
NVTE_Mask_Type = _enum(
    "NVTE_Mask_Type",
    [
        "NVTE_NO_MASK",
        "NVTE_PADDING_MASK",
        "NVTE_CAUSAL_MASK",
        "NVTE_PADDING_CAUSAL_MASK",
        "NVTE_CAUSAL_BOTTOM_RIGHT_MASK",
        "NVTE_PADDING_CAUSAL_BOTTOM_RIGHT_MASK",
        "NVTE_ARBITRARY_MASK",
    ],
)
NVTE_QKV_Format = _enum(
    "NVTE_QKV_Format",
    [
        "NVTE_SBHD",
        "NVTE_BSHD",
        "NVTE_THD",
        "NVTE_BHSD",
        "NVTE_SBHD_2BSHD",
        "NVTE_BSHD_2SBHD",
        "NVTE_THD_2BSHD",
        "NVTE_THD_2SBHD",
        "NVTE_QKV_Format_NOT_SET",
    ],
)
NVTE_QKV_Layout = _enum(
    "NVTE_QKV_Layout",
    [
        "NVTE_SB3HD",
        "NVTE_SBH3D",
        "NVTE_SBHD_SB2HD",
        "NVTE_SBHD_SBH2D",
        "NVTE_SBHD_SBHD_SBHD",
        "NVTE_BS3HD",
        "NVTE_BSH3D",
        "NVTE_BSHD_BS2HD",
        "NVTE_BSHD_BSH2D",
        "NVTE_BSHD_BSHD_BSHD",
        "NVTE_T3HD",
        "NVTE_TH3D",
        "NVTE_THD_T2HD",
        "NVTE_THD_TH2D",
        "NVTE_THD_THD_THD",
        "NVTE_SBHD_BSHD_BSHD",
        "NVTE_BSHD_SBHD_SBHD",
        "NVTE_THD_BSHD_BSHD",
        "NVTE_THD_SBHD_SBHD",
        "NVTE_Paged_KV_BSHD_BSHD_BSHD",
        "NVTE_Paged_KV_BSHD_SBHD_SBHD",
        "NVTE_Paged_KV_SBHD_BSHD_BSHD",
        "NVTE_Paged_KV_SBHD_SBHD_SBHD",
        "NVTE_Paged_KV_THD_BSHD_BSHD",
        "NVTE_Paged_KV_THD_SBHD_SBHD",
        "NVTE_BHSD_BHSD_BHSD",
        "NVTE_QKV_Layout_NOT_SET",
    ],
)
NVTE_Softmax_Type = _enum(
    "NVTE_Softmax_Type", ["NVTE_VANILLA_SOFTMAX", "NVTE_OFF_BY_ONE_SOFTMAX", "NVTE_LEARNABLE_SOFTMAX"]
)
NVTERoutingMapFormat = _enum("NVTERoutingMapFormat", ["kBool", "kIndex"])
CommOverlapType = _enum("CommOverlapType", ["RS", "AG"])
Float8BlockScaleTensorFormat = _enum("Float8BlockScaleTensorFormat", ["GEMM_READY", "COMPACT"])
NVTEScalingMode = _enum(
    "NVTEScalingMode",
    [
        "NVTE_DELAYED_TENSOR_SCALING",
        "NVTE_MXFP8_1D_SCALING",
        "NVTE_BLOCK_SCALING_1D",
        "NVTE_BLOCK_SCALING_2D",
        "NVTE_NVFP4_1D_SCALING",
    ],
)
NVTEQBHistogramMode = _enum("NVTEQBHistogramMode", ["NONE"])
CommOverlapAlgo = _enum(
    "CommOverlapAlgo",
    [
        "BULK_OVERLAP_AG",
        "BULK_OVERLAP_RS",
        "SPLIT_PIPELINED_AG_P2P",
        "SPLIT_PIPELINED_RS",
        "SPLIT_PIPELINED_RS_P2P",
        "ATOMIC_GEMM_RS",
        "ATOMIC_GEMM_AG_P2P",
        "ATOMIC_GEMM_RS_P2P",
        "EXTERNAL_BULK_OVERLAP_AG",
    ],
)


class FP8TensorMeta:
    """TE 1.x pybind class: three read/write tensors."""

    def __init__(self) -> None:
        self.scale: torch.Tensor | None = None
        self.scale_inv: torch.Tensor | None = None
        self.amax_history: torch.Tensor | None = None


class _NoCuda:
    """Base of the extension's CUDA-only classes: constructing one raises."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(f"transformer_engine_torch stand-in: {type(self).__name__} needs CUDA")


class CommOverlap(_NoCuda):
    pass


class CommOverlapP2P(_NoCuda):
    pass


class CommOverlapHelper(_NoCuda):
    pass


class LayerNorm(_NoCuda):
    pass


class _Namespace:
    """Submodule of kernels (``tex.grouped_mlp_experimental``)."""

    def __init__(self, name: str) -> None:
        self.__name__ = name

    def __getattr__(self, attr: str) -> Any:
        if attr.startswith("__"):
            raise AttributeError(attr)
        return _kernel(f"{self.__name__}.{attr}")


grouped_mlp_experimental = _Namespace("grouped_mlp_experimental")


def _kernel(name: str) -> Any:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError(f"transformer_engine_torch stand-in: {name} is a CUDA kernel (not on CPU)")

    kernel.__name__ = kernel.__qualname__ = name
    return kernel


_KERNELS = (
    "columnwise_swizzle",
    "dsituglu",
    "ep_prepare_and_dispatch",
    "fused_multi_quantize",
    "fused_topk_with_score_function_qb_fwd",
    "get_device_pointer_for_data_and_scales",
    "rowwise_swizzle",
    "scaled_dsituglu",
    "scaled_situglu",
    "situglu",
    "bgrad_group_quantize",
    "bgrad_quantize",
    "bulk_overlap_ag_with_external_gemm",
    "cast_to_fp8",
    "clamped_dswiglu",
    "clamped_swiglu",
    "compute_amax",
    "convert_bshd_to_thd",
    "convert_thd_to_bshd",
    "copy_data_ptrs_to_device",
    "copy_to_kv_cache",
    "create_empty_quantized_tensor",
    "cusolvermp_ctx_create",
    "cusolvermp_ctx_destroy",
    "dbias_dgelu",
    "dbias_dqgelu",
    "dbias_drelu",
    "dbias_dsilu",
    "dbias_dsrelu",
    "dequantize",
    "dgeglu",
    "dgelu",
    "dglu",
    "dqgeglu",
    "dqgelu",
    "dreglu",
    "drelu",
    "dropout_bwd",
    "dropout_fwd",
    "dsilu",
    "dsreglu",
    "dsrelu",
    "dswiglu",
    "ep_combine",
    "ep_combine_bwd",
    "ep_dispatch",
    "ep_dispatch_bwd",
    "ep_finalize",
    "ep_get_zero_copy",
    "ep_handle_mem_size",
    "ep_initialize",
    "ep_prepare",
    "fa_prepare_bwd",
    "fa_prepare_fwd",
    "fp8_block_scaling_compute_partial_amax",
    "fp8_block_scaling_partial_cast",
    "fp8_cast_transpose_bgrad_dgelu_fused",
    "fp8_cast_transpose_bgrad_fused",
    "fp8_cs_quantize",
    "fp8_dequantize",
    "fp8_gemm",
    "fp8_quantize",
    "fp8_transpose",
    "fp8_transpose_noalloc",
    "fp8_transpose_noalloc_noop",
    "fused_attn_bwd",
    "fused_attn_bwd_kvpacked",
    "fused_attn_bwd_qkvpacked",
    "fused_attn_fwd",
    "fused_attn_fwd_kvpacked",
    "fused_attn_fwd_qkvpacked",
    "fused_cast_transpose_bgrad",
    "fused_cast_transpose_bgrad_dgelu",
    "fused_cast_transpose_noop",
    "fused_dswiglu_cast_transpose",
    "fused_fp8_transpose_bgrad",
    "fused_moe_aux_loss_bwd",
    "fused_moe_aux_loss_fwd",
    "fused_moe_aux_loss_fwd_graph_safe",
    "fused_multi_cast_transpose_alloc",
    "fused_multi_row_padding",
    "fused_multi_row_unpadding",
    "fused_qkv_rope_backward",
    "fused_qkv_rope_forward",
    "fused_rope_backward",
    "fused_rope_forward",
    "fused_rope_thd_backward",
    "fused_rope_thd_forward",
    "fused_score_for_moe_aux_loss_bwd",
    "fused_score_for_moe_aux_loss_fwd",
    "fused_topk_with_score_function_bwd",
    "fused_topk_with_score_function_fwd",
    "geglu",
    "gelu",
    "gemm",
    "gemm_inf",
    "generic_gemm",
    "get_fused_attn_backend",
    "get_grouped_gemm_setup_workspace_size",
    "get_stream_priority_range",
    "glu",
    "group_quantize",
    "group_requantize_inplace",
    "grouped_swizzle_for_gemm",
    "layernorm",
    "layernorm_bwd",
    "layernorm_fwd",
    "layernorm_fwd_fp8",
    "layernorm_fwd_fp8_inf",
    "layernorm_fwd_fp8_noalloc",
    "layernorm_fwd_inf",
    "layernorm_fwd_noalloc",
    "moe_permute_bwd",
    "moe_permute_fwd",
    "moe_unpermute_bwd",
    "moe_unpermute_fwd",
    "multi_tensor_adam",
    "multi_tensor_adam_capturable",
    "multi_tensor_adam_capturable_master",
    "multi_tensor_adam_fp8",
    "multi_tensor_adam_param_remainder",
    "multi_tensor_compute_scale_and_scale_inv",
    "multi_tensor_compute_scale_inv_e8m0",
    "multi_tensor_l2norm",
    "multi_tensor_scale",
    "multi_tensor_scale_tensor",
    "multi_tensor_sgd",
    "multi_tensor_swizzle_scales_for_gemm_unchecked_",
    "multi_tensor_transpose_to_bhsd",
    "multi_tensor_unscale_l2norm",
    "mxfp8_dequantize",
    "mxfp8_quantize",
    "mxfp8_scaling_compute_partial_amax",
    "mxfp8_scaling_partial_cast",
    "newton_schulz",
    "nvfp4_2d_multi_tensor_transpose",
    "nvfp4_2d_scale_transpose",
    "nvfp4_compute_global_scale",
    "nvfp4_data_transpose",
    "nvfp4_group_quantize_with_amax",
    "nvfp4_multi_tensor_2d_partial_cast",
    "nvfp4_multi_tensor_compute_partial_amax",
    "nvfp4_multi_tensor_fused_scale",
    "nvfp4_quantize_with_amax",
    "qgeglu",
    "qgelu",
    "quantize",
    "reglu",
    "relu",
    "rmsnorm_bwd",
    "rmsnorm_bwd_add",
    "rmsnorm_fwd",
    "rmsnorm_fwd_fp8",
    "rmsnorm_fwd_fp8_inf",
    "rmsnorm_fwd_fp8_noalloc",
    "rmsnorm_fwd_inf",
    "rmsnorm_fwd_noalloc",
    "scaled_aligned_causal_masked_softmax_backward",
    "scaled_aligned_causal_masked_softmax_forward",
    "scaled_clamped_dswiglu",
    "scaled_clamped_swiglu",
    "scaled_dsrelu",
    "scaled_dswiglu",
    "scaled_masked_softmax_backward",
    "scaled_masked_softmax_forward",
    "scaled_softmax_backward",
    "scaled_softmax_forward",
    "scaled_srelu",
    "scaled_swiglu",
    "scaled_upper_triang_masked_softmax_backward",
    "scaled_upper_triang_masked_softmax_forward",
    "silu",
    "split_quantize",
    "splits_to_offsets",
    "splits_to_offsets_multi",
    "sreglu",
    "srelu",
    "swap_first_dims",
    "swiglu",
    "swizzle_scales_for_gemm_",
    "te_general_grouped_gemm",
    "te_general_grouped_gemm_for_discrete_in",
    "te_general_grouped_gemm_for_discrete_out",
    "te_general_grouped_gemm_for_grouped_tensor",
    "thd_copy_valid_tokens_from_per_split_to_rank_local",
    "thd_cp_rank_order_to_sequence_order",
    "thd_get_partitioned_indices",
    "thd_grad_correction",
    "thd_out_correction",
    "thd_read_half_tensor",
    "thd_read_second_half_lse",
    "thd_second_half_lse_correction",
    "thd_sequence_order_to_cp_rank_order",
)
for _name in _KERNELS:
    globals()[_name] = _kernel(_name)


def get_cublasLt_version() -> int:
    return 0


def get_cudnn_version() -> int:
    """cuDNN 9.12.0 (``cudnnGetVersion`` encoding): TE 2.20's loader refuses older runtimes."""
    return 91200


def get_num_cublas_streams() -> int:
    return 4


_num_cublas_streams = 4


def device_supports_multicast(*args: Any) -> bool:
    return False


def ubuf_built_with_mpi() -> bool:
    return False


def ep_zero_copy_supported() -> bool:
    return False


_FP8_MAX = {"kFloat8E4M3": 448.0, "kFloat8E5M2": 57344.0}


def fused_amax_and_scale_update_after_reduction(
    amax_reduction_buffer: torch.Tensor,
    amax_histories: list[torch.Tensor],
    scales: list[torch.Tensor],
    *rest: Any,
) -> None:
    """CPU version of the delayed-scaling update (TE 1.x passes ``scale_invs`` before the algo)."""
    if len(rest) == 4:  # TE 1.x: (scale_invs, amax_compute_algo, fp8_dtype, margin)
        scale_invs, algo, fp8_dtype, margin = rest
    else:  # TE 2.x: (amax_compute_algo, fp8_dtype, margin)
        scale_invs, (algo, fp8_dtype, margin) = None, rest
    fp8_max = _FP8_MAX[DType(int(fp8_dtype)).name]
    offset = 0
    for i, (history, scale) in enumerate(zip(amax_histories, scales)):
        n = scale.numel()
        history[0].copy_(amax_reduction_buffer[offset : offset + n])
        offset += n
        amax = history.max(dim=0).values if algo == "max" else history[0].clone()
        rolled = torch.roll(history, -1, dims=0)
        rolled[-1].zero_()
        history.copy_(rolled)
        new_scale = fp8_max / amax / (2.0**margin)
        ok = (amax > 0) & torch.isfinite(amax)
        scale.copy_(torch.where(ok, new_scale, scale))
        if scale_invs is not None:
            scale_invs[i].copy_(1.0 / scale)


class _CudaLooking(torch.Tensor):
    """An input that answers ``is_cuda`` as it would on a GPU (``prepare_forward``'s device check)."""

    @property
    def is_cuda(self) -> bool:  # type: ignore[override]
        return True


class _CpuPlatform:
    """STAND-IN: what ``torchfix_fp8_recompute.reproduction`` runs its cases with on a CPU (its
    ``Platform``; the module docstring says what each answer stands in for)."""

    device = torch.device("cpu")

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """For the block: CPU answers to the CUDA queries of TE's checkpoint (the RNG state it saves
        and restores, ``distributed.py``), of its FP8-support check (device 0, compute capability
        9.0) and of ``fp8_graph_capturing`` (no stream is being captured); restored after."""
        import transformer_engine.pytorch.distributed as dist

        answers = [
            (dist, "_get_cuda_rng_state", lambda *args, **kwargs: torch.get_rng_state()),
            (dist, "_set_cuda_rng_state", lambda *args, **kwargs: None),
            (torch.cuda, "current_device", lambda: 0),
            (torch.cuda, "get_device_properties", lambda device=None: types.SimpleNamespace(major=9, minor=0)),
            (torch.cuda, "is_current_stream_capturing", lambda: False),
        ]
        saved = [(owner, name, getattr(owner, name)) for owner, name, _ in answers]
        for owner, name, answer in answers:
            setattr(owner, name, answer)
        try:
            yield
        finally:
            for owner, name, value in saved:
                setattr(owner, name, value)

    @contextlib.contextmanager
    def constructing(self) -> Iterator[None]:
        """``torch.cuda.is_available`` answers True for the block (TE's module constructor requires CUDA)."""
        saved = torch.cuda.is_available
        torch.cuda.is_available = lambda: True
        try:
            yield
        finally:
            torch.cuda.is_available = saved

    def module_input(self, x: torch.Tensor) -> torch.Tensor:
        """``x`` as a tensor that reports ``is_cuda`` (for ``prepare_forward``'s device check only)."""
        return x.as_subclass(_CudaLooking)


cpu_platform = _CpuPlatform()

__all__ += [
    n
    for n in list(globals())
    if not n.startswith("_")
    and n not in ("annotations", "contextlib", "enum", "metadata", "torch", "types", "Any", "Iterator", "Sequence")
]

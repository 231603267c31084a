"""The test kit for pass authors: random graphs, pattern strategies, and checks.

    from ge.testing import graphs, conv_bn_chain, run_pass, assert_equivalent, count_ops

    @given(graphs(with_pattern=conv_bn_chain()))
    def test_conv_bn_fusion(case):
        after = run_pass(case, "ConvBatchnormFusionPass")
        assert_equivalent(case, after)
        assert count_ops(after, BatchNormOp) <= count_ops(case, BatchNormOp) - len(case.sites_of("conv_bn_chain", exact=True))

`builder` builds graphs by hand, `strategies` draws them, `patterns` places the
subgraphs passes match (and near misses), `equivalence` runs and compares them,
`fusion` runs a fusion pass with its counts and finds the sites' ops.
"""

from ge.testing.builder import GraphBuilder, GraphCase, InputSpec, PatternSite, random_inputs
from ge.testing.equivalence import RTOL, assert_equivalent, clone, count_ops, run_pass
from ge.testing.fusion import alive, fuse, site_ops
from ge.testing.patterns import (
    attention,
    cast_chain,
    constant_subgraph,
    conv_bias_add,
    conv_bn_chain,
    conv_covering_input,
    conv_scale_chain,
    gelu_erf_decomposition,
    gemm_chain,
    layer_norm_decomposition,
    matmul_bias_add,
    reshape_transpose_chain,
    second_user,
    softmax_decomposition,
    transpose_reshape_pair,
)
from ge.testing.strategies import DEFAULT_OPS, ELEMENTWISE_OPS, OP_KINDS, GraphState, Pattern, graphs

__all__ = [
    "alive",
    "fuse",
    "site_ops",
    "DEFAULT_OPS",
    "ELEMENTWISE_OPS",
    "OP_KINDS",
    "RTOL",
    "GraphBuilder",
    "GraphCase",
    "GraphState",
    "InputSpec",
    "Pattern",
    "PatternSite",
    "assert_equivalent",
    "attention",
    "cast_chain",
    "clone",
    "constant_subgraph",
    "conv_bias_add",
    "conv_bn_chain",
    "conv_covering_input",
    "conv_scale_chain",
    "count_ops",
    "gelu_erf_decomposition",
    "gemm_chain",
    "graphs",
    "layer_norm_decomposition",
    "matmul_bias_add",
    "random_inputs",
    "reshape_transpose_chain",
    "run_pass",
    "second_user",
    "softmax_decomposition",
    "transpose_reshape_pair",
]

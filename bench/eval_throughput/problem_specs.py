"""The problems that bench/eval_throughput's candidates are written for, and how each is fused.

Each spec says how ModelNew is built (the same layers, in the same order as the reference's
Model, so the seeded initialisation gives identical weights), what stays in PyTorch (the heavy op
of a level-2 problem), and the element-wise tail that the candidate's CUDA kernel computes:
`bodies` are C++ function bodies of `float op(float v[, float b][, params])` (v: one element of
the input / of the heavy op's output, b: the bias element that belongs to it) that compute what the
reference computes; `wrong` are bodies that compute something else, and differ from the
reference by far more than atol = rtol = 1e-4 on the problem's inputs (torch.rand: every level-1
input lies in [0, 1), so a mistake that only shows for negative inputs would pass there: such
mistakes are used only on level-2 problems, whose GEMM/conv outputs have both signs).

Math that must match torch's CUDA kernels (fp32, checked in the README's notes):
  sigmoid  1 / (1 + exp(-x))                    torch: same expression in float
  gelu     0.5 x (1 + erf(x / sqrt 2))          torch: x * 0.5 * (1 + erf(x * M_SQRT1_2))
  softplus x > 20 ? x : log1p(exp(x))           torch: beta = 1, threshold = 20
  selu     scale * (x > 0 ? x : alpha expm1(x)) alpha 1.6732632..., scale 1.0507009...
  mish     x tanh(log1p(exp(x)))                torch: same, no threshold
  hardsigmoid min(max(x + 3, 0), 6) / 6
"""

# transcendental: the body calls expf/tanhf/erff/...; such candidates never get -use_fast_math
# (fast math swaps in approximate intrinsics; kept to bodies where it changes nothing but a
# division's last bit).
# params: (C name, Python expression in ModelNew.forward, literal for a "baked" variant or None
# when the value arrives through forward's arguments, module-level constant that must equal it)

LEVEL1 = [
    dict(path="level1/19_ReLU.py", slug="relu",
         bodies=["return v > 0.0f ? v : 0.0f;",
                 "return fmaxf(v, 0.0f);"],
         wrong=[], transcendental=False),
    dict(path="level1/20_LeakyReLU.py", slug="leaky_relu",
         init_sig="negative_slope: float = 0.01",
         init_lines=["self.negative_slope = negative_slope"],
         params=[("negative_slope", "float(self.negative_slope)", 0.01, None)],
         bodies=["return v > 0.0f ? v : v * negative_slope;",
                 "return v >= 0.0f ? v : negative_slope * v;"],
         wrong=[], transcendental=False),
    dict(path="level1/21_Sigmoid.py", slug="sigmoid",
         bodies=["return 1.0f / (1.0f + expf(-v));"],
         wrong=[("exp sign flipped", "return 1.0f / (1.0f + expf(v));")],
         transcendental=True),
    dict(path="level1/22_Tanh.py", slug="tanh",
         bodies=["return tanhf(v);"],
         wrong=[("tanh of 2x", "return tanhf(2.0f * v);")], transcendental=True),
    dict(path="level1/25_Swish.py", slug="swish",
         bodies=["return v / (1.0f + expf(-v));",
                 "const float s = 1.0f / (1.0f + expf(-v));\n    return v * s;"],
         wrong=[("exp sign flipped", "return v / (1.0f + expf(v));")], transcendental=True),
    dict(path="level1/26_GELU_.py", slug="gelu",
         bodies=["return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f));",
                 "return v * 0.5f * (1.0f + erff(v * M_SQRT1_2));"],
         wrong=[("erf argument not scaled by 1/sqrt(2)", "return 0.5f * v * (1.0f + erff(v));")],
         transcendental=True),
    dict(path="level1/27_SELU_.py", slug="selu",
         bodies=["const float alpha = 1.6732632423543772848170429916717f;\n"
                 "    const float scale = 1.0507009873554804934193349852946f;\n"
                 "    return v > 0.0f ? scale * v : scale * alpha * expm1f(v);",
                 "const float alpha = 1.6732632423543772848170429916717f;\n"
                 "    const float scale = 1.0507009873554804934193349852946f;\n"
                 "    return scale * (v > 0.0f ? v : alpha * (expf(v) - 1.0f));"],
         wrong=[("alpha and scale swapped",
                 "const float alpha = 1.0507009873554804934193349852946f;\n"
                 "    const float scale = 1.6732632423543772848170429916717f;\n"
                 "    return v > 0.0f ? scale * v : scale * alpha * expm1f(v);")],
         transcendental=True),
    dict(path="level1/28_HardSigmoid.py", slug="hardsigmoid",
         bodies=["return fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) / 6.0f;",
                 "return fminf(fmaxf(v + 3.0f, 0.0f), 6.0f) * (1.0f / 6.0f);"],
         wrong=[("Keras-style slope 0.2", "return fminf(fmaxf(0.2f * v + 0.5f, 0.0f), 1.0f);")],
         transcendental=False),
    dict(path="level1/29_Softplus.py", slug="softplus",
         bodies=["return v > 20.0f ? v : log1pf(expf(v));",
                 "return fmaxf(v, 0.0f) + log1pf(expf(-fabsf(v)));"],
         wrong=[("the 1 + dropped", "return v > 20.0f ? v : logf(expf(v));")],
         transcendental=True),
    dict(path="level1/30_Softsign.py", slug="softsign",
         bodies=["return v / (1.0f + fabsf(v));"],
         wrong=[("squared denominator", "return v / (1.0f + v * v);")], transcendental=False),
    dict(path="level1/31_ELU.py", slug="elu",
         init_sig="alpha: float = 1.0",
         init_lines=["self.alpha = alpha"],
         params=[("alpha", "float(self.alpha)", 1.0, None)],
         bodies=["return v > 0.0f ? v : alpha * expm1f(v);",
                 "return v > 0.0f ? v : alpha * (expf(v) - 1.0f);"],
         wrong=[], transcendental=True),
    dict(path="level1/32_HardTanh.py", slug="hardtanh",
         bodies=["return fminf(fmaxf(v, -1.0f), 1.0f);",
                 "return v < -1.0f ? -1.0f : (v > 1.0f ? 1.0f : v);"],
         wrong=[("max_val 0.5 instead of 1", "return fminf(fmaxf(v, -1.0f), 0.5f);")],
         transcendental=False),
    dict(path="level1/88_MinGPTNewGelu.py", slug="new_gelu",
         bodies=["const float k = 0.7978845608028654f;  // sqrt(2 / pi)\n"
                 "    return 0.5f * v * (1.0f + tanhf(k * (v + 0.044715f * v * v * v)));"],
         wrong=[("0.44715 instead of 0.044715",
                 "const float k = 0.7978845608028654f;\n"
                 "    return 0.5f * v * (1.0f + tanhf(k * (v + 0.44715f * v * v * v)));")],
         transcendental=True),
    dict(path="level1/5_Matrix_scalar_multiplication.py", slug="scalar_mul",
         fwd_sig="A, s", inp="A",
         params=[("s", "float(s)", None, None)],
         bodies=["return v * s;"],
         wrong=[], transcendental=False),
]

for _s in LEVEL1:
    _s.setdefault("init_sig", "")
    _s.setdefault("init_lines", [])
    _s.setdefault("params", [])
    _s.setdefault("fwd_sig", "x")
    _s.setdefault("inp", "x")
    _s["heavy"] = None
    _s["bias"] = None
    _s["offbyone"] = True  # every level-1 output here is nonzero on inputs in (0, 1)

LEVEL2 = [
    dict(path="level2/12_Gemm_Multiply_LeakyReLU.py", slug="gemm_mul_lrelu",
         init_sig="in_features, out_features, multiplier, negative_slope",
         init_lines=["self.gemm = nn.Linear(in_features, out_features)",
                     "self.multiplier = multiplier",
                     "self.negative_slope = negative_slope"],
         heavy="self.gemm(x)",
         params=[("multiplier", "float(self.multiplier)", 2.0, "multiplier"),
                 ("negative_slope", "float(self.negative_slope)", 0.1, "negative_slope")],
         bodies=["const float t = v * multiplier;\n    return t > 0.0f ? t : t * negative_slope;"],
         wrong=[("slope 0.01 instead of the problem's 0.1",
                 "const float t = v * multiplier;\n    return t > 0.0f ? t : t * 0.01f;")],
         transcendental=False),
    dict(path="level2/9_Matmul_Subtract_Multiply_ReLU.py", slug="mm_sub_mul_relu",
         init_sig="in_features, out_features, subtract_value, multiply_value",
         init_lines=["self.linear = nn.Linear(in_features, out_features)",
                     "self.subtract_value = subtract_value",
                     "self.multiply_value = multiply_value"],
         heavy="self.linear(x)",
         params=[("subtract_value", "float(self.subtract_value)", 2.0, "subtract_value"),
                 ("multiply_value", "float(self.multiply_value)", 1.5, "multiply_value")],
         bodies=["return fmaxf((v - subtract_value) * multiply_value, 0.0f);"],
         wrong=[("the ReLU left out", "return (v - subtract_value) * multiply_value;")],
         transcendental=False),
    dict(path="level2/63_Gemm_ReLU_Divide.py", slug="gemm_relu_div",
         init_sig="in_features, out_features, divisor",
         init_lines=["self.linear = nn.Linear(in_features, out_features)",
                     "self.divisor = divisor"],
         heavy="self.linear(x)",
         params=[("divisor", "float(self.divisor)", 2.0, "divisor")],
         bodies=["return fmaxf(v, 0.0f) / divisor;"],
         wrong=[("multiplies by the divisor", "return fmaxf(v, 0.0f) * divisor;")],
         transcendental=False),
    dict(path="level2/76_Gemm_Add_ReLU.py", slug="gemm_add_relu",
         init_sig="in_features, out_features, bias_shape",
         init_lines=["self.gemm = nn.Linear(in_features, out_features, bias=False)",
                     "self.bias = nn.Parameter(torch.randn(bias_shape))"],
         heavy="self.gemm(x)", bias="self.bias",
         bodies=["return fmaxf(v + b, 0.0f);"],
         wrong=[("ReLU before the bias add", "return fmaxf(v, 0.0f) + b;")],
         transcendental=False),
    dict(path="level2/86_Matmul_Divide_GELU.py", slug="mm_div_gelu",
         init_sig="input_size, output_size, divisor",
         init_lines=["self.linear = nn.Linear(input_size, output_size)",
                     "self.divisor = divisor"],
         heavy="self.linear(x)",
         params=[("divisor", "float(self.divisor)", 10.0, "divisor")],
         bodies=["const float t = v / divisor;\n"
                 "    return 0.5f * t * (1.0f + erff(t * 0.70710678118654752440f));"],
         wrong=[("GELU of the undivided value, then divided",
                 "return 0.5f * v * (1.0f + erff(v * 0.70710678118654752440f)) / divisor;")],
         transcendental=True),
    dict(path="level2/70_Gemm_Sigmoid_Scaling_ResidualAdd.py", slug="gemm_sig_scale_res",
         init_sig="input_size, hidden_size, scaling_factor",
         init_lines=["self.gemm = nn.Linear(input_size, hidden_size)",
                     "self.scaling_factor = scaling_factor"],
         heavy="self.gemm(x)",
         params=[("scaling_factor", "float(self.scaling_factor)", 2.0, "scaling_factor")],
         bodies=["const float s = 1.0f / (1.0f + expf(-v));\n    return s * scaling_factor + v;"],
         wrong=[("scales the residual instead of the sigmoid",
                 "const float s = 1.0f / (1.0f + expf(-v));\n    return s + v * scaling_factor;")],
         transcendental=True),
    dict(path="level2/81_Gemm_Swish_Divide_Clamp_Tanh_Clamp.py", slug="gemm_swish_tanh_clamp",
         init_sig="in_features, out_features, bias=True",
         init_lines=["self.gemm = nn.Linear(in_features, out_features, bias=bias)"],
         heavy="self.gemm(x)",
         bodies=["float t = v / (1.0f + expf(-v));\n"
                 "    t = t / 2.0f;\n"
                 "    t = fminf(fmaxf(t, -1.0f), 1.0f);\n"
                 "    t = tanhf(t);\n"
                 "    return fminf(fmaxf(t, -1.0f), 1.0f);"],
         wrong=[("the divide by 2 left out",
                 "float t = v / (1.0f + expf(-v));\n"
                 "    t = fminf(fmaxf(t, -1.0f), 1.0f);\n"
                 "    return fminf(fmaxf(tanhf(t), -1.0f), 1.0f);")],
         transcendental=True),
    dict(path="level2/29_Matmul_Mish_Mish.py", slug="mm_mish_mish",
         init_sig="in_features, out_features",
         init_lines=["self.linear = nn.Linear(in_features, out_features)"],
         heavy="self.linear(x)",
         bodies=["const float m = v * tanhf(log1pf(expf(v)));\n"
                 "    return m * tanhf(log1pf(expf(m)));"],
         wrong=[("Mish applied once", "return v * tanhf(log1pf(expf(v)));")],
         transcendental=True),
    dict(path="level2/1_Conv2D_ReLU_BiasAdd.py", slug="conv_relu_bias",
         init_sig="in_channels, out_channels, kernel_size, bias_shape",
         init_lines=["self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)",
                     "self.bias = nn.Parameter(torch.randn(bias_shape))"],
         heavy="self.conv(x)", bias="self.bias",
         bodies=["return fmaxf(v, 0.0f) + b;"],
         wrong=[("bias added before the ReLU", "return fmaxf(v + b, 0.0f);")],
         transcendental=False),
    dict(path="level2/57_Conv2d_ReLU_HardSwish.py", slug="conv_relu_hswish",
         init_sig="in_channels, out_channels, kernel_size",
         init_lines=["self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)"],
         heavy="self.conv(x)",
         bodies=["const float t = fmaxf(v, 0.0f);\n"
                 "    return t * fminf(fmaxf((t + 3.0f) / 6.0f, 0.0f), 1.0f);"],
         wrong=[("divides by 5 instead of 6",
                 "const float t = fmaxf(v, 0.0f);\n"
                 "    return t * fminf(fmaxf((t + 3.0f) / 5.0f, 0.0f), 1.0f);")],
         transcendental=False),
    dict(path="level2/71_Conv2d_Divide_LeakyReLU.py", slug="conv_div_lrelu",
         init_sig="in_channels, out_channels, kernel_size, divisor",
         init_lines=["self.conv = nn.Conv2d(in_channels, out_channels, kernel_size)",
                     "self.divisor = divisor"],
         heavy="self.conv(x)",
         params=[("divisor", "float(self.divisor)", 2.0, "divisor")],
         bodies=["const float t = v / divisor;\n    return t > 0.0f ? t : t * 0.01f;"],
         wrong=[("slope 0.1 instead of 0.01",
                 "const float t = v / divisor;\n    return t > 0.0f ? t : t * 0.1f;")],
         transcendental=False),
    dict(path="level2/5_ConvTranspose2d_Subtract_Tanh.py", slug="convt_sub_tanh",
         init_sig="in_channels, out_channels, kernel_size, bias_shape, stride=2, padding=1, "
                  "output_padding=1",
         init_lines=["self.conv_transpose = nn.ConvTranspose2d(in_channels, out_channels, "
                     "kernel_size, stride=stride, padding=padding, output_padding=output_padding)",
                     "self.bias = nn.Parameter(torch.randn(bias_shape))"],
         heavy="self.conv_transpose(x)", bias="self.bias",
         bodies=["return tanhf(v - b);"],
         wrong=[("adds the bias instead of subtracting it", "return tanhf(v + b);")],
         transcendental=True),
]

for _s in LEVEL2:
    _s.setdefault("params", [])
    _s.setdefault("bias", None)
    _s["fwd_sig"] = "x"
    _s["inp"] = "x"
    _s["offbyone"] = False  # ReLU-like tails give zeros that stale memory can match

GPU_PROBLEMS = LEVEL1 + LEVEL2

# CPU smoke problems (bench/eval_throughput/smoke_problems), C++ CPU code through load_inline
SMOKE = [
    dict(path="level1/1_tiny_relu.py", slug="tiny_relu", init_sig="", init_lines=[],
         params=[], fwd_sig="x", inp="x", heavy=None, bias=None,
         bodies=["return v > 0.0f ? v : 0.0f;", "return std::max(v, 0.0f);"],
         wrong=[("leaks negative values", "return v > 0.0f ? v : 0.5f * v;")],
         transcendental=False, offbyone=False),
    dict(path="level2/1_tiny_Gemm_Multiply_LeakyReLU.py", slug="tiny_gemm_mul_lrelu",
         init_sig="in_features, out_features, multiplier, negative_slope",
         init_lines=["self.gemm = nn.Linear(in_features, out_features)",
                     "self.multiplier = multiplier",
                     "self.negative_slope = negative_slope"],
         heavy="self.gemm(x)", fwd_sig="x", inp="x", bias=None,
         params=[("multiplier", "float(self.multiplier)", 2.0, "multiplier"),
                 ("negative_slope", "float(self.negative_slope)", 0.1, "negative_slope")],
         bodies=["const float t = v * multiplier;\n    return t > 0.0f ? t : t * negative_slope;"],
         wrong=[("slope 0.01 instead of the problem's 0.1",
                 "const float t = v * multiplier;\n    return t > 0.0f ? t : t * 0.01f;")],
         transcendental=False, offbyone=False),
]

#include "runtime/eval/answer_parsing.hpp"

#include "messages/errors.hpp"

#include <algorithm>
#include <cctype>
#include <optional>
#include <vector>

namespace kbrl::eval {

namespace {

// -- the examples --------------------------------------------------------------------------------

const char* const example_reference = R"(import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return a + b


def get_inputs():
    return [torch.randn(4096, 1024), torch.randn(4096, 1024)]


def get_init_inputs():
    return []
)";

const char* const cuda_answer = R"(import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

add_source = """
#include <torch/extension.h>

__global__ void add_kernel(const float* a, const float* b, float* out, int64_t n) {
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = a[i] + b[i];
}

torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b) {
    auto ac = a.contiguous(), bc = b.contiguous();
    auto out = torch::empty_like(ac);
    int64_t n = ac.numel();
    int threads = 256;
    int blocks = (int)((n + threads - 1) / threads);
    add_kernel<<<blocks, threads>>>(ac.data_ptr<float>(), bc.data_ptr<float>(),
                                    out.data_ptr<float>(), n);
    return out;
}
"""

add = load_inline(
    name="add_example",
    cpp_sources="torch::Tensor add_cuda(torch::Tensor a, torch::Tensor b);",
    cuda_sources=add_source,
    functions=["add_cuda"],
)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return add.add_cuda(a, b)
)";

const char* const triton_answer = R"(import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def add_kernel(a_ptr, b_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    a = tl.load(a_ptr + offsets, mask=mask)
    b = tl.load(b_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, a + b, mask=mask)


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        add_kernel[(triton.cdiv(n, 1024),)](a, b, out, n, BLOCK=1024)
        return out
)";

const char* const torch_answer = R"(import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

add_source = """
#include <torch/extension.h>

torch::Tensor add_cpu(torch::Tensor a, torch::Tensor b) {
    auto ac = a.contiguous(), bc = b.contiguous();
    auto out = torch::empty_like(ac);
    const float* pa = ac.data_ptr<float>();
    const float* pb = bc.data_ptr<float>();
    float* po = out.data_ptr<float>();
    for (int64_t i = 0, n = ac.numel(); i < n; ++i) po[i] = pa[i] + pb[i];
    return out;
}
"""

add = load_inline(name="add_example", cpp_sources=add_source, functions=["add_cpu"])


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a, b):
        return add.add_cpu(a, b)
)";

const char* backend_words(kernel_backend b) {
  switch (b) {
    case kernel_backend::cuda:
      return "custom CUDA kernels (written as C++/CUDA source strings and compiled with "
             "torch.utils.cpp_extension.load_inline)";
    case kernel_backend::hip:
      return "custom HIP kernels (source strings compiled with "
             "torch.utils.cpp_extension.load_inline)";
    case kernel_backend::triton: return "custom Triton kernels (@triton.jit functions)";
    case kernel_backend::torch:
      return "your own code for the CPU (PyTorch operations, or C++ compiled with "
             "torch.utils.cpp_extension.load_inline using cpp_sources)";
    case kernel_backend::cute: return "custom CUTLASS/CuTe kernels";
    case kernel_backend::tilelang: return "custom TileLang kernels (@T.prim_func)";
    case kernel_backend::thunderkittens: return "custom ThunderKittens kernels";
  }
  return "custom kernels";
}

// -- extraction ----------------------------------------------------------------------------------

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front())))
    s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back())))
    s.remove_suffix(1);
  return s;
}

struct fenced_block {
  std::string language; ///< lower-case, "" for a bare fence
  std::string body;
  bool closed = false;
};

/// Every fenced block of `text`, in order. An opening fence is a line starting (after spaces)
/// with ``` and a language word at most; a block closes at a line that is ``` alone or ends
/// with ``` (the code then runs up to it).
std::vector<fenced_block> fenced_blocks(std::string_view text) {
  std::vector<fenced_block> out;
  bool inside = false;
  size_t pos = 0;
  while (pos <= text.size()) {
    auto end = text.find('\n', pos);
    if (end == std::string_view::npos)
      end = text.size();
    auto line = text.substr(pos, end - pos);
    auto t = trim(line);
    if (!inside) {
      if (t.substr(0, 3) == "```") {
        auto lang = trim(t.substr(3));
        bool word = std::all_of(lang.begin(), lang.end(), [](char c) {
          return std::isalnum(static_cast<unsigned char>(c)) || c == '+' || c == '_' || c == '-';
        });
        if (word) {
          fenced_block b;
          for (char c : lang)
            b.language += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
          out.push_back(std::move(b));
          inside = true;
        }
      }
    } else if (t.size() >= 3 && t.substr(t.size() - 3) == "```") {
      auto before = line.substr(0, line.rfind("```"));
      if (!trim(before).empty())
        out.back().body.append(before.data(), before.size()).append("\n");
      out.back().closed = true;
      inside = false;
    } else {
      out.back().body.append(line.data(), line.size()).append("\n");
    }
    pos = end + 1;
  }
  return out;
}

bool is_python(const std::string& lang) {
  return lang == "python" || lang == "py" || lang == "python3";
}

bool defines_model_new(std::string_view code) {
  return code.find("class ModelNew") != std::string_view::npos;
}

/// The code of the fenced blocks of `text` by the rules, or why there is none.
caf::expected<std::string> from_fences(std::string_view text, std::string& how) {
  auto blocks = fenced_blocks(text);
  const fenced_block* chosen = nullptr;
  for (auto& b : blocks)
    if (b.closed && (is_python(b.language) || b.language.empty()) && defines_model_new(b.body))
      chosen = &b;
  if (!chosen)
    for (auto& b : blocks)
      if (b.closed && is_python(b.language))
        chosen = &b;
  if (chosen) {
    how = is_python(chosen->language) ? "python_block" : "code_block";
    return chosen->body;
  }
  if (!blocks.empty() && !blocks.back().closed)
    return make_error(errc::invalid_argument,
                      "the last ``` code block is not closed (the answer ended inside it)");
  if (!blocks.empty())
    return make_error(errc::invalid_argument,
                      "no ```python code block (the answer's code blocks are in other languages "
                      "and none defines class ModelNew)");
  return make_error(errc::invalid_argument,
                    "no ```python code block and no <KERNEL>...</KERNEL> in the answer");
}

} // namespace

const answer_example& example_for(kernel_backend backend) {
  static const answer_example cuda{example_reference, cuda_answer};
  static const answer_example triton{example_reference, triton_answer};
  static const answer_example torch{example_reference, torch_answer};
  switch (backend) {
    case kernel_backend::triton: return triton;
    case kernel_backend::torch: return torch;
    default: return cuda;
  }
}

std::string single_turn_prompt(const problem& p) {
  auto& ex = example_for(p.backend);
  std::string out;
  out += "Make the PyTorch program below faster by replacing some of its operators with ";
  out += backend_words(p.backend);
  out += ".\n\nYou may fuse several operators into one kernel, use a better algorithm (an online "
         "softmax, for example), or leave operators that are already fast as they are. Keep the "
         "interface: define a class named ModelNew that takes the same constructor arguments as "
         "Model and whose forward() returns the same outputs (up to floating-point tolerance). "
         "Your program is run on its own, so it must import and define everything it uses.\n\n";
  out += "An example. The program to speed up:\n```python\n" + ex.reference + "```\n";
  out += "An answer:\n```python\n" + ex.answer + "```\n\n";
  out += "Now the program to speed up";
  if (!p.name.empty())
    out += " (" + p.name + ")";
  out += ":\n```python\n" + p.reference_source;
  if (!p.reference_source.empty() && p.reference_source.back() != '\n')
    out += "\n";
  out += "```\n\nAnswer with the complete new program, defining ModelNew, in one ```python code "
         "block (or between <KERNEL> and </KERNEL>). Write only the code: no tests, no example "
         "usage.\n";
  return out;
}

caf::expected<extracted_code> extract_kernel_code(std::string_view answer) {
  // 1. Skip the reasoning.
  if (auto think = answer.rfind("</think>"); think != std::string_view::npos)
    answer.remove_prefix(think + 8);
  // 2. The last complete <KERNEL>...</KERNEL>.
  extracted_code out;
  auto close = answer.rfind("</KERNEL>");
  if (close != std::string_view::npos) {
    auto open = answer.rfind("<KERNEL>", close);
    if (open != std::string_view::npos) {
      auto inner = answer.substr(open + 8, close - open - 8);
      std::string how;
      if (auto fenced = from_fences(inner, how))
        out.code = *fenced;
      else
        out.code = std::string(trim(inner)) + "\n";
      out.how = "kernel_tag";
      if (trim(out.code).empty())
        return make_error(errc::invalid_argument, "<KERNEL>...</KERNEL> holds no code");
      return out;
    }
  }
  // 3. Fenced blocks.
  auto fenced = from_fences(answer, out.how);
  if (!fenced)
    return fenced.error();
  out.code = std::move(*fenced);
  if (trim(out.code).empty())
    return make_error(errc::invalid_argument, "the chosen ```python code block is empty");
  return out;
}

} // namespace kbrl::eval

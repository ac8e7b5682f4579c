// Retrieval corpora: the Python lexer, the keys that recognise the same program, JSONL loading
// with the built-in KernelBook and Sakana mappings (test/data/retrieval holds one small sample
// of each, written in the datasets' field names), malformed lines reported by number, filters,
// duplicates, and TOML mapping files with their errors.

#include "runtime/retrieval/corpus.hpp"
#include "runtime/retrieval/python_lexer.hpp"
#include "runtime/retrieval/source_keys.hpp"
#include "runtime/eval/problems.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <string>

using namespace kbrl;
using namespace kbrl::retrieval;
using kbrl::test::temp_dir;
using kbrl::test::why;
using kbrl::test::contains;

namespace {

const std::string data_dir = std::string(KBRL_TEST_DATA) + "/retrieval";

std::string kinds(const std::vector<py_token>& tokens) {
  std::string out;
  for (auto& t : tokens) {
    switch (t.kind) {
      case py_token_kind::name: out += "N"; break;
      case py_token_kind::number: out += "0"; break;
      case py_token_kind::string: out += t.statement_string ? "D" : "S"; break;
      case py_token_kind::comment: out += "#"; break;
      case py_token_kind::op: out += "o"; break;
      case py_token_kind::newline: out += "|"; break;
    }
  }
  return out;
}

} // namespace

BOOST_AUTO_TEST_SUITE(retrieval_corpus)

BOOST_AUTO_TEST_CASE(lexer_reads_names_numbers_strings_comments_and_lines) {
  const std::string src = "x = torch.randn(16, 1e-5)  # noise\n"
                          "def f(a,\n      b):\n"
                          "    \"\"\"doc\n    string\"\"\"\n"
                          "    return a @ b ** 2 + 'q'\n";
  auto t = lex_python(src);
  // x = torch . randn ( 16 , 1e-5 ) # |  def f ( a , b ) : |  D |  return a @ b ** 2 + S |
  BOOST_CHECK_EQUAL(kinds(t), "NoNoNo0o0o#|NNoNoNoo|D|NNoNo0oS|");
  BOOST_CHECK_EQUAL(t[8].text, "1e-5");
  BOOST_CHECK_EQUAL(t[10].text, "# noise");
  BOOST_CHECK_EQUAL(t[t.size() - 7].text, "@");
  BOOST_CHECK_EQUAL(t[t.size() - 5].text, "**");
  BOOST_CHECK_EQUAL(t[12].text, "def");
}

BOOST_AUTO_TEST_CASE(lexer_never_fails_on_broken_text) {
  for (const std::string src : {"s = 'unterminated\nx = 1", "\"\"\"never closed", "a = (1,\n",
                                "\\", "", "\xff\xfe bytes", "x = 0x1F + .5"}) {
    auto t = lex_python(src);
    size_t total = 0;
    for (auto& tok : t)
      total += tok.text.size();
    BOOST_CHECK_MESSAGE(total <= src.size(), "tokens cover more than the text: " << src);
  }
  auto t = lex_python("s = 'unterminated\nx = 1");
  BOOST_CHECK_EQUAL(kinds(t), "NoS|No0|"); // the string stops at its line end
}

BOOST_AUTO_TEST_CASE(reference_keys_ignore_comments_docstrings_and_spacing) {
  const std::string a = "import torch\n\nclass Model:\n    \"\"\"Adds.\"\"\"\n"
                        "    def forward(self, x):\n        return x + 1  # add one\n";
  const std::string b = "import torch\r\nclass Model:\r\n    def forward(self, x):\r\n"
                        "        # another comment\r\n        return x+1\r\n";
  const std::string c = "import torch\nclass Model:\n    def forward(self, x):\n"
                        "        return x + 2\n";
  BOOST_CHECK_EQUAL(reference_key(a), reference_key(b));
  BOOST_CHECK_NE(reference_key(a), reference_key(c));
  // The hash matches problem::source_hash: trailing whitespace and CRLF do not count...
  BOOST_CHECK_EQUAL(reference_hash("x = 1  \r\ny = 2\r\n"), reference_hash("x = 1\ny = 2\n"));
  BOOST_CHECK_EQUAL(reference_hash(a), eval::normalized_source_hash(a));
  // ... but comments do.
  BOOST_CHECK_NE(reference_hash(a), reference_hash(b));
  BOOST_CHECK_EQUAL(duplicate_key("a\n\n  b  \n", "k"), duplicate_key("a\r\n  b\n", "k\n"));
  BOOST_CHECK_NE(duplicate_key("a", "k1"), duplicate_key("a", "k2"));
}

BOOST_AUTO_TEST_CASE(backend_names_parse_case_insensitively) {
  BOOST_CHECK(parse_backend("Triton") == kernel_backend::triton);
  BOOST_CHECK(parse_backend("cuda") == kernel_backend::cuda);
  BOOST_CHECK(parse_backend("thunderkittens") == kernel_backend::thunderkittens);
  BOOST_CHECK(!parse_backend("opencl"));
  BOOST_CHECK_EQUAL(backend_names().size(), 7u);
}

BOOST_AUTO_TEST_CASE(kernelbook_sample_loads_with_malformed_lines_reported) {
  auto c = load_corpus(data_dir + "/kernelbook_sample.jsonl", kernelbook_mapping());
  BOOST_REQUIRE_MESSAGE(c, why(c));
  const auto& r = c->report;
  BOOST_CHECK_EQUAL(r.lines, 7); // 8 lines, one blank
  BOOST_CHECK_EQUAL(c->entries.size(), 3u);
  BOOST_CHECK_EQUAL(r.kept, 3);
  BOOST_CHECK_EQUAL(r.duplicates, 1); // line 4 is line 2 with other whitespace
  BOOST_REQUIRE_EQUAL(r.malformed.size(), 3u);
  BOOST_CHECK_EQUAL(r.malformed[0].line, 6);
  BOOST_CHECK_MESSAGE(contains(r.malformed[0].reason, "not JSON"), r.malformed[0].reason);
  BOOST_CHECK_EQUAL(r.malformed[1].line, 7);
  BOOST_CHECK_EQUAL(r.malformed[1].reason, "field 'triton_code' is missing");
  BOOST_CHECK_EQUAL(r.malformed[2].line, 8);
  BOOST_CHECK_EQUAL(r.malformed[2].reason, "field 'python_code' is a number, expected a string");
  BOOST_CHECK_EQUAL(r.skipped(), 4);
  BOOST_CHECK_MESSAGE(contains(r.summary(), "3 malformed (lines 6, 7, 8)"), r.summary());
  const auto& e = c->entries[1];
  BOOST_CHECK_EQUAL(e.id, "1");
  BOOST_CHECK_EQUAL(e.name, "ReluNet");
  BOOST_CHECK(e.backend == kernel_backend::triton);
  BOOST_CHECK(!e.correct.has_value());
  BOOST_CHECK_EQUAL(e.speedup, 0);
  BOOST_CHECK_EQUAL(e.line, 2);
  BOOST_CHECK(contains(e.kernel_source, "@triton.jit"));
  BOOST_CHECK_EQUAL(e.reference_hash, reference_hash(e.reference_source));
  BOOST_CHECK_EQUAL(c->sha256.size(), 64u);
}

BOOST_AUTO_TEST_CASE(sakana_sample_reads_levels_correctness_and_speedups) {
  corpus_filters keep_all;
  keep_all.require_correct = false;
  auto all = load_corpus(data_dir + "/sakana_sample.jsonl", sakana_mapping(), keep_all);
  BOOST_REQUIRE_MESSAGE(all, why(all));
  BOOST_REQUIRE_EQUAL(all->entries.size(), 6u);
  const auto& first = all->entries[0];
  BOOST_CHECK_EQUAL(first.id, "1/19/relu_vectorized");
  BOOST_CHECK_EQUAL(first.name, "19_ReLU");
  BOOST_CHECK_EQUAL(first.level, 1);
  BOOST_CHECK(first.backend == kernel_backend::cuda);
  BOOST_CHECK(first.correct == true);
  BOOST_CHECK_CLOSE(first.speedup, 1.12, /*tol %=*/1e-9);
  BOOST_CHECK(all->entries[2].correct == false);
  BOOST_CHECK_EQUAL(all->entries[4].speedup, 0); // null: unknown

  auto defaults = load_corpus(data_dir + "/sakana_sample.jsonl", sakana_mapping());
  BOOST_REQUIRE_MESSAGE(defaults, why(defaults));
  BOOST_CHECK_EQUAL(defaults->entries.size(), 5u);
  BOOST_CHECK_EQUAL(defaults->report.dropped_incorrect, 1);

  corpus_filters fast;
  fast.min_speedup = 1.0;
  auto f = load_corpus(data_dir + "/sakana_sample.jsonl", sakana_mapping(), fast);
  BOOST_REQUIRE_MESSAGE(f, why(f));
  BOOST_CHECK_EQUAL(f->entries.size(), 3u); // 1.12, 1.31, 2.5; unknown speedups dropped too
  BOOST_CHECK_EQUAL(f->report.dropped_speedup, 2);

  corpus_filters level1;
  level1.levels = {1};
  auto l = load_corpus(data_dir + "/sakana_sample.jsonl", sakana_mapping(), level1);
  BOOST_REQUIRE_MESSAGE(l, why(l));
  BOOST_CHECK_EQUAL(l->entries.size(), 4u);
  BOOST_CHECK_EQUAL(l->report.dropped_level, 1);

  corpus_filters triton_only;
  triton_only.backends = {kernel_backend::triton};
  auto t = load_corpus(data_dir + "/sakana_sample.jsonl", sakana_mapping(), triton_only);
  BOOST_REQUIRE(!t);
  BOOST_CHECK_MESSAGE(contains(describe(t.error()), "the filters left no entry")
                        && contains(describe(t.error()), "6 dropped for their backend"),
                      describe(t.error()));
}

BOOST_AUTO_TEST_CASE(a_corpus_of_only_malformed_lines_fails_naming_them) {
  temp_dir dir;
  auto path = dir.write("bad.jsonl", "not json\n[1, 2]\n{\"python_code\": \"x\"}\n");
  auto c = load_corpus(path, kernelbook_mapping());
  BOOST_REQUIRE(!c);
  const auto text = describe(c.error());
  BOOST_CHECK_MESSAGE(contains(text, "every line is malformed"), text);
  BOOST_CHECK_MESSAGE(contains(text, "line 1: not JSON"), text);
  BOOST_CHECK_MESSAGE(contains(text, "line 2: the line is an array, expected a JSON object"),
                      text);
  BOOST_CHECK_MESSAGE(contains(text, "line 3: field 'triton_code' is missing"), text);

  auto empty = load_corpus(dir.write("empty.jsonl", "\n\n"), kernelbook_mapping());
  BOOST_REQUIRE(!empty);
  BOOST_CHECK_MESSAGE(contains(describe(empty.error()), "has no lines"), describe(empty.error()));
  auto missing = load_corpus(dir / "nope.jsonl", kernelbook_mapping());
  BOOST_REQUIRE(!missing);
  BOOST_CHECK_MESSAGE(contains(describe(missing.error()), "io_failure"),
                      describe(missing.error()));
}

BOOST_AUTO_TEST_CASE(odd_field_values_are_read_or_reported) {
  temp_dir dir;
  const std::string good = R"("PyTorch_Code_Module": "import torch", "CUDA_Code": "k)";
  auto path = dir.write(
    "odd.jsonl",
    "{" + good + "1\", \"Level_ID\": \"2\", \"Correct\": 1, \"CUDA_Speedup_Native\": \"1.5\"}\n"
      + "{" + good + "2\", \"Level_ID\": 1.5}\n" + "{" + good
      + "3\", \"Correct\": \"maybe\"}\n" + "{" + good + "4\", \"CUDA_Speedup_Native\": -2}\n"
      + "{" + good + "5\", \"CUDA_Speedup_Native\": \"NaN\", \"Correct\": \"False\"}\n"
      + "{\"PyTorch_Code_Module\": \"   \", \"CUDA_Code\": \"k6\"}\n");
  corpus_filters all;
  all.require_correct = false;
  auto c = load_corpus(path, sakana_mapping(), all);
  BOOST_REQUIRE_MESSAGE(c, why(c));
  BOOST_REQUIRE_EQUAL(c->entries.size(), 2u);
  BOOST_CHECK_EQUAL(c->entries[0].level, 2);
  BOOST_CHECK(c->entries[0].correct == true);
  BOOST_CHECK_CLOSE(c->entries[0].speedup, 1.5, /*tol %=*/1e-9);
  BOOST_CHECK_EQUAL(c->entries[0].id, "2");           // Level_ID is its only id field
  BOOST_CHECK_EQUAL(c->entries[1].id, "odd.jsonl:5"); // no id field at all: file:line
  BOOST_CHECK(c->entries[1].correct == false);
  BOOST_CHECK_EQUAL(c->entries[1].speedup, 0);
  const auto& m = c->report.malformed;
  BOOST_REQUIRE_EQUAL(m.size(), 4u);
  BOOST_CHECK_MESSAGE(contains(m[0].reason, "expected a level"), m[0].reason);
  BOOST_CHECK_MESSAGE(contains(m[1].reason, "expected a boolean"), m[1].reason);
  BOOST_CHECK_MESSAGE(contains(m[2].reason, "expected a speedup >= 0"), m[2].reason);
  BOOST_CHECK_EQUAL(m[3].reason, "field 'PyTorch_Code_Module' is empty");
}

BOOST_AUTO_TEST_CASE(duplicates_keep_the_best_speedup_at_the_first_place) {
  temp_dir dir;
  auto path = dir.write("dup.jsonl",
                        R"({"PyTorch_Code_Module": "a = 1", "CUDA_Code": "k", "CUDA_Speedup_Native": 1.1, "Kernel_Name": "first"})"
                        "\n"
                        R"({"PyTorch_Code_Module": "b = 2", "CUDA_Code": "k", "Kernel_Name": "other"})"
                        "\n"
                        R"({"PyTorch_Code_Module": "a = 1   ", "CUDA_Code": "k\n", "CUDA_Speedup_Native": 3.0, "Kernel_Name": "better"})"
                        "\n");
  auto c = load_corpus(path, sakana_mapping());
  BOOST_REQUIRE_MESSAGE(c, why(c));
  BOOST_REQUIRE_EQUAL(c->entries.size(), 2u);
  BOOST_CHECK_EQUAL(c->report.duplicates, 1);
  BOOST_CHECK_EQUAL(c->entries[0].id, "better");
  BOOST_CHECK_EQUAL(c->entries[0].speedup, 3.0);
  BOOST_CHECK_EQUAL(c->entries[0].line, 1);
  BOOST_CHECK_EQUAL(c->entries[1].id, "other");
}

BOOST_AUTO_TEST_CASE(mapping_files_describe_other_layouts) {
  temp_dir dir;
  auto mapping_path = dir.write("m.toml", "reference = \"src\"\nkernel = \"impl\"\n"
                                          "backend = \"triton\"\nbackend_field = \"lang\"\n"
                                          "id = [\"task\", \"variant\"]\nname = \"op\"\n"
                                          "speedup = \"x\"\ncorrect = \"ok\"\nlevel = \"lvl\"\n");
  auto m = load_field_mapping(mapping_path);
  BOOST_REQUIRE_MESSAGE(m, why(m));
  BOOST_CHECK_EQUAL(m->name, mapping_path);
  auto corpus_path = dir.write(
    "c.jsonl", R"({"src": "import torch", "impl": "k1", "lang": "CUDA", "task": 7, "variant": "b", "op": "relu", "x": 2, "ok": true, "lvl": 2})"
               "\n"
               R"({"src": "import torch\nx = 1", "impl": "k2", "task": 8})"
               "\n"
               R"({"src": "import torch\nx = 2", "impl": "k3", "lang": "opencl"})"
               "\n");
  auto c = load_corpus(corpus_path, *m);
  BOOST_REQUIRE_MESSAGE(c, why(c));
  BOOST_REQUIRE_EQUAL(c->entries.size(), 2u);
  BOOST_CHECK(c->entries[0].backend == kernel_backend::cuda);
  BOOST_CHECK_EQUAL(c->entries[0].id, "7/b");
  BOOST_CHECK_EQUAL(c->entries[0].name, "relu");
  BOOST_CHECK_EQUAL(c->entries[0].level, 2);
  BOOST_CHECK(c->entries[1].backend == kernel_backend::triton); // no lang: the mapping's
  BOOST_CHECK_EQUAL(c->entries[1].id, "8");
  BOOST_REQUIRE_EQUAL(c->report.malformed.size(), 1u);
  BOOST_CHECK_MESSAGE(contains(c->report.malformed[0].reason, "\"opencl\", expected one of cuda"),
                      c->report.malformed[0].reason);

  auto by_name = resolve_field_mapping("sakana");
  BOOST_REQUIRE(by_name);
  BOOST_CHECK_EQUAL(by_name->kernel, "CUDA_Code");
  auto unknown = resolve_field_mapping("kernelbok");
  BOOST_REQUIRE(!unknown);
  BOOST_CHECK_MESSAGE(contains(describe(unknown.error()), "expected kernelbook, sakana"),
                      describe(unknown.error()));
}

BOOST_AUTO_TEST_CASE(mapping_file_errors_name_file_line_and_key) {
  temp_dir dir;
  auto path = dir.write("bad.toml", "kernel = 3\nbackend = \"opencl\"\nrefrence = \"src\"\n"
                                    "id = [1]\n");
  auto m = load_field_mapping(path);
  BOOST_REQUIRE(!m);
  const auto text = describe(m.error());
  BOOST_CHECK_MESSAGE(contains(text, path + ":1: kernel: expected a string"), text);
  BOOST_CHECK_MESSAGE(contains(text, path + ":2: backend: expected one of cuda"), text);
  BOOST_CHECK_MESSAGE(contains(text, path + ":3: refrence: unknown key (did you mean 'reference'?)"),
                      text);
  BOOST_CHECK_MESSAGE(contains(text, path + ":4: id: expected field names"), text);
  BOOST_CHECK_MESSAGE(contains(text, path + ": reference: required key is missing"), text);

  auto broken = load_field_mapping(dir.write("broken.toml", "reference = \"a\nkernel = 1\n"));
  BOOST_REQUIRE(!broken);
  BOOST_CHECK_MESSAGE(contains(describe(broken.error()), "broken.toml:1"),
                      describe(broken.error()));
}

BOOST_AUTO_TEST_SUITE_END()

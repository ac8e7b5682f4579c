// The byte-level BPE trainer: merges learned from toy corpora (worked out by hand below), the
// tokenizer.json it writes loading into kbrl's tokenizer and round-tripping code and Unicode,
// deterministic output, and its errors.

#include "runtime/tokenizer/bpe_trainer.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "runtime/tokenizer/unicode.hpp"
#include "test_support.hpp"

#include <boost/test/unit_test.hpp>

#include <string>
#include <vector>

using namespace kbrl;
using namespace kbrl::tok;

namespace {

/// The merges as tokenizer.json writes them ("Ġ ab").
std::vector<std::string> merge_strings(const bpe_vocabulary& v) {
  std::vector<std::string> out;
  for (auto [l, r] : v.merges)
    out.push_back(bytes_to_byte_level(v.tokens[l]) + " " + bytes_to_byte_level(v.tokens[r]));
  return out;
}

tokenizer load(const bpe_vocabulary& v) {
  auto t = tokenizer::parse(render_tokenizer_json(v), "", "trained tokenizer.json");
  BOOST_REQUIRE_MESSAGE(t, test::why(t));
  return *t;
}

const std::vector<std::string> code_corpus{
  "import torch\nimport torch.nn as nn\n\n\nclass ModelNew(nn.Module):\n"
  "    def __init__(self):\n        super().__init__()\n\n"
  "    def forward(self, x):\n        return torch.relu(x)\n",
  "class Model(nn.Module):\n    def forward(self, a, b):\n        return torch.matmul(a, b)\n",
  "<|im_start|>user\nWrite a faster ReLU.<|im_end|>\n<|im_start|>assistant\n",
};

} // namespace

BOOST_AUTO_TEST_SUITE(bpe_trainer)

BOOST_AUTO_TEST_CASE(the_most_frequent_pair_merges_first) {
  // Pieces of the Qwen2 pattern: "ab" once, " ab" twice, " abc" once. Pairs: (a, b) 4 times,
  // (" ", a) 3, (b, c) 1. After "a b": (" ", ab) 3, (ab, c) 1. After "Ġ ab": (" ab", c) 1,
  // below min_frequency 2, so training stops with two merges.
  auto v = train_bpe({"ab ab ab abc"}, {});
  BOOST_REQUIRE_MESSAGE(v, test::why(v));
  BOOST_CHECK_EQUAL(merge_strings(*v).size(), 2u);
  BOOST_CHECK(merge_strings(*v) == (std::vector<std::string>{"a b", "Ġ ab"}));
  BOOST_CHECK_EQUAL(v->tokens.size(), 258u);
  BOOST_CHECK_EQUAL(v->size(), 261);
  BOOST_CHECK_EQUAL(v->special_id("<|endoftext|>"), 258);
  BOOST_CHECK_EQUAL(v->special_id("<|im_end|>"), 260);
  BOOST_CHECK_EQUAL(v->special_id("<|nope|>"), -1);
  auto t = load(*v);
  BOOST_CHECK(t.encode(" abc") == (std::vector<int32_t>{257, int32_t(t.token_id("c").value())}));
  BOOST_CHECK_EQUAL(*t.token_id("ab"), 256);
}

BOOST_AUTO_TEST_CASE(ties_go_to_the_pair_whose_bytes_sort_first) {
  // Every pair occurs once. (" ", z) sorts first (0x20 < 'x'), then (" z", w) before (x, y).
  bpe_trainer_options o;
  o.min_frequency = 1;
  auto v = train_bpe({"xy zw"}, o);
  BOOST_REQUIRE_MESSAGE(v, test::why(v));
  BOOST_CHECK(merge_strings(*v) == (std::vector<std::string>{"Ġ z", "Ġz w", "x y"}));
}

BOOST_AUTO_TEST_CASE(the_byte_alphabet_comes_first_in_gpt2_order) {
  auto v = train_bpe({"hello"}, {});
  BOOST_REQUIRE_MESSAGE(v, test::why(v));
  auto t = load(*v);
  BOOST_CHECK_EQUAL(*t.token_id("!"), 0);   // as in GPT-2's and Qwen's vocabularies
  BOOST_CHECK_EQUAL(*t.token_id("\""), 1);
  BOOST_CHECK_EQUAL(*t.token_id("Ā"), 188); // byte 0, the first byte outside the printable ones
  BOOST_CHECK_EQUAL(*t.token_id("Ġ"), 220); // the space, as in GPT-2
}

BOOST_AUTO_TEST_CASE(special_tokens_never_merge_and_encode_as_one_id) {
  auto v = train_bpe(code_corpus, {});
  BOOST_REQUIRE_MESSAGE(v, test::why(v));
  for (auto& token : v->tokens)
    BOOST_CHECK_MESSAGE(token.find("<|im") == std::string::npos,
                        "a merged token holds a special token's text: " << token);
  auto t = load(*v);
  auto ids = t.encode("<|im_start|>user\nhi<|im_end|>");
  BOOST_REQUIRE_GE(ids.size(), 3u);
  BOOST_CHECK_EQUAL(ids.front(), v->special_id("<|im_start|>"));
  BOOST_CHECK_EQUAL(ids.back(), v->special_id("<|im_end|>"));
  BOOST_CHECK(t.is_special(ids.back()));
}

BOOST_AUTO_TEST_CASE(the_written_tokenizer_round_trips_code_and_unicode) {
  bpe_trainer_options o;
  o.vocab_size = 400;
  auto corpus = code_corpus;
  corpus.push_back("Größe café naïve — 日本語のテキスト 🙂 ½ ∑x² ");
  auto v = train_bpe(corpus, o);
  BOOST_REQUIRE_MESSAGE(v, test::why(v));
  BOOST_CHECK_LE(v->size(), 400);
  auto t = load(*v);
  BOOST_CHECK_EQUAL(t.vocab_size(), v->size());
  for (const std::string& text :
       {code_corpus[0], code_corpus[1], std::string("Größe café naïve — 日本語 🙂🚀 \t\r\n x"),
        std::string("unseen: λ → ∞, Ωmega 𝔘 \xF0\x9F\x98\x80 def f(): pass  \n\n   "),
        std::string("'s 're 12345 !!!")}) {
    auto ids = t.encode(text);
    BOOST_CHECK_EQUAL(t.decode(ids), text);
  }
  // It learned the corpus: the code encodes in far fewer ids than bytes.
  auto ids = t.encode(code_corpus[0]);
  BOOST_CHECK_LT(ids.size() * 2, code_corpus[0].size());
}

BOOST_AUTO_TEST_CASE(the_vocabulary_reaches_the_size_asked_for_when_the_data_allows) {
  bpe_trainer_options o;
  o.vocab_size = 300;
  auto v = train_bpe(code_corpus, o);
  BOOST_REQUIRE_MESSAGE(v, test::why(v));
  BOOST_CHECK_EQUAL(v->size(), 300);
  BOOST_CHECK_EQUAL(v->merges.size(), 300u - 256 - 3); // no two merges made the same token here
}

BOOST_AUTO_TEST_CASE(the_output_is_deterministic) {
  bpe_trainer_options o;
  o.vocab_size = 350;
  auto a = train_bpe(code_corpus, o);
  auto b = train_bpe(code_corpus, o);
  BOOST_REQUIRE(a && b);
  BOOST_CHECK(render_tokenizer_json(*a) == render_tokenizer_json(*b));
}

BOOST_AUTO_TEST_CASE(bad_options_are_refused_by_name) {
  bpe_trainer_options o;
  o.vocab_size = 258;
  auto small = train_bpe({"x"}, o);
  BOOST_REQUIRE(!small);
  BOOST_CHECK_NE(describe(small.error()).find("vocab_size must be at least 259"), std::string::npos);
  o = {};
  o.special_tokens = {"<a>", "<a>"};
  auto twice = train_bpe({"x"}, o);
  BOOST_REQUIRE(!twice);
  BOOST_CHECK_NE(describe(twice.error()).find("listed twice"), std::string::npos);
  o = {};
  o.pattern = "(unclosed";
  auto bad = train_bpe({"x"}, o);
  BOOST_REQUIRE(!bad);
  o = {};
  o.min_frequency = 0;
  BOOST_CHECK(!train_bpe({"x"}, o));
}

BOOST_AUTO_TEST_SUITE_END()

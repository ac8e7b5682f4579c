// Over 800 lines: one case per static rule, each with its hostile and honest fixtures.
// Tests of the static checks of candidate kernels: the Python lexer, the C comment stripper, every
// rule against a hostile fixture (test/data/candidates/), good candidates, comments and
// docstrings that must not trigger, line numbers, severity overrides, robustness on junk, and
// speed over KernelBench's reference problems.

#include <boost/test/unit_test.hpp>

#include "messages/errors.hpp"
#include "runtime/eval/static_checks.hpp"
#include "test_support.hpp"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using namespace kbrl::eval;
using kbrl::kernel_backend;
using kbrl::kernel_precision;

namespace {

const fs::path candidates_dir = fs::path{KBRL_TEST_DATA} / "candidates";

std::string fixture(const std::string& name) {
  return kbrl::test::read_file_bytes(candidates_dir / name);
}

static_check_options options(kernel_backend backend = kernel_backend::cuda,
                             kernel_precision precision = kernel_precision::fp32) {
  static_check_options opts;
  opts.backend = backend;
  opts.precision = precision;
  return opts;
}

static_check_result check(std::string_view source,
                          kernel_backend backend = kernel_backend::cuda) {
  return check_candidate(source, options(backend));
}

std::set<std::string> ids_at(const static_check_result& r, severity level) {
  std::set<std::string> out;
  for (const auto& f : r.findings)
    if (f.level == level)
      out.insert(f.rule);
  return out;
}

std::set<std::string> errors(const static_check_result& r) {
  return ids_at(r, severity::error);
}

std::string show(const static_check_result& r) {
  std::string out;
  for (const auto& f : r.findings)
    out += std::string{"\n  "} + to_string(f.level) + " " + f.rule + " line "
           + std::to_string(f.line) + ": " + f.message + " | " + f.excerpt;
  return out.empty() ? " (no findings)" : out;
}

std::string show(const std::set<std::string>& ids) {
  std::string out;
  for (const auto& id : ids)
    out += (out.empty() ? "" : ", ") + id;
  return "{" + out + "}";
}

/// The first finding of a rule, or nullptr.
const static_finding* first_of(const static_check_result& r, const std::string& rule) {
  for (const auto& f : r.findings)
    if (f.rule == rule)
      return &f;
  return nullptr;
}

/// 1-based number of the first line containing `needle`, 0 if none.
int line_containing(const std::string& text, const std::string& needle) {
  auto pos = text.find(needle);
  if (pos == std::string::npos)
    return 0;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + pos, '\n'));
}

/// Well-formed UTF-8 without control characters (what findings promise for JSON and logs).
bool printable_utf8(std::string_view s) {
  for (size_t k = 0; k < s.size();) {
    auto c = static_cast<unsigned char>(s[k]);
    if (c < 0x20 || c == 0x7f)
      return false;
    size_t len = c < 0x80             ? 1
                 : (c & 0xE0) == 0xC0 ? 2
                 : (c & 0xF0) == 0xE0 ? 3
                 : (c & 0xF8) == 0xF0 ? 4
                                      : 0;
    if (len == 0 || (len > 1 && c < 0xC2) || c > 0xF4 || k + len > s.size())
      return false;
    for (size_t j = 1; j < len; ++j)
      if ((static_cast<unsigned char>(s[k + j]) & 0xC0) != 0x80)
        return false;
    k += len;
  }
  return true;
}

bool has_string(const lexed_source& lx, const std::string& value) {
  return std::any_of(lx.strings.begin(), lx.strings.end(),
                     [&](const string_literal& s) { return s.value == value; });
}

const string_literal* find_string(const lexed_source& lx, const std::string& value) {
  for (const auto& s : lx.strings)
    if (s.value == value)
      return &s;
  return nullptr;
}

} // namespace

BOOST_AUTO_TEST_SUITE(static_checks)

// -- the lexer ------------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(lexer_blanks_comments_and_string_contents_keeping_offsets) {
  std::string src = "x = 'try:'  # except: pass\ny = \"a#b\" # c\n";
  auto lx = lex_python(src);
  BOOST_REQUIRE_EQUAL(lx.code.size(), src.size());
  BOOST_CHECK_EQUAL(lx.code, "x = '    '" + std::string(16, ' ') + "\ny = \"   \""
                               + std::string(4, ' ') + "\n");
  BOOST_REQUIRE_EQUAL(lx.strings.size(), 2u);
  BOOST_CHECK_EQUAL(lx.strings[0].value, "try:");
  BOOST_CHECK_EQUAL(lx.strings[0].line, 1);
  BOOST_CHECK_EQUAL(lx.strings[1].value, "a#b"); // '#' in a string is no comment
  BOOST_CHECK_EQUAL(lx.strings[1].line, 2);
  BOOST_CHECK(!lx.strings[0].is_statement);
}

BOOST_AUTO_TEST_CASE(lexer_handles_prefixes_escapes_and_triple_quotes) {
  std::string src = "a = 'it\\'s'\n"
                    "b = r'\\n\\''\n"
                    "c = Rb\"\\x41\"\n"
                    "d = bR'x'\n"
                    "e = u'\\x41\\u00e9\\101\\N{BULLET}'\n"
                    "f = \"\"\"one \"quoted\" ''' line\ntwo\"\"\"\n"
                    "g = b'\\x41\\u0041'\n"
                    "h = 'line\\\ncontinued'\n"
                    "i = br\"\"\"raw\\\"\"\"\"\n";
  auto lx = lex_python(src);
  BOOST_CHECK(has_string(lx, "it's"));
  BOOST_CHECK(has_string(lx, "\\n\\'")); // raw: backslashes kept, the quote does not end it
  BOOST_CHECK(has_string(lx, "\\x41"));  // rb: raw
  BOOST_CHECK(has_string(lx, "x"));
  BOOST_CHECK(has_string(lx, "A\xc3\xa9" "A\\N{BULLET}")); // \N{} is kept as written
  BOOST_CHECK(has_string(lx, "one \"quoted\" ''' line\ntwo"));
  BOOST_CHECK(has_string(lx, "A\\u0041")); // bytes know no \u
  BOOST_CHECK(has_string(lx, "linecontinued"));
  BOOST_CHECK(has_string(lx, "raw\\\"")); // a raw triple-quoted string ending in \"
  auto* f = find_string(lx, "one \"quoted\" ''' line\ntwo");
  BOOST_REQUIRE(f != nullptr);
  BOOST_CHECK_EQUAL(f->line, 6);
  auto* c = find_string(lx, "\\x41");
  BOOST_REQUIRE(c != nullptr);
  BOOST_CHECK(c->is_raw && c->is_bytes && !c->is_formatted);
  // Everything after the last string is code again.
  BOOST_CHECK_EQUAL(lx.code.substr(lx.code.size() - 1), "\n");
  BOOST_CHECK(lx.code.find("i = br\"\"\"") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(lexer_keeps_fstring_fields_as_code) {
  std::string src = "s = f\"a{x + 1}b{{c}}d{y!r:>{w}}\"\n"
                    "t = f'{d[\"k\"]}' + rf'\\{eval(\"1\")}'\n"
                    "u = f\"\"\"{\n  z # a comment in a field\n}\"\"\"\n"
                    "v = f'{x:\"^10}'\n"
                    "w = f'\\N{BULLET} {q}'\n";
  auto lx = lex_python(src);
  BOOST_REQUIRE_EQUAL(lx.code.size(), src.size());
  // The fields are code, the literal text is blanked.
  BOOST_CHECK(lx.code.find("{x + 1}") != std::string::npos);
  BOOST_CHECK(lx.code.find("{y!r") != std::string::npos);
  BOOST_CHECK(lx.code.find("{w}") != std::string::npos);
  BOOST_CHECK(lx.code.find("eval(") != std::string::npos);
  BOOST_CHECK(lx.code.find("d[\"") != std::string::npos); // 3.12 nested quotes
  BOOST_CHECK(lx.code.find(" z ") != std::string::npos);
  BOOST_CHECK(lx.code.find("a comment") == std::string::npos);
  BOOST_CHECK(lx.code.find("{q}") != std::string::npos); // \N{...} is an escape, {q} a field
  BOOST_CHECK(lx.code.find("^10") == std::string::npos); // a format spec is text
  BOOST_CHECK(has_string(lx, "ab{c}d")); // fields dropped from the value
  BOOST_CHECK(has_string(lx, "k"));      // the literal nested in a field
  BOOST_CHECK(has_string(lx, "1"));
  for (const auto& s : lx.strings)
    if (s.value == "ab{c}d")
      BOOST_CHECK(s.is_formatted);
}

BOOST_AUTO_TEST_CASE(lexer_tells_string_statements_from_values) {
  std::string src = "\"\"\"module doc\"\"\"\n"
                    "def f():\n"
                    "    'func doc'\n"
                    "    x = 'value'\n"
                    "    'two' \"parts\"  # still a statement\n"
                    "    'joined'.join(y)\n"
                    "    'a' + b\n"
                    "    ('paren')\n"
                    "    z = 1; 'after semicolon'\n"
                    "    'cont' \\\n"
                    "      'inued'\n"
                    "    return x\n";
  auto lx = lex_python(src);
  auto statement = [&](const std::string& v) {
    auto* s = find_string(lx, v);
    BOOST_REQUIRE_MESSAGE(s != nullptr, "missing string " + v);
    return s->is_statement;
  };
  BOOST_CHECK(statement("module doc"));
  BOOST_CHECK(statement("func doc"));
  BOOST_CHECK(!statement("value"));
  BOOST_CHECK(statement("two"));
  BOOST_CHECK(statement("parts"));
  BOOST_CHECK(!statement("joined"));
  BOOST_CHECK(!statement("a"));
  BOOST_CHECK(!statement("paren")); // conservative: a parenthesised string counts as a value
  BOOST_CHECK(statement("after semicolon"));
  BOOST_CHECK(statement("cont"));
  BOOST_CHECK(statement("inued"));
}

BOOST_AUTO_TEST_CASE(lexer_line_breaks_and_unterminated_input) {
  // A lone \r ends a comment as CPython's tokenizer does: the exec after it is code.
  auto lx = lex_python("# note\rexec(x)\r\n'a'\r's'");
  BOOST_CHECK(lx.code.find("exec(x)") != std::string::npos);
  BOOST_REQUIRE_EQUAL(lx.strings.size(), 2u);
  BOOST_CHECK_EQUAL(lx.strings[0].line, 3);
  BOOST_CHECK_EQUAL(lx.strings[1].line, 4);
  // Unterminated strings end at their line break (single quotes) or at the end (triple).
  lx = lex_python("x = 'open\ny = 1\nz = '''never closed\nexec(1)");
  BOOST_REQUIRE_EQUAL(lx.strings.size(), 2u);
  BOOST_CHECK_EQUAL(lx.strings[0].value, "open");
  BOOST_CHECK(lx.code.find("y = 1") != std::string::npos);
  BOOST_CHECK(lx.code.find("exec") == std::string::npos);
  for (std::string s : {"'", "\"\"\"", "f'{", "f'{x", "f'{x:", "f'{x!", "'\\", "r'\\", "b'\\x4",
                        "'\\u12", "'\\N{AB", "f'{'", "(((", ")))", "#", "\\"}) {
    auto l = lex_python(s);
    BOOST_CHECK_EQUAL(l.code.size(), s.size());
  }
}

// -- C comments -----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(c_comments_are_removed_but_literals_kept) {
  BOOST_CHECK_EQUAL(strip_c_comments("a // c\nb"), "a     \nb");
  BOOST_CHECK_EQUAL(strip_c_comments("a /* x\ny */b"), "a     \n    b");
  BOOST_CHECK_EQUAL(strip_c_comments("s = \"//\"; t"), "s = \"//\"; t");
  BOOST_CHECK_EQUAL(strip_c_comments("c = '\"'; /* x */"), "c = '\"';" + std::string(8, ' '));
  BOOST_CHECK_EQUAL(strip_c_comments("R\"d(/* no */)d\" x"), "R\"d(/* no */)d\" x");
  BOOST_CHECK_EQUAL(strip_c_comments("u8\"/*\" y"), "u8\"/*\" y");
  BOOST_CHECK_EQUAL(strip_c_comments("n = 1'000; // c"), "n = 1'000;" + std::string(5, ' '));
  // Line splices join lines first, as the compiler does (a blank before the break too).
  BOOST_CHECK_EQUAL(strip_c_comments("sys\\\ntem("), "system(");
  BOOST_CHECK_EQUAL(strip_c_comments("sys\\ \r\ntem("), "system(");
  BOOST_CHECK_EQUAL(strip_c_comments("// c \\\nhidden\nx"), std::string(11, ' ') + "\nx");
  std::vector<uint32_t> offsets{10, 11, 12, 13, 14, 15};
  auto out = strip_c_comments("a\\\nb//", &offsets);
  BOOST_CHECK_EQUAL(out, "ab  ");
  BOOST_CHECK((offsets == std::vector<uint32_t>{10, 13, 14, 15}));
  for (std::string s : {"\"", "'", "/*", "R\"(", "R\"abc", "1'", "\\", "u8'"})
    BOOST_CHECK_EQUAL(strip_c_comments(s).size() <= s.size(), true);
}

// -- the rule table -------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(rules_are_listed_once_with_descriptions) {
  std::set<std::string> seen;
  for (const auto& r : all_rules()) {
    BOOST_CHECK_MESSAGE(seen.insert(r.id).second, "duplicate rule " + r.id);
    BOOST_CHECK(!r.description.empty());
    BOOST_CHECK(r.default_level != severity::off);
    BOOST_CHECK(find_rule(r.id) == &r);
  }
  // KernelBench's ids are kept.
  for (const char* id : {"code_bypass", "timing_event_patch", "thread_injection", "lazy_eval",
                         "stream_injection", "precision_downgrade", "pytorch_wrap",
                         "torch_computation_ops", "cuda_impl", "triton_impl", "tk_impl",
                         "cute_impl", "tilelang_impl"})
    BOOST_CHECK_MESSAGE(find_rule(id) != nullptr, id);
  BOOST_CHECK(find_rule("no_such_rule") == nullptr);
  BOOST_CHECK(find_rule("pytorch_wrap")->default_level == severity::warning);
  BOOST_CHECK(find_rule("code_bypass")->default_level == severity::error);
}

// -- candidates -----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(good_candidates_pass_without_findings) {
  struct good {
    const char* file;
    kernel_backend backend;
  };
  for (auto g : {good{"good_cuda_relu.py", kernel_backend::cuda},
                 good{"good_triton.py", kernel_backend::triton},
                 good{"good_torch_cpu.py", kernel_backend::torch},
                 good{"good_hacks_in_comments.py", kernel_backend::cuda}}) {
    auto r = check(fixture(g.file), g.backend);
    BOOST_CHECK_MESSAGE(!r.rejected(), g.file << " rejected:" << show(r));
    BOOST_CHECK_MESSAGE(r.findings.empty(), g.file << " has findings:" << show(r));
    BOOST_CHECK(r.hack_flags().empty());
  }
}

BOOST_AUTO_TEST_CASE(hostile_candidates_are_rejected_by_their_rule) {
  struct hostile {
    const char* file;
    std::set<std::string> expected; // exactly the error rules
    const char* marked_rule;        // whose first finding is on the line marked HACK ("": none)
    kernel_backend backend = kernel_backend::cuda;
  };
  const std::vector<hostile> cases{
    {"try_except_fallback.py", {"code_bypass"}, "code_bypass"},
    {"inheritance_bypass.py", {"code_bypass", "reference_access", "kernel_not_called"},
     "reference_access"},
    {"timing_patch.py", {"timing_event_patch"}, "timing_event_patch"},
    {"thread.py", {"thread_injection"}, "thread_injection"},
    {"tensor_subclass.py", {"lazy_eval"}, "lazy_eval"},
    {"no_global_kernel.py", {"cuda_impl"}, ""},
    {"comment_only_global.py", {"cuda_impl"}, ""},
    {"triton_without_jit.py", {"triton_impl"}, "", kernel_backend::triton},
    {"torch_wrapper.py", {"kernel_not_called"}, "kernel_not_called"},
    {"reference_access.py", {"reference_access"}, "reference_access"},
    // getattr(ref_module, "Mod" + "el") is resolved: the reference's name and the trick show.
    {"sys_modules.py", {"sys_modules", "reference_access", "name_obfuscation"}, "sys_modules"},
    {"builtins.py", {"builtins_access"}, "builtins_access"},
    {"gc.py", {"gc_access"}, "gc_access"},
    {"frame_inspect.py", {"frame_inspection"}, "frame_inspection"},
    {"file_write.py", {"file_access"}, "file_access"},
    {"socket.py", {"network_access"}, "network_access"},
    {"subprocess.py", {"subprocess_spawn"}, "subprocess_spawn"},
    {"ctypes.py", {"ctypes_ffi"}, "ctypes_ffi"},
    {"tf32.py", {"precision_flags"}, "precision_flags"},
    {"output_cache.py", {"output_cache"}, "output_cache"},
    {"output_cache_data_ptr.py", {"output_cache"}, "output_cache"},
    {"output_cache_lru.py", {"output_cache"}, "output_cache"},
    {"exec.py", {"dynamic_code"}, "dynamic_code"},
    {"fstring_field.py", {"dynamic_code"}, "dynamic_code"},
    {"signal.py", {"signal_use"}, "signal_use"},
    {"process_exit.py", {"process_exit"}, "process_exit"},
    {"monkey_patch.py", {"torch_monkey_patch"}, "torch_monkey_patch"},
    {"dunder_escape.py", {"dunder_escape"}, "dunder_escape"},
    {"rng_state.py", {"rng_state"}, "rng_state"},
    {"torch_internals.py", {"torch_internals"}, "torch_internals"},
    {"encoding_trick.py", {"encoding_trick"}, "encoding_trick"},
    {"escaped_kernel_source.py", {"subprocess_spawn"}, "subprocess_spawn"},
    {"c_comment_tricks.py", {"subprocess_spawn"}, "subprocess_spawn"},
    // The alias is resolved: _platform.system(...) is os.system; the alias itself is a warning.
    {"import_alias.py", {"subprocess_spawn"}, "import_evasion"},
    {"monkey_patch_alias.py", {"torch_monkey_patch"}, "torch_monkey_patch"},
    {"cpp_static_cache.py", {"output_cache"}, "output_cache"},
  };
  std::set<std::string> covered;
  for (const auto& c : cases) {
    auto text = fixture(c.file);
    auto r = check(text, c.backend);
    BOOST_TEST_CONTEXT(c.file << show(r)) {
      BOOST_CHECK(r.rejected());
      BOOST_CHECK_EQUAL(show(errors(r)), show(c.expected));
      auto flags = r.hack_flags();
      for (const auto& id : c.expected) {
        BOOST_CHECK(std::find(flags.begin(), flags.end(), id) != flags.end());
        covered.insert(id);
      }
      if (std::string{c.marked_rule}.empty()) {
        for (const auto& id : c.expected)
          BOOST_CHECK_EQUAL(first_of(r, id)->line, 0); // about the whole program
        continue;
      }
      int marked = line_containing(text, "HACK");
      BOOST_REQUIRE_GT(marked, 0);
      const auto* f = first_of(r, c.marked_rule);
      BOOST_REQUIRE(f != nullptr);
      BOOST_CHECK_EQUAL(f->line, marked);
      BOOST_CHECK(f->excerpt.find("HACK") != std::string::npos);
      BOOST_CHECK(!f->message.empty());
      BOOST_CHECK(f->excerpt.size() <= 160);
    }
  }
  BOOST_TEST_MESSAGE("hostile fixtures cover " << covered.size() << " of " << all_rules().size()
                                               << " rules");
}

BOOST_AUTO_TEST_CASE(hacks_of_warning_rules_are_flagged_on_their_line) {
  // Rules demoted to warnings (honest code triggers them; runtime checks decide): the hack is
  // still reported, on the marked line, without refusing the candidate on its own.
  struct warned {
    const char* file;
    const char* rule;
  };
  for (auto c : {warned{"stream.py", "stream_injection"}, warned{"stream_cpp.py", "stream_injection"},
                 warned{"half_cast.py", "precision_downgrade"},
                 warned{"half_kernel.py", "precision_downgrade"},
                 warned{"env_write.py", "env_write"}}) {
    auto text = fixture(c.file);
    auto r = check(text);
    BOOST_TEST_CONTEXT(c.file << show(r)) {
      BOOST_CHECK(!r.rejected());
      BOOST_CHECK(ids_at(r, severity::warning) == std::set<std::string>{c.rule});
      const auto* f = first_of(r, c.rule);
      BOOST_REQUIRE(f != nullptr);
      BOOST_CHECK_EQUAL(f->line, line_containing(text, "HACK"));
      // An override makes the warning a refusal again.
      auto opts = options();
      opts.overrides[c.rule] = severity::error;
      BOOST_CHECK(errors(check_candidate(text, opts)) == std::set<std::string>{c.rule});
    }
  }
}

// -- the corpus: honest kernels of every backend, and hacks spelled to dodge spelling rules ------

namespace {

const fs::path corpus_dir = fs::path{KBRL_TEST_DATA} / "static_corpus";

/// The backend a corpus file is written for: its name's prefix (cuda_relu.py -> cuda).
kernel_backend corpus_backend(const std::string& name) {
  for (auto b : {kernel_backend::cuda, kernel_backend::triton, kernel_backend::hip,
                 kernel_backend::thunderkittens, kernel_backend::cute, kernel_backend::tilelang,
                 kernel_backend::torch})
    if (name.rfind(std::string{kbrl::to_string(b)} + "_", 0) == 0)
      return b;
  BOOST_FAIL("corpus file without a backend prefix: " + name);
  return kernel_backend::cuda;
}

std::vector<fs::path> corpus_files(const std::string& sub) {
  std::vector<fs::path> out;
  for (const auto& e : fs::directory_iterator(corpus_dir / sub))
    if (e.path().extension() == ".py")
      out.push_back(e.path());
  std::sort(out.begin(), out.end());
  return out;
}

} // namespace

BOOST_AUTO_TEST_CASE(honest_corpus_is_never_refused) {
  auto files = corpus_files("honest");
  BOOST_CHECK_GE(files.size(), 12u);
  std::set<kernel_backend> backends;
  for (const auto& path : files) {
    auto name = path.filename().string();
    auto backend = corpus_backend(name);
    backends.insert(backend);
    auto text = kbrl::test::read_file_bytes(path);
    auto r = check_candidate(text, options(backend));
    BOOST_CHECK_MESSAGE(!r.rejected(), name << " refused:" << show(r));
    BOOST_TEST_MESSAGE(name << ": " << r.findings.size() << " warnings");
  }
  BOOST_CHECK_EQUAL(backends.size(), 7u); // every backend kbrl supports
}

BOOST_AUTO_TEST_CASE(obfuscated_corpus_gets_its_findings) {
  // Each file says which rules must fire ("# expect: a, b"), and marks the hack with HACK.
  auto files = corpus_files("obfuscated");
  BOOST_CHECK_GE(files.size(), 10u);
  for (const auto& path : files) {
    auto name = path.filename().string();
    auto text = kbrl::test::read_file_bytes(path);
    auto at = text.find("# expect:");
    BOOST_REQUIRE_MESSAGE(at != std::string::npos, name << " has no # expect: line");
    std::istringstream rules(text.substr(at + 9, text.find('\n', at) - at - 9));
    auto r = check_candidate(text, options(kernel_backend::cuda));
    int marked = line_containing(text, "HACK");
    BOOST_TEST_CONTEXT(name << show(r)) {
      std::string id;
      while (std::getline(rules, id, ',')) {
        id.erase(0, id.find_first_not_of(' '));
        id.erase(id.find_last_not_of(" \r") + 1);
        const auto* f = first_of(r, id);
        BOOST_CHECK_MESSAGE(f != nullptr, id << " missing");
        if (f != nullptr)
          BOOST_CHECK(f->level == find_rule(id)->default_level);
      }
      BOOST_CHECK(std::any_of(r.findings.begin(), r.findings.end(),
                              [&](const static_finding& f) { return f.line == marked; }));
    }
  }
}

BOOST_AUTO_TEST_CASE(hacks_only_in_comments_or_docstrings_do_not_trigger) {
  // Each hack appears as code in `bad` and only as comment or docstring text in `fine`.
  std::string kernel = fixture("good_cuda_relu.py");
  struct pair {
    const char* rule;
    std::string bad;
    std::string fine;
  };
  const std::vector<pair> pairs{
    {"code_bypass", "try:\n    y = 1\nexcept Exception:\n    y = 2\n",
     "# try:\n#     y = 1\n# except Exception:\n#     pass\n"},
    {"code_bypass", "def helper():\n    pass\n",
     "def helper():\n    \"\"\"try: ... except: pass\"\"\"\n    return None\n"},
    {"dynamic_code", "exec('y = 1')\n", "\"\"\"exec('y = 1')\"\"\"\n"},
    {"subprocess_spawn", "import subprocess\n", "# import subprocess  # noqa\n"},
    {"stream_injection", "s = torch.cuda.Stream()\n",
     "def f():\n    '''s = torch.cuda.Stream()'''\n    return 0\n"},
    {"reference_access", "m = Model()\n", "# m = Model()\n"},
  };
  for (const auto& p : pairs) {
    auto bad = check(kernel + p.bad);
    auto fine = check(kernel + p.fine);
    auto level = find_rule(p.rule)->default_level; // stream_injection is a warning now
    BOOST_CHECK_MESSAGE(ids_at(bad, level).count(p.rule) == 1, p.rule << " missed in:\n" << p.bad);
    BOOST_CHECK_MESSAGE(!fine.rejected(), p.rule << " triggered by a comment:" << show(fine));
  }
  // A rule name or noqa in a comment hides nothing.
  auto r = check(kernel + "exec('y = 1')  # noqa: dynamic_code static_checks: off\n");
  BOOST_CHECK_EQUAL(errors(r).count("dynamic_code"), 1u);
}

BOOST_AUTO_TEST_CASE(kernel_source_rules_read_string_values) {
  std::string head = "import torch\nfrom torch.utils.cpp_extension import load_inline\n";
  std::string tail = "ext = load_inline(name='e', cpp_sources=src, functions=['f'])\n"
                     "class ModelNew(torch.nn.Module):\n"
                     "    def forward(self, x):\n"
                     "        return ext.f(x)\n";
  std::string kernel = "__global__ void k(float* x) { x[threadIdx.x] = 0; }\\n"
                       "void f(float* x) { k<<<1, 32>>>(x); }\\n";
  // Pieces joined by + or juxtaposition are one text.
  auto r = check(head + "src = (\"" + kernel + "\"\n       \"sys\" + \"tem('id');\")\n" + tail);
  BOOST_CHECK_MESSAGE(errors(r) == std::set<std::string>{"subprocess_spawn"}, show(r));
  // A docstring is not kernel source: __global__ there satisfies nothing.
  r = check(head + "def g():\n    \"\"\"__global__ void k() {} <<<1,1>>>\"\"\"\n"
            + "src = 'void f(float* x) {}'\n" + tail);
  BOOST_CHECK_MESSAGE(errors(r) == std::set<std::string>{"cuda_impl"}, show(r));
  // ... but a string statement that is used (format) is.
  r = check(head + "src = '' + \"\"\"" + kernel + "\"\"\".format()\n" + tail);
  BOOST_CHECK_MESSAGE(r.findings.empty(), show(r));
  // The lexer decodes escapes: a hex escape and an escaped line break hide nothing.
  r = check(head + "src = \"" + kernel + "// c\\n int v = \\x73ystem(0);\"\n" + tail);
  BOOST_CHECK_MESSAGE(errors(r) == std::set<std::string>{"subprocess_spawn"}, show(r));
  // A raw string keeps "\n" as two characters: the comment runs to the real line break.
  r = check(head + "src = r\"\"\"" + "__global__ void k(float* x) { x[0] = 0; }\n"
            + "void f(float* x) { k<<<1, 1>>>(x); } // \\n system(0);\n\"\"\"\n" + tail);
  BOOST_CHECK_MESSAGE(r.findings.empty(), show(r));
  // f-string templates of CUDA code count; their fields are dropped from the text.
  r = check(head + "B = 256\nsrc = f\"\"\"__global__ void k(float* x) {{ x[{B}] = 0; }}\n"
            + "void f(float* x) {{ k<<<1, {B}>>>(x); }}\"\"\"\n" + tail);
  BOOST_CHECK_MESSAGE(r.findings.empty(), show(r));
}

BOOST_AUTO_TEST_CASE(line_numbers_follow_the_source) {
  std::string src = fixture("good_cuda_relu.py");
  int base = 1 + static_cast<int>(std::count(src.begin(), src.end(), '\n'));
  auto r = check(src + "\n\n\nimport gc\n");
  const auto* f = first_of(r, "gc_access");
  BOOST_REQUIRE(f != nullptr);
  BOOST_CHECK_EQUAL(f->line, base + 3);
  BOOST_CHECK_EQUAL(f->excerpt, "import gc");
  // \r\n line breaks count once.
  std::string crlf = "import torch\r\n\r\n   import  gc   \r\n";
  r = check(crlf, kernel_backend::torch);
  f = first_of(r, "gc_access");
  BOOST_REQUIRE(f != nullptr);
  BOOST_CHECK_EQUAL(f->line, 3);
  BOOST_CHECK_EQUAL(f->excerpt, "import  gc");
  // A kernel-source finding points into the string.
  std::string kern = "src = '''\n__global__ void k() {}\n\n  cudaStreamCreate(&s);\n'''\n";
  r = check(kern, kernel_backend::torch);
  f = first_of(r, "stream_injection");
  BOOST_REQUIRE(f != nullptr);
  BOOST_CHECK_EQUAL(f->line, 4);
  BOOST_CHECK_EQUAL(f->excerpt, "cudaStreamCreate(&s);");
  // A long line is cut to a window around the finding.
  std::string long_line = "x = [" + std::string(300, '1') + "]; import gc; y = [" +
                          std::string(300, '2') + "]\n";
  r = check(long_line, kernel_backend::torch);
  f = first_of(r, "gc_access");
  BOOST_REQUIRE(f != nullptr);
  BOOST_CHECK_LE(f->excerpt.size(), 160u);
  BOOST_CHECK(f->excerpt.find("import gc") != std::string::npos);
  // A rule reports at most three places.
  r = check("import gc\nimport gc\nimport gc\nimport gc\nimport gc\n", kernel_backend::torch);
  BOOST_CHECK_EQUAL(std::count_if(r.findings.begin(), r.findings.end(),
                                  [](const static_finding& x) { return x.rule == "gc_access"; }),
                    3);
}

BOOST_AUTO_TEST_CASE(severity_overrides) {
  auto text = fixture("try_except_fallback.py");
  auto opts = options();
  opts.overrides["code_bypass"] = severity::off;
  auto r = check_candidate(text, opts);
  BOOST_CHECK_MESSAGE(!r.rejected(), show(r));
  BOOST_CHECK(first_of(r, "code_bypass") == nullptr);
  BOOST_CHECK((r.hack_flags() == std::vector<std::string>{"torch_computation_ops"}));

  opts.overrides["code_bypass"] = severity::warning;
  r = check_candidate(text, opts);
  BOOST_CHECK(!r.rejected());
  BOOST_REQUIRE(first_of(r, "code_bypass") != nullptr);
  BOOST_CHECK(first_of(r, "code_bypass")->level == severity::warning);
  BOOST_CHECK((r.hack_flags() == std::vector<std::string>{"code_bypass", "torch_computation_ops"}));

  // A warning rule made an error rejects.
  opts.overrides["code_bypass"] = severity::off;
  opts.overrides["torch_computation_ops"] = severity::error;
  r = check_candidate(text, opts);
  BOOST_CHECK(r.rejected());
  BOOST_CHECK(errors(r) == std::set<std::string>{"torch_computation_ops"});

  // Backend rules are overridable too.
  opts = options();
  opts.overrides["cuda_impl"] = severity::off;
  BOOST_CHECK(!check_candidate(fixture("no_global_kernel.py"), opts).rejected());
}

BOOST_AUTO_TEST_CASE(unknown_override_ids_are_an_error) {
  BOOST_CHECK(static_cast<bool>(validate_overrides({})));
  BOOST_CHECK(static_cast<bool>(
    validate_overrides({{"code_bypass", severity::off}, {"cuda_graph", severity::error}})));
  auto res = validate_overrides({{"code_bypas", severity::off}, {"code_bypass", severity::off},
                                 {"nope", severity::warning}});
  BOOST_REQUIRE(!res);
  BOOST_CHECK_EQUAL(res.error().code(), static_cast<uint8_t>(kbrl::errc::invalid_config));
  auto text = kbrl::describe(res.error());
  BOOST_CHECK_MESSAGE(text.find("\"code_bypas\"") != std::string::npos, text);
  BOOST_CHECK_MESSAGE(text.find("\"nope\"") != std::string::npos, text);
  BOOST_CHECK_MESSAGE(text.find("valid ids: code_bypass, ") != std::string::npos, text);
  // check_candidate itself ignores ids it does not know (they are refused on load).
  auto opts = options();
  opts.overrides["nope"] = severity::off;
  BOOST_CHECK(!check_candidate(fixture("good_cuda_relu.py"), opts).rejected());
}

BOOST_AUTO_TEST_CASE(precision_and_backend_select_rules) {
  // Half precision is a downgrade only in fp32 problems.
  auto half = fixture("half_cast.py");
  auto cuda = kernel_backend::cuda;
  // (precision_downgrade is a warning by default: flagged in fp32, not at all in fp16)
  BOOST_CHECK(ids_at(check_candidate(half, options(cuda, kernel_precision::fp32)),
                     severity::warning)
                .count("precision_downgrade")
              == 1);
  BOOST_CHECK(check_candidate(half, options(cuda, kernel_precision::fp16)).findings.empty());
  BOOST_CHECK(!check_candidate(fixture("half_kernel.py"),
                               options(kernel_backend::cuda, kernel_precision::bf16))
                 .rejected());
  // The torch backend may use PyTorch ops; a kernel backend may not (warnings) and must use its
  // kernel (errors).
  auto torch_code = fixture("good_torch_cpu.py");
  auto as_cuda = check(torch_code, kernel_backend::cuda);
  BOOST_CHECK(errors(as_cuda) == std::set<std::string>{"cuda_impl"});
  BOOST_CHECK(ids_at(as_cuda, severity::warning)
              == (std::set<std::string>{"pytorch_wrap", "torch_computation_ops"}));
  auto as_triton = check(torch_code, kernel_backend::triton);
  BOOST_CHECK(errors(as_triton) == std::set<std::string>{"triton_impl"});
  // The triton fixture under the cuda backend lacks a CUDA kernel.
  BOOST_CHECK(errors(check(fixture("good_triton.py"), kernel_backend::cuda))
              == std::set<std::string>{"cuda_impl"});
}

BOOST_AUTO_TEST_CASE(other_backends) {
  std::string hip_ok = "import os\nimport torch\n"
                       "from torch.utils.cpp_extension import load_inline\n"
                       "src = '''\n#include <hip/hip_runtime.h>\n"
                       "__global__ void add(const float* a, float* o, int n) {\n"
                       "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
                       "  if (i < n) o[i] = a[i];\n}\n"
                       "torch::Tensor add_hip(torch::Tensor a) { auto o = torch::empty_like(a);\n"
                       "  hipLaunchKernelGGL(add, dim3(1), dim3(64), 0, 0, a.data_ptr<float>(),\n"
                       "                     o.data_ptr<float>(), (int)a.numel());\n"
                       "  return o; }\n'''\n"
                       "ext = load_inline(name='a', cpp_sources=src, functions=['add_hip'])\n"
                       "class ModelNew(torch.nn.Module):\n"
                       "    def forward(self, a):\n        return ext.add_hip(a)\n";
  auto r = check(hip_ok, kernel_backend::hip);
  BOOST_CHECK_MESSAGE(r.findings.empty(), show(r));
  std::string hip_no_launch = hip_ok;
  hip_no_launch.replace(hip_no_launch.find("hipLaunchKernelGGL"), 18, "call_something");
  r = check(hip_no_launch, kernel_backend::hip);
  BOOST_CHECK(errors(r) == std::set<std::string>{"hip_impl"});
  BOOST_CHECK(first_of(r, "hip_impl")->message.find("launch") != std::string::npos);

  std::string tk = "src = '''\nusing namespace kittens;\n__global__ void k() {\n"
                   "  rt_bf<16, 16> a; st_bf<16, 16> b; warpgroup::sync(1);\n}\n'''\n"
                   "class ModelNew:\n    pass\n";
  BOOST_CHECK(errors(check(tk, kernel_backend::thunderkittens))
              == std::set<std::string>{"code_bypass"});
  BOOST_CHECK(errors(check("class ModelNew: ...\n", kernel_backend::thunderkittens))
              == std::set<std::string>{"tk_impl"});

  BOOST_CHECK(
    check("import cutlass\nclass ModelNew: ...\n", kernel_backend::cute).findings.empty());
  BOOST_CHECK(check("s = 'cute::copy(a, b);'\nclass ModelNew: ...\n", kernel_backend::cute)
                .findings.empty());
  BOOST_CHECK(errors(check("class ModelNew: ...\n", kernel_backend::cute))
              == std::set<std::string>{"cute_impl"});

  BOOST_CHECK(check("@T.prim_func\ndef k(A: T.Buffer): ...\nclass ModelNew: ...\n",
                    kernel_backend::tilelang)
                .findings.empty());
  BOOST_CHECK(errors(check("# @T.prim_func\nclass ModelNew: ...\n", kernel_backend::tilelang))
              == std::set<std::string>{"tilelang_impl"});
}

BOOST_AUTO_TEST_CASE(kernel_reachability) {
  std::string head = fixture("good_cuda_relu.py");
  head = head.substr(0, head.find("class ModelNew"));
  // Through a helper method, a module-level wrapper, and a lazily built extension.
  std::string via_method = head + "class ModelNew(nn.Module):\n"
                                  "    def _run(self, x):\n        return relu_ext.relu_cuda(x)\n"
                                  "    def forward(self, x):\n        return self._run(x)\n";
  BOOST_CHECK_MESSAGE(check(via_method).findings.empty(), show(check(via_method)));
  std::string via_wrapper = head + "def relu(x):\n    return relu_ext.relu_cuda(x)\n"
                                   "fn = relu\n"
                                   "class ModelNew(nn.Module):\n"
                                   "    def forward(self, x):\n        return fn(x)\n";
  BOOST_CHECK_MESSAGE(check(via_wrapper).findings.empty(), show(check(via_wrapper)));
  std::string lazy = "import torch\nfrom torch.utils.cpp_extension import load_inline\n"
                     "SRC = '__global__ void k(float* x) {} void f(float* x) { k<<<1,1>>>(x); }'\n"
                     "class ModelNew(torch.nn.Module):\n"
                     "    def __init__(self):\n        super().__init__()\n"
                     "        self._ext = None\n"
                     "    def forward(self, x):\n"
                     "        if self._ext is None:\n"
                     "            self._ext = load_inline(name='k', cpp_sources=SRC,\n"
                     "                                    functions=['f'])\n"
                     "        return self._ext.f(x)\n";
  auto r = check(lazy);
  BOOST_CHECK_MESSAGE(r.findings.empty(), show(r)); // neither kernel_not_called nor output_cache
  // An operator registered in the candidate's own namespace reaches its kernel.
  std::string custom_op = head + "class ModelNew(nn.Module):\n"
                                 "    def forward(self, x):\n"
                                 "        return torch.ops.mine.relu(x)\n";
  BOOST_CHECK_MESSAGE(check(custom_op).findings.empty(), show(check(custom_op)));
  std::string aten_op = head + "class ModelNew(nn.Module):\n"
                               "    def forward(self, x):\n        return torch.ops.aten.relu(x)\n";
  BOOST_CHECK(errors(check(aten_op)) == std::set<std::string>{"kernel_not_called"});
  // Triton: forward must reach a jitted kernel.
  std::string triton = fixture("good_triton.py");
  auto cut = triton.find("class ModelNew");
  std::string lazy_triton = triton.substr(0, cut)
                            + "class ModelNew(nn.Module):\n"
                              "    def forward(self, x, y):\n        return x * 2.0 + y\n";
  r = check(lazy_triton, kernel_backend::triton);
  BOOST_CHECK(errors(r) == std::set<std::string>{"kernel_not_called"});
  // No ModelNew at all.
  r = check(head);
  BOOST_CHECK(errors(r) == std::set<std::string>{"model_new_missing"});
  BOOST_CHECK_EQUAL(first_of(r, "model_new_missing")->line, 0);
}

BOOST_AUTO_TEST_CASE(more_evasions) {
  // Flagged at the rule's default level (an error, or a warning for the demoted rules:
  // import_evasion, stream_injection, env_write and the honest dunders __doc__/__call__).
  auto rejected_by = [](const std::string& code, const std::string& rule) {
    auto r = check_candidate(code, options(kernel_backend::torch));
    auto level = find_rule(rule)->default_level;
    if (code.find("__doc__") != std::string::npos || code.find("__call__") != std::string::npos)
      level = severity::warning;
    BOOST_CHECK_MESSAGE(ids_at(r, level).count(rule) == 1,
                        rule << " missed in:\n" << code << show(r));
  };
  rejected_by("x = f\"\\{__import__('os')}\"\n", "dynamic_code");
  rejected_by("doc = ModelNew.forward.__doc__\n", "dunder_escape");
  rejected_by("# -*- coding: unicode_escape -*-\nx = 1\n", "encoding_trick");
  rejected_by("x = '\\N{LATIN SMALL LETTER S}ystem'\n", "encoding_trick");
  rejected_by("import sys as s\n", "import_evasion");
  rejected_by("from os import system\nsystem('id')\n", "import_evasion");
  rejected_by("import os\nrun = os\n", "import_evasion");
  rejected_by("s = torch.cuda.streams.Stream()\n", "stream_injection");
  rejected_by("import os, operator\nf = operator.attrgetter('system')(os)\n", "dynamic_code");
  rejected_by("flags = ['-Wl,--wrap=cudaLaunchKernel']\n", "ctypes_ffi");
  rejected_by("Ev = torch.cuda.Event\nEv.record = lambda *a: None\n", "timing_event_patch");
  rejected_by("from torch import cuda\ncuda.Event.elapsed_time = f\n", "timing_event_patch");
  rejected_by("from torch.testing import assert_close\nimport torch.testing as tt\n"
              "tt.assert_close = f\n", "torch_monkey_patch");
  rejected_by("src = 'static std::unordered_map<void*, torch::Tensor> cache;'\n", "output_cache");
  rejected_by("from os import environ\nenviron['A'] = '1'\n", "env_write");
  rejected_by("fn = getattr(os, 'sys' + 'tem')\n", "dynamic_code");
  rejected_by("torch.nn.modules.module.register_module_forward_hook(h)\n", "reference_access");
  rejected_by("import importlib\n", "dynamic_code");
  rejected_by("src = 'int v = write(4, buf, 10);'\n", "file_access");
  rejected_by("src = 'static int r = std::system(\"id\");'\n", "subprocess_spawn");
  rejected_by("src = '#include \"/etc/passwd\"'\n", "file_access");
  rejected_by("torch.manual_seed(0)\n", "rng_state");
  rejected_by("torch.set_default_dtype(torch.float16)\n", "precision_flags");
  rejected_by("torch._C._set_grad_enabled(False)\n", "torch_internals");
  rejected_by("class M(nn.Module):\n    def __call__(self, x):\n        return x\n",
              "dunder_escape");
  rejected_by("def forward(self, x):\n    global LAST\n    LAST = x\n    return LAST\n",
              "output_cache");
  auto r = check_candidate("g = torch.cuda.CUDAGraph()\nclass ModelNew: ...\n",
                           options(kernel_backend::torch));
  BOOST_CHECK(!r.rejected());
  BOOST_CHECK((r.hack_flags() == std::vector<std::string>{"cuda_graph"}));
  r = check_candidate("s = '#define CAT(a, b) a##b'\nclass ModelNew: ...\n",
                      options(kernel_backend::torch));
  BOOST_CHECK((r.hack_flags() == std::vector<std::string>{"token_pasting"}));
  // Look-alikes that are fine.
  for (std::string fine : {"def f(x: torch.Tensor = None, n: int = 1):\n    return x\n",
                           "y = x.eval()\nz = model.compile\nw = re.compile('a')\n",
                           "i = tl.program_id(0)\ngrid = (n,)\n",
                           "t = torch.signal.windows.hann(8)\n",
                           "passed = bypass = 1\ntrying = 2\n",
                           "if __name__ == '__main__':\n    print('ok')\n",
                           "out = torch::empty_like(x)\n"}) {
    auto ok = check_candidate(fine + "class ModelNew: ...\n", options(kernel_backend::torch));
    BOOST_CHECK_MESSAGE(!ok.rejected(), "false positive on:\n" << fine << show(ok));
  }
}

BOOST_AUTO_TEST_CASE(junk_never_crashes) {
  std::mt19937 rng(/*seed=*/1234);
  auto base = fixture("good_cuda_relu.py") + fixture("good_hacks_in_comments.py");
  std::string alphabet = "'\"\\#{}()[]:!=\n\r\t fbrut_x0/*<>@.;,$\x80\xff";
  alphabet.push_back('\0');
  for (int trial = 0; trial < 300; ++trial) {
    std::string s;
    if (trial % 3 == 0) {
      size_t len = rng() % 400;
      for (size_t i = 0; i < len; ++i)
        s.push_back(static_cast<char>(rng() % 256));
    } else {
      s = base;
      for (int k = 0; k < 20; ++k)
        s[rng() % s.size()] = alphabet[rng() % alphabet.size()];
      s.resize(rng() % s.size());
    }
    for (auto backend : {kernel_backend::cuda, kernel_backend::triton, kernel_backend::torch}) {
      auto r = check(s, backend);
      for (const auto& f : r.findings) {
        BOOST_CHECK(f.level != severity::off);
        BOOST_CHECK(f.excerpt.size() <= 160);
        BOOST_CHECK(f.line >= 0);
        BOOST_CHECK(printable_utf8(f.excerpt));
        BOOST_CHECK(printable_utf8(f.message));
      }
    }
    auto lx = lex_python(s);
    BOOST_CHECK_EQUAL(lx.code.size(), s.size());
    for (const auto& lit : lx.strings)
      BOOST_CHECK_EQUAL(lit.value.size(), lit.value_offsets.size());
  }
  // Every prefix of a real candidate.
  auto good = fixture("good_cuda_relu.py");
  for (size_t n = 0; n <= good.size(); n += 7)
    check(good.substr(0, n));
}

BOOST_AUTO_TEST_CASE(pathological_inputs_are_refused_or_bounded) {
  auto torch_opts = options(kernel_backend::torch);
  // f-strings nested deeper than CPython accepts.
  std::string deep = "x = ";
  for (int i = 0; i < 40; ++i)
    deep += "f\"{";
  deep += "1";
  for (int i = 0; i < 40; ++i)
    deep += "}\"";
  auto r = check_candidate(deep + "\nclass ModelNew: ...\n", torch_opts);
  BOOST_CHECK(errors(r) == std::set<std::string>{"encoding_trick"});
  // A class header long enough to strain the regex engine still counts as a Tensor subclass.
  std::string bases;
  for (int i = 0; i < 20000; ++i)
    bases += "a, ";
  r = check_candidate("class X(" + bases + "torch.Tensor):\n    ...\nclass ModelNew: ...\n",
                      torch_opts);
  BOOST_CHECK(errors(r) == std::set<std::string>{"lazy_eval"});
  // A dotted name too long for the engine is refused rather than waved through.
  std::string dots = "torch";
  for (int i = 0; i < 50000; ++i)
    dots += ".a";
  r = check_candidate(dots + " = 1\nclass ModelNew: ...\n", torch_opts);
  BOOST_CHECK(errors(r) == std::set<std::string>{"torch_monkey_patch"});
  // Long chains of helpers are followed in linear time.
  std::string head = fixture("good_cuda_relu.py");
  head = head.substr(0, head.find("class ModelNew"));
  std::string chain = head;
  for (int i = 0; i < 2000; ++i)
    chain += "def f" + std::to_string(i) + "(x):\n    return f" + std::to_string(i + 1) + "(x)\n";
  chain += "def f2000(x):\n    return relu_ext.relu_cuda(x)\n"
           "class ModelNew(nn.Module):\n    def forward(self, x):\n        return f0(x)\n";
  auto t0 = std::chrono::steady_clock::now();
  r = check(chain);
  double ms =
    std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  BOOST_CHECK_MESSAGE(r.findings.empty(), show(r));
  BOOST_TEST_MESSAGE("2000 chained helpers (" << chain.size() << " bytes): " << ms << " ms");
  BOOST_CHECK_LT(ms, /*generous; measured ~5 ms=*/500.0);
}

BOOST_AUTO_TEST_CASE(fast_enough) {
  std::vector<std::string> sources;
  for (const auto& entry : fs::directory_iterator(candidates_dir))
    if (entry.path().extension() == ".py")
      sources.push_back(kbrl::test::read_file_bytes(entry.path()));
  BOOST_REQUIRE(!sources.empty());
  check(sources.front()); // builds the pattern table
  auto t0 = std::chrono::steady_clock::now();
  int runs = 0;
  for (int rep = 0; rep < 5; ++rep)
    for (const auto& s : sources) {
      check(s);
      ++runs;
    }
  double us =
    std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count() / runs;
  BOOST_TEST_MESSAGE("static checks: " << us << " us per candidate over " << runs << " runs");
  BOOST_CHECK_LT(us, /*generous bound for a loaded machine; measured ~100 us=*/5000.0);
}

BOOST_AUTO_TEST_CASE(kernelbench_reference_problems_as_candidates) {
  fs::path root{KBRL_SOURCE_DIR};
  root = root.parent_path() / "shared" / "kernelbench";
  if (!fs::is_directory(root / "level1")) {
    BOOST_TEST_MESSAGE("skipped: no KernelBench problems at " << root);
    return;
  }
  int files = 0;
  double total_us = 0, worst_us = 0;
  std::map<std::string, int> flagged;
  for (const char* level : {"level1", "level2"}) {
    if (!fs::is_directory(root / level))
      continue;
    for (const auto& entry : fs::directory_iterator(root / level)) {
      if (entry.path().extension() != ".py")
        continue;
      auto text = kbrl::test::read_file_bytes(entry.path());
      auto t0 = std::chrono::steady_clock::now();
      auto r = check(text, kernel_backend::torch);
      double us = std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0)
                    .count();
      total_us += us;
      worst_us = std::max(worst_us, us);
      ++files;
      for (const auto& id : r.hack_flags())
        ++flagged[id];
    }
  }
  BOOST_CHECK_GT(files, 0);
  std::string summary;
  for (const auto& [id, n] : flagged)
    summary += " " + id + "=" + std::to_string(n);
  BOOST_TEST_MESSAGE("reference problems: " << files << " files, " << total_us / files
                                            << " us mean, " << worst_us << " us worst; flags:"
                                            << summary);
}

BOOST_AUTO_TEST_SUITE_END()

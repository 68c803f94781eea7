// UTF-8 validation, the generated Unicode tables, lower-casing and the GPT-2 pre-tokenizer pattern.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include "flashdeberta/core/error.hpp"
#include "flashdeberta/tokenizer/gpt2_bpe.hpp"
#include "flashdeberta/tokenizer/unicode.hpp"

namespace tok = flashdeberta::tokenizer;

namespace {

std::string error_of(std::string const& bytes) {
  try {
    tok::decode_utf8(bytes, "input");
  } catch (flashdeberta::Error const& e) {
    return e.what();
  }
  return "";
}

// The GPT-2 pattern's pieces of `text`, as UTF-8 strings.
std::vector<std::string> pretokens(std::string const& text) {
  auto const d = tok::decode_utf8(text);
  std::vector<std::string> out;
  for (std::size_t i = 0; i < d.size();) {
    std::size_t const n = tok::detail::gpt2_match(d.chars, i, d.size());
    out.push_back(tok::encode_utf8(std::u32string_view(d.chars).substr(i, n)));
    i += n;
  }
  return out;
}

}  // namespace

TEST_CASE("decode_utf8 gives code points and byte offsets") {
  auto const d = tok::decode_utf8("a\xC3\xA9\xE6\x9D\xB1\xF0\x9F\x8D\x95");  // a é 東 🍕
  CHECK(d.chars == std::u32string{U'a', 0xE9, 0x6771, 0x1F355});
  CHECK(d.byte_offsets == std::vector<std::size_t>{0, 1, 3, 6, 10});
  CHECK(tok::encode_utf8(d.chars) == "a\xC3\xA9\xE6\x9D\xB1\xF0\x9F\x8D\x95");
  CHECK(tok::decode_utf8("").size() == 0);
}

TEST_CASE("decode_utf8 rejects every kind of invalid UTF-8 and names the byte") {
  CHECK(error_of("ab\x80") == "input: invalid UTF-8 at byte 2 (byte 0x80 cannot start a character)");
  CHECK(error_of("\xC3") == "input: invalid UTF-8 at byte 0 (the text ends inside a 2-byte character)");
  CHECK(error_of("x\xC3(") == "input: invalid UTF-8 at byte 1 (byte 2 is not a continuation byte)");
  CHECK(error_of("\xC0\xAF").find("cannot start") != std::string::npos);                  // overlong '/'
  CHECK(error_of("\xE0\x80\xAF").find("overlong") != std::string::npos);                  // overlong '/'
  CHECK(error_of("\xED\xA0\x80").find("not a Unicode scalar") != std::string::npos);      // U+D800
  CHECK(error_of("\xF4\x90\x80\x80").find("not a Unicode scalar") != std::string::npos);  // U+110000
  CHECK(error_of("\xFF").find("cannot start") != std::string::npos);
}

TEST_CASE("utf8_lossy replaces maximal invalid subparts as Rust does") {
  CHECK(tok::detail::utf8_lossy("ok") == "ok");
  CHECK(tok::detail::utf8_lossy("\xF0\x9F\x8D") == "\xEF\xBF\xBD");  // one U+FFFD for a cut 4-byte character
  CHECK(tok::detail::utf8_lossy("a\x80\x80z") == "a\xEF\xBF\xBD\xEF\xBF\xBDz");
  CHECK(tok::detail::utf8_lossy("\xED\xA0\x80") == "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");
}

TEST_CASE("Unicode categories from the generated tables") {
  CHECK(tok::is_letter(U'a'));
  CHECK(tok::is_letter(0xE9));     // é
  CHECK(tok::is_letter(0x6771));   // 東
  CHECK(tok::is_letter(0x1D518));  // 𝔘 (mathematical fraktur)
  CHECK_FALSE(tok::is_letter(U'1'));
  CHECK_FALSE(tok::is_letter(0x1F355));  // 🍕
  CHECK(tok::is_number(0xFF11));         // full-width 1
  CHECK(tok::is_number(0x2460));         // ①
  CHECK(tok::is_number(0xB2));           // ²
  CHECK(tok::is_whitespace(0x3000));
  CHECK(tok::is_whitespace(0xA0));
  CHECK_FALSE(tok::is_whitespace(0x200B));   // zero-width space is a format character
  CHECK(tok::is_punctuation(U'$'));          // ASCII symbol, counted by split_by_punct
  CHECK(tok::is_punctuation(0x3002));        // 。
  CHECK(tok::is_punctuation(0xBF));          // ¿
  CHECK_FALSE(tok::is_punctuation(0x20AC));  // € is a symbol (Sc), not punctuation
}

TEST_CASE("lower-casing follows str.lower() per character") {
  auto lower = [](std::string const& s) {
    std::u32string out;
    for (char32_t c : tok::decode_utf8(s).chars) tok::append_lowercase(out, c);
    return tok::encode_utf8(out);
  };
  CHECK(lower("HELLO World") == "hello world");
  CHECK(lower("\xC3\x80\xC3\x89\xC3\x8E") == "\xC3\xA0\xC3\xA9\xC3\xAE");  // ÀÉÎ -> àéî
  CHECK(lower("\xC4\xB0") == "i\xCC\x87");                                 // İ -> i + U+0307
  CHECK(lower("\xE1\xBA\x9E") == "\xC3\x9F");                              // ẞ -> ß
  CHECK(lower("\xCE\xA3\xCE\x91") == "\xCF\x83\xCE\xB1");                  // ΣΑ -> σα
  CHECK(lower("\xD0\x90\xD0\xAF") == "\xD0\xB0\xD1\x8F");                  // АЯ -> ая
  CHECK(lower("\xEF\xBC\xA1") == "\xEF\xBD\x81");                          // Ａ -> ａ
}

TEST_CASE("GPT-2 pre-tokenization pattern") {
  using V = std::vector<std::string>;
  CHECK(pretokens("Hello world") == V{"Hello", " world"});
  CHECK(pretokens("I'm here, they've") == V{"I", "'m", " here", ",", " they", "'ve"});
  CHECK(pretokens("I'M") == V{"I", "'", "M"});
  CHECK(pretokens("a   b") == V{"a", "  ", " b"});
  CHECK(pretokens("a \tb") == V{"a", " ", "\t", "b"});
  CHECK(pretokens("end  ") == V{"end", "  "});
  CHECK(pretokens("x\n\ny") == V{"x", "\n", "\n", "y"});
  CHECK(pretokens("in 2024!!") == V{"in", " 2024", "!!"});
  CHECK(pretokens(" !? ok") == V{" !?", " ok"});
}

"""Regex syntax -> AST, per dialect; clear errors for everything not compiled."""
import pytest
import regex

from fstok.compile.regex_parse import (Alt, Assert, Chars, Concat, Repeat, RegexSyntaxError, RegexUnsupported, parse,
                                       single_char_set)
from fstok.compile.unicode_props import CharSet, tables
from fstok.pretokenize import CL100K_PAT, LLAMA3_PAT, O200K_PAT, R50K_PAT, CompiledPattern, compile_tables

RUST, ONIG = "rust-regex", "oniguruma"


def spans(pattern, text, dialect=RUST):
    return CompiledPattern([compile_tables(pattern, dialect)], "find").spans(text)


def ref(pattern, text):
    # set operations (&& -- ~~) need the regex module's V1 syntax
    flags = regex.V1 if any(op in pattern for op in ("&&", "--", "~~")) else 0
    return [m.span() for m in regex.finditer(pattern, text, flags=flags)]


@pytest.mark.parametrize("pat", [R50K_PAT, CL100K_PAT, O200K_PAT, LLAMA3_PAT])
@pytest.mark.parametrize("dialect", [RUST, ONIG])
def test_real_patterns_parse(pat, dialect):
    ast = parse(pat, dialect)
    assert isinstance(ast, Alt) and len(ast.items) >= 7


def test_literals_escapes_and_classes():
    cases = [
        (r"a\tb\n\r\x41\u263A\u00e9", "a\tb\n\rA\u263a\u00e9"),
        (r"[a-c\d]+", "xab1cz9"),
        (r"[^a-z\s]+", "ab CD12 e"),
        (r"[\[\]\\-]+", "a[]\\-b"),
        (r"[-a]+|[a-]+", "a-b-"),
        (r"[]a]+", "]a]b"),
        (r"\.\*\+\?\(\)\|\{\}\^\$", ".*+?()|{}^$"),
        (r"[\p{Lu}&&[A-M]]+", "ABNOZK"),
        (r"[\w--\d]+", "ab12_c"),
        (r"[a-z~~m-q]+", "abmnxyz"),
        (r"[[:alpha:]x]".replace("[:alpha:]", "a"), "xay"),
        (r"\p{L}+|\P{L}+", "héllo, мир!"),
        (r"\pL+|\pN", "ab12"),
        (r"\p{Letter}+|\p{Decimal_Number}", "ab12"),
        (r"\p{gc=Lu}+", "ABcD"),
        (r".+", "ab\ncd"),
        (r"(?s:.+)", "ab\ncd"),
        (r"a(?:bc)+|(x)(?P<n>y)(?<m>z)", "abcbcxyz"),
        (r"a{2}|b{2,}|c{1,2}", "aaabbbccc"),
        (r"a*?b|a+?|c??d", "aaabaacdd"),
    ]
    for pat, text in cases:
        assert spans(pat, text) == ref(pat, text), pat


def test_braced_escapes():
    assert spans(r"\x{263A}+|\u{1F600}|\U0001F601", "\u263a\u263a\U0001F600\U0001F601") == [(0, 2), (2, 3), (3, 4)]
    assert spans(r"\x{263A}\u263A", "\u263a\u263a", ONIG) == [(0, 2)]
    assert spans(r"\0|\012", "\0\n", ONIG) == [(0, 1), (1, 2)]


def test_case_insensitive_uses_the_engine_folding():
    # (?i) s also matches U+017F LATIN SMALL LETTER LONG S, k matches U+212A KELVIN SIGN (simple folding)
    assert spans(r"(?i:s)+|(?i)k", "sSſxK\u212a") == [(0, 3), (4, 5), (5, 6)]
    assert spans(r"'(?i:[sdmt]|ll|ve|re)", "'S 'ſ 'LL 'Re") == [(0, 2), (3, 5), (6, 9), (10, 13)]
    # flags are scoped to the group; (?i) applies to the rest of the enclosing group
    assert spans(r"(?i:a)b|c", "ABAbC") == [(2, 4)]
    assert spans(r"x(?i)y", "xYXy") == [(0, 2)]
    # case folding applies before negation: (?i)[^a] matches neither a nor A
    assert spans(r"(?i)[^a]+", "aAbB") == [(2, 4)]


def test_oniguruma_multichar_folds_are_rejected_not_misread():
    # Oniguruma (?i:ss) also matches "ß"; fstok does not compile multi-character folds
    with pytest.raises(RegexUnsupported, match="multi-character"):
        parse("(?i:ss)", ONIG)
    with pytest.raises(RegexUnsupported, match="multi-character"):
        parse("(?i)\u00df", ONIG)  # Oniguruma: (?i)ß matches "ss"
    with pytest.raises(RegexUnsupported, match="multi-character"):
        parse("(?i)[a-z\u00df]", ONIG)  # and so does (?i)[ß]
    parse("(?i)[^\u00df]", ONIG)  # a negated class matches one character only
    assert spans("(?i)[\u00df]", "ss\u00df\u1e9e", RUST) == [(2, 3), (3, 4)]  # regex-syntax: simple folding
    parse("(?i:ss)", RUST)  # regex-syntax uses simple folding only: nothing to reject
    parse(LLAMA3_PAT, ONIG)  # 's 't 're 've 'm 'll 'd contain no multi-character fold


def test_oniguruma_interval_plus_is_a_repeated_interval():
    # rust-regex (fancy-regex): {1,3}+ is possessive; Oniguruma (Ruby syntax): (?:x{1,3})+
    r = parse(r"\p{N}{1,3}+", RUST)
    assert isinstance(r, Repeat) and r.possessive and (r.min, r.max) == (1, 3)
    o = parse(r"\p{N}{1,3}+", ONIG)
    assert isinstance(o, Repeat) and not o.possessive and (o.min, o.max) == (1, None)
    assert isinstance(o.node, Repeat) and (o.node.min, o.node.max) == (1, 3)
    assert spans(r"\p{N}{1,3}+", "12345", RUST) == [(0, 3), (3, 5)]
    assert spans(r"\p{N}{1,3}+", "12345", ONIG) == [(0, 5)]
    # but ?+ *+ ++ are possessive in both
    for d in (RUST, ONIG):
        assert parse(r"a++", d).possessive and parse(r"a?+", d).possessive and parse(r"a*+", d).possessive


def test_oniguruma_interval_syntax():
    assert spans(r"a{,2}b", "aaab", ONIG) == [(1, 4)]
    assert spans(r"a{x", "a{xa{x", ONIG) == [(0, 3), (3, 6)]  # not an interval: literal '{'
    with pytest.raises(RegexSyntaxError, match="repetition"):
        parse(r"a{x", RUST)
    with pytest.raises(RegexSyntaxError):
        parse(r"a{,2}", RUST)


def test_inline_flags_scope_per_dialect():
    # Oniguruma: `a(?i)b|c` is `a(?i:b|c)`; regex-syntax: `(?:a(?i:b))|(?i:c)`
    assert spans("a(?i)b|c", "ac aB C", ONIG) == [(0, 2), (3, 5)]
    assert spans("a(?i)b|c", "ac aB C", RUST) == [(1, 2), (3, 5), (6, 7)]
    from tokenizers import Regex, pre_tokenizers

    pt = pre_tokenizers.Split(Regex("a(?i)b|c"), behavior="isolated")
    assert [o for _, o in pt.pre_tokenize_str("ac aB C")] == CompiledPattern(
        [compile_tables("a(?i)b|c", ONIG)], "split").spans("ac aB C")


def test_dollar_per_dialect():
    # rust-regex: end of text; Oniguruma: end of line (before \n or at the end)
    assert spans(r"\s+$", "a \nb  ", RUST) == [(4, 6)]
    assert spans(r"\s+$|\s", "a \nb  ", ONIG) == [(1, 2), (2, 3), (4, 6)]
    assert spans(r"(?m)x$", "x\nx", RUST) == [(0, 1), (2, 3)]
    assert spans(r"a\z|b", "ab a", RUST) == [(1, 2), (3, 4)]


def test_lookahead_forms():
    assert spans(r"\s+(?!\S)|\s+", "a   b  ") == ref(r"\s+(?!\S)|\s+", "a   b  ")
    assert spans(r"a(?=b)|a", "abac") == [(0, 1), (2, 3)]
    assert spans(r"[a-z]+(?![0-9])", "abc1 de") == ref(r"[a-z]+(?![0-9])", "abc1 de")
    assert spans(r"(?:x|y(?!z))", "xyzy") == [(0, 1), (3, 4)]  # at the end of an inner alternative too


@pytest.mark.parametrize("pat,where,what", [
    (r"a(?!b)c", 1, "assertion"),
    (r"(?:a(?!b))+", 4, "assertion"),
    (r"\s+(?!\S\S)", 3, "exactly one character"),
    (r"(?<=a)b", 0, "lookbehind"),
    (r"(?>ab)", 0, "atomic"),
    (r"^a", 0, "start anchor"),
    (r"\bword", 0, "\\b"),
    (r"a\1", 1, "\\1"),
    (r"(?x)a b", 2, "verbose"),
    (r"(ab)++", 4, "possessive quantifier on a multi-character"),
    (r"a++a", 1, "possessive quantifier whose operand"),
    (r"\s++\s", 2, "possessive quantifier whose operand"),
    (r"a*", None, "empty string"),
    (r"a|", None, "empty string"),
    (r"(?:a?)*b", 6, "empty string"),
    (r"[^\x00-\x{10FFFF}]", None, "never match"),
    (r"\p{Greek}", 0, "Unicode property"),
    (r"[[:alpha:]]", 1, "POSIX"),
    (r"a{2000}", 1, "limit"),
])
def test_unsupported_constructs_name_the_construct_and_position(pat, where, what):
    with pytest.raises((RegexUnsupported, RegexSyntaxError)) as ei:
        compile_tables(pat)
    msg = str(ei.value)
    assert what in msg
    if where is not None:
        assert f"position {where}" in msg


@pytest.mark.parametrize("pat,what", [
    ("(ab", "unclosed group"), ("ab)", "unmatched ')'"), ("[ab", "unclosed character class"), ("*a", "nothing to repeat"),
    ("a**", "nested quantifier"), ("a{3,1}", "max < min"), ("[z-a]", "invalid range"), (r"\x{110000}", "out of range"),
    (r"\x{D800}", "surrogate"), ("(?q)", "unknown flag"), (r"\p{L", "unterminated"),
])
def test_syntax_errors(pat, what):
    with pytest.raises(RegexSyntaxError, match=None) as ei:
        parse(pat, RUST)
    assert what in str(ei.value)
    assert "position" in str(ei.value)


def test_possessive_equivalence_is_checked_not_assumed():
    # the tiktoken patterns' possessive quantifiers can never give back: compiled as greedy
    for p in (R50K_PAT, CL100K_PAT):
        compile_tables(p)
    # \s++$ : the continuation ($) starts with no character at all
    assert spans(r"\s++$|\s", "a  ") == [(1, 3)]
    assert spans(r"\s++$|\s", "  a") == [(0, 1), (1, 2)]


def test_wrong_types_and_dialects():
    with pytest.raises(TypeError):
        parse(b"abc")
    with pytest.raises(ValueError, match="dialect"):
        parse("abc", "pcre")
    with pytest.raises(TypeError):
        parse("abc", 3)
    with pytest.raises(RegexSyntaxError, match="surrogate"):
        parse("a\ud800")


def test_shorthands_follow_the_engine():
    onig, rust = tables(ONIG), tables(RUST)
    # Oniguruma's \w includes No (superscript two); regex-syntax's does not
    assert 0xB2 in onig.shorthand("w") and 0xB2 not in rust.shorthand("w")
    # \s is White_Space in both: U+001C (str.isspace) is not, U+0085 and U+00A0 are
    for u in (onig, rust):
        s = u.shorthand("s")
        assert 0x1C not in s and 0x85 in s and 0xA0 in s and 0x200B not in s
    assert single_char_set(parse(r"[ab]|c")) == CharSet.of(0x61, 0x62, 0x63)
    assert isinstance(parse("ab"), Concat) and isinstance(parse("a"), Chars) and isinstance(parse("$"), Assert)
